"""A memory cgroup around one sandbox: all of a submission's processes capped together.

The sandbox's per-process limit (address space, ``RLIMIT_AS``) does not bound what a
submission uses in all: its kernel, its engines and whatever it forks each get the limit.
A memory cgroup does: the kernel, the runner, the engines and their children are charged
together (files written to the sandbox's memory-backed folders included), and past the
limit the kernel's out-of-memory killer stops one of them, inside the cgroup only.

Making one needs root (or a delegated cgroup): cgroup v2's ``memory.max``, else v1's
``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is accounted),
in this process's own cgroup, so that the container or session the grader runs in still
counts the sandbox's memory. Where none can be made, :func:`create` returns None and the
sandbox runs under the per-process limits alone, which the grader says.

A group is named for the grader process that made it (``hpclab-grade-<pid>-<n>``); a
grader killed before it removed its groups leaves them empty, and the next one removes
them (:func:`remove_stale`).
"""
from __future__ import annotations

import errno
import itertools
import os
import secrets
import signal
import time
from pathlib import Path

from hpclab.processes import alive

PREFIX = "hpclab-grade-"
_COUNT = itertools.count()


def _mounts():
    """(version, mount point, the hierarchy's path that is mounted there) of the cgroup
    hierarchies that hold the memory controller."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        if rest[0] == "cgroup2":
            controllers = Path(fields[4]) / "cgroup.controllers"
            try:
                if "memory" in controllers.read_text().split():
                    out.append((2, Path(fields[4]), fields[3]))
            except OSError:
                pass
        elif rest[0] == "cgroup" and "memory" in rest[2].split(","):
            out.append((1, Path(fields[4]), fields[3]))
    return sorted(out, key=lambda m: -m[0])


def _own(version):
    """This process's cgroup path in the hierarchy of that version ('/...')."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (version == 2 and controllers == "") or \
                (version == 1 and "memory" in controllers.split(",")):
            return path or "/"
    return "/"


def _parent():
    """(version, the folder new groups go in), or (None, why none can be made)."""
    mounts = _mounts()
    if not mounts:
        return None, "no cgroup hierarchy with the memory controller is mounted"
    why = "no writable memory cgroup"
    for version, mount, root in mounts:
        # this process's cgroup, relative to what is mounted (a container may mount a part)
        path = _own(version)
        if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
            path = path[len(root.rstrip("/")):]
        own = mount / path.lstrip("/")
        parent = own if own.is_dir() else mount
        if version == 2:
            # cgroup v2 enables a controller for the children of a group only when the group
            # itself holds no process (but for the root): the grader's own group, under
            # systemd or in a container, usually does. Then no cap is made here (the grader
            # says so); a delegated group with the grader in a leaf of its own is needed.
            try:
                if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                    (parent / "cgroup.subtree_control").write_text("+memory")
            except OSError as exc:
                why = (f"cgroup v2 cannot enable the memory controller below {parent} "
                       f"({exc.strerror}): it holds processes, the grader's own among them")
                continue
        if os.access(parent, os.W_OK):
            return version, parent
        why = f"{parent} is not writable (grading as root makes memory cgroups)"
    return None, why


def available():
    """(True, '') when a memory cgroup can be made here, else (False, why not)."""
    version, parent = _parent()
    return (version is not None), ("" if version is not None else str(parent))


class MemoryGroup:
    """One cgroup with a memory limit. :meth:`join` (in the sandbox's first process,
    before it starts anything) puts a process in it; :meth:`remove` ends what is left in
    it and removes it."""

    def __init__(self, path: Path, version: int, limit: int):
        self.path, self.version, self.limit = path, version, limit

    def join(self, pid: int | None = None) -> None:
        (self.path / "cgroup.procs").write_text(str(pid or os.getpid()))

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def oom_kills(self) -> int:
        """How many processes the out-of-memory killer stopped in this group."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0  # a kernel too old to count its kills: the reason then cannot say it

    def remove(self) -> None:
        _remove(self.path)


def _remove(path):
    """End the processes left in a group and remove it; True when it is gone."""
    for _ in range(50):
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY:  # not ours to remove: do not wait for it
                return False
            time.sleep(0.05)
    return False


def remove_stale(parent: Path | None = None) -> int:
    """Remove the groups of graders that are no longer running; how many were removed."""
    if parent is None:
        version, parent = _parent()
        if version is None:
            return 0
    n = 0
    for path in Path(parent).glob(PREFIX + "*"):
        try:
            pid = int(path.name[len(PREFIX):].split("-")[0])
        except ValueError:
            continue
        if not alive(pid) and _remove(path):
            n += 1
    return n


def create(limit: int) -> MemoryGroup | None:
    """A new group capped at ``limit`` bytes (swap included where it is accounted), or None
    where none can be made."""
    version, parent = _parent()
    if version is None:
        return None
    remove_stale(parent)
    # the grader's pid, then a count and a random part: a reused pid never meets a stale name
    path = parent / f"{PREFIX}{os.getpid()}-{next(_COUNT)}-{secrets.token_hex(3)}"
    try:
        path.mkdir()
    except OSError:
        return None
    try:
        if version == 2:
            (path / "memory.max").write_text(str(limit))
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
        else:
            (path / "memory.limit_in_bytes").write_text(str(limit))
            if (path / "memory.memsw.limit_in_bytes").exists():
                (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
    except OSError:
        _remove(path)
        return None
    return MemoryGroup(path, version, limit)
