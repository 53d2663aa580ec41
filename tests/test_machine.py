import os

from hpclab import machine


def test_describe_reports_the_topology():
    info = machine.describe()
    assert info["logical_cpus"] == os.cpu_count()
    assert info["physical_cores"] >= 1 and info["sockets"] >= 1 and info["numa_nodes"] >= 1
    assert any(c["level"] == 1 for c in info["caches"])
    assert all(c["size_bytes"] > 0 for c in info["caches"])
    assert info["transparent_hugepages"] in ("always", "madvise", "never", None)
    assert "MPI" in machine.summary(info) or "MPICH" in machine.summary(info)


def test_size_and_cpu_list_parsing():
    assert machine._parse_size("32K") == 32 * 1024
    assert machine._parse_size("4M") == 4 << 20
    assert machine._parse_size("weird") is None
    assert machine._cpu_list("0-3,8") == [0, 1, 2, 3, 8]
    assert machine.total_cache_bytes() > 0


def test_what_a_machine_cannot_show_is_computed_from_its_description():
    wanted = (("a socket boundary", {"sockets": 2}), ("a node boundary", {"nodes": 2}),
              ("twelve ranks", {"cores": 12}))
    small = {"usable_cores": 2, "sockets": 1}
    words = machine.cannot_show(small, wanted)
    assert words.startswith("This machine has two cores on one socket of one node, so it "
                            "cannot show a socket boundary, a node boundary or twelve ranks")
    big = {"usable_cores": 48, "sockets": 2}
    words = machine.cannot_show(big, wanted)
    assert "cannot show a node boundary" in words and "can show a socket boundary" in words
    assert "48 cores on two sockets" in words
    assert machine.cannot_show({"usable_cores": 1}, wanted).startswith(
        "This machine has one core on one socket")


def test_the_labs_timed_sizes_are_twice_the_cache_per_rank(monkeypatch):
    """One rule sizes what every lab times: the working set of one rank at the most ranks
    timed reaches twice the last-level cache, from the profile's own size on; quick keeps
    its sizes."""
    import pytest

    from hpclab import profiles
    from hpclab.chapters.amdahl import sweep as amdahl
    from hpclab.chapters.jacobi import sweep as jacobi
    from hpclab.chapters.poisson import sweep as poisson
    from hpclab.chapters.stencil import sweep as stencil

    llc = machine.last_level_cache_bytes() or machine.UNKNOWN_CACHE_BYTES
    assert machine.beyond_cache(lambda n: n, 0, 10, factor=1) >= llc
    with pytest.raises(ValueError, match="positive step"):
        machine.beyond_cache(lambda n: n, 5, 0)
    L0 = max(profiles.get("jacobi", "standard")["weak"])
    nx0, ny0, nz0 = profiles.get("amdahl", "standard")["shapes"][0]
    n0 = max(profiles.get("poisson", "standard")["strong"])
    for cache in (8 << 20, 256 << 20):
        monkeypatch.setattr(machine, "last_level_cache_bytes", lambda cache=cache: cache)
        L = jacobi.lab_points("standard")
        assert 24 * (L + 2) ** 3 >= 2 * cache and L % 8 == 0
        assert L == L0 or 24 * (L - 8 + 2) ** 3 < 2 * cache  # the smallest such, from L0
        for ranks in (1, 2, 4):
            nx, ny, nz = amdahl.lab_shape("standard", ranks)
            assert 24 * nx * ny * nz / ranks >= 2 * cache and (ny, nz) == (ny0, nz0)
            assert nx == nx0 or 24 * (nx - 24) * ny * nz / ranks < 2 * cache
            n = poisson.lab_n("standard", ranks)
            assert 32 * (n + 2) ** 2 / ranks >= 2 * cache
            assert n == n0 or 32 * (n - 256 + 2) ** 2 / ranks < 2 * cache
            m = stencil.lab_points("standard", ranks, order=8)
            assert 16 * (m + 8) ** 3 / ranks >= 2 * cache and m % 8 == 0
            assert m == 64 or 16 * (m - 8 + 8) ** 3 / ranks < 2 * cache
        assert stencil.lab_points("quick", 2) == profiles.get("stencil", "quick")["n"][0]
        quick = {k: profiles.get(k, "quick") for k in ("jacobi", "amdahl", "poisson")}
        assert (jacobi.lab_points("quick"), amdahl.lab_shape("quick", 2),
                poisson.lab_n("quick", 2)) == (max(quick["jacobi"]["weak"]),
                                               tuple(quick["amdahl"]["shapes"][0]),
                                               max(quick["poisson"]["strong"]))
    # a lab's run times the size it was given
    assert {t["nx"] for t in amdahl.tasks("quick", shapes=[(96, 20, 20)], kinds=("strong",))
            if t["impl"] == "c"} == {96}
    assert {t["n"] for t in poisson.tasks("quick", strong=[128]) if t["kind"] == "strong"} == \
        {128}
