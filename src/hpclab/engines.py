"""ipyparallel MPI engines for notebooks and experiments (:func:`cluster`, :class:`Engines`):
started under one mpiexec (or one Slurm job) with their controller, every call with a
timeout (a deadlock raises TimeoutError and fresh engines start), a remote error raised here
as its own type with the caller's lines, and the engines stopped however the Python that
started them ends (a watcher process for a kill -9).

Part of :mod:`hpclab.launch`, which pages and labs import.
"""
from __future__ import annotations

import atexit
import contextlib
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

from hpclab import mpicython, processes, sharing, shm
from hpclab.mpirun import DEFAULT_TIMEOUT, output_tail, without_job_identity
from hpclab.ranks import (
    ONE_BLAS_THREAD,
    THREAD_LEVEL,
    MPILaunchError,
    allow_overload,
    check_ranks,
    find_mpiexec,
    mpiexec_options,
    positive_count,
    srun_mpi_plugin,
    usable_cores,
)

START_TIMEOUT = 90.0
# seconds the other engines get to finish once one has raised (see Engines.run)
RAISED_GRACE = 3.0
BUSY_POLL = 0.25  # seconds between two looks at the engines' processor time (Engines.run busy)
# The controller counts an engine registered at its first answered heartbeat, about 1.5
# periods after it connects: at ipyparallel's 3 s period, 5 s of every start. A 0.5 s period
# starts engines in under 3 s; 60 misses keep the 30 s of silence (a machine too loaded to
# answer; a long MPI call does not stop an engine's heart, a thread of its own) after which
# the controller drops an engine. An engine stops itself after 50 missed pings of the
# controller, checked every period + 0.5 s: 50 s now.
HEARTBEAT = ["--HeartMonitor.period=500", "--HeartMonitor.max_heartmonitor_misses=60"]
# The controller's schedulers as threads of its own process, not eight processes of their own:
# a start of four engines took 19 s of CPU time (8 s on the clock) on two cores, 12 s (6 s)
# with threads. The schedulers pass messages between the notebook and the engines; no timing
# goes through them (the kernels time themselves, in MPI)
THREADED = ["--IPController.use_threads=True"]
# ... and its heart monitor forked before those threads start, not after (see ipcontroller)
CONTROLLER = [sys.executable, "-m", "hpclab.ipcontroller"]


T = TypeVar("T")


def _profile_root():
    root = os.environ.get("HPCLAB_IPP_DIR")
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    return root


_REMOTE_TYPES = {"ValueError": ValueError, "TypeError": TypeError, "MemoryError": MemoryError,
                 "ZeroDivisionError": ZeroDivisionError, "IndexError": IndexError,
                 "KeyError": KeyError, "AssertionError": AssertionError,
                 "NotImplementedError": NotImplementedError}


class EngineCrash(RuntimeError):
    """An engine's process died while it ran a call (a crash, not an exception)."""


def _engine_died(exc):
    """Whether an ipyparallel remote error says an engine died (its process is gone)."""
    errors = getattr(exc, "elist", None) or [(getattr(exc, "ename", ""), None, None, None)]
    return any(e[0] == "EngineError" for e in errors)


def _remote_exception(exc, what, note="", ranks=None):
    """Turn an ipyparallel remote error into an exception of the original type (``note``:
    a sentence after the error; ``ranks``: each engine id's MPI rank, where they differ)."""
    from hpclab.kernels import KernelError

    errors = getattr(exc, "elist", None) or [(exc.ename, exc.evalue, exc.traceback,
                                              getattr(exc, "engine_info", {}))]
    ename, evalue, tb, info = errors[0]
    evalue = _mpi_error_in_words(str(evalue))
    rank = (info or {}).get("engine_id", "?")
    rank = (ranks or {}).get(rank, rank)
    message = f"{what} failed on rank {rank}: {ename}: {evalue}"
    if note:
        message += f" ({note})"
    if ename == "KernelError":
        return KernelError(message)
    where = remote_frames(tb)
    if where:
        message += "\n" + where
    kind = _REMOTE_TYPES.get(ename)
    return kind(message) if kind is not None else RuntimeError(message)


