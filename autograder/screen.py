"""Check a submission folder before anything of it runs.

    problem = screen.problem(folder, notebook="pingpong.ipynb", limit=32 << 20)

``problem`` is None for a folder that can be graded, else one sentence that says what is
wrong and what to do, in words a student and an instructor both read (it becomes the
submission's ``ungradable`` reason). Nothing here follows a link, opens a special file or
runs the submission's code; a notebook is parsed only after its size was checked.
"""
from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


def unsafe_id(student: str) -> str | None:
    """Why ``student`` cannot name a submission (folders, gradebook, feedback), or None."""
    if SAFE_ID.fullmatch(student) and ".." not in student:
        return None
    return (f"the student id {student!r} is not a safe name: use letters, digits and . _ @ + - "
            "(at most 64, starting with a letter or digit); rename the folder "
            "submitted/<id>/ and grade again")


def _timestamp_problem(path: Path) -> str | None:
    from dateutil.parser import ParserError, parse

    try:
        raw = path.read_text(errors="strict").strip()
    except (OSError, UnicodeDecodeError):
        return "timestamp.txt cannot be read as text"
    if not raw or len(raw) > 100:
        return "timestamp.txt is empty or not a date"
    try:
        parse(raw)
    except (ParserError, ValueError, OverflowError):
        return (f"timestamp.txt holds {raw[:40]!r}, not a date and time: write the hand-in time "
                "as e.g. 2026-12-01 16:59:00 UTC")
    return None


def problem(folder, notebook: str, limit: int = 32 << 20,
            total: int = 64 << 20) -> str | None:
    """Why the submission in ``folder`` cannot be graded, or None (see the module's doc).

    ``notebook`` is the file name the lab's notebook must have; ``limit`` bytes for the
    notebook, ``total`` for the whole folder. A timestamp.txt, when there is one, must hold
    a date (nbgrader's hand-in time); without one nbgrader counts the submission on time,
    which :func:`notes` says."""
    folder = Path(folder)
    for level in (folder.parent, folder):
        try:
            mode = os.lstat(level).st_mode
        except OSError:
            return "the submission folder cannot be read"
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
            return (f"{level.name} is a link or a file, not a folder: copy the submission "
                    "itself (cp -rL, not cp -a)")
    size, notebooks = 0, []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            rel = path.relative_to(folder)
            try:
                st = os.lstat(path)
            except OSError:
                return f"{rel} cannot be read"
            if stat.S_ISLNK(st.st_mode):
                return (f"{rel} is a link (to {os.readlink(path)!r}); submissions hold only "
                        "plain files: hand in the file itself, not a link (cp -L, not cp -a)")
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                return f"{rel} is not a plain file (a device, pipe or socket): remove it"
            if stat.S_ISREG(st.st_mode):
                size += st.st_size
                if name.endswith(".ipynb") and ".ipynb_checkpoints" not in rel.parts:
                    notebooks.append(rel)
    if size > total:
        return f"the submission holds {size >> 20} MiB, over the limit of {total >> 20} MiB"
    if Path(notebook) not in notebooks:
        found = ", ".join(map(str, notebooks)) or "no notebook"
        return (f"there is no {notebook} (found: {found}): hand in the lab's notebook under "
                "its own name")
    if len(notebooks) > 1:
        others = ", ".join(str(n) for n in notebooks if n != Path(notebook))
        return f"more than one notebook ({notebook} and {others}): hand in only {notebook}"
    path = folder / notebook
    if path.stat().st_size > limit:
        return (f"{notebook} is {path.stat().st_size >> 20} MiB, over the limit of "
                f"{limit >> 20} MiB: clear the outputs (Edit > Clear Outputs of All Cells) and "
                "save")
    try:
        nb = json.loads(path.read_text(errors="strict"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return (f"{notebook} is not a notebook (it is not JSON): open it in JupyterLab; if it does "
                "not open, hand in a fresh copy of the lab with your answers")
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) or \
            nb.get("nbformat") != 4:
        return f"{notebook} is not a version-4 Jupyter notebook: save it from JupyterLab 4"
    stamp = folder / "timestamp.txt"
    if stamp.exists():
        return _timestamp_problem(stamp)
    return None


def notes(folder, due: bool = False) -> list[str]:
    """What a gradable submission's reason should still say."""
    if due and not (Path(folder) / "timestamp.txt").exists():
        return ["no timestamp.txt: lateness not judged (nbgrader counts it on time)"]
    return []
