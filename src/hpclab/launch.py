"""Start MPI work with a timeout, and always clean up after it.

Two ways to run MPI code:

* :func:`cluster` - ipyparallel MPI engines for notebooks and experiments::

      with hpclab.launch.cluster(n=2, timeout=60) as engines:
          times = engines.run(pingpong.measure, "c", 1024, what="pingpong c 1 KiB")

  ``engines.run`` calls a function on every engine (one engine per MPI rank)
  and returns the results in rank order. A call that does not finish within
  its timeout (a deadlock, usually) raises :class:`TimeoutError` naming what
  was running; the stuck engines are stopped and fresh ones started, so the
  context stays usable. The engines, the controller and their mpiexec are
  stopped when the block ends, by an exception or by KeyboardInterrupt too.

* :func:`mpirun` - a plain ``mpiexec -n N ...`` with a timeout, for scripts
  and tests; on timeout the whole process group is killed.

More ranks than cores make timings meaningless (ranks take turns on a core, and MPICH
ranks busy-poll): engines refuse to start that way (:class:`OversubscribedError`, naming
the cores) unless asked with ``oversubscribe=True`` for a correctness check, and
:func:`mpirun` (scripts, tests) warns with :class:`OversubscriptionWarning`. A run's
placement says whether it was oversubscribed (:func:`oversubscribed`), and its records
keep that.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from hpclab import processes, shm

DEFAULT_TIMEOUT = 120.0
START_TIMEOUT = 90.0
# The controller counts an engine registered at its first answered heartbeat, about 1.5
# periods after it connects: at ipyparallel's 3 s period, 5 s of every start. A 0.5 s period
# starts engines in under 3 s; 60 misses keep the 30 s of silence (a machine too loaded to
# answer; a long MPI call does not stop an engine's heart, a thread of its own) after which
# the controller drops an engine. An engine stops itself after 50 missed pings of the
# controller, checked every period + 0.5 s: 50 s now.
HEARTBEAT = ["--HeartMonitor.period=500", "--HeartMonitor.max_heartmonitor_misses=60"]
# mpi4py initialises MPI_THREAD_MULTIPLE by default, and MPICH then locks on every call
# (about 8% of a 0.65 µs message here). Only the main thread calls MPI in hpclab, as in
# osu_latency and IMB, so MPI jobs start funneled unless MPI4PY_RC_THREAD_LEVEL says otherwise.
THREAD_LEVEL = "funneled"
# With more ranks than cores under mpiexec (a correctness run: its timings mean nothing),
# MPICH's funneled progress keeps spinning on a core another rank needs: its MPI test suite
# took 37 s at 4 ranks on 2 cores here, against 11-14 s under thread multiple, whose lock
# gives the core up. (Engines beyond the cores stay funneled: they wait outside MPI.)
OVERSUBSCRIBED_THREAD_LEVEL = {"mpich": "multiple"}


T = TypeVar("T")


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
    if any(v in os.environ for v in _RANK_VARIABLES):
        return max(own, _affinity_of(os.getppid()) or 0)
    return own


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


def _positive(n):
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
            f"{what}: {n} MPI ranks on {cores} cores oversubscribes this machine; "
            "results are correct but timings are meaningless",
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


def mpiexec_options(n):
    """Extra mpiexec arguments and environment this MPI needs for n ranks here."""
    args = []
    level = THREAD_LEVEL
    if n > usable_cores():
        level = OVERSUBSCRIBED_THREAD_LEVEL.get(mpi_family(), THREAD_LEVEL)
    env = {"MPI4PY_RC_THREAD_LEVEL": os.environ.get("MPI4PY_RC_THREAD_LEVEL", level)}
    if mpi_family() == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if n > usable_cores():
            args.append("--oversubscribe")
    return args, env


def _allow_overload(mpi_args, n):
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


# --------------------------------------------------------------------------- mpirun


def _kill_group(proc, grace=3.0):
    """Stop a process started with start_new_session=True, and its group, and remove the
    shared-memory segments its ranks leave behind (see :mod:`hpclab.shm`)."""
    left = shm.Leftovers(proc.pid)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # ranks that outlive mpiexec still carry its process group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    left.remove()


def mpirun(args, n, timeout=DEFAULT_TIMEOUT, what=None, mpi_args=(), env=None, check=True,
           cwd=None):
    """Run ``mpiexec -n n *args`` and return the CompletedProcess (text output).

    Parameters
    ----------
    args : list of str
        The program and its arguments, e.g. ``[sys.executable, "-m", "hpclab", "run", ...]``.
    n : int
        Number of MPI ranks.
    timeout : float
        Seconds before the run is stopped and :class:`TimeoutError` raised.
    what : str, optional
        What is running, for messages.
    mpi_args : list of str
        Extra mpiexec options (binding, mapping), placed before ``-n``.
    env : dict, optional
        Variables added to this process's environment.
    check : bool
        Raise :class:`MPILaunchError` when the program exits non-zero.
    """
    what = what or " ".join(map(str, args))
    check_ranks(n, what)
    extra_args, extra_env = mpiexec_options(n)
    cmd = [find_mpiexec(), *extra_args, *_allow_overload(mpi_args, n), "-n", str(n),
           *map(str, args)]
    result = run_process(cmd, timeout=timeout, what=what, where=f" on {n} MPI ranks",
                         env={**os.environ, **extra_env, **(env or {})}, cwd=cwd)
    if check and result.returncode != 0:
        raise MPILaunchError(
            f"{what} failed on {n} MPI ranks (exit code {result.returncode}):\n"
            f"{_tail(result.stderr) or _tail(result.stdout)}")
    return result


_JOB_PREFIXES = ("PMIX_", "PMI_", "ORTE_", "HYDRA_", "OMPI_COMM_WORLD_", "OMPI_APP_CTX",
                 "OMPI_MCA_ess", "OMPI_MCA_orte_", "OMPI_MCA_pmix", "OMPI_UNIVERSE_SIZE",
                 "OMPI_NUM_APP_CTX", "OMPI_FIRST_RANKS", "OMPI_FILE_LOCATION",
                 "OMPI_MCA_initial_wdir", "MPI_LOCALNRANKS", "MPI_LOCALRANKID")


def clean_environment(env):
    """env without the variables an MPI launcher (or Open MPI's singleton start) sets for
    its ranks. A child started with them believes it is one of those ranks: under Open MPI,
    an mpiexec started from a process that initialised MPI exits 1 without a word. The
    user's own settings (OMPI_MCA_btl, MPICH's MPIR_CVAR_*, ...) stay. Python's
    ``os.environ`` does not see what MPI set at C level, so it is the default source."""
    return {k: v for k, v in env.items() if not k.startswith(_JOB_PREFIXES)}


def without_job_identity(cmd, env=None):
    """``cmd`` preceded by ``env -u NAME`` for each variable of ``env`` (default: this
    process's) by which an MPI job describes itself (:func:`clean_environment`).
    ipyparallel starts the engines' mpiexec with a copy of ``os.environ``, and a Python
    started by a process that had initialised MPI (Open MPI's singleton sets PMIX_*/OMPI_*
    at C level) inherits them: with them, Open MPI's mpiexec exits without a word. This
    process's own environment is left as it is."""
    env = os.environ if env is None else env
    unset = sorted(k for k in env if k.startswith(_JOB_PREFIXES))
    return ["env", *(a for k in unset for a in ("-u", k)), *cmd] if unset else list(cmd)


def run_process(cmd, timeout, what=None, env=None, cwd=None, where=""):
    """Run a command in its own process group and return the CompletedProcess (text).

    At the timeout (or on Ctrl-C) the whole group is stopped and TimeoutError
    (or KeyboardInterrupt) raised: nothing it started is left running.
    ``env`` is the complete environment (default: this one), without the variables by which
    an MPI job describes itself to its ranks (see :func:`clean_environment`).
    """
    what = what or " ".join(map(str, cmd))
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=clean_environment(os.environ if env is None else env), cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise TimeoutError(
            f"{what} did not finish within {timeout:g} s{where} (a deadlock, or a run too long "
            f"for its timeout); all of its processes were stopped.\n"
            f"last output:\n{_tail(out)}{_tail(err)}") from None
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _tail(text, lines=20):
    if not text:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:]) + "\n"


