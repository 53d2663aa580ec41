"""The STREAM sweep: what every MPI rank runs (see :mod:`hpclab.chapters`)."""
from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np

from hpclab import launch, machine, profiles, protocol, records
from hpclab.kernels import registry
from hpclab.sweeps import in_job, on_engines, sweep

NAME = "stream"
KERNEL = registry.get(NAME)
MIN_PROCS = KERNEL.min_procs
NPROCS = KERNEL.procs("default_procs")
IMPLS = KERNEL.implementations
METRIC, UNIT = "time", "s"


def array_elements(profile=None, ranks=1):
    """Doubles per array (per rank, when ranks > 1) for a profile; refuses sizes that
    would not fit in half of this machine's memory."""
    from hpclab.chapters.stream.kernels import min_elements

    n = profiles.get(NAME, profile)["n"]
    if n is None:
        n = -(-min_elements() // ranks)
    memory = machine.memory_bytes()
    if memory and 3 * 8 * n * ranks > memory / 2:
        raise ValueError(
            f"STREAM's rule asks for three arrays of {n * 8 / 1e9:.1f} GB on each of {ranks} "
            f"rank(s), more than half of this machine's {memory / 1e9:.0f} GB of memory: use "
            "--profile quick, or call the kernel with a smaller n and say so with the results")
    return int(n)


def numa_pairs():
    """(cpunodebind, membind) pairs for close and distant memory: [] with one NUMA node."""
    ids = sorted(machine.numa_nodes())
    if len(ids) < 2:
        return []
    return [(ids[0], ids[0]), (ids[0], ids[1]), (ids[1], ids[1]), (ids[1], ids[0])]


def tasks(profile=None, impls=IMPLS, hugepages=False, threads=None, ranks=None):
    """The measurements a profile asks for, in the order they run."""
    settings = profiles.get(NAME, profile)
    unknown = set(impls) - set(IMPLS)
    if unknown or not impls:
        raise ValueError(f"unknown stream implementation(s) {sorted(unknown)}: choose from "
                         f"{', '.join(IMPLS)}")
    threads = list(threads or range(1, launch.usable_cores() + 1))
    n = array_elements(profile)
    base = {"ntimes": settings["ntimes"], "hugepages": bool(hugepages)}
    out = []
    for nt in threads:
        for bind in settings["binds"]:
            for impl in impls:
                out.append({"mode": "threads", "impl": impl, "threads": nt, "bind": bind,
                            "n": n, **base})
    pairs = numa_pairs()
    if pairs and shutil.which("numactl"):
        nodes = machine.numa_nodes()
        for nt in threads:
            for cpu, mem in pairs:
                if nt > len(nodes[cpu]):  # the threads must fit on the node's cores
                    continue
                for impl in impls:
                    out.append({"mode": "threads", "impl": impl, "threads": nt, "bind": "close",
                                "n": n, "cpunodebind": cpu, "membind": mem, **base})
    if ranks:
        per_rank = array_elements(profile, ranks)
        for mode in ("star", "single") if ranks > 1 else ("single",):
            for impl in impls:
                out.append({"mode": mode, "impl": impl, "threads": 1, "bind": "none",
                            "n": per_rank, **base})
    return out


def _clean_env(env):
    """This environment without the variables of a surrounding MPI job or OpenMP setting."""
    drop = ("PMI_", "PMIX_", "HYDRA_", "MPIR_", "OMPI_COMM_", "OMPI_MCA_orte", "OMP_")
    return {k: v for k, v in env.items() if not k.startswith(drop)}


def run_threads(impl, threads, bind, n, ntimes, hugepages=False, cpunodebind=None,
                membind=None, timeout=None):
    """One threaded STREAM run in a fresh process; its result as a dict (the timeout
    defaults to the profile's)."""
    timeout = timeout or profiles.timeout(NAME)
    env = _clean_env(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), OMP_PLACES="cores", OMP_PROC_BIND=bind)
    cmd = [sys.executable, "-m", "hpclab.chapters.stream.kernels", "--impl", impl, "--threads",
           str(threads), "--n", str(n), "--ntimes", str(ntimes)]
    if hugepages:
        cmd.append("--hugepages")
    if cpunodebind is not None:
        if not shutil.which("numactl"):
            raise RuntimeError("close and distant memory need numactl (apt-get install numactl)")
        cmd = ["numactl", f"--cpunodebind={cpunodebind}", f"--membind={membind}", *cmd]
    proc = launch.run_process(cmd, timeout=timeout, env=env,
                              what=f"STREAM {impl} with {threads} thread(s), {bind}")
    results = protocol.parse(proc.stdout)
    result = results[-1] if results else {"error": proc.stderr.strip()[-2000:] or
                                          f"exit code {proc.returncode}, no result"}
    if "error" in result:
        from hpclab.kernels import KernelError

        raise KernelError(f"STREAM {impl} with {threads} thread(s) failed: {result['error']}")
    return result


def _rows(impl, nprocs, nthreads, params, times, rank=0):
    return records.timings(KERNEL, impl, nprocs, nthreads, {**params, "rank": rank}, times)


