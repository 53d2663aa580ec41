"""Finite differences of any even order: coefficients, reference operators and their counts.

The stencil chapter (report 003, hpcscan) computes second derivatives along each axis of a
3D grid, and the Laplacian, at orders 2 to 16. This module is its numpy reference, shared by
the kernels' checks, the page and the lab:

* :func:`weights` is Fornberg's algorithm (Math. Comp. 51, 1988): the weights of the
  derivatives up to order ``m`` at a point from values at any distinct nodes; and
  :func:`second_derivative` the centred weights of d²/dx² of accuracy ``order`` on the
  2r + 1 nodes -r .. r (r = order / 2, spacing 1), computed, never typed in;
* :func:`derivative` and :func:`laplacian` apply them to an array with a halo of r points
  on every side, as every rank's block is stored;
* :func:`flops_per_point` and :func:`bytes_per_point` count what one output point costs,
  in hpcscan's terms (its GFlop/s and "GByte/s" count every stencil point as loaded from
  memory) and as memory must really move it (each input point once).

Axes are named as hpcscan names them: axis 1 is the fastest (contiguous) dimension, numpy's
last axis; axis 3 the slowest, numpy's first.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

ORDERS = (2, 4, 8, 12, 16)
# hpcscan's axis (1 fastest) -> the numpy axis of an array stored in C order
NUMPY_AXIS = {1: 2, 2: 1, 3: 0}


def weights(z, x, m, exact=False):
    """Fornberg's weights: ``c[j, k]`` multiplies the value at node ``x[j]`` in the k-th
    derivative at ``z``, for k = 0 .. m, from the distinct nodes ``x`` (len(x) > m).
    ``exact=True`` computes in rational arithmetic (z and x must then be integers or
    Fractions) and returns Fractions."""
    num = Fraction if exact else float
    z = num(z)
    x = [num(v) for v in x]
    n = len(x)
    if n <= m:
        raise ValueError(f"{n} nodes cannot give a derivative of order {m}: give more than m")
    if len(set(x)) != n:
        raise ValueError("the nodes must be distinct")
    c = [[num(0)] * (m + 1) for _ in range(n)]
    c1, c4 = num(1), x[0] - z
    c[0][0] = num(1)
    for i in range(1, n):
        mn = min(i, m)
        c2, c5, c4 = num(1), c4, x[i] - z
        for j in range(i):
            c3 = x[i] - x[j]
            c2 = c2 * c3
            if j == i - 1:
                for k in range(mn, 0, -1):
                    c[i][k] = c1 * (k * c[i - 1][k - 1] - c5 * c[i - 1][k]) / c2
                c[i][0] = -c1 * c5 * c[i - 1][0] / c2
            for k in range(mn, 0, -1):
                c[j][k] = (c4 * c[j][k] - k * c[j][k - 1]) / c3
            c[j][0] = c4 * c[j][0] / c3
        c1 = c2
    return c if exact else np.array(c)


def check_order(order):
    """The order as an int, or a ValueError that names the orders this chapter runs."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 2 \
            or order % 2:
        raise ValueError(f"order {order!r}: a centred second derivative has an even order "
                         f"of accuracy, at least 2 (this chapter runs {ORDERS})")
    return int(order)


def second_derivative(order, exact=False):
    """The centred weights of d²/dx² with accuracy ``order`` (even) on the nodes -r .. r
    (r = order / 2) for a unit spacing: an array of 2r + 1 floats, symmetric, summing to 0
    (Fractions with ``exact=True``). Divide by h² for a spacing h."""
    r = check_order(order) // 2
    c = weights(0, range(-r, r + 1), 2, exact=True)
    out = [row[2] for row in c]
    return out if exact else np.array([float(v) for v in out])


def _interior(u, r):
    if u.ndim != 3:
        raise ValueError(f"a 3D array is needed, got shape {u.shape}")
    if min(u.shape) <= 2 * r:
        raise ValueError(f"an array of shape {u.shape} has no interior inside a halo of {r}")
    return tuple(slice(r, n - r) for n in u.shape)


def derivative(u, axis, order, h=1.0):
    """d²u/dx_axis² (axis 1, 2 or 3 as hpcscan names them) at the interior points of ``u``,
    which carries a halo of order / 2 points on every side: an array of the interior's
    shape."""
    if axis not in NUMPY_AXIS:
        raise ValueError(f"axis {axis!r}: choose 1 (fastest), 2 or 3 (slowest)")
    c = second_derivative(order)
    r = len(c) // 2
    inner = _interior(u, r)
    a = NUMPY_AXIS[axis]
    out = np.zeros(tuple(s.stop - s.start for s in inner))
    for k, ck in enumerate(c):
        shifted = list(inner)
        shifted[a] = slice(inner[a].start + k - r, inner[a].stop + k - r)
        out += ck * u[tuple(shifted)]
    return out / (h * h)


def laplacian(u, order, h=1.0):
    """The Laplacian of ``u`` at its interior points (a halo of order / 2 points on every
    side), with the same spacing h along every axis."""
    return sum(derivative(u, axis, order, h) for axis in NUMPY_AXIS)


def flops_per_point(operator, order):
    """Floating-point operations per output point as hpcscan counts them: a second
    derivative of radius r = order / 2 takes 3r + 2 (r sums of the symmetric pairs, r
    products and r additions, the centre's product and the product by 1/h²), the Laplacian
    three of them and two additions."""
    r = check_order(order) // 2
    one = 3 * r + 2
    if operator == "laplacian":
        return 3 * one + 2
    if operator in (1, 2, 3):
        return one
    raise ValueError(f"operator {operator!r}: an axis 1, 2 or 3, or 'laplacian'")


