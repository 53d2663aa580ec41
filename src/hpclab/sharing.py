"""Other users' work on a shared server (a course's JupyterHub): how many cores it takes.

On a hub (``HPCLAB_SHARED_SERVER=1``, set by hub/jupyterhub_config.py) every student's engines
run on the same machine. :func:`other_users` measures the CPU that processes of other users
took over a short window, from ``/proc``; the engine cell prints it when it is more than a
fifth of a core (:func:`note`), and every record's metadata keeps it (``shared_server``), so
that a timing taken on a busy hub is marked as such.
"""
from __future__ import annotations

import os
import pwd
import time
from pathlib import Path
from typing import Any

THRESHOLD = 0.2  # cores of other users' work worth a word
WINDOW = 0.25  # seconds the CPU time is counted over


def on_shared_server() -> bool:
    return os.environ.get("HPCLAB_SHARED_SERVER", "") not in ("", "0")


def _cpu_ticks() -> dict[int, tuple[int, int]]:
    """{pid: (owner's uid, user + system ticks)} of every process but this user's."""
    mine, found = os.getuid(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            if uid == mine:
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        found[int(entry.name)] = (uid, int(fields[11]) + int(fields[12]))
    return found


def other_users(window: float = WINDOW) -> dict[str, Any] | None:
    """``{"cores": c, "users": [...]}``: the cores other users' processes kept busy over
    ``window`` seconds (0 to the machine's cores) and who they are; None where /proc does not
    say (not Linux)."""
    if not Path("/proc/self/stat").exists():
        return None
    tick = os.sysconf("SC_CLK_TCK")
    before, t0 = _cpu_ticks(), time.monotonic()
    time.sleep(window)
    after, elapsed = _cpu_ticks(), time.monotonic() - t0
    busy: dict[int, int] = {}
    for pid, (uid, ticks) in after.items():
        if pid in before and before[pid][0] == uid:
            busy[uid] = busy.get(uid, 0) + max(0, ticks - before[pid][1])
    users = []
    for uid, ticks in sorted(busy.items(), key=lambda kv: -kv[1]):
        if ticks / tick / elapsed >= 0.05:
            try:
                users.append(pwd.getpwuid(uid).pw_name)
            except KeyError:
                users.append(str(uid))
    return {"cores": round(sum(busy.values()) / tick / elapsed, 2), "users": users}


def note(load: dict[str, Any] | None, cores: int) -> str | None:
    """The engine cell's words for ``load`` (:func:`other_users`) on ``cores`` cores, or None
    when other users' work is too small to matter."""
    if not load or load["cores"] < THRESHOLD:
        return None
    who = ", ".join(load["users"][:5]) or "other users"
    return (f"other users' work ({who}) kept {load['cores']:.1f} of this machine's {cores} "
            "cores busy as your engines started: your timings now share the cores with it, "
            "and each record of them says so (shared_server in its metadata). Measure again "
            "when the server is quieter for timings that mean what the model says.")