def _idle_wait(comm):
    """Wait for the other ranks without spinning a core (MPICH polls in MPI_Barrier)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.005)


def _on_rank0(comm, work):
    """``work()`` on rank 0 of comm (or alone without comm) while the other ranks wait idle;
    its result on rank 0, None elsewhere. An error of rank 0 is raised on every rank, so
    that the job stops together instead of leaving the others waiting in the next task."""
    from hpclab.kernels import KernelError

    rank = 0 if comm is None else comm.Get_rank()
    result, error = None, None
    if rank == 0:
        try:
            result = work()
        except Exception as exc:  # re-raised below, on every rank
            error = exc
    if comm is not None:
        _idle_wait(comm)
        text = comm.bcast(None if error is None else f"{error}", root=0)
        if text is not None and rank != 0:
            raise KernelError(f"rank 0 failed: {text}")
    if error is not None:
        raise error
    return result


def measure(mode, impl, threads, bind, n, ntimes, hugepages=False, cpunodebind=None,
            membind=None, comm=None, timeout=None):
    """One measurement; the records on rank 0 of comm (all of them without comm)."""
    from hpclab.chapters.stream import kernels as stream

    params = {"mode": mode, "bind": bind, "n": n, "ntimes": ntimes, "hugepages": bool(hugepages),
              "cpunodebind": -1 if cpunodebind is None else cpunodebind,
              "membind": -1 if membind is None else membind}
    if comm is None and mode != "threads":
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    rank = 0 if comm is None else comm.Get_rank()
    size = 1 if comm is None else comm.Get_size()
    if mode == "threads":
        def threaded():
            result = run_threads(impl, threads, bind, n, ntimes, hugepages, cpunodebind,
                                 membind, timeout)
            times = np.asarray(result["times"])  # the counted trials (the first is dropped)
            params["openmp_bind"] = result["openmp"]["proc_bind"]
            return _rows(impl, 1, threads, params, times)

        return _on_rank0(comm, threaded) or []
    if mode == "star":
        times = stream.RUNNERS[impl](n, ntimes, 1, hugepages, comm=comm)
        everyone = comm.gather(times, root=0)
        if rank != 0:
            return []
        return [row for r, t in enumerate(everyone) for row in _rows(impl, size, 1, params, t, r)]
    if mode == "single":
        return _on_rank0(comm, lambda: _rows(impl, size, 1, params, stream.RUNNERS[impl](
            n, ntimes, 1, hugepages))) or []
    raise ValueError(f"unknown stream mode {mode!r}: threads, star or single")


def _describe(task):
    where = (f" cpu node {task['cpunodebind']} mem node {task['membind']}"
             if "cpunodebind" in task else "")
    return f"{task['mode']} {task['impl']} {task['threads']} thread(s) {task['bind']}{where}"


def _extra(impls, hugepages, n):
    from hpclab.kernels import build_info

    info = build_info()
    return {"implementations": list(impls), "hugepages": bool(hugepages),
            "doubles_per_array": n, "cache_bytes": machine.total_cache_bytes(),
            "numa_nodes": len(machine.numa_nodes() or []) or 1,
            "numactl": bool(shutil.which("numactl")),
            "kernel_flags": info.get("kernel_flags", {}).get("stream", {}),
            "write_allocate_counted": False}


def run(profile=None, impls=IMPLS, threads=None, hugepages=False, mpi=True, n=None,
        engines=None, progress=True, timeout=None):
    """Thread scaling (and close/distant memory) in fresh processes, then StarSTREAM and
    SingleSTREAM on n MPI engines (default: all cores; ``mpi=False`` skips them)."""
    settings = profiles.get(NAME, profile)
    timeout = timeout or settings["timeout"]
    todo = tasks(profile, impls, hugepages, threads)
    df = sweep(NAME, todo, lambda **t: measure(**t, timeout=timeout), progress)
    threaded = records.Run(df, records.metadata(NAME, profiles.name(profile), {
        "launcher": "subprocess", "settings": settings, "cores": launch.usable_cores(),
        **_extra(impls, hugepages, array_elements(profile))}))
    if not mpi:
        return threaded
    ranks = n or (engines.n if engines is not None else NPROCS)
    mpi_tasks = [t for t in tasks(profile, impls, hugepages, [1], ranks)
                 if t["mode"] != "threads"]
    on_ranks = on_engines(sys.modules[__name__], mpi_tasks, profile=profile, n=ranks,
                          engines=engines, timeout=timeout, progress=progress,
                          describe=_describe)
    return records.Run.combine(threaded, on_ranks, mpi_run=on_ranks.meta["run_id"])


def run_mpi(comm=None, profile=None, impls=IMPLS, hugepages=False, progress=True):
    """The same experiment in this MPI job (``python -m hpclab run stream``): rank 0
    starts the threaded runs while the others wait idle, then all ranks run StarSTREAM
    and SingleSTREAM. Records on rank 0, None elsewhere."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    todo = tasks(profile, impls, hugepages, None, comm.Get_size())
    return in_job(sys.modules[__name__], todo, comm=comm, profile=profile, progress=progress,
                  extra=_extra(impls, hugepages, array_elements(profile)))
