"""Whether a process is running, read from ``/proc``: no signal is sent, so it answers for
any user's process, and a zombie (ended, not yet reaped) counts as gone."""
from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """True while process ``pid`` runs (not ended, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
