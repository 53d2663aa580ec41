"""The topology layer (C and mpi4py); runs unchanged under mpiexec -n 1, 2, 3 and 4.

Every rank fills the interior of its block with a function of the global index, exchanges
halos, and checks each halo point against the value of the global point it mirrors
(periodic wrap, or untouched at a closed boundary); the gathered interiors equal the
global array.
"""
import itertools

import numpy as np
import pytest
from mpi4py import MPI

from hpclab.kernels.topology import IMPLEMENTATIONS, Topology, block_range

COMM = MPI.COMM_WORLD
SIZE = COMM.Get_size()
SENTINEL = -1.0

CASES = [((11,), None, (True,)), ((11,), None, (False,)), ((7, 5), None, (False, True)),
         ((5, 6), (1, 0), (True, True)), ((5, 4, 7), None, (False, False, False)),
         ((6, 5, 4), None, (True, True, True)), ((9, 3, 2), (0, 1, 1), (True, False, True))]


def value(index, shape):
    """A distinct value for every global point."""
    return float(np.ravel_multi_index(index, shape)) + 1.0


def global_array(shape):
    return np.arange(1, int(np.prod(shape)) + 1, dtype=float).reshape(shape)


def check_layers(topo, f, g, periods, what=""):
    """Every layer k of the halo outside each face of an exchanged field ``f`` holds the
    global point k beyond the block's edge (wrapped where periodic; the sentinel, untouched,
    beyond a closed boundary)."""
    shape, w = g.shape, topo.halo
    for d in range(len(shape)):
        for k in range(1, w + 1):
            for side, index, edge in (("lo", w - k, topo.offset[d] - k),
                                      ("hi", topo.local[d] + w - 1 + k,
                                       topo.offset[d] + topo.local[d] - 1 + k)):
                idx = list(topo.interior)
                idx[d] = index
                got = f[tuple(idx)]
                gidx = [np.arange(o, o + n) for o, n in zip(topo.offset, topo.local)]
                if periods[d]:
                    gidx[d] = np.array([edge % shape[d]])
                elif not 0 <= edge < shape[d]:
                    assert (got == SENTINEL).all(), \
                        f"{what}{side} layer {k} of a closed boundary changed"
                    continue
                else:
                    gidx[d] = np.array([edge])
                want = g[np.ix_(*gidx)].reshape(got.shape)
                np.testing.assert_array_equal(got, want,
                                              err_msg=f"{what}dim {d} {side} layer {k}")


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape,dims,periods", CASES)
def test_halo_exchange_matches_the_global_grid(impl, shape, dims, periods):
    with Topology(COMM, shape, dims=dims, periods=periods, impl=impl) as topo:
        assert int(np.prod(topo.dims)) == SIZE
        g = global_array(shape)
        f = topo.field(SENTINEL)
        block = tuple(slice(o, o + n) for o, n in zip(topo.offset, topo.local))
        f[topo.interior] = g[block]
        topo.exchange(f)
        check_layers(topo, f, g, periods, f"{impl} ")
        # corners are not exchanged: a 7-point stencil does not read them
        if len(shape) > 1:
            assert f[(0,) * len(shape)] == SENTINEL
        gathered = topo.gather(f)
        if COMM.Get_rank() == 0:
            np.testing.assert_array_equal(gathered, g)


@pytest.mark.parametrize("shape,dims,periods", CASES)
def test_c_and_python_decompose_alike(shape, dims, periods):
    with Topology(COMM, shape, dims, periods, impl="c") as c, \
            Topology(COMM, shape, dims, periods, impl="python") as p:
        assert c.describe() == p.describe()
        assert c.cut == sum(d > 1 for d in c.dims)
    blocks = COMM.allgather((p.offset, p.local))
    covered = np.zeros(shape, int)
    for offset, local in blocks:
        covered[tuple(slice(o, o + n) for o, n in zip(offset, local))] += 1
    assert (covered == 1).all(), "every point belongs to exactly one rank"