# what an MPI error class means in a student's code (MPICH and Open MPI name them so)
_MPI_HINTS = {
    "Message truncated": "a receive buffer smaller than the message sent into it: size each "
                         "receive buffer for what its sender sends, counted in elements",
    "MPI_ERR_TRUNCATE": "a receive buffer smaller than the message sent into it: size each "
                        "receive buffer for what its sender sends, counted in elements",
    "See the MPI_ERROR field in MPI_Status": "a message did not fit what was posted for it "
                                             "(in a collective, most often a receive too small "
                                             "for its send): the counts and displacements of "
                                             "both sides must agree, counted in elements",
}


def _mpi_error_in_words(evalue):
    """An MPI library's error with its internal call stack cut to its innermost line (MPICH
    prints one line per internal function; the last says what happened, with the sizes)
    and, for the common ones, what it means in the caller's code."""
    first, _, stack = evalue.partition(", error stack:")
    first = first.strip()
    inner = [line.split(": ", 1)[-1].strip() for line in stack.splitlines()]
    inner = [line for line in inner if line]
    if inner:
        first += f": {inner[-1]}"
    hint = next((h for mark, h in _MPI_HINTS.items() if mark in first), None)
    if hint is None and not stack:
        return evalue
    return first + (f" ({hint})" if hint else "")


_FRAME = re.compile(r"^File (?P<file>.+?):(?P<line>\d+)(?:, in (?P<func>[^(\n]+))?", re.MULTILINE)
_INTERNAL = ("ipyparallel", "<string>", "site-packages", "hpclab/launch.py",
             "hpclab/engines.py", "hpclab/mpirun.py", "hpclab/ranks.py",
             # the labs' harnesses that call the student's code, and mpi4py's sources
             "hpclab/exercises/", "hpclab/chapters/", "hpclab/mpicython.py", "mpi4py/MPI.src/")


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
        if Path(path).name.startswith(mpicython.PREFIX):  # an %%mpi_cython cell: its own lines
            func = func.rpartition(".")[2]
            lines.append(f'  File "your %%mpi_cython cell", line {lineno}, in {func}')
            source = linecache.getline(
                str(mpicython.build_dir(create=False) / Path(path).name), lineno).strip()
            if source:
                lines.append(f"    {source}")
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


