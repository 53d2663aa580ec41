"""Every MPI launch has a timeout, errors clearly and leaves no process behind."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

import leftovers
from hpclab import launch

DEADLOCK = ("from mpi4py import MPI; import numpy as np; c = MPI.COMM_WORLD; "
            "b = np.zeros(1); c.Recv(b, source=(c.rank + 1) % c.size)")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_dead(pids, seconds=15):
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def children_of_session(pgid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.getpgid(int(d)) == pgid:
                    out.append(int(d))
            except OSError:
                pass
    return out


def test_mpirun_runs_and_returns_output():
    code = ("import sys; from mpi4py import MPI; c = MPI.COMM_WORLD; "
            "sys.stdout.write(f'<{c.rank}/{c.size}>'); sys.stdout.flush()")
    r = launch.mpirun([sys.executable, "-c", code], n=2, timeout=60)
    assert sorted(re.findall(r"<(\d)/(\d)>", r.stdout)) == [("0", "2"), ("1", "2")]


# the deadlock, after MPI started (its shared memory is mapped by then) saying what it maps
SHOW_SEGMENTS = ("from mpi4py import MPI; import sys; from hpclab import shm; "
                 "c = MPI.COMM_WORLD; c.Barrier(); "
                 "print('segments:', *sorted(shm.mapped_by_process('self'))); sys.stdout.flush(); ")


def test_mpirun_deadlock_times_out_and_leaves_nothing():
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"deadlock demo did not finish within 4 s on 2 MPI") \
            as info:
        launch.mpirun([sys.executable, "-c", SHOW_SEGMENTS + DEADLOCK], n=2, timeout=4,
                      what="deadlock demo")
    assert time.monotonic() - t0 < 4 + 15
    from leftovers import tagged
    assert not [p for p, cmd in tagged(os.environ["HPCLAB_RUN_TAG"]) if "Recv" in cmd]
    segments = re.findall(r"/dev/shm/\S+", str(info.value))
    assert "segments:" in str(info.value)
    if launch.mpi_family() == "mpich":
        assert segments, f"MPICH's ranks mapped no shared memory: {info.value}"
    left = [s for s in segments if os.path.exists(s)]
    assert not left, f"the killed ranks' shared memory is still in /dev/shm: {left}"


def test_mpirun_failure_shows_the_error():
    with pytest.raises(launch.MPILaunchError, match="ZeroDivisionError"):
        launch.mpirun([sys.executable, "-c", "1/0"], n=2, timeout=60, what="bad script")


def test_oversubscription_warns():
    with pytest.warns(launch.OversubscriptionWarning, match="are meaningless"):
        launch.check_ranks(launch.usable_cores() + 1)


def test_engines_for_timing_refuse_more_ranks_than_cores_and_name_them():
    cores = launch.usable_cores()
    before = set(leftovers.tagged(os.environ["HPCLAB_RUN_TAG"]))
    with pytest.raises(launch.OversubscribedError,
                       match=rf"{cores + 1} MPI ranks on this machine's {cores} cores.*"
                             rf"at most {cores}.*oversubscribe=True"):
        launch.cluster(n=cores + 1, timeout=30)
    assert set(leftovers.tagged(os.environ["HPCLAB_RUN_TAG"])) == before, "something started"
    with pytest.warns(launch.OversubscriptionWarning):
        engines = launch.Engines(cores + 1, oversubscribe=True)  # allowed, nothing started
    assert engines.n == cores + 1 and engines.cluster is None


def test_a_placement_says_where_it_was_oversubscribed():
    def rank(host, cores):
        return {"host": host, "cores": cores, "cpus": [0]}

    assert launch.crowded([rank("a", 2), rank("a", 2), rank("b", 1)]) == []
    assert launch.crowded([rank("a", 2)] * 3 + [rank("b", 4)]) == [("a", 3, 2)]
    assert launch.oversubscribed([rank("a", 1)] * 2)
    assert not launch.oversubscribed([{"host": "a", "cpus": [0]}] * 4)  # cores not recorded
    me = launch.whoami()
    assert me["cores"] == launch.usable_cores()
    # a sweep's run is oversubscribed when the ranks it times are, not its idle engines
    from hpclab import sweeps

    assert sweeps._timed([{"nprocs": 1}, {"nprocs": 2}], 4) == 2
    assert sweeps._timed([{"nbytes": 8}], 4) == 4


@pytest.mark.parametrize("n", [0, -1, 1.5, "2", True])
def test_bad_rank_counts_are_refused(n):
    with pytest.raises(ValueError, match="positive integer"):
        launch.check_ranks(n)


def test_n_belongs_in_n_not_mpi_args():
    with pytest.raises(ValueError, match="not as -n"):
        launch.cluster(n=2, mpi_args=["-n", "4"])


def test_an_engine_set_that_stops_while_starting_says_what_mpiexec_said():
    """ipyparallel raises its EngineError when the engine set exits before every engine
    registered (a CI run once saw it from a book page): the error names the engines and
    carries mpiexec's output, as a start that times out does."""
    import ipyparallel as ipp

    class Launcher:
        def get_output(self):
            return "Registration timed out after 5.0 seconds"

    class Cluster:
        engines = {"set": Launcher()}
        controller = None

        def start_engines_sync(self, n):
            pass

    class Client:
        def wait_for_engines(self, n, **kw):
            raise ipp.error.EngineError("Engine set stopped: {'exit_code': 1}")

    e = launch.Engines(n=1, what="a page")
    e.cluster, e.client = Cluster(), Client()
    with pytest.raises(launch.MPILaunchError, match=r"(?s)a page: the MPI engines stopped "
                       r"while starting .*exit_code.*mpiexec said:.*Registration timed out"):
        e._start_engines()


