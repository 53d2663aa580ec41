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
