"""Whether a process is running, since when and for how much processor time, read from
``/proc``: no signal is sent, so it answers for any user's process, and a zombie (ended, not yet
reaped) counts as gone."""
from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """True while process ``pid`` runs (not ended, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat: the process's start, in clock ticks since boot (None when
    it is gone). A pid with the same start time is the same process, not a later one that
    took its number."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """Processor time the process has used so far, user and system, in seconds (fields 14 and
    15 of /proc/<pid>/stat, all its threads); None when it is gone or /proc cannot say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None