def _ranks():
    import os

    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size(), os.getpid()


def _segments():
    from hpclab import shm
    return sorted(shm.mapped_by_process("self"))


def _deadlock():
    import numpy as np
    from mpi4py import MPI
    c = MPI.COMM_WORLD
    c.Recv(np.zeros(1), source=(c.rank + 1) % c.size)


def _fail_on_rank_one():
    from mpi4py import MPI
    if MPI.COMM_WORLD.rank == 1:
        raise ValueError("rank one is unhappy")
    return 0


def test_engines_deadlock_times_out_within_its_timeout_and_recovers():
    with launch.cluster(n=2, timeout=60) as eng:
        first = eng.run(_ranks)
        assert [(r, s) for r, s, _ in first] == [(0, 2), (1, 2)]
        engine_pids = [p for _, _, p in first]
        segments = [s for rank in eng.run(_segments) for s in rank]
        if launch.mpi_family() == "mpich":
            assert segments, "MPICH's engines mapped no shared memory"
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="ring deadlock did not finish within 6 s on 2 MPI"):
            eng.run(_deadlock, timeout=6, what="ring deadlock")
        assert time.monotonic() - t0 < 6 + 5, "the timeout was not kept (twice it is 12 s)"
        assert not wait_dead(engine_pids), "deadlocked engines still running"
        left = [s for s in segments if os.path.exists(s)]
        assert not left, f"the killed engines' shared memory is still in /dev/shm: {left}"
        second = eng.run(_ranks)
        assert [(r, s) for r, s, _ in second] == [(0, 2), (1, 2)]
        # a call that, when right, is milliseconds of work: a right one returns under a
        # budget of processor time, a deadlock is stopped by it long before its clock runs out
        assert [r for r, _, _ in eng.run(_ranks, timeout=60, busy=0.5)] == [0, 1]
        with pytest.raises(TimeoutError, match=r"ring deadlock did not finish: ranks? [01, ]+ "
                                               r"spent 0\.5 s of processor time on it"):
            eng.run(_deadlock, timeout=60, busy=0.5, what="ring deadlock")
        third = eng.run(_ranks)
        pids = eng.pids
    assert not wait_dead(list(pids) + [p for _, _, p in second + third])