def test_uneven_blocks_differ_by_at_most_one():
    from hpclab.kernels.common._common import block_range as c_block_range

    for n, parts in itertools.product(range(1, 12), range(1, 6)):
        if n < parts:
            continue
        blocks = [block_range(n, parts, i) for i in range(parts)]
        assert [c_block_range(n, parts, i) for i in range(parts)] == blocks
        counts = [c for _, c in blocks]
        assert sum(counts) == n and max(counts) - min(counts) <= 1
        assert [o for o, _ in blocks] == list(np.cumsum([0] + counts[:-1]))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("kwargs,match", [
    ({"global_shape": (SIZE - 1 or 0,)}, "positive integers|at least one point"),
    ({"global_shape": (4, 4, 4, 4)}, "1 to 3 dimensions"),
    ({"global_shape": (8, 8), "dims": (SIZE + 1, 1)}, "does not fit|does not match"),
    ({"global_shape": (8,), "dims": (-1,)}, ">= 0"),
    ({"global_shape": (8, 8), "periods": (True,)}, "need 2 entries"),
])
def test_bad_shapes_are_refused_on_every_rank(impl, kwargs, match):
    with pytest.raises(ValueError, match=match):
        Topology(COMM, impl=impl, **kwargs)


def test_a_field_of_the_wrong_shape_is_refused():
    for impl in IMPLEMENTATIONS:
        with Topology(COMM, (8, 8), impl=impl) as topo:
            with pytest.raises(ValueError, match="local \\+ 2 halo per dimension"):
                topo.exchange(np.zeros((3, 3)))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape,dims", [((7, 5, 3), (0, 1, 1)), ((7, 5, 3), (0, 0, 1)),
                                        ((7, 5, 3), None), ((12, 6, 4), None), ((9,), None)])
def test_scatter_and_collect_blocks_through_subarray_datatypes(impl, shape, dims):
    """Every rank receives exactly its block of the root's array; collect puts them back."""
    if any(n < d for n, d in zip(shape, MPI.Compute_dims(SIZE, list(dims or [0] * len(shape))))):
        pytest.skip("a dimension has fewer points than ranks")
    t = Topology(COMM, shape, dims=dims, impl=impl)
    try:
        whole = global_array(shape) if t.rank == 0 else None
        mine = t.scatter(whole)
        index = tuple(slice(o, o + n) for o, n in zip(t.offset, t.local))
        np.testing.assert_array_equal(mine, global_array(shape)[index])
        assert t.block_of(t.rank) == (tuple(t.offset), tuple(t.local))
        back = t.collect(mine * 2)
        if t.rank == 0:
            np.testing.assert_array_equal(back, 2 * global_array(shape))
        else:
            assert back is None
    finally:
        t.free()


def test_scatter_refuses_a_global_array_of_the_wrong_shape():
    t = Topology(COMM, (6, 4), impl="python")
    try:
        with pytest.raises(ValueError, match="C-contiguous float64 array of shape"):
            t.scatter(np.zeros((4, 6)) if t.rank == 0 else None)  # on every rank
    finally:
        t.free()


WIDE = [((14, 12, 13), None, (False, False, False), 3), ((17, 9), (0, 1), (True, False), 2),
        ((12,), None, (True,), 3)]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape,dims,periods,halo", WIDE)
def test_a_wider_halo_holds_every_layer_of_the_neighbours(impl, shape, dims, periods, halo):
    """A halo of w layers: layer k outside each face holds the global point k beyond the
    block's edge (wrapped where periodic, untouched at a closed boundary)."""
    with Topology(COMM, shape, dims=dims, periods=periods, impl=impl, halo=halo) as topo:
        assert topo.shape == tuple(n + 2 * halo for n in topo.local)
        assert topo.describe()["halo"] == halo
        g = global_array(shape)
        f = topo.field(SENTINEL)
        f[topo.interior] = g[tuple(slice(o, o + n) for o, n in zip(topo.offset, topo.local))]
        topo.exchange(f)
        check_layers(topo, f, g, periods, f"{impl} ")
        np.testing.assert_array_equal(topo.gather(f), g if COMM.Get_rank() == 0 else None)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_halo_thicker_than_a_cut_block_is_refused_on_every_rank(impl):
    if SIZE == 1:
        with Topology(COMM, (3, 4), periods=(True, False), impl=impl, halo=3) as topo:
            assert topo.shape == (9, 10)  # one rank, periodic: 3 points hold a halo of 3
        with pytest.raises(ValueError, match="a halo of 4 layers needs blocks at least 4"):
            Topology(COMM, (3, 4), periods=(True, False), impl=impl, halo=4)
        return
    with pytest.raises(ValueError, match=r"a halo of 3 layers needs blocks at least 3 "
                                         r"points thick, but \d+ ranks cut dimension 0"):
        Topology(COMM, (2 * SIZE, 40), dims=(SIZE, 1), impl=impl, halo=3)