# --------------------------------------------------------------------------- engines


def _profile_root():
    root = os.environ.get("HPCLAB_IPP_DIR")
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    return root


_REMOTE_TYPES = {"ValueError": ValueError, "TypeError": TypeError, "MemoryError": MemoryError,
                 "ZeroDivisionError": ZeroDivisionError, "IndexError": IndexError,
                 "KeyError": KeyError, "AssertionError": AssertionError,
                 "NotImplementedError": NotImplementedError}


def _remote_exception(exc, what):
    """Turn an ipyparallel remote error into an exception of the original type."""
    from hpclab.kernels import KernelError

    errors = getattr(exc, "elist", None) or [(exc.ename, exc.evalue, exc.traceback,
                                              getattr(exc, "engine_info", {}))]
    ename, evalue, tb, info = errors[0]
    rank = (info or {}).get("engine_id", "?")
    message = f"{what} failed on rank {rank}: {ename}: {evalue}"
    if ename == "KernelError":
        return KernelError(message)
    where = remote_frames(tb)
    if where:
        message += "\n" + where
    kind = _REMOTE_TYPES.get(ename)
    return kind(message) if kind is not None else RuntimeError(message)


_FRAME = re.compile(r"^File (?P<file>.+?):(?P<line>\d+)(?:, in (?P<func>[^(\n]+))?", re.MULTILINE)
_INTERNAL = ("ipyparallel", "<string>", "site-packages", "hpclab/launch.py")


