"""The Poisson chapter's model of one CG iteration on an N×N mesh over P ranks in rows:
T(N, P) = t·N²/P + r·N·h(P) + a·⌈log2 P⌉ — the local work, the halo rows of the busiest
rank (:func:`halo_rows`) and the tree of the global reductions.

``x`` is a table with the inputs ``N`` and ``P``, see :func:`hpclab.models.fit`.
"""
import numpy as np

from hpclab.models import Model
from hpclab.stats import NONNEGATIVE


def halo_rows(P):
    """Rows of halo the busiest rank exchanges in a 1D row distribution over P ranks."""
    return np.minimum(np.asarray(P, dtype=float) - 1.0, 2.0)


def _cg_iteration(X, t_point, t_row, t_reduce):
    N, P = X
    return t_point * N**2 / P + t_row * N * halo_rows(P) + t_reduce * np.ceil(np.log2(P))


def _cg_guess(X, y):
    N, P = X
    return [float(np.median(y * P / N**2)), float(np.median(y / N)) * 0.1 + 1e-12, 1e-6]


MODEL = Model("cg_iteration", "T(N,P) = t·N²/P + r·N·h(P) + a·⌈log2 P⌉", _cg_iteration,
              ("t_point", "t_row", "t_reduce"), _cg_guess,
              (NONNEGATIVE, NONNEGATIVE, NONNEGATIVE), 1.0, True,
              "mesh points per side N, ranks P", "time per iteration T",
              inputs=("N", "P"))
