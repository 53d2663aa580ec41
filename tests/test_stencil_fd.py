"""The stencil chapter's finite differences: Fornberg's weights, the reference operators and
their counts, checked against what is known of them independently."""
from fractions import Fraction as F

import numpy as np
import pytest

from hpclab.chapters.stencil import fd


def test_the_weights_of_orders_2_and_4_are_the_textbook_ones():
    assert fd.second_derivative(2, exact=True) == [1, -2, 1]
    assert fd.second_derivative(4, exact=True) == [F(-1, 12), F(4, 3), F(-5, 2), F(4, 3),
                                                    F(-1, 12)]
    # order 12's centre and last weight, as exact fractions (a typed table rounds them)
    c12 = fd.second_derivative(12, exact=True)
    assert c12[6] == F(-5369, 1800) and c12[0] == F(-1, 16632)


@pytest.mark.parametrize("order", fd.ORDERS)
def test_the_weights_are_exact_for_polynomials_up_to_the_order_plus_one(order):
    """Moments: sum c_k k^p is 0 for every p <= order + 1 but p = 2, where it is 2 (the
    second derivative of x^2); at p = order + 2 it is not 0 (the leading error term)."""
    c = fd.second_derivative(order, exact=True)
    r = order // 2
    for p in range(order + 2):
        moment = sum(ck * F(k) ** p for ck, k in zip(c, range(-r, r + 1)))
        assert moment == (2 if p == 2 else 0), (order, p)
    assert sum(ck * F(k) ** (order + 2) for ck, k in zip(c, range(-r, r + 1))) != 0
    assert np.allclose(fd.second_derivative(order), [float(v) for v in c], rtol=0, atol=1e-15)


def test_fornberg_gives_one_sided_and_first_derivative_weights_too():
    c = fd.weights(0, [0, 1, 2], 1, exact=True)
    assert [row[1] for row in c] == [F(-3, 2), 2, F(-1, 2)]
    c = fd.weights(0.5, [0, 1], 1)
    assert np.allclose(c[:, 0], [0.5, 0.5]) and np.allclose(c[:, 1], [-1, 1])


@pytest.mark.parametrize("bad", [0, 3, -2, 2.0, True, "8"])
def test_an_order_that_is_not_even_and_positive_is_refused_with_the_orders_run(bad):
    with pytest.raises(ValueError, match=r"even order.*\(2, 4, 8, 12, 16\)"):
        fd.second_derivative(bad)


def _field(n, order):
    """sin(a x1) sin(b x2) sin(c x3) on n points per axis of [0, 1] plus a halo of order / 2,
    its spacing and its exact second derivatives by hpcscan's axis."""
    r = order // 2
    h = 1.0 / (n - 1)
    x = (np.arange(-r, n + r)) * h
    k = {1: 2.0, 2: 3.0, 3: 1.5}  # wave numbers (radians per unit) along axes 1, 2, 3
    s = {a: np.sin(k[a] * x) for a in k}
    u = s[3][:, None, None] * s[2][None, :, None] * s[1][None, None, :]
    inner = u[r:-r, r:-r, r:-r]
    return u, h, {a: -k[a] ** 2 * inner for a in k}


@pytest.mark.parametrize("order", (2, 4, 8))
def test_the_error_falls_as_h_to_the_order(order):
    errs, hs = [], []
    for n in (11, 21, 41):
        u, h, d2 = _field(n, order)
        errs.append(max(np.abs(fd.derivative(u, a, order, h) - d2[a]).max() for a in d2))
        hs.append(h)
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.3, (order, slope, errs)


def test_each_axis_is_the_one_hpcscan_names_and_the_laplacian_sums_them():
    u, h, d2 = _field(17, 4)
    for a in (1, 2, 3):
        others = [b for b in (1, 2, 3) if b != a]
        err = np.abs(fd.derivative(u, a, 4, h) - d2[a]).max()
        wrong = min(np.abs(fd.derivative(u, a, 4, h) - d2[b]).max() for b in others)
        assert err < 1e-3 < wrong, (a, err, wrong)
    assert np.allclose(fd.laplacian(u, 4, h), sum(d2.values()), atol=3e-3)
    with pytest.raises(ValueError, match="no interior"):
        fd.laplacian(np.zeros((4, 9, 9)), 4)
    with pytest.raises(ValueError, match="axis 0"):
        fd.derivative(u, 0, 4, h)