def remote_frames(tb):
    """The frames of a remote traceback that are the caller's own code, as Python prints
    them, with each line's source (looked up here: a notebook's cells are known to the
    kernel that defined the function, not to the engines that ran it)."""
    import linecache

    text = re.sub(r"\x1b\[[0-9;]*m", "", tb or "")
    lines = []
    for m in _FRAME.finditer(text):
        path, lineno, func = m["file"].strip(), int(m["line"]), (m["func"] or "").strip()
        if any(mark in path for mark in _INTERNAL):
            continue
        lines.append(f'  File "{path}", line {lineno}' + (f", in {func}" if func else ""))
        source = linecache.getline(path, lineno).strip()
        if source:
            lines.append(f"    {source}")
    return "Traceback (the code that raised, on the engine):\n" + "\n".join(lines) if lines \
        else ""


DEFAULT_WHAT = "MPI engines"
# Engines started under a name of their own ("pingpong lab"), by name: starting such a set
# again (a notebook cell run twice) stops the one it replaces, so a kernel never holds two.
_NAMED: dict[str, Engines] = {}
# every set this process started: stopped when it exits
_STARTED: weakref.WeakSet[Engines] = weakref.WeakSet()


def _stop_all_at_exit():
    for engines in list(_STARTED):
        with contextlib.suppress(Exception):
            engines.stop()


atexit.register(_stop_all_at_exit)


# The watcher of a set of engines: a small process that holds a pipe from the Python that
# started them. When that Python ends without stopping them (a kernel killed because it did
# not exit in time, a crash, kill -9: no atexit runs), the pipe closes and the watcher stops
# the process groups of mpiexec and the controller (and the shared memory their ranks mapped).
# Each group is given as leader:start (its start time in clock ticks since boot), and is
# stopped only while that same leader runs: a group whose leader exited, and whose number a
# new process took since, is left alone.
_WATCHER = """
import os, select, signal, sys
from hpclab import processes, shm
from hpclab.processes import start_time as started

groups = [arg.split(":") for arg in sys.argv[1:]]
line = None
while line is None:
    if select.select([sys.stdin], [], [], 1.0)[0]:
        line = sys.stdin.readline()  # '' once the Python that started the engines is gone
    elif not any(started(pid) == start for pid, start in groups):
        sys.exit(0)  # the engines are gone already, however they went: nothing to watch
if line.strip() != "stopped":
    ours = [int(pid) for pid, start in groups if started(pid) == start]
    lefts = [shm.Leftovers(pid) for pid in ours]
    for pid in ours:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    for left in lefts:
        left.remove()
"""


def _watch(pids):
    """Start a watcher of the process groups ``pids`` (see _WATCHER); its Popen, or None
    (with a warning) when no process can be started now."""
    groups = [f"{pid}:{start}" for pid in sorted(pids)
              if (start := processes.start_time(pid)) is not None]
    try:
        return subprocess.Popen([sys.executable, "-c", _WATCHER, *groups],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, text=True)
    except OSError as exc:
        warnings.warn(f"these engines have no watcher ({exc}): if this Python is killed, "
                      "they stop only after their heartbeat times out", stacklevel=3)
        return None