def _crash_rank_one():
    import os
    import signal

    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 1:
        os.kill(os.getpid(), signal.SIGSEGV)  # what an index past an array's end can do
    MPI.COMM_WORLD.Barrier()
    return 0


def test_an_engine_that_crashes_is_named_and_fresh_engines_follow():
    """A segmentation fault in one engine (compiled code writing past an array) raises
    EngineCrash in words, stops the set instead of leaving rank 0 in its barrier, and the
    next run starts fresh engines."""
    from hpclab.engines import EngineCrash

    with launch.cluster(n=2, timeout=60) as eng:
        before = [p for _, _, p in eng.run(_ranks)]
        with pytest.raises(EngineCrash, match="an MPI engine died while running it"):
            eng.run(_crash_rank_one, timeout=30, what="a crash")
        assert not wait_dead(before), "the crashed set's engines still run"
        assert [(r, s) for r, s, _ in eng.run(_ranks)] == [(0, 2), (1, 2)]


def test_fresh_engines_work_while_the_controller_still_counts_the_killed_ones(monkeypatch):
    """A controller that learns late that the engines were killed (on a loaded machine the
    nanny's word and the missed heartbeats can both come after a restart) still gives the
    fresh engines every call: a restart that waited 30 s for the killed ones to go, then
    viewed every registered engine, held killed ones, and each call waited for its timeout
    (a CI run lost nine ring tests so)."""
    from hpclab import engines as engines_module

    # ten minutes of missed heartbeats before the controller drops an engine, and no nanny
    # (ipyparallel's process beside each engine that tells the controller when it exits)
    monkeypatch.setattr(engines_module, "HEARTBEAT", [
        "--HeartMonitor.period=500", "--HeartMonitor.max_heartmonitor_misses=1200"])
    patience = engines_module.Engines._patience
    monkeypatch.setattr(engines_module.Engines, "_patience",
                        lambda self: [*patience(self), "--IPEngine.enable_nanny=False"])
    with launch.cluster(n=2, timeout=60) as eng:
        killed = set(eng.client.ids)
        with pytest.raises(TimeoutError, match="did not finish within 4 s"):
            eng.run(_deadlock, timeout=4, what="ring deadlock")
        t0 = time.monotonic()
        second = eng.run(_ranks, timeout=30)
        assert time.monotonic() - t0 < 30, "the restart waited for the killed engines to go"
        assert killed <= set(eng.client.ids), "the controller forgot the killed engines early"
        # the new engines could not have their ranks as ids: results and errors still name
        # ranks (a CI run got rank 1's result first)
        assert not set(eng.view.targets) & killed
        assert [(r, s) for r, s, _ in second] == [(0, 2), (1, 2)]
        with pytest.raises(ValueError, match="failed on rank 1: ValueError: rank one"):
            eng.run(_fail_on_rank_one, timeout=30, what="unhappy test")


def test_a_restart_after_the_killed_engines_left_finds_new_ones_on_the_same_ids(monkeypatch):
    """The controller gives an engine its rank as id when that id is free: once it has
    dropped the killed engines (the nanny's word is usually quick), the fresh ones take the
    same ids. A restart that told new engines from old by id saw none and waited for its
    start timeout; it tells them by the controller's uuid of each engine."""
    from hpclab import engines as engines_module

    kill = engines_module.Engines._kill_engines

    def kill_and_wait_until_dropped(self):
        gone = set(self.client.ids)
        kill(self)
        deadline = time.monotonic() + 60
        while set(self.client.ids) & gone and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not set(self.client.ids) & gone, "the controller kept the killed engines"

    monkeypatch.setattr(engines_module.Engines, "_kill_engines", kill_and_wait_until_dropped)
    with launch.cluster(n=2, timeout=60, start_timeout=30) as eng:
        first = eng.run(_ranks, timeout=30)
        ids = set(eng.client.ids)
        eng.restart()
        second = eng.run(_ranks, timeout=30)
        assert [(r, s) for r, s, _ in second] == [(0, 2), (1, 2)]
        assert set(eng.view.targets) == ids, "the fresh engines took other ids than their ranks"
        assert not {p for _, _, p in first} & {p for _, _, p in second}
        pids = eng.pids
    assert not wait_dead(list(pids) + [p for _, _, p in second])


