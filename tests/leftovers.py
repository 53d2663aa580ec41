"""Find processes that a tagged run (the test suite) started and left running.

Every process the suite starts inherits ``HPCLAB_RUN_TAG`` from it; this
reads /proc/<pid>/environ to find them, so it never touches anybody else's
processes. Zombies (already dead, waiting to be reaped) do not count.

Under pytest-xdist each worker tags what it starts ``<run tag>-<worker>`` (see
conftest), so that a test looking at "what I started" does not see the other
worker's processes; the end-of-session check looks at the whole family.
"""
import os
import signal
import time
from pathlib import Path

TAG_VAR = "HPCLAB_RUN_TAG"


def _ancestors():
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def parent(pid):
    """The parent process id of pid (None when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def tagged(tag, family=False):
    """[(pid, command line)] of live processes carrying the tag, other than us and our parents;
    family=True: also those carrying a worker's tag made from it (``<tag>-<worker>``)."""
    needle = f"{TAG_VAR}={tag}".encode()
    skip = _ancestors()

    def carries(entry):
        return entry == needle or (family and entry.startswith(needle + b"-"))

    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid in skip:
            continue
        try:
            if not any(carries(e) for e in (proc / "environ").read_bytes().split(b"\0")):
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state in ("Z", "X"):
                continue
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append((pid, cmd.strip()))
    return found


def wait_gone(tag, seconds=20.0, family=False):
    """Wait until no tagged process is left; return those still there after `seconds`."""
    return wait_gone_matching(lambda: tagged(tag, family), seconds)


def kill(procs):
    for pid, _ in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def wait_gone_matching(find, seconds=20.0):
    """Like wait_gone, for the processes find() returns."""
    deadline = time.monotonic() + seconds
    left = find()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = find()
    return left