def _world_rank():
    """Runs on an engine: its rank in MPI.COMM_WORLD, its process id and its host's name."""
    import os
    import socket

    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank(), os.getpid(), socket.gethostname()


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
        self.n = check_ranks(n, what, oversubscribe) if launcher == "mpiexec" else positive_count(n)
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self.mpi_args = list(map(str, mpi_args))
        self.environment = dict(environment or {})
        self.what = what
        self.cluster = None
        self.client = None
        self.view = None
        self._ranks = {}  # engine id -> MPI rank (see _in_rank_order)
        self._local = {}  # MPI rank -> process id, of the engines on this machine
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
                                  log_level=40, controller_args=HEARTBEAT + THREADED)
            cluster.config.MPIEngineSetLauncher.environment = {**extra_env, **self.environment}
            cluster.config.MPIEngineSetLauncher.mpi_cmd = without_job_identity([find_mpiexec()])
            cluster.config.MPIEngineSetLauncher.mpi_args = extra_args + allow_overload(
                self.mpi_args, self.n)
            cluster.config.MPIEngineSetLauncher.engine_args = self._patience()
        cluster.config.LocalControllerLauncher.controller_cmd = CONTROLLER
        self.cluster = cluster
        try:
            cluster.start_controller_sync()
            self._remember_pids()
            self._start_engines()
        except BaseException:
            self.stop()
            raise
        if sharing.on_shared_server() and self.launcher != "slurm":  # a course's hub
            said = sharing.note(sharing.other_users(), usable_cores())
            if said:
                print(said)
        return self

    def _slurm_cluster(self, ipp):
        """Engines as one Slurm job of n tasks, started by ``srun --mpi=<srun_mpi>`` (a bare
        srun would give n engines of MPI size 1); the controller listens on every interface,
        so that engines on other nodes reach it."""
        if not shutil.which("sbatch"):
            raise MPILaunchError("launcher='slurm' needs Slurm's sbatch on PATH (on a laptop: "
                                 "python -m hpclab.localslurm start)")
        cluster = ipp.Cluster(engines="slurm", n=self.n, profile_dir=self.profile_dir,
                              log_level=40, controller_ip="*",
                              controller_args=HEARTBEAT + THREADED)
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
        launcher.engine_args = ["--mpi", *self._patience()]
        launcher.environment = {
            "MPI4PY_RC_THREAD_LEVEL": os.environ.get("MPI4PY_RC_THREAD_LEVEL", THREAD_LEVEL),
            **{k: os.environ.get(k, "1") for k in ONE_BLAS_THREAD}, **self.environment}
        return cluster

    def _patience(self):
        """ipengine's own limits, as long as the start may take: it waits 10 s for the
        controller's connection file and 5 s for the reply to its registration, then exits
        (on a loaded machine the controller once took longer, and the engine set stopped)."""
        return [f"--IPEngine.timeout={self.start_timeout:g}",
                f"--IPEngine.wait_for_url_file={self.start_timeout:g}"]

    def _start_engines(self, old=frozenset()):
        """Start n engines and view them; ``old``: the uuids of engines killed before (a
        restart), which the controller may still count as registered (see restart)."""
        import ipyparallel as ipp

        self.cluster.start_engines_sync(self.n)
        self._remember_pids()
        if self.client is None:
            # the controller answers the client once its loop runs: ipyparallel waits 10 s,
            # which a CI run's loaded machine once passed ("Hub connection request timed out")
            self.client = self.cluster.connect_client_sync(timeout=self.start_timeout)
        try:
            if old:
                self._wait_for_new(old)
            else:
                self.client.wait_for_engines(self.n, timeout=self.start_timeout,
                                             interactive=False, block=True)
        except TimeoutError:
            raise MPILaunchError(
                f"{self.what}: {self.n} MPI engines did not start within {self.start_timeout:g} s. "
                f"mpiexec said:\n{self._engine_output()}") from None
        except ipp.error.EngineError as exc:  # the engine set exited before all registered
            raise MPILaunchError(
                f"{self.what}: the MPI engines stopped while starting ({exc}). mpiexec "
                f"said:\n{self._engine_output()}") from None
        self.view = self._in_rank_order(sorted(i for i, u in self._registered().items()
                                               if u not in old))
        self.view.block = False

    def _registered(self):
        """{engine id: uuid} of the engines the controller counts as registered. An id is
        reused (an engine asks for its rank as id and gets it when free); a uuid is not."""
        while True:
            with contextlib.suppress(RuntimeError):  # changed by the client's thread meanwhile
                return dict(self.client._engines)

    def _in_rank_order(self, ids):
        """A view of the engines ``ids`` in the order of their MPI ranks, and ``_ranks``, the
        rank of each engine id (``run`` orders results and names ranks by it). An engine asks
        for its rank as its id; after a restart while the killed engines' ids are still
        registered, the controller gives the next free ids in the order the engines register,
        which need not be the ranks'."""
        import socket

        import ipyparallel as ipp

        try:
            said = self.client[ids].apply_async(_world_rank).get(timeout=self.start_timeout)
        except ipp.error.TimeoutError:
            raise MPILaunchError(f"{self.what}: the new MPI engines did not say their ranks "
                                 f"within {self.start_timeout:g} s") from None
        ranks = [rank for rank, _, _ in said]
        self._ranks = dict(zip(ids, ranks))
        # the engines this machine's /proc can see (mpiexec's, not a Slurm job's: its ranks
        # may share this host's name from a node of their own)
        here = socket.gethostname()
        self._local = {rank: pid for rank, pid, host in said
                       if host == here and self.launcher == "mpiexec"}
        return self.client[[i for _, i in sorted(zip(ranks, ids))]]

    def _wait_for_new(self, old):
        """Wait until n engines whose uuids are not in ``old`` have registered: ipyparallel's
        own wait counts every registered engine, dead ones too, and raises when one of them
        is unregistered meanwhile."""
        import ipyparallel as ipp

        deadline = time.monotonic() + self.start_timeout
        while len(set(self._registered().values()) - old) < self.n:
            if any(getattr(es, "state", None) == "after"
                   for es in (self.cluster.engines or {}).values()):
                raise ipp.error.EngineError("the engine set exited")
            if time.monotonic() > deadline:
                raise TimeoutError
            time.sleep(0.05)

    def _engine_output(self):
        out = []
        for launcher in (self.cluster.engines or {}).values():
            with contextlib.suppress(Exception):
                out.append(launcher.get_output())
        return output_tail("\n".join(out)) or "(nothing)"

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

    @staticmethod
    def _kill_group(pid):
        """Kill process group ``pid`` and remove the shared memory its MPI left behind."""
        left = shm.Leftovers(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        left.remove()

    def _kill_leftovers(self):
        """Kill the process groups of mpiexec and the controller if anything survived."""
        for pid in self._pids:
            self._kill_group(pid)
        self._pids.clear()

    def _kill_engines(self):
        """Kill the engines' mpiexec and everything in its process group, at once (under
        Slurm: cancel their job); the next call starts fresh ones."""
        if self.launcher != "slurm":
            for launcher in list((self.cluster.engines or {}).values()):
                pid = getattr(launcher, "pid", None)
                if pid:
                    self._kill_group(pid)
                    self._pids.discard(pid)
            self._rewatch()
        with contextlib.suppress(Exception):
            self.cluster.stop_engines_sync()
        # under Slurm too: a view of the cancelled job's engines would take the next call and
        # report it as an engine's crash
        self.view = None
        self._stale = True

    def restart(self):
        """Replace the engines by fresh ones (after a deadlock, say)."""
        if self.cluster is None:
            raise MPILaunchError("the engines are stopped; start a new cluster")
        old = frozenset(self._registered().values())
        if not self._stale:
            self._kill_engines()
        # the controller forgets a killed engine when ipyparallel's nanny (a process of its
        # own beside each engine) says it exited, or after HEARTBEAT's 30 s of silence; both
        # can take longer on a loaded machine. The new engines are told from the old by the
        # uuid the controller gave each (not by id: a fresh engine takes its rank as id when
        # the killed one's is free), not by waiting for the old ones to be gone (a view of
        # every registered engine once held killed ones, and every call on it waited for its
        # timeout)
        try:
            self._start_engines(old | frozenset(self._registered().values()))
        except BaseException:
            self._kill_engines()  # what started of a failed set; the next run tries again
            raise
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
            what: str | None = None, busy: float | None = None, **kwargs: Any) -> list[T]:
        """Call ``func(*args, **kwargs)`` on every engine; results in rank order.

        ``busy``: for a call that, when right, needs milliseconds of work (a check of a
        student's exchange): it is stopped as stuck as soon as one engine has spent ``busy``
        seconds of processor time on it (MPI waits by polling: a deadlock spends it at the
        pace the machine's load lets it), not only at ``timeout``. On a loaded machine a
        right call may take long on the clock but never spends that; where /proc cannot see
        the engines (under Slurm) ``timeout`` alone applies.

        Raises
        ------
        TimeoutError
            The call did not finish within ``timeout`` seconds, or spent ``busy`` seconds of
            processor time on an engine; the engines were killed, and fresh ones start with
            the next call.
        hpclab.kernels.KernelError, ValueError, ...
            Re-raised from the lowest-numbered failing engine, with its rank; when one
            engine raised while the others still ran (waiting for it), from that one, after
            RAISED_GRACE seconds, the engines stopped.
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
            deadline = time.monotonic() + timeout
            spinning = [] if busy is None else self._busy_ranks(ar, timeout, float(busy))
            if not spinning:
                left = self._stop_when_one_raised(ar, max(0.0, deadline - time.monotonic()),
                                                  what)
                results = ar.get(timeout=left)
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
        except (ipp.error.CompositeError, ipp.error.RemoteError) as exc:
            if _engine_died(exc):
                # a crash (compiled code that wrote outside its arrays, say): the rest of the
                # set waits for a rank that is gone, so stop it; the next run starts fresh ones
                self._kill_engines()
                raise EngineCrash(
                    f"{what}: an MPI engine died while running it (a crash of the process, "
                    "most often compiled code that read or wrote outside an array: with "
                    "boundscheck=False nothing stops an index past the end; or code built for "
                    "another CPU). The engines were stopped, and fresh ones start with the next "
                    "run") from None
            raise _remote_exception(exc, what, ranks=self._ranks) from None
        if spinning:
            self._kill_engines()
            raise TimeoutError(
                f"{what} did not finish: rank{'s' if len(spinning) > 1 else ''} "
                f"{', '.join(map(str, spinning))} spent {busy:g} s of processor time on it "
                "without returning (a deadlock: MPI waits for a message by polling); the "
                "engines were stopped, and fresh ones start with the next run")
        order = sorted(range(len(results)),
                       key=lambda i: self._ranks.get(ar.engine_id[i], ar.engine_id[i]))
        return [results[i] for i in order]


    def _busy_ranks(self, ar: Any, timeout: float, busy: float) -> list[int]:
        """Wait for ``ar`` up to ``timeout`` while no engine of this machine has spent
        ``busy`` seconds of processor time since the call began; the ranks that have, when
        one has (``ar`` not done), else []: ``ar`` is done, one of its engines raised (the
        caller says which), or the time is up (the caller says so)."""
        import concurrent.futures as cf

        from hpclab.processes import cpu_seconds

        start: dict[int, float] = {}
        for rank, pid in self._local.items():
            if (t := cpu_seconds(pid)) is not None:
                start[rank] = t
        deadline = time.monotonic() + timeout
        parts = ar.split() or [ar]
        while start and (left := deadline - time.monotonic()) > 0:
            done, pending = cf.wait(parts, timeout=min(BUSY_POLL, left),
                                    return_when=cf.FIRST_EXCEPTION)
            if not pending or any(p.exception() is not None for p in done):
                return []
            used = {rank: (cpu_seconds(self._local[rank]) or t) - t
                    for rank, t in start.items()}
            spinning = sorted(rank for rank, u in used.items() if u >= busy)
            if spinning:
                return spinning
        return []

    def _stop_when_one_raised(self, ar: Any, timeout: float, what: Any) -> float:
        """Wait for ``ar`` up to ``timeout``, and when an engine raises while others still
        run (ranks left waiting for a message the failed one will never send), give them
        RAISED_GRACE seconds, then stop the engines and raise the failed rank's error at once,
        instead of a deadlock at the timeout. Returns the seconds left of ``timeout``."""
        import concurrent.futures as cf

        deadline = time.monotonic() + timeout

        def left():
            return max(0.0, deadline - time.monotonic())

        parts = ar.split()
        if len(parts) < 2:
            return left()
        done, pending = cf.wait(parts, timeout=timeout, return_when=cf.FIRST_EXCEPTION)
        if not pending or all(p.exception() is None for p in done):
            return left()
        _, pending = cf.wait(pending, timeout=min(RAISED_GRACE, left()))
        if not pending:
            return left()
        waiting = sorted(i for i, p in enumerate(parts) if p in pending)
        failed = next(p for p in parts if p.done() and p.exception() is not None)
        self._kill_engines()
        raise _remote_exception(
            failed.exception(), what, ranks=self._ranks,
            note=(f"ranks {', '.join(map(str, waiting))}" if len(waiting) > 1
                  else f"rank {waiting[0]}")
            + f" had not finished {RAISED_GRACE:g} s later (left waiting for a message or a "
              "collective call of the rank that raised, or still at work): the engines were "
              "stopped, and fresh ones start with the next run")


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