def test_engines_stop_on_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt):
        with launch.cluster(n=2, timeout=30) as eng:
            ranks = eng.run(_ranks)
            pids = list(eng.pids) + [p for _, _, p in ranks]
            raise KeyboardInterrupt
    assert not wait_dead(pids)
    assert eng.profile_dir is None


def test_interrupting_a_stuck_call_kills_the_engines_and_recovers():
    import signal
    import threading

    with launch.cluster(n=2, timeout=60) as eng:
        engine_pids = [p for _, _, p in eng.run(_ranks)]
        timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            eng.run(_deadlock, timeout=50, what="interrupted deadlock")
        timer.join()
        assert time.monotonic() - t0 < 10
        assert not wait_dead(engine_pids)
        assert [(r, s) for r, s, _ in eng.run(_ranks)] == [(0, 2), (1, 2)]


def _students_own_error(x):
    y = x + 1
    raise ZeroDivisionError(f"the student divided by {y - 2}")  # the line a student must see


def _children(pid):
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and leftovers.parent(int(d)) == pid]


def _cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")


FORK_ORDER = """
import json, shutil, sys, tempfile, threading
from hpclab.ipcontroller import Controller
folder = tempfile.mkdtemp()
app = Controller.instance()
app.initialize([f"--profile-dir={folder}", "--IPController.use_threads=True",
                "--log-level=40"])
monitor = app.heartmonitor_process
said = {"monitor": monitor.is_alive(), "threads": [t.name for t in threading.enumerate()],
        "schedulers": [type(c).__name__ for c in app.children]}
if monitor.is_alive():
    monitor.terminate()
    monitor.join(10)
shutil.rmtree(folder, ignore_errors=True)
print(json.dumps(said))
"""


