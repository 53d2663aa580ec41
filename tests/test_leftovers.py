"""The end-of-run check (conftest.pytest_sessionfinish) finds what a run left running."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import leftovers

HERE = Path(__file__).resolve().parent

LEAK = textwrap.dedent("""
    import subprocess

    def test_leaves_a_process_behind(tmp_path):
        p = subprocess.Popen(["sleep", "300"], start_new_session=True)
        (tmp_path.parent.parent / "leaked.pid").write_text(str(p.pid))
""")


def test_a_process_left_running_fails_the_run_is_named_and_killed(tmp_path):
    """A test that leaves a process running (in a session of its own, so that nothing else
    stops it) passes, but the run fails, names the process and kills it."""
    (tmp_path / "test_leak.py").write_text(LEAK)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HPCLAB_RUN_", "PYTEST_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
               HPCLAB_LEFTOVER_WAIT="2")
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p",
                        "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
                        "--basetemp", str(tmp_path / "base"), str(tmp_path / "test_leak.py")],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    pid = int((tmp_path / "leaked.pid").read_text())
    def alive():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):  # gone (or reaped while read)
            return []
        return [] if state in ("Z", "X") else [(pid, "sleep")]

    gone = not leftovers.wait_gone_matching(alive, seconds=10)
    if not gone:
        leftovers.kill([(pid, "sleep")])
    assert "1 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.returncode == 1, r.stdout[-2000:]
    assert "leftover processes" in r.stdout and f"{pid}: sleep 300" in r.stdout, r.stdout[-2000:]
    assert gone, "the leftover was named but not killed"