def stencil_points(operator, order):
    """Input points one output point reads: 2r + 1 along one axis, 6r + 1 for the
    Laplacian (r = order / 2)."""
    r = check_order(order) // 2
    if operator == "laplacian":
        return 6 * r + 1
    if operator in (1, 2, 3):
        return 2 * r + 1
    raise ValueError(f"operator {operator!r}: an axis 1, 2 or 3, or 'laplacian'")


def bytes_per_point(operator, order, word=8, counted="hpcscan", stores="plain"):
    """Bytes per output point. ``counted="hpcscan"``: every stencil point loaded and the
    result stored, as hpcscan's GByte/s counts them (so blocked kernels run "above" memory
    bandwidth); ``"minimum"``: each input point read from memory once and the output
    written, the least any kernel that keeps its neighbours in cache can move: with
    ``stores="plain"`` a store first reads the line it writes (write-allocate: 3 words),
    with ``"streaming"`` it writes past the cache without reading it (2 words)."""
    if stores not in ("plain", "streaming"):
        raise ValueError(f"stores={stores!r}: 'plain' or 'streaming'")
    if counted == "hpcscan":
        return (stencil_points(operator, order) + 1) * word
    if counted == "minimum":
        stencil_points(operator, order)  # checks the arguments
        return (3 if stores == "plain" else 2) * word
    raise ValueError(f"counted={counted!r}: 'hpcscan' or 'minimum'")


def symbol_max(order):
    """The largest value of the second derivative's symbol -sum_k c_k cos(k theta) over
    the wave numbers theta in [0, pi] on a unit spacing (4 at order 2, nearer pi² = 9.87
    as the order grows): how fast the discrete operator can make the shortest wave grow."""
    c = second_derivative(order)
    r = len(c) // 2
    theta = np.linspace(0.0, np.pi, 4097)
    symbol = -sum(ck * np.cos((k - r) * theta) for k, ck in enumerate(c))
    return float(symbol.max())


def stable_step(order, h, speed=1.0, dims=3):
    """The largest stable time step of the leapfrog wave propagator (second order in time)
    with this order's Laplacian on a spacing h in every one of ``dims`` dimensions: (c dt)²
    times the Laplacian's largest symbol may not exceed 4, so dt = 2 h / (c sqrt(dims S))."""
    return 2.0 * h / (speed * np.sqrt(dims * symbol_max(order)))


def mirror(u, r):
    """Fill the halo of width r on every face with the odd reflection about the boundary
    points (u = 0 there, the value at distance k outside is minus the value at distance k
    inside): the boundary condition under which sine modes are exact solutions."""
    for a in range(3):
        v = np.moveaxis(u, a, 0)  # a view: writing it writes u
        n = v.shape[0]
        for k in range(1, r + 1):
            v[r - k] = -v[r + k]
            v[n - 1 - r + k] = -v[n - 1 - r - k]


def standing_mode(n, order, mode=1, periods=1.0, dt_fraction=0.5, speed=1.0):
    """The acoustic wave equation u_tt = c² Δu on the unit cube, u = 0 on its faces, from the
    standing eigenmode sin(m pi x) sin(m pi y) sin(m pi z) cos(omega t), advanced with the
    leapfrog scheme and this order's Laplacian on n interior points per axis (h = 1 / (n +
    1), as the chapter's kernels count them) for ``periods`` periods at ``dt_fraction`` of
    the stable step. Returns (the error: the largest |u - exact| over every point and step,
    relative to the amplitude; the steps; the points per wavelength 2 (n + 1) / m). The error
    is taken over every step because a phase error is invisible whenever the mode is at its
    crest (at whole periods, say)."""
    order = check_order(order)
    if n < 1 or mode < 1 or mode > n:
        raise ValueError(f"n = {n} interior points per axis cannot carry mode {mode}: need "
                         "1 <= mode <= n")
    if not 0 < dt_fraction:
        raise ValueError(f"dt_fraction = {dt_fraction}: a positive share of the stable step")
    r = order // 2
    faces = n + 2  # the points per axis with the two faces, where u stays 0
    h = 1.0 / (n + 1)
    omega = speed * mode * np.pi * np.sqrt(3.0)
    t_end = periods * 2 * np.pi / omega
    steps = max(1, int(np.ceil(t_end / (dt_fraction * stable_step(order, h, speed)))))
    dt = t_end / steps
    s = np.sin(mode * np.pi * np.arange(-r, faces + r) * h)
    phi = s[:, None, None] * s[None, :, None] * s[None, None, :]
    inner = (slice(r, faces + r),) * 3
    prev, cur = phi * np.cos(-omega * dt), phi.copy()
    nxt = np.zeros_like(phi)
    k2 = (speed * dt) ** 2
    amplitude, err = np.abs(phi[inner]).max(), 0.0
    for step in range(1, steps + 1):
        mirror(cur, r)
        nxt[inner] = 2 * cur[inner] - prev[inner] + k2 * laplacian(cur, order, h)
        prev, cur, nxt = cur, nxt, prev
        err = max(err, np.abs(cur[inner] - phi[inner] * np.cos(omega * step * dt)).max())
    return float(err / amplitude), steps, 2.0 * (n + 1) / mode
