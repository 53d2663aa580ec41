"""Tests that run this environment's Python as another user (nobody): they need root, and every
folder above the interpreter open to others (o+x), as .ci/run leaves them."""
import os
import sys
from pathlib import Path


def reachable_by_others(path):
    """Whether another user can run ``path`` (every folder above it open to others)."""
    path = Path(os.path.realpath(path))
    return all(os.stat(p).st_mode & 0o001 for p in path.parents) and \
        bool(os.stat(path).st_mode & 0o001)


def why_not_as_another_user():
    """Why this Python cannot be run as another user here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root to run a process as another user"
    if not reachable_by_others(sys.executable):
        return (f"the environment's Python ({os.path.realpath(sys.executable)}) cannot be run "
                "by other users: open the folders above it (chmod o+x), as .ci/run does")
    return None
