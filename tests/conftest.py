"""Session set-up shared by every test.

* ``HPCLAB_RUN_TAG`` marks every process the suite starts, so that the last
  test can prove none is left running (see leftovers.py).
* ``HPCLAB_IPP_DIR`` keeps the ipyparallel profile folders of this session in
  one temporary folder; anything left there is stopped at the end.
* ``HPCLAB_PROFILE`` defaults to quick.
"""
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

os.environ.setdefault("HPCLAB_RUN_TAG", f"pytest-{uuid.uuid4().hex[:12]}")
os.environ.setdefault("HPCLAB_PROFILE", "quick")
_IPP_DIR = tempfile.mkdtemp(prefix="hpclab-test-ipp-")
os.environ["HPCLAB_IPP_DIR"] = _IPP_DIR
# engines and mpiexec'd pytest import helpers from tests/
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
# the venv's mpiexec and mpicc first, as `make` does
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")

LAST = "test_zz_leftovers.py"


def pytest_collection_modifyitems(session, config, items):
    """The leftover check runs last, after everything that starts processes."""
    items.sort(key=lambda item: item.fspath.basename == LAST)


def stop_leftover_clusters():
    """`ipcluster stop --all` for every profile folder a test did not clean up."""
    ipcluster = Path(sys.executable).with_name("ipcluster")
    for profile in Path(_IPP_DIR).glob("*"):
        if profile.is_dir():
            subprocess.run([str(ipcluster), "stop", "--all", f"--profile-dir={profile}"],
                           capture_output=True, timeout=60)
            shutil.rmtree(profile, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    stop_leftover_clusters()
    shutil.rmtree(_IPP_DIR, ignore_errors=True)


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
    """The book built once per session with the quick profile: (html folder, process)."""
    out = tmp_path_factory.mktemp("book")
    env = {**os.environ, "HPCLAB_PROFILE": "quick", "HPCLAB_RESULTS_DIR": str(out / "results"),
           "HPCLAB_REPOSITORY_URL": REPOSITORY_URL}
    r = subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", "--all",
                        "-W", "-n", "--keep-going", "--path-output", str(out), str(ROOT)],
                       capture_output=True, text=True, env=env, timeout=1200)
    return out / "_build" / "html", r


@pytest.fixture(scope="session")
def engines():
    """Two MPI engines shared by the tests that only run kernels on them."""
    from hpclab import launch

    with launch.cluster(n=2, timeout=60, what="test engines") as e:
        yield e