def test_the_controllers_heart_monitor_is_forked_before_its_scheduler_threads_start():
    """The controller's schedulers are threads; ipyparallel forks its heart monitor after they
    start, and a fork can copy a lock one held, never released in the child (a CI run's
    engines heard no ping for 50 s and stopped). hpclab's controller has its monitor running
    at the end of its set-up, while no thread of its own runs yet."""
    res = subprocess.run([sys.executable, "-c", FORK_ORDER], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    said = json.loads(res.stdout.strip().splitlines()[-1])
    assert said["monitor"], "the heart monitor was not running after the controller's set-up"
    # the schedulers are threads (made, not started: none but the main thread runs)
    assert said["schedulers"] == ["ThreadMonitoredQueue"] * 3, said
    assert said["threads"] == ["MainThread"], said


def test_engines_run_under_hpclabs_controller(engines):
    """The engines' controller is hpclab's, whose heart monitor is a fork of it made before
    the scheduler threads start."""
    controller = engines.cluster.controller.pid
    own = _cmdline(controller)
    assert b"hpclab.ipcontroller" in own
    assert own in [_cmdline(p) for p in _children(controller)], "no forked heart monitor"


def test_a_remote_error_shows_the_line_of_code_that_raised(engines):
    with pytest.raises(ZeroDivisionError) as info:
        engines.run(_students_own_error, 1, what="the exercise")
    text = str(info.value)
    assert "the exercise failed on rank 0: ZeroDivisionError: the student divided by 0" in text
    assert "in _students_own_error" in text and "test_launch.py" in text
    assert 'raise ZeroDivisionError(f"the student divided by {y - 2}")' in text
    assert "ipyparallel" not in text


def test_remote_errors_keep_their_type_and_rank(engines):
    with pytest.raises(ValueError, match="unhappy test failed on rank 1: ValueError: rank one"):
        engines.run(_fail_on_rank_one, what="unhappy test")
    assert len(engines.run(_ranks)) == 2


def _raise_on_one_while_zero_waits():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 1:
        raise IndexError("rank one's own mistake")  # before the message rank 0 waits for
    return comm.recv(source=1)


def test_an_error_on_one_rank_is_raised_at_once_not_as_the_others_deadlock():
    """Rank 1 raises before sending what rank 0 waits for: its error (type, rank, line) comes
    back after the grace, naming the rank left waiting, instead of a deadlock at the call's
    timeout; the next call runs on fresh engines."""
    from hpclab import engines as engines_module

    with launch.cluster(n=2, timeout=60, what="grace test") as eng:
        engine_pids = [p for _, _, p in eng.run(_ranks)]
        with pytest.raises(IndexError) as info:
            eng.run(_raise_on_one_while_zero_waits, timeout=600, what="the exercise")
        text = str(info.value)
        assert "the exercise failed on rank 1: IndexError: rank one's own mistake" in text
        assert "rank 0 had not finished 3 s later (left waiting" in text
        assert "raise IndexError" in text
        assert engines_module.RAISED_GRACE < 600
        assert not wait_dead(engine_pids), "the waiting engines were not stopped"
        assert [(r, s) for r, s, _ in eng.run(_ranks)] == [(0, 2), (1, 2)]


def test_starting_named_engines_again_replaces_the_first_set():
    """A notebook's engine cell run twice leaves one set of engines, not two."""
    first = launch.cluster(n=2, timeout=60, what="twice-run lab").start()
    engine_pids = [p for _, _, p in first.run(_ranks)]
    try:
        second = launch.cluster(n=2, timeout=60, what="twice-run lab").start()
        try:
            assert first.cluster is None, "the first set was not stopped"
            assert not wait_dead(engine_pids + sorted(first.stopped_pids))
            assert launch.running()["twice-run lab"] is second
            assert [r for r, _, _ in second.run(_ranks)] == [0, 1]
        finally:
            second.stop()
    finally:
        first.stop()
    assert "twice-run lab" not in launch.running()


def test_engines_stop_when_the_python_that_started_them_exits(tmp_path):
    """A kernel that shuts down or restarts takes its engines with it (atexit)."""
    code = ("from hpclab import launch, protocol\n"
            "e = launch.cluster(n=2, timeout=60, what='exit lab').start()\n"
            "protocol.emit({'pids': [p for p in e.run(__import__('os').getpid)]})\n")
    r = launch.run_process([sys.executable, "-c", code], timeout=120)
    from hpclab import protocol

    pids = protocol.last(r.stdout)["pids"]
    assert r.returncode == 0 and len(pids) == 2
    assert not wait_dead(pids), "engines outlived the Python that started them"


def test_engines_stop_when_the_python_that_started_them_is_killed():
    """kill -9 runs no atexit (a kernel that did not exit in time is killed so): the engines'
    watcher stops them and their controller."""
    import subprocess

    from hpclab import protocol

    code = ("import os, signal\nfrom hpclab import launch, protocol\n"
            "e = launch.cluster(n=2, timeout=60, what='killed lab').start()\n"
            "protocol.emit({'pids': e.run(os.getpid) + sorted(e.pids)})\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stdout + r.stderr
    pids = protocol.last(r.stdout)["pids"]
    assert len(pids) == 4, pids  # two engines, mpiexec and the controller
    assert not wait_dead(pids), "engines outlived the Python that started them, killed"


def _job_identity():
    import os

    return {k: os.environ.get(k) for k in ("PMIX_NAMESPACE", "OMPI_MCA_ess")}


def test_engines_start_from_a_python_that_inherited_an_mpi_jobs_identity(monkeypatch):
    """A Python started by a process that initialised MPI inherits its job's variables
    (Open MPI's singleton sets PMIX_*/OMPI_* at C level); the engines' mpiexec must not see
    them, or under Open MPI it exits without a word and no engine registers."""
    fake = {"PMIX_RANK": "0", "PMIX_NAMESPACE": "prterun-x-1@0", "PMI_RANK": "0",
            "OMPI_MCA_ess": "singleton", "OMPI_COMM_WORLD_SIZE": "1"}
    for key, value in fake.items():
        monkeypatch.setenv(key, value)
    assert launch.without_job_identity(["mpiexec"])[:3] == ["env", "-u", "OMPI_COMM_WORLD_SIZE"]
    with launch.cluster(n=2, timeout=60, start_timeout=60, what="inherited identity") as e:
        seen = e.run(_job_identity, timeout=30)
        assert [r["size"] for r in e.run(launch.whoami, timeout=30)] == [2, 2]
    # (an mpiexec sets such variables of its own: Open MPI's engines see OMPI_MCA_ess=^singleton)
    assert all(s[k] != fake[k] for s in seen for k in ("OMPI_MCA_ess", "PMIX_NAMESPACE")), seen
    assert os.environ["PMIX_RANK"] == "0", "the caller's own environment is left as it is"


def test_a_binding_launcher_does_not_shrink_the_machine():
    """Pinned to one core each (as Open MPI and srun pin), ranks still see the job's cores."""
    # rank 0 hands over every rank's view at once: two ranks printing could share a line
    code = ("from mpi4py import MPI\n"
            "from hpclab import launch, protocol\n"
            "seen = MPI.COMM_WORLD.gather({'usable': launch.usable_cores(),\n"
            "                              'own': launch.rank_cores()})\n"
            "if MPI.COMM_WORLD.Get_rank() == 0:\n"
            "    protocol.emit(seen)\n")
    n = 2 if launch.rank_cores() >= 2 else 1
    r = launch.mpirun([sys.executable, "-c", code], n=n, timeout=120,
                      mpi_args=launch.bind_to_core(n))
    from hpclab import protocol

    seen = protocol.last(r.stdout)
    assert len(seen) == n
    assert all(s["own"] == 1 for s in seen), seen
    assert all(s["usable"] == launch.rank_cores() for s in seen), seen


def test_slurm_allocation_sets_the_core_count(monkeypatch):
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "24")
    assert launch.usable_cores() == 24
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert launch.launcher_name() == "srun"


def test_open_mpi_overload_binding_above_the_cores(monkeypatch):
    from hpclab import ranks  # where bind_to_core looks it up

    monkeypatch.setattr(ranks, "mpi_family", lambda: "openmpi")
    cores = launch.usable_cores()
    assert launch.bind_to_core(cores) == ["--bind-to", "core", "--map-by", "core"]
    assert launch.bind_to_core(cores + 1)[1] == "core:overload-allowed"
    assert launch.allow_overload(["--bind-to", "core"], cores + 1) == \
        ["--bind-to", "core:overload-allowed"]
    assert launch.allow_overload(["--bind-to", "core"], cores) == ["--bind-to", "core"]


def test_children_do_not_inherit_an_mpi_jobs_identity():
    """Under Open MPI, a process that initialised MPI carries PMIX_*/OMPI_* variables; an
    mpiexec started with them exits 1 silently. The user's own MCA settings stay."""
    env = {"PMIX_RANK": "0", "OMPI_MCA_ess": "singleton", "OMPI_COMM_WORLD_SIZE": "2",
           "PMI_SIZE": "2", "OMPI_MCA_btl": "self,vader", "MPIR_CVAR_CH4_NETMOD": "ofi",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "HOME": "/root"}
    kept = launch.clean_environment(env)
    assert kept == {"OMPI_MCA_btl": "self,vader", "MPIR_CVAR_CH4_NETMOD": "ofi",
                    "OMPI_ALLOW_RUN_AS_ROOT": "1", "HOME": "/root"}


def test_an_mpi_rank_gets_one_blas_thread_unless_the_user_sets_it(monkeypatch):
    """numpy's BLAS starts a thread per core in every rank: with a rank per core, P ranks ran
    P threads per core and a 4 MB dot product took many times as long. A rank started here gets
    one BLAS thread; a value the user set is kept."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    code = ("import os, json; print(json.dumps([os.environ.get(k) for k in "
            "('OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS')]))")
    r = launch.mpirun([sys.executable, "-c", code], n=1, timeout=60)
    assert json.loads(r.stdout.strip().splitlines()[-1]) == ["1", "3"]