def _unwatch(watcher):
    """Tell a watcher that its engines were stopped here; it exits without touching them."""
    if watcher is None:
        return
    with contextlib.suppress(OSError, ValueError):
        watcher.stdin.write("stopped\n")
        watcher.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watcher.wait(timeout=10)


def running():
    """The named engine sets this process has started and not stopped ({name: Engines})."""
    return {k: e for k, e in _NAMED.items() if e.cluster is not None}


class Engines:
    """A set of n ipyparallel engines under one mpiexec, with its controller.

    Use :func:`cluster` in a ``with`` block; in a notebook, ``Engines(n).start()``
    and ``.stop()`` in a later cell. The engines stop when Python exits (a notebook
    kernel that shuts down or restarts), and engines started under a name of their own
    (``what="pingpong lab"``) are stopped when a set of the same name starts again, so
    running a notebook's engine cell twice leaves one set, not two.
    """

    def __init__(self, n=2, timeout=DEFAULT_TIMEOUT, start_timeout=START_TIMEOUT, mpi_args=(),
                 environment=None, what=DEFAULT_WHAT, launcher="mpiexec", srun_mpi=None,
                 sbatch_options=(), oversubscribe=False):
        if launcher not in ("mpiexec", "slurm"):
            raise ValueError(f"launcher is 'mpiexec' or 'slurm', got {launcher!r}")
        self.launcher = launcher
        self.srun_mpi = str(srun_mpi) if srun_mpi else None
        self.sbatch_options = [str(o) for o in sbatch_options]
        # under Slurm the job's allocation, not this machine's cores, sets the ranks' cores
        self.n = check_ranks(n, what, oversubscribe) if launcher == "mpiexec" else _positive(n)
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self.mpi_args = list(map(str, mpi_args))
        self.environment = dict(environment or {})
        self.what = what
        self.cluster = None
        self.client = None
        self.view = None
        self.profile_dir = None
        self._pids = set()
        self._watcher = None
        self.stopped_pids = set()
        self._stale = False

    # -- life cycle
    def start(self) -> Engines:
        import ipyparallel as ipp

        if self.what != DEFAULT_WHAT:
            earlier = _NAMED.pop(self.what, None)
            if earlier is not None and earlier is not self and earlier.cluster is not None:
                earlier.stop()
                print(f"stopped the earlier {self.what!r} engines of this kernel (pids "
                      f"{sorted(earlier.stopped_pids)}) before starting new ones")
            _NAMED[self.what] = self
        _STARTED.add(self)

        self.profile_dir = tempfile.mkdtemp(prefix="hpclab-ipp-", dir=_profile_root())
        if self.launcher == "slurm":
            cluster = self._slurm_cluster(ipp)
        else:
            extra_args, extra_env = mpiexec_options(self.n)
            # engines beyond the cores wait outside MPI (only P <= cores of them are timed):
            # funneled, as for any timing
            extra_env["MPI4PY_RC_THREAD_LEVEL"] = os.environ.get("MPI4PY_RC_THREAD_LEVEL",
                                                                 THREAD_LEVEL)
            cluster = ipp.Cluster(engines="mpi", n=self.n, profile_dir=self.profile_dir,
                                  log_level=40, controller_args=HEARTBEAT)
            cluster.config.MPIEngineSetLauncher.environment = {**extra_env, **self.environment}
            cluster.config.MPIEngineSetLauncher.mpi_cmd = without_job_identity([find_mpiexec()])
            cluster.config.MPIEngineSetLauncher.mpi_args = extra_args + _allow_overload(
                self.mpi_args, self.n)
        self.cluster = cluster
        try:
            cluster.start_controller_sync()
            self._remember_pids()
            self._start_engines()
        except BaseException:
            self.stop()
            raise
        return self

    def _slurm_cluster(self, ipp):
        """Engines as one Slurm job of n tasks, started by ``srun --mpi=<srun_mpi>`` (a bare
        srun would give n engines of MPI size 1); the controller listens on every interface,
        so that engines on other nodes reach it."""
        if not shutil.which("sbatch"):
            raise MPILaunchError("launcher='slurm' needs Slurm's sbatch on PATH (on a laptop: "
                                 "python -m hpclab.localslurm start)")
        cluster = ipp.Cluster(engines="slurm", n=self.n, profile_dir=self.profile_dir,
                              log_level=40, controller_ip="*", controller_args=HEARTBEAT)
        options = "".join(f"#SBATCH {o}\n" for o in self.sbatch_options)
        self.srun_mpi = self.srun_mpi or srun_mpi_plugin()[0]
        srun_args = " ".join(self.mpi_args)
        launcher = cluster.config.SlurmEngineSetLauncher
        # the batch script and the job's output stay in the profile folder (removed on
        # stop), not in the notebook's folder
        launcher.batch_file_name = os.path.join(self.profile_dir, "engines.sbatch")
        launcher.batch_template = (
            "#!/bin/sh\n#SBATCH --export=ALL\n#SBATCH --job-name=hpclab-engines-{cluster_id}\n"
            "#SBATCH --ntasks={n}\n#SBATCH --output={output_file}\n" + options
            + f"srun --mpi={self.srun_mpi} {srun_args} {{program_and_args}}\n")
        launcher.engine_args = ["--mpi"]
        launcher.environment = {
            "MPI4PY_RC_THREAD_LEVEL": os.environ.get("MPI4PY_RC_THREAD_LEVEL", THREAD_LEVEL),
            **self.environment}
        return cluster

    def _start_engines(self):
        self.cluster.start_engines_sync(self.n)
        self._remember_pids()
        if self.client is None:
            self.client = self.cluster.connect_client_sync()
        try:
            self.client.wait_for_engines(self.n, timeout=self.start_timeout, interactive=False,
                                         block=True)
        except TimeoutError:
            raise MPILaunchError(
                f"{self.what}: {self.n} MPI engines did not start within {self.start_timeout:g} s. "
                f"mpiexec said:\n{self._engine_output()}") from None
        self.view = self.client[:]
        self.view.block = False

    def _engine_output(self):
        out = []
        for launcher in (self.cluster.engines or {}).values():
            with contextlib.suppress(Exception):
                out.append(launcher.get_output())
        return _tail("\n".join(out)) or "(nothing)"

    def _remember_pids(self):
        if self.cluster is None:
            return
        launchers = list((self.cluster.engines or {}).values())
        if self.cluster.controller is not None:
            launchers.append(self.cluster.controller)
        before = set(self._pids)
        for launcher in launchers:
            pid = getattr(launcher, "pid", None)
            if pid:
                self._pids.add(pid)
        if self._pids != before:
            self._rewatch()

    def _rewatch(self):
        """Engines and controller outlive this Python only until their watcher sees it gone
        (see _WATCHER): one watcher, of the process groups alive now."""
        if self.launcher != "mpiexec":
            return
        old, self._watcher = self._watcher, _watch(self._pids) if self._pids else None
        _unwatch(old)  # after the new one holds its pipe: never a moment without one

    def _kill_leftovers(self):
        """Kill the process groups of mpiexec and the controller if anything survived."""
        for pid in self._pids:
            left = shm.Leftovers(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            left.remove()
        self._pids.clear()

    def _kill_engines(self):
        """Kill the engines' mpiexec and everything in its process group, at once (under
        Slurm: cancel their job)."""
        if self.launcher == "slurm":
            with contextlib.suppress(Exception):
                self.cluster.stop_engines_sync()
            return
        for launcher in list((self.cluster.engines or {}).values()):
            pid = getattr(launcher, "pid", None)
            if pid:
                left = shm.Leftovers(pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                left.remove()
                self._pids.discard(pid)
        self._rewatch()
        with contextlib.suppress(Exception):
            self.cluster.stop_engines_sync()
        self.view = None
        self._stale = True

    def restart(self):
        """Replace the engines by fresh ones (after a deadlock, say)."""
        if self.cluster is None:
            raise MPILaunchError("the engines are stopped; start a new cluster")
        if not self._stale:
            self._kill_engines()
        deadline = time.monotonic() + 30
        while self.client.ids and time.monotonic() < deadline:
            time.sleep(0.1)
        self._start_engines()
        self._stale = False

    def stop(self) -> None:
        """Stop engines and controller and remove the profile folder; safe to call twice."""
        self.stopped_pids = set(self._pids)
        if _NAMED.get(self.what) is self:
            del _NAMED[self.what]
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                if self.client is not None:
                    self.client.close()
            with contextlib.suppress(Exception):
                self.cluster.stop_engines_sync()
            with contextlib.suppress(Exception):
                self.cluster.stop_controller_sync()
            self._kill_leftovers()
        _unwatch(self._watcher)
        self._watcher = None
        self.cluster = self.client = self.view = None
        if self.profile_dir:
            shutil.rmtree(self.profile_dir, ignore_errors=True)
            self.profile_dir = None

    def __enter__(self):
        return self if self.cluster is not None else self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def __del__(self):
        with contextlib.suppress(Exception):
            self.stop()

    # -- work
    @property
    def pids(self):
        """Process ids of mpiexec and the controller (their process groups hold the rest)."""
        return set(self._pids)

    def run(self, func: Callable[..., T], *args: Any, timeout: float | None = None,
            what: str | None = None, **kwargs: Any) -> list[T]:
        """Call ``func(*args, **kwargs)`` on every engine; results in rank order.

        Raises
        ------
        TimeoutError
            The call did not finish within ``timeout`` seconds; the engines were
            killed, and fresh ones start with the next call.
        hpclab.kernels.KernelError, ValueError, ...
            Re-raised from the lowest-numbered failing engine, with its rank.
        """
        import ipyparallel as ipp

        if self._stale and self.cluster is not None:
            self.restart()
        if self.view is None:
            raise MPILaunchError("the engines are not running: use `with cluster(n) as engines:`"
                                 " or call start() first")
        timeout = self.timeout if timeout is None else float(timeout)
        what = what or getattr(func, "__name__", "the call")
        ar = self.view.apply_async(func, *args, **kwargs)
        try:
            results = ar.get(timeout=timeout)
        except ipp.error.TimeoutError:
            self._kill_engines()
            raise TimeoutError(
                f"{what} did not finish within {timeout:g} s on {self.n} MPI engines (a deadlock, "
                "or a run too long for its timeout); the engines were stopped, and fresh ones "
                "start with the next run"
            ) from None
        except KeyboardInterrupt:
            # the engines may be stuck in MPI (a deadlock the user gave up on): kill them
            # now, so that the next call starts fresh ones instead of waiting behind it
            self._kill_engines()
            raise
        except ipp.error.CompositeError as exc:
            raise _remote_exception(exc, what) from None
        except ipp.error.RemoteError as exc:
            raise _remote_exception(exc, what) from None
        order = sorted(range(len(results)), key=lambda i: ar.engine_id[i])
        return [results[i] for i in order]


def cluster(n: int = 2, timeout: float = DEFAULT_TIMEOUT,
            start_timeout: float = START_TIMEOUT, mpi_args: Iterable[str] = (),
            environment: Mapping[str, str] | None = None, what: str = DEFAULT_WHAT,
            launcher: str = "mpiexec", srun_mpi: str | None = None,
            sbatch_options: Iterable[str] = (), oversubscribe: bool = False) -> Engines:
    """Context manager: n MPI engines, stopped when the block ends however it ends.

    Parameters
    ----------
    n : int
        Number of engines (MPI ranks).
    timeout : float
        Default timeout in seconds of each :meth:`Engines.run` call.
    start_timeout : float
        Seconds to wait for the engines to register.
    mpi_args : list of str
        Extra mpiexec options, e.g. ``["-bind-to", "core"]``. Never ``-n``.
    environment : dict
        Extra environment variables for controller and engines.
    launcher : {'mpiexec', 'slurm'}
        'slurm': the engines are one batch job of n tasks (``sbatch``), started by
        ``srun --mpi=<srun_mpi>`` (default: :func:`srun_mpi_plugin`, 'pmi2' for the mpich
        package, MPICH and Intel MPI, 'pmix' for Open MPI; ``srun --mpi=list`` shows a
        site's); ``mpi_args`` go to srun and
        ``sbatch_options`` (``["--time=00:30:00", "--partition=debug"]``) into the script.
    oversubscribe : bool
        Allow more engines than this machine's cores (a correctness check: its timings mean
        nothing, and the records of a sweep on them say ``oversubscribed``). Without it,
        such a start raises :class:`OversubscribedError`, naming the cores.
    """
    if any(a in ("-n", "-np") for a in map(str, mpi_args)):
        raise ValueError("give the number of ranks as n=..., not as -n in mpi_args")
    return Engines(n, timeout=timeout, start_timeout=start_timeout, mpi_args=mpi_args,
                   environment=environment, what=what, launcher=launcher, srun_mpi=srun_mpi,
                   sbatch_options=sbatch_options, oversubscribe=oversubscribe)
