"""The Ring chapter's model: the time of one ring grows with its ranks, T(P) = λ·P.

Each of the P steps of a ring moves one message per rank to its neighbour, and the steps
follow one another, so one ring costs P message times λ.
"""
import numpy as np

from hpclab.models import Model
from hpclab.stats import NONNEGATIVE


def _ring(p, lam):
    return lam * p


MODEL = Model("ring", "T(P) = λ·P", _ring, ("lambda",), lambda x, y: [np.mean(y / x)],
              (NONNEGATIVE,), 1.0, True, "ranks P", "time T")