def test_the_counts_are_hpcscans_and_agree_with_its_published_laplacian():
    assert [fd.flops_per_point(1, o) for o in fd.ORDERS] == [5, 8, 14, 20, 26]
    assert fd.flops_per_point("laplacian", 12) == 62 and fd.stencil_points("laplacian", 12) == 37
    # report 003: 950 GByte/s and 390 GFlop/s for the O12 Laplacian, single precision; both
    # counts give the same point rate (6.25 and 6.29 GPoint/s) only with these counts
    gpts_bytes = 950 / fd.bytes_per_point("laplacian", 12, word=4)
    gpts_flops = 390 / fd.flops_per_point("laplacian", 12)
    assert abs(gpts_bytes / gpts_flops - 1) < 0.01
    assert fd.bytes_per_point("laplacian", 8, counted="minimum") == 24
    # past the cache, w's line is not read before it is written: u and w once
    assert fd.bytes_per_point("laplacian", 8, counted="minimum", stores="streaming") == 16
    assert fd.bytes_per_point("laplacian", 8, stores="streaming") == 26 * 8  # hpcscan's count
    with pytest.raises(ValueError, match="'plain' or 'streaming'"):
        fd.bytes_per_point(1, 8, counted="minimum", stores="nontemporal")
    with pytest.raises(ValueError, match="'hpcscan' or 'minimum'"):
        fd.bytes_per_point(1, 8, counted="all")


def test_the_stable_step_is_the_classic_one_at_order_2_and_shrinks_with_the_order():
    assert np.isclose(fd.stable_step(2, 0.1), 0.1 / np.sqrt(3))
    s = [fd.symbol_max(o) for o in fd.ORDERS]
    assert s[0] == pytest.approx(4) and all(a < b < np.pi ** 2 for a, b in zip(s, s[1:]))
    assert fd.stable_step(16, 0.1) < fd.stable_step(2, 0.1)


def test_the_mirror_makes_the_halo_the_odd_reflection():
    u = np.arange(7.0 ** 3).reshape(7, 7, 7)
    fd.mirror(u, 2)
    assert (u[1, 3, 3], u[0, 3, 3]) == (-u[3, 3, 3], -u[4, 3, 3])
    assert (u[3, 3, 5], u[3, 3, 6]) == (-u[3, 3, 3], -u[3, 3, 2])


def test_the_propagator_converges_as_h2_at_order_2_and_faster_at_order_4():
    e2 = [fd.standing_mode(n, 2, mode=3, periods=2, dt_fraction=0.1)[0] for n in (11, 23)]
    e4 = fd.standing_mode(23, 4, mode=3, periods=2, dt_fraction=0.1)[0]
    assert 3.5 < e2[0] / e2[1] < 4.5, e2
    assert e4 < e2[1] / 10
    err, steps, ppw = fd.standing_mode(23, 8, mode=3, periods=1, dt_fraction=0.5)
    assert ppw == 16 and steps > 1 and err < 0.05


@pytest.mark.parametrize("order", (2, 8))
def test_beyond_the_stable_step_the_wave_grows_and_within_it_it_does_not(order):
    # a mode of 4.4 points per wavelength excites the shortest waves the grid carries
    grows = fd.standing_mode(23, order, mode=11, periods=20, dt_fraction=1.05)[0]
    bounded = fd.standing_mode(23, order, mode=11, periods=20, dt_fraction=0.95)[0]
    assert grows > 10 and bounded <= 2.01, (grows, bounded)
    with pytest.raises(ValueError, match="mode 30"):
        fd.standing_mode(23, order, mode=30)