ALIGNED = [((7, 5), None, (False, True), 1, 8), ((5, 4, 7), None, (True, False, True), 1, 8),
           ((17, 9), (0, 1), (True, False), 2, 4), ((12,), None, (True,), 3, 8)]


@pytest.mark.parametrize("shape,dims,periods,halo,align", ALIGNED)
def test_padded_rows_exchange_like_unpadded_ones(shape, dims, periods, halo, align):
    """The C layer's aligned layout (hpclab_topo_set_align, the Poisson solver's): every
    row padded to a multiple of align doubles; the halo holds what an unpadded one would,
    the padding is never written, and the lead puts each row's first interior point on
    an aligned offset."""
    from types import SimpleNamespace

    from hpclab.kernels.common._common import LINE_DOUBLES, CTopology
    from hpclab.kernels.topology import LINE_DOUBLES as PY_LINE_DOUBLES, padded_row

    assert LINE_DOUBLES == PY_LINE_DOUBLES == padded_row(1), \
        "hpclab_topo.h's HPCLAB_LINE_DOUBLES and hpclab.kernels.topology.LINE_DOUBLES differ"
    dims = dims or (0,) * len(shape)
    t = CTopology(COMM, shape, dims, periods, halo, align)
    try:
        d = t.describe()
        plain = tuple(n + 2 * halo for n in d["local"])
        row = -(-plain[-1] // align) * align
        assert d["extents"] == plain[:-1] + (row,) and d["points"] == int(np.prod(d["extents"]))
        assert (d["lead"] + halo) % align == 0
        f = np.full(d["points"], SENTINEL)
        padded = f.reshape(d["extents"])
        view = padded[..., :plain[-1]]
        topo = SimpleNamespace(halo=halo, offset=d["offset"], local=d["local"],
                               interior=tuple(slice(halo, halo + n) for n in d["local"]))
        g = global_array(shape)
        view[topo.interior] = g[tuple(slice(o, o + n) for o, n in zip(d["offset"], d["local"]))]
        t.exchange(f)
        check_layers(topo, view, g, periods, f"aligned {align} ")
        assert (padded[..., plain[-1]:] == SENTINEL).all(), "the padding was written"
    finally:
        t.free()


def test_an_alignment_out_of_range_is_refused():
    from hpclab.kernels.common._common import CTopology

    with pytest.raises(ValueError, match="rows are aligned to 1 to 64 doubles, got 0"):
        CTopology(COMM, (4, 4), (0, 0), (False, False), 1, 0)


@pytest.mark.skipif(SIZE != 2, reason="the two ranks' rows differ by one point at 2 ranks")
def test_a_row_too_long_on_one_rank_is_refused_on_every_rank():
    """A padded row longer than an MPI count on one rank only: every rank refuses (a rank
    that went on would wait in the next collective for one that stopped). The last
    dimension's 2^31 - 3 points split 2^30 - 1 and 2^30 - 2 between the ranks; with this
    halo the first rank's row pads to 2^31 doubles and the second's to 2^31 - 8."""
    from hpclab.kernels.common._common import CTopology

    shape, halo = (1, 2**31 - 3), 536870909
    with pytest.raises(ValueError, match="too long for an MPI datatype"):
        CTopology(COMM, shape, (1, 2), (False, False), halo, 8)
