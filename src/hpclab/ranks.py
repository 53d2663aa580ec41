"""Where MPI ranks run: the cores this process may use, the MPI library and its mpiexec,
how many ranks a run may have (more than cores only for correctness, never for timings),
binding, and the placement a run records (:func:`whoami`, :func:`crowded`).

Part of :mod:`hpclab.launch`, which pages and labs import.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

# mpi4py initialises MPI_THREAD_MULTIPLE by default, and MPICH then locks on every call
# (about 8% of a 0.65 µs message here). Only the main thread calls MPI in hpclab, as in
# osu_latency and IMB, so MPI jobs start funneled unless MPI4PY_RC_THREAD_LEVEL says otherwise.
THREAD_LEVEL = "funneled"
# With more ranks than cores under mpiexec (a correctness run: its timings mean nothing),
# MPICH's funneled progress keeps spinning on a core another rank needs: its MPI test suite
# took 37 s at 4 ranks on 2 cores here, against 11-14 s under thread multiple, whose lock
# gives the core up. (Engines beyond the cores stay funneled: they wait outside MPI.)
OVERSUBSCRIBED_THREAD_LEVEL = {"mpich": "multiple"}



class OversubscribedError(ValueError):
    """More MPI ranks than cores where the run would time them."""


class OversubscriptionWarning(UserWarning):
    """More MPI ranks than cores: fine for correctness, meaningless for timings."""


class MPILaunchError(RuntimeError):
    """mpiexec or the engines could not be started, or an MPI program failed."""


def rank_cores():
    """CPUs this process may run on (its own affinity mask), at least 1.

    Under a launcher that binds (Open MPI's mpiexec binds each of 2 ranks to one core,
    ``srun --cpu-bind=cores`` too) this is the rank's binding, not the machine."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


# set in the environment of every rank by the launchers hpclab meets
_RANK_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS")


def _affinity_of(pid):
    """The number of CPUs in another process's affinity mask (Linux), or None."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)", text, re.MULTILINE)
    if not m:
        return None
    count = 0
    for part in m.group(1).split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def usable_cores() -> int:
    """Cores the job may use on this node, at least 1.

    In a Slurm job: the CPUs Slurm gave the job on this node (``SLURM_CPUS_ON_NODE``).
    In a rank started by mpiexec: the launcher's own affinity (a binding launcher pins
    each rank to one core, which says nothing about how many cores the job has).
    Elsewhere: this process's affinity mask. :func:`rank_cores` is the rank's own mask.
    """
    own = rank_cores()
    slurm = os.environ.get("SLURM_CPUS_ON_NODE", "")
    if slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    if started_by_launcher():
        return max(own, _affinity_of(os.getppid()) or 0)
    return own


def started_by_launcher() -> bool:
    """Whether this process is a rank an MPI launcher started (its variables are set)."""
    return any(v in os.environ for v in _RANK_VARIABLES)


def srun_mpi_plugin():
    """The ``srun --mpi=`` plugin this environment's MPI needs, and a warning or None: 'pmix'
    for Open MPI, 'pmi2' for MPICH and its kin (the mpich package, Intel MPI, MVAPICH). When
    srun is on PATH and does not list the plugin, the warning says so."""
    plugin = "pmix" if mpi_family() == "openmpi" else "pmi2"
    if not shutil.which("srun"):
        return plugin, None
    try:
        listed = subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True,
                                timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return plugin, None
    names = re.findall(r"^\s*(\w+)\s*$", listed.stdout + listed.stderr, re.MULTILINE)
    if names and plugin not in names:
        return plugin, (f"this site's srun does not list --mpi={plugin} (it has "
                        f"{', '.join(names)}); ask its support which PMI your MPI speaks")
    return plugin, None


def launcher_name():
    """How this MPI job was started, for the records: 'srun' inside a Slurm job step,
    'mpiexec' otherwise."""
    return "srun" if "SLURM_STEP_ID" in os.environ and "SLURM_PROCID" in os.environ \
        else "mpiexec"


def positive_count(n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of MPI ranks must be a positive integer, got {n!r}")
    return n


def check_ranks(n, what="this run", oversubscribe=True):
    """Validate a rank count. More ranks than cores: an :class:`OversubscribedError` that
    names the cores, or with ``oversubscribe`` a warning (a correctness run)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of MPI ranks must be a positive integer, got {n!r}")
    cores = usable_cores()
    if n > cores and not oversubscribe:
        raise OversubscribedError(
            f"{what}: {n} MPI ranks on this machine's {cores} cores would take turns on a "
            f"core, and every timing would measure the turns. Start at most {cores} to time "
            "anything, or pass oversubscribe=True for a correctness check (its records say "
            "it was oversubscribed).")
    if n > cores:
        warnings.warn(
            f"{what}: {n} MPI ranks on {cores} cores, as asked (oversubscribe=True): right "
            f"for checking results; ranks take turns on a core, so timings of more than "
            f"{cores} ranks are meaningless",
            OversubscriptionWarning, stacklevel=3)
    return n


