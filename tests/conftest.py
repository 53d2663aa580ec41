"""Session set-up shared by every test.

* ``HPCLAB_RUN_TAG`` marks every process the suite starts, so that the end of
  the session can prove none is left running (see leftovers.py). Under
  pytest-xdist (``make test`` runs three workers) each worker tags its own
  processes ``<run tag>-<worker>``.
* ``HPCLAB_IPP_DIR`` keeps the ipyparallel profile folders of this process in
  one temporary folder; anything left there is stopped at the end.
* ``HPCLAB_PROFILE`` defaults to quick; runs are saved in a temporary
  ``HPCLAB_RESULTS_DIR`` unless a test names its own, never in the checkout.
* ``IPYTHONDIR`` is the worker's own (the kernels' profile and history database).
  ``%%cython`` and ``%%mpi_cython`` builds go to the user's cache folder, shared by the
  workers (the STREAM and PingPong notebooks build there; grading builds inside its sandbox):
  ``%%mpi_cython`` builds in a folder of its own and moves the library in whole.
* Under xdist (``--dist loadfile``) the tests of a file run on one worker, so their
  module fixtures are made once; the book is built once for all workers (``book``).
  The files that take minutes are handed out first, longest first (``LONGEST_FIRST``;
  ``make test`` turns off xdist's own order, by number of tests, which started the longest
  file last): a long file started last is the run's tail.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

import leftovers  # noqa: E402  (tests/ is on the path from here)

# the controller makes the run's tag before it starts the workers, which inherit it; the
# pytest that made it owns the run and checks for leftovers at its end (not the workers, nor
# the pytest that tests/mpi runs on every rank under mpiexec, which would take the other
# ranks, still finishing, for leftovers)
RUN_OWNER = os.environ.setdefault("HPCLAB_RUN_OWNER", str(os.getpid())) == str(os.getpid())
RUN_TAG = os.environ.setdefault("HPCLAB_RUN_TAG", f"pytest-{uuid.uuid4().hex[:12]}")
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if WORKER and not RUN_TAG.endswith(f"-{WORKER}"):  # not again in a worker's child pytest
    os.environ["HPCLAB_RUN_TAG"] = f"{RUN_TAG}-{WORKER}"
    # each worker's grading sandboxes their own user ids: a sandbox's process limit
    # (RLIMIT_NPROC) counts every process of its user, and a test counts what its sandboxes
    # left behind by user id
    os.environ["HPCLAB_GRADER_UID"] = str(int(os.environ.get("HPCLAB_GRADER_UID", "64123"))
                                          + 64 * int(WORKER.removeprefix("gw") or 0))
os.environ.setdefault("HPCLAB_PROFILE", "quick")
_IPP_DIR = tempfile.mkdtemp(prefix="hpclab-test-ipp-")
os.environ["HPCLAB_IPP_DIR"] = _IPP_DIR
_SCRATCH = tempfile.mkdtemp(prefix="hpclab-test-")
# removed at exit, after an in-process IPython shell has written its history there
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
# each process of the run its own (a worker must not take the other's runs as inputs), unless
# the user named one
if "HPCLAB_RESULTS_DIR" not in os.environ or os.environ.get("HPCLAB_TEST_RESULTS"):
    os.environ["HPCLAB_RESULTS_DIR"] = os.path.join(_SCRATCH, "results")
    os.environ["HPCLAB_TEST_RESULTS"] = "1"
os.environ["IPYTHONDIR"] = os.path.join(_SCRATCH, "ipython")
# engines and mpiexec'd pytest import helpers from tests/
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
# the venv's mpiexec and mpicc first, as `make` does
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")


def stop_leftover_clusters():
    """`ipcluster stop --all` for every profile folder a test did not clean up."""
    ipcluster = Path(sys.executable).with_name("ipcluster")
    for profile in Path(_IPP_DIR).glob("*"):
        if profile.is_dir():
            subprocess.run([str(ipcluster), "stop", "--all", f"--profile-dir={profile}"],
                           capture_output=True, timeout=60)
            shutil.rmtree(profile, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """Every process the run started must be gone: checked once, by the process that ran the
    session (the xdist controller, after its workers have stopped). A leftover fails the run."""
    stop_leftover_clusters()
    shutil.rmtree(_IPP_DIR, ignore_errors=True)
    if WORKER or not RUN_OWNER:
        return
    # an Open MPI singleton (MPI initialised in this very process by a test) keeps its
    # daemon until this process finalises MPI at exit: that one is ours, not a leftover
    def left_over():
        return [(pid, cmd) for pid, cmd in leftovers.tagged(RUN_TAG, family=True)
                if not (leftovers.parent(pid) == os.getpid()
                        and cmd.split(" ", 1)[0].rsplit("/", 1)[-1] in ("orted", "prted"))]

    left = leftovers.wait_gone_matching(
        left_over, seconds=float(os.environ.get("HPCLAB_LEFTOVER_WAIT", "30")))
    leftovers.kill(left)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = ["processes started by the test suite were still running (now killed):",
                 *(f"  {pid}: {cmd}" for pid, cmd in left)]
        if reporter is not None:
            reporter.write_sep("=", "leftover processes", red=True)
            for line in lines:
                reporter.write_line(line)
        else:
            print("\n".join(lines), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# the files that take minutes, longest first (``--durations`` of a run lists them): under
# ``--dist loadfile --no-loadscope-reorder`` the workers take files in this order, so none of
# them starts at the end of the run; the book's readers (test_site) come after the book
LONGEST_FIRST = ("test_wrong_answers.py", "test_wrong_answers_second.py", "test_book.py",
                 "test_hostile_class.py", "test_notebooks.py", "test_notebooks_grading.py",
                 "test_jupyterlab.py", "test_hub.py", "test_launch.py", "test_kernels.py",
                 "test_site.py", "test_pingpong.py", "test_ring.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: in a file too


@pytest.fixture(scope="session")
def root():
    return ROOT


# the address the test build is told its repository has (the button on every page)
REPOSITORY_URL = "https://example.org/hpclab-course/hpclab"


@pytest.fixture(scope="session")
def repository_url():
    return REPOSITORY_URL


@pytest.fixture(scope="session")
def book(tmp_path_factory):
    """The book built once per run with the quick profile: (html folder, process). Under
    xdist the first worker that asks builds it in the run's shared temporary folder while
    holding a lock; the other waits for it and reads the same build."""
    import fcntl
    import json

    shared = tmp_path_factory.getbasetemp()
    if WORKER:
        shared = shared.parent  # the folder of the run, above each worker's own
    out = shared / "book"
    done = shared / "book-build.json"
    with open(shared / "book.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            out.mkdir(exist_ok=True)
            env = {**os.environ, "HPCLAB_PROFILE": "quick",
                   "HPCLAB_RESULTS_DIR": str(out / "results"),
                   "HPCLAB_REPOSITORY_URL": REPOSITORY_URL}
            r = subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build",
                                "--all", "-W", "-n", "--keep-going", "--path-output", str(out),
                                str(ROOT)], capture_output=True, text=True, env=env,
                               timeout=1200)
            done.write_text(json.dumps({"args": r.args, "returncode": r.returncode,
                                        "stdout": r.stdout, "stderr": r.stderr}))
    built = json.loads(done.read_text())
    return out / "_build" / "html", subprocess.CompletedProcess(**built)


@pytest.fixture(scope="session")
def engines():
    """Two MPI engines shared by the tests that only run kernels on them."""
    from hpclab import launch

    with launch.cluster(n=2, timeout=60, what="test engines") as e:
        yield e
