"""Shared-memory segments that a killed MPI job leaves behind.

MPICH and Open MPI ranks on one node talk through files in ``/dev/shm`` that are
removed when the job ends normally. A job stopped by a timeout or Ctrl-C is killed
before that, and its segments (1-2 MB each here) stay in memory until the machine
restarts: on a shared JupyterHub node, every deadlock a student gives up on would
cost memory for good. Whoever kills a process group therefore asks first which
segments its processes map, and removes those that nobody maps once it is dead.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from hpclab.processes import alive

SHM = "/dev/shm/"


def _stat(proc: Path) -> tuple[int, int]:
    """(parent, process group) from /proc/<pid>/stat: "pid (comm) state ppid pgrp ...";
    comm may hold spaces and ")"."""
    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[2])


def mapped_by_process(pid: str) -> set[str]:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return set()
    found = set()
    for line in maps.splitlines():
        parts = line.split(None, 5)
        path = parts[5].strip() if len(parts) == 6 else ""
        # a segment already removed by its job shows as "(deleted)": its name is free for
        # another job's segment, which is not ours to remove
        if path.startswith(SHM) and not path.endswith(" (deleted)"):
            found.add(path)
    return found


def job(pgid: int) -> set[int]:
    """Live processes of process group ``pgid`` and all their descendants (MPICH's
    proxies put each rank in a group of its own)."""
    parent, group = {}, {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            parent[int(proc.name)], group[int(proc.name)] = _stat(proc)
        except (OSError, ValueError, IndexError):
            continue
    members = {pid for pid, g in group.items() if g == pgid}
    grown = True
    while grown:
        more = {pid for pid, p in parent.items() if p in members} - members
        members |= more
        grown = bool(more)
    return members


def mapped_by(pids: set[int]) -> set[str]:
    """Files under /dev/shm mapped by these processes."""
    found: set[str] = set()
    for pid in pids:
        found |= mapped_by_process(str(pid))
    return found


class Leftovers:
    """Before killing process group ``pgid``: ``left = Leftovers(pgid)``; after: ``left.remove()``
    waits (up to ``seconds``) for its processes to exit and removes the segments they mapped
    that nobody else maps."""

    def __init__(self, pgid: int):
        self.pids = job(pgid)
        self.segments = {}
        for path in mapped_by(self.pids):
            try:
                st = os.stat(path)
            except OSError:
                continue
            self.segments[path] = (st.st_dev, st.st_ino)

    def remove(self, seconds: float = 5.0) -> list[str]:
        if not self.segments:
            return []
        deadline = time.monotonic() + seconds
        while any(alive(pid) for pid in self.pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        return remove_orphans(self.segments)


def mapped_by_anyone() -> set[str]:
    found: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        found |= mapped_by_process(proc.name)
    return found


def remove_orphans(segments: dict[str, tuple[int, int]]) -> list[str]:
    """Remove those of ``segments`` ({path: (device, inode)} noted while their job ran) that
    are still the same files, are ours and are mapped by no live process; return them."""
    if not segments:
        return []
    still = mapped_by_anyone()
    removed = []
    for path in sorted(set(segments) - still):
        try:
            st = os.stat(path)
            if (st.st_dev, st.st_ino) != segments[path] or st.st_uid != os.getuid():
                continue
            os.unlink(path)
        except OSError:
            continue
        removed.append(path)
    return removed