def find_mpiexec():
    """The mpiexec that belongs to this environment's MPI.

    ``$MPIEXEC`` when set, else the one beside this Python (the ``mpich`` wheel
    puts it there), else the first on PATH.
    """
    candidates = [os.environ.get("MPIEXEC"), str(Path(sys.executable).with_name("mpiexec")),
                  shutil.which("mpiexec")]
    for cand in candidates:
        if cand and shutil.which(cand):
            return shutil.which(cand)
    raise MPILaunchError(
        "no mpiexec found: install MPI into this environment (`pip install mpich`, or "
        "`make setup`), load your cluster's MPI module, or set MPIEXEC=/path/to/mpiexec")


@functools.lru_cache(maxsize=None)
def mpi_library():
    """The MPI library mpi4py loads: {'version': its version string, 'standard': 'M.m'},
    found without initialising MPI in this process.

    Importing ``mpi4py.MPI`` initialises MPI, and under Open MPI a process that does so
    outside mpiexec starts a daemon of its own: a process that only launches jobs asks a
    short-lived child instead (unless it already runs MPI)."""
    mod = sys.modules.get("mpi4py.MPI")
    if mod is not None:
        text, standard = mod.Get_library_version(), "{}.{}".format(*mod.Get_version())
    else:
        code = ("import json, mpi4py; mpi4py.rc.initialize = False; mpi4py.rc.finalize = False\n"
                "from mpi4py import MPI\n"
                "print(json.dumps([MPI.Get_library_version(),\n"
                "                  '{}.{}'.format(*MPI.Get_version())]))")
        try:
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  timeout=60)
            text, standard = json.loads(done.stdout.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            raise MPILaunchError(f"mpi4py does not load an MPI library here: {exc}") from None
    # Open MPI ends its version string with a NUL
    return {"version": text.replace("\x00", "").strip(), "standard": standard}


def library_version():
    """The version string of the MPI library mpi4py loads (see :func:`mpi_library`)."""
    return mpi_library()["version"]


def mpi_family():
    """'openmpi', 'mpich' or 'other', from the library mpi4py loads."""
    text = library_version().lower()
    if "open mpi" in text:
        return "openmpi"
    if "mpich" in text or "mvapich" in text or "intel" in text:
        return "mpich"
    return "other"


# numpy's BLAS starts a thread per core in every process that calls it (np.vdot, np.dot):
# with one rank per core, P ranks would run P threads per core, spinning while they wait, and
# a dot product of 4 MB took 8 ms instead of 0.15 on 2 ranks of 2 cores. An MPI rank gets one
# BLAS thread unless the user's environment says otherwise.
ONE_BLAS_THREAD = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def mpiexec_options(n):
    """Extra mpiexec arguments and environment this MPI needs for n ranks here (and one BLAS
    thread per rank: :data:`ONE_BLAS_THREAD`)."""
    args = []
    level = THREAD_LEVEL
    if n > usable_cores():
        level = OVERSUBSCRIBED_THREAD_LEVEL.get(mpi_family(), THREAD_LEVEL)
    env = {"MPI4PY_RC_THREAD_LEVEL": os.environ.get("MPI4PY_RC_THREAD_LEVEL", level)}
    env.update({k: os.environ.get(k, "1") for k in ONE_BLAS_THREAD})
    if mpi_family() == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if n > usable_cores():
            args.append("--oversubscribe")
    return args, env


def allow_overload(mpi_args, n):
    """Open MPI refuses ``--bind-to core`` with more ranks than cores ("binding more
    processes than cpus"): above the core count the binding becomes
    ``core:overload-allowed`` (correctness runs; timings there are meaningless anyway)."""
    mpi_args = [str(a) for a in mpi_args]
    if n <= usable_cores() or mpi_family() != "openmpi":
        return mpi_args
    out = list(mpi_args)
    for i, arg in enumerate(out[:-1]):
        if arg in ("--bind-to", "-bind-to") and ":" not in out[i + 1]:
            out[i + 1] += ":overload-allowed"
    return out


def bind_to_core(n=None):
    """mpiexec options that pin each rank to one core, filling one socket first
    (MPICH's Hydra and Open MPI spell them differently). With n ranks above the
    cores, Open MPI is told that overloading is allowed."""
    if mpi_family() == "openmpi":
        core = "core:overload-allowed" if n and n > usable_cores() else "core"
        return ["--bind-to", core, "--map-by", "core"]
    return ["-bind-to", "core", "-map-by", "core"]


def whoami() -> dict[str, Any]:
    """Where this code runs: MPI rank and size, host, process id and the CPUs it may use
    (its binding). Call it on engines, or on every rank of an mpiexec job."""
    import socket

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    levels = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
              MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
    return {"rank": comm.Get_rank(), "size": comm.Get_size(), "host": socket.gethostname(),
            "pid": os.getpid(), "cpus": cpus, "cores": usable_cores(),
            "thread_level": levels.get(MPI.Query_thread())}


def crowded(placement) -> list[tuple[str, int, int]]:
    """(host, ranks, cores) of each host of a placement (:func:`whoami` of every rank) that
    ran more ranks than the job's cores there; [] when none did (or the placement predates
    the cores)."""
    hosts: dict[str, list[dict]] = {}
    for p in placement or ():
        hosts.setdefault(p.get("host", "?"), []).append(p)
    out = []
    for host, ranks in sorted(hosts.items()):
        cores = max((r.get("cores") or 0) for r in ranks)
        if cores and len(ranks) > cores:
            out.append((host, len(ranks), cores))
    return out


def oversubscribed(placement) -> bool:
    """Whether a run with this placement had more ranks than cores on some host."""
    return bool(crowded(placement))
