"""Kernel correctness under mpiexec: the tests/mpi suite at 1, 2 and 4 ranks (it runs unchanged
at each), and every declared kernel's correctness matrix (``python -m hpclab check``) at the
rank counts its declaration names, so a new kernel is checked without a new test file."""
import re
import sys
import warnings
from pathlib import Path

import pytest

from hpclab import check, launch
from hpclab.kernels import registry

MPI_TESTS = Path(__file__).parent / "mpi"


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_kernel_suite_under_mpiexec(nprocs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", launch.OversubscriptionWarning)
        result = launch.mpirun(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
             str(MPI_TESTS)], n=nprocs, timeout=300, what=f"kernel tests on {nprocs} ranks",
            check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


def test_topology_layer_with_a_rank_count_that_does_not_divide():
    """The suite runs at 1, 2 and 4 ranks above; the topology layer also at 3."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", launch.OversubscriptionWarning)
        result = launch.mpirun(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
             str(MPI_TESTS / "test_topology_mpi.py")], n=3, timeout=300,
            what="topology tests on 3 ranks", check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


@pytest.mark.parametrize("slug", registry.extensions())
def test_every_kernel_passes_its_correctness_matrix(slug):
    kernel = registry.get(slug)
    ranks = [p for p in kernel.check_procs if p >= kernel.min_procs]
    run = check.run(slug, ranks=ranks, profile="quick")
    df = run.records
    assert set(df["nprocs"]) == set(ranks)
    assert set(df["impl"]) == set(kernel.implementations)
    assert (df["value"] == 1).all()
    per_p = df.groupby("nprocs").size()
    assert per_p.min() >= len(kernel.implementations)
    cores = launch.usable_cores()
    assert (df["oversubscribed"] == (df["nprocs"] > cores)).all()


@pytest.mark.parametrize("chosen", [None, "active"])
def test_a_checks_threads_sleep_while_they_wait_unless_the_user_chose(monkeypatch, chosen):
    """A check is never timed: its OpenMP threads wait passively (more ranks than cores spin
    otherwise), unless the user set OMP_WAIT_POLICY."""
    import json
    import subprocess

    from hpclab import protocol

    envs = []
    ok = protocol.PREFIX + json.dumps({"impl": "c", "params": {}, "ok": True, "message": ""})

    def mpirun(args, n, **kwargs):
        envs.append(kwargs.get("env") or {})
        return subprocess.CompletedProcess(args, 0, stdout=ok, stderr="")

    monkeypatch.setattr(launch, "mpirun", mpirun)
    if chosen:
        monkeypatch.setenv("OMP_WAIT_POLICY", chosen)
    else:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    check.run(registry.extensions()[0], ranks=[1, 2])
    assert [e.get("OMP_WAIT_POLICY") for e in envs] == [chosen or "passive"] * 2


def test_check_cli_exits_non_zero_on_a_wrong_answer():
    slug = registry.extensions()[0]
    low = registry.get(slug).min_procs
    ok = launch.run_process([sys.executable, "-m", "hpclab", "check", slug, "--ranks",
                             str(max(low, 2))], timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "every answer right" in ok.stdout and "✗" not in ok.stdout
    bad = launch.run_process([sys.executable, "-m", "hpclab", "check", slug, "--ranks",
                              str(max(low, 2)), "--inject-fault"], timeout=300)
    assert bad.returncode == 1 and "WRONG" in bad.stderr and "Traceback" not in bad.stderr


def test_check_refuses_rank_counts_below_the_kernels_minimum():
    slug = max(registry.extensions(), key=lambda s: registry.get(s).min_procs)
    low = registry.get(slug).min_procs
    if low < 2:
        pytest.skip("no kernel needs more than one rank")
    r = launch.run_process([sys.executable, "-m", "hpclab", "check", slug, "--ranks", "1"],
                           timeout=60)
    assert r.returncode == 2 and f"at least {low} rank" in r.stderr
    assert "Traceback" not in r.stderr


OTHER_MPI = {"open mpi": ("MPICH Version:      4.2.0\nMPICH Release date: ...", "MPICH"),
             "mpich": ("Open MPI v5.0.3, package: ...\x00", "Open MPI")}


def test_build_mismatch_is_explained(monkeypatch):
    """Kernels built with one MPI refuse to run under the other, in either direction."""
    from mpi4py import MPI

    import hpclab.kernels as k

    built = k.build_info()["mpi_library"]
    family = k._family(built)
    assert family in OTHER_MPI, built
    other, name = OTHER_MPI[family]
    monkeypatch.setattr(MPI, "Get_library_version", lambda: other)
    with pytest.raises(k.BuildMismatchError,
                       match=f"compiled against {re.escape(built)}.*loaded {name}"):
        k.check_mpi_match()


def test_a_kernel_built_for_a_newer_cpu_refuses_to_load_and_says_how_to_rebuild():
    """-march=native on a login node, run on an older compute node: a clear error, not an
    illegal instruction."""
    import hpclab.kernels as k

    info = {"kernel_flags": {"k": {"-march=native": True}},
            "cpu_isa": ["avx", "avx2", "avx512f", "fma", "sse2"]}
    with pytest.raises(k.BuildMismatchError, match=r"avx512f; this CPU does not.*HPCLAB_MARCH"):
        k.check_isa_match("k", info, here={"avx", "avx2", "fma", "sse2"})
    k.check_isa_match("k", info, here={"avx", "avx2", "avx512f", "fma", "sse2", "sse3"})
    # built for a named target, or without the flag: nothing recorded to compare
    named = {**info, "kernel_flags": {"k": {"-march=x86-64-v2": True}}}
    k.check_isa_match("k", named, here={"sse2"})
    k.check_isa_match("k", {**info, "kernel_flags": {}}, here={"sse2"})


def test_this_build_recorded_the_cpu_it_was_compiled_for():
    import hpclab.kernels as k

    info = k.build_info()
    assert "cpu_isa" in info
    here = k.cpu_isa()
    if here is not None:  # (Linux) the build machine is this one
        assert set(info["cpu_isa"]) == here
        for slug in info["kernel_flags"]:
            k.check_isa_match(slug)
