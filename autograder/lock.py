"""One grader at a time per course folder.

    with lock.hold(workdir, "grade pingpong"):
        ...

The lock is an ``flock`` on ``<workdir>/grading.lock``: the kernel releases it when its
holder ends, killed or not, so a crashed grader never blocks the next one. The holder
writes its process id, start time and command into the file; a second grader reads them,
says who holds the course and exits (code 3) without touching anything.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path

BUSY = 3  # exit code of a grader that found the course folder busy


class Busy(SystemExit):
    def __init__(self, message):
        super().__init__(message)
        self.code = BUSY
        self.message = message


@contextlib.contextmanager
def hold(workdir, what):
    path = Path(workdir) / "grading.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:
                holder = {}
            pid = holder.get("pid", "?")
            print(f"another grader is working on {Path(workdir).resolve()}: process {pid}, "
                  f"started {holder.get('started', '?')} ({holder.get('what', '?')}). Nothing "
                  f"was changed. Wait for it to finish, or stop it (kill {pid}) and run this "
                  "again.", file=sys.stderr)
            raise Busy(f"course folder busy (process {pid})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what,
                                  "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}).encode(), 0)
        yield
    finally:
        os.close(fd)
