"""The Amdahl chapter's models: the speed-up of N workers when a fraction s of the work
stays serial, for a fixed problem (Amdahl) and for one that grows with N (Gustafson)."""
from hpclab.models import Model
from hpclab.stats import FRACTION


def _amdahl(n, s):
    return 1.0 / (s + (1.0 - s) / n)


def _gustafson(n, s):
    return n - s * (n - 1.0)


MODEL = Model("amdahl", "S(N) = 1/(s + (1-s)/N)", _amdahl, ("s",), lambda x, y: [0.1],
              (FRACTION,), 1.0, True, "workers N", "speed-up S")
GUSTAFSON = Model("gustafson", "S(N) = N - s(N-1)", _gustafson, ("s",), lambda x, y: [0.1],
                  (FRACTION,), 1.0, True, "workers N", "scaled speed-up S")
