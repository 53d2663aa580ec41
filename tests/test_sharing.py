"""Other users' work on a course's shared server (hpclab.sharing): counted from /proc, said by
the engine cell and kept in every record's metadata."""
import os
import subprocess
import sys

import pytest

import others  # this folder's helper
from hpclab import records, sharing

BURN = 0.3  # seconds of CPU the other user's process uses


@pytest.mark.skipif(bool(others.why_not_as_another_user()),
                    reason=others.why_not_as_another_user() or "")
def test_another_users_cpu_time_is_counted():
    """A process of another user (nobody) burns BURN s of CPU between the two readings: the
    count is of CPU ticks, so it holds however busy the machine is."""
    burner = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nsys.stdin.readline()\nt = time.process_time()\n"
         f"while time.process_time() - t < {BURN}: pass\nprint('done', flush=True)\n"
         "sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        user="nobody", group="nogroup" if _has_group("nogroup") else None)
    try:
        before = sharing._cpu_ticks()
        burner.stdin.write("go\n")
        burner.stdin.flush()
        assert burner.stdout.readline().strip() == "done"
        after = sharing._cpu_ticks()
        tick = os.sysconf("SC_CLK_TCK")
        uid, ticks = after[burner.pid]
        assert uid != os.getuid() and burner.pid in before
        assert (ticks - before[burner.pid][1]) / tick >= BURN - 2 / tick
        assert os.getpid() not in after  # this user's own processes are not counted
    finally:
        burner.kill()
        burner.wait(timeout=30)


def _has_group(name):
    import grp

    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def test_the_engine_cells_words():
    assert sharing.note(None, 2) is None
    assert sharing.note({"cores": 0.1, "users": ["bob"]}, 2) is None
    said = sharing.note({"cores": 1.46, "users": ["bob", "carol"]}, 2)
    assert "(bob, carol) kept 1.5 of this machine's 2 cores busy" in said
    assert "shared_server" in said


def test_records_say_the_shared_load_on_a_hub_only(monkeypatch):
    monkeypatch.delenv("HPCLAB_SHARED_SERVER", raising=False)
    assert "shared_server" not in records.metadata("pingpong", "quick")
    monkeypatch.setenv("HPCLAB_SHARED_SERVER", "1")
    monkeypatch.setattr(sharing, "other_users", lambda window=0: {"cores": 0.7, "users": ["x"]})
    assert records.metadata("pingpong", "quick")["shared_server"] == {"cores": 0.7,
                                                                       "users": ["x"]}
