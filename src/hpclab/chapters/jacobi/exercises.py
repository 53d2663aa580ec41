"""Jacobi lab: run sweeps with the student's slab halo exchange on the first P engines and
compare the field with a serial sweep of the same grid."""
from __future__ import annotations

import numpy as np


def _sweeps_on_rank(exchange, nprocs, shape, sweeps, seed):
    """Runs on every engine: slabs of the global grid, the student's exchange, our sweep."""
    from mpi4py import MPI

    from hpclab.chapters.jacobi import kernels as jacobi
    from hpclab.kernels.api import first_ranks
    from hpclab.kernels.topology import block_range

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        rank, size = sub.Get_rank(), sub.Get_size()
        u0 = np.random.default_rng(seed).random(shape)
        _, f_all, w, diag = jacobi.serial_problem(shape)
        first, planes = block_range(shape[0], size, rank)
        f = np.ascontiguousarray(f_all[first:first + planes + 2])
        u = np.zeros_like(f)
        u[1:-1, 1:-1, 1:-1] = u0[first:first + planes]
        if rank > 0:
            u[0] = np.nan  # a halo the exchange must fill
        if rank < size - 1:
            u[-1] = np.nan
        unew = u.copy()
        cart = sub.Create_cart([size], periods=[False])
        try:
            for _ in range(sweeps):
                exchange(cart, u)
                jacobi.sweep(u, f, unew, w, diag)
                u, unew = unew, u
        finally:
            cart.Free()
        blocks = sub.gather(u[1:-1, 1:-1, 1:-1].copy(), root=0)
        if rank != 0:
            return {"rank": rank}
        # compared with the serial sweep where the check runs, not here
        return {"rank": 0, "field": np.concatenate(blocks)}


def halo_check(engines, exchange, nprocs, shape=(12, 8, 6), sweeps=3, seed=0, timeout=60):
    """Run ``sweeps`` Jacobi sweeps of a random field on the first nprocs engines, slabs of
    planes per rank, with ``exchange(cart, u)`` filling the halo planes ``u[0]`` and
    ``u[-1]`` before every sweep (``cart``: a 1D non-periodic Cartesian communicator).

    Returns a dict: ``ok`` (the gathered field equals a serial sweep of the whole grid),
    ``wrong`` (points that differ), ``nan`` (points reached by a halo never filled) and
    ``first_wrong_plane``.
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    per_rank = engines.run(_sweeps_on_rank, exchange, int(nprocs), tuple(shape), int(sweeps),
                           int(seed), timeout=timeout,
                           what=f"your halo exchange on {nprocs} ranks")
    from hpclab.chapters.jacobi import kernels as jacobi

    root = next(r for r in per_rank if r is not None and r["rank"] == 0)
    got = np.asarray(root["field"], dtype=float)
    want = jacobi.serial_sweeps(np.random.default_rng(seed).random(shape), sweeps)
    if got.shape != want.shape:
        return {"ok": False, "wrong": int(want.size), "nan": 0, "first_wrong_plane": 0}
    bad = ~np.isclose(got, want, rtol=1e-12, atol=1e-12)
    return {"ok": not bad.any(), "wrong": int(bad.sum()), "nan": int(np.isnan(got).sum()),
            "first_wrong_plane": int(np.argwhere(bad)[0][0]) if bad.any() else None}
