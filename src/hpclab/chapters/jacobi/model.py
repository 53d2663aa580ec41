"""The Jacobi chapter's model (report 001, eq. 8): lattice updates per second of N ranks
that each update L³ cells and send two halo faces of L² doubles per cut direction (one to
the neighbour on each side), P(L, N) = L³N / (L³·t + 16·L²·k/B + k·λ).

``x`` is a table with the inputs ``L`` (cells per side of a rank's block), ``N`` (ranks)
and ``k`` (cut directions), see :func:`hpclab.models.fit`.
"""
import numpy as np

from hpclab.models import Model
from hpclab.stats import NONNEGATIVE, POSITIVE

# bytes per face point and cut direction: two faces (one to each neighbour along it) of
# 8-byte doubles (report 001, eq. 8: c(L, N) = L²·k·2·8)
HALO_BYTES_PER_FACE_POINT = 2 * 8


def _jacobi(X, t_update, bandwidth, lam):
    L, N, k = X
    compute = L**3 * t_update
    comm = HALO_BYTES_PER_FACE_POINT * L**2 * k / bandwidth + k * lam
    return L**3 * N / (compute + comm)


def _jacobi_guess(X, y):
    L, N, k = X
    t = float(np.min(L**3 * N / y / L**3))
    return [t, 1e10, 1e-6]


MODEL = Model("jacobi", "P(L,N) = L³N/(L³·t + 16·L²·k/B + k·λ)", _jacobi,
              ("t_update", "B", "lambda"), _jacobi_guess,
              (POSITIVE, POSITIVE, NONNEGATIVE), 0.0, True,
              "cells per side L, ranks N, cut directions k", "lattice updates per second",
              inputs=("L", "N", "k"))
