"""What students get: this repository without its solutions, hidden tests, grading or tests.

    python autograder/student_release.py DEST       # make student-release DEST=...

Writes the files git tracks here (their current content), except ``solutions/``,
``autograder/``, ``hub/``, ``tests/`` and ``.ci/``, into DEST: the book, the released labs, the
package, the reference data and the environment. The README and the Makefile lose their instructors'
parts (between ``<!-- instructors -->`` and ``<!-- /instructors -->``, and between the
Makefile's ``# >>> instructors`` and ``# <<< instructors`` lines). Before anything is written
the output is searched for the solution and hidden-test text of every source notebook
(:func:`leaks`); when any is found nothing is written and each place is named.

DEST is a new or empty folder, or an earlier student release (it holds ``.hpclab-student-release``),
whose files are then replaced; a ``.git`` folder in it is kept, so that a students' repository
can be updated with one commit. DEST may not lie inside this repository.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = ("solutions/", "autograder/", "hub/", "tests/", ".ci/")
MARK = ".hpclab-student-release"
# the instructors' parts of the shipped files: (file, first line's mark, last line's mark)
INSTRUCTOR_PARTS = {"README.md": ("<!-- instructors -->", "<!-- /instructors -->"),
                    "Makefile": ("# >>> instructors", "# <<< instructors")}
WINDOW = 3  # consecutive lines of a solution searched for together
SHORTEST = 20  # characters: a shorter window (`else:`, `k += 1`) is no evidence of anything
_BEGIN = re.compile(r"#+\s*BEGIN (SOLUTION|HIDDEN TESTS)")
_END = re.compile(r"#+\s*END (SOLUTION|HIDDEN TESTS)")


class ReleaseError(Exception):
    """What stops a release, in words that say what to do."""


def strip_parts(text, first, last, name):
    """``text`` without each block from a line starting with ``first`` to one starting with
    ``last`` (both included)."""
    kept, inside = [], None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        mark = line.strip()
        if mark.startswith(first):
            if inside:
                raise ReleaseError(f"{name}:{number}: '{first}' again before '{last}' "
                                   f"(line {inside} opened the part)")
            inside = number
        elif mark.startswith(last):
            if not inside:
                raise ReleaseError(f"{name}:{number}: '{last}' with no '{first}' before it")
            inside = None
        elif not inside:
            kept.append(line)
    if inside:
        raise ReleaseError(f"{name}:{inside}: '{first}' is never closed by '{last}'")
    return "".join(kept)


def regions(notebook):
    """The solution and hidden-test regions of a source notebook, each a list of its stripped,
    non-blank lines, and the notebook's given text (every other line, stripped, joined)."""
    found, given = [], []
    for cell in json.loads(Path(notebook).read_text())["cells"]:
        source = "".join(cell["source"])
        grading = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" and grading.get("solution"):
            found.append([s for s in (ln.strip() for ln in source.splitlines()) if s])
            continue
        current = None
        for line in source.splitlines():
            s = line.strip()
            if _BEGIN.match(s):
                current = []
            elif _END.match(s):
                if current is not None:
                    found.append(current)
                current = None
            elif current is not None:
                if s:
                    current.append(s)
            elif s:
                given.append(s)
    return found, "\n".join(given)


def _searchable(path):
    """A file's stripped, non-blank lines joined by newlines (a notebook: its cells' sources and
    text outputs), or None for a file that is not text."""
    try:
        text = Path(path).read_text()
    except (UnicodeDecodeError, OSError):
        return None
    if str(path).endswith(".ipynb"):
        try:
            cells = json.loads(text)["cells"]
        except (ValueError, KeyError, TypeError):
            pass
        else:
            parts = []
            for cell in cells:
                parts.append("".join(cell.get("source", "")))
                for out in cell.get("outputs", []):
                    parts.append("".join(out.get("text", "")))
                    parts.extend("".join(v) for v in out.get("data", {}).values()
                                 if isinstance(v, (str, list)))
            text = "\n".join(parts)
    return "\n".join(s for s in (ln.strip() for ln in text.splitlines()) if s)


def leaks(folder, sources):
    """Where the solution or hidden-test text of the notebooks ``sources`` appears in the files
    under ``folder``: a list of (file, lab, text). Every window of WINDOW consecutive lines of a
    region (the whole region when it is shorter) is searched for, except a window the lab's
    given text holds (a question that states the call it wants) or one shorter than SHORTEST
    characters."""
    windows = {}
    for notebook in sources:
        lab = Path(notebook).parent.name
        for region, given in [(r, g) for found, g in [regions(notebook)] for r in found]:
            for i in range(max(1, len(region) - WINDOW + 1)):
                window = "\n".join(region[i:i + WINDOW])
                if len(window) >= SHORTEST and window not in given:
                    windows.setdefault(window, lab)
    found = []
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and ".git" not in p.parts):
        text = _searchable(path)
        if text is None:
            continue
        name = str(path.relative_to(folder))
        found += [(name, lab, w) for w, lab in windows.items() if w in text]
    return found


def shipped(root=ROOT):
    """The files of ``root`` a student release holds (tracked by git, not left out)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ReleaseError(f"cannot list the repository's files with git ({exc}): run this in "
                           "a clone of the repository") from exc
    names = [n for n in out.decode().split("\0") if n]
    return [n for n in names if not n.startswith(LEFT_OUT) and (root / n).is_file()]


def _check_dest(dest, root, inside_ok=False):
    if not inside_ok and (dest == root or root in dest.parents):
        raise ReleaseError(f"{dest} lies inside the repository: choose a folder outside it")
    if dest.exists() and not dest.is_dir():
        raise ReleaseError(f"{dest} is a file: choose a new or empty folder")
    if dest.exists():
        content = [p.name for p in dest.iterdir() if p.name != ".git"]
        if content and MARK not in content:
            raise ReleaseError(f"{dest} holds files that are not a student release "
                               f"({', '.join(sorted(content)[:3])}...): choose a new or empty "
                               "folder")


def release(dest, root=ROOT, sources=None, inside_ok=False):
    """Write the student release into ``dest`` (see the module's text); returns the number of
    files written. ``inside_ok``: ``dest`` may lie in the repository (the course hub's copy,
    in its git-ignored build folder)."""
    dest = Path(dest).expanduser().resolve()
    root = Path(root).resolve()
    _check_dest(dest, root, inside_ok)
    sources = sorted((root / "solutions").glob("*/*.ipynb")) if sources is None else sources
    names = shipped(root)
    with tempfile.TemporaryDirectory(prefix="student-release-") as tmp:
        stage = Path(tmp) / "release"
        for name in names:
            target = stage / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if name in INSTRUCTOR_PARTS:
                first, last = INSTRUCTOR_PARTS[name]
                target.write_text(strip_parts((root / name).read_text(), first, last, name))
            else:
                shutil.copy2(root / name, target)
        found = leaks(stage, sources)
        if found:
            lines = [f"  {f}: {lab}'s {w.splitlines()[0]!r}..." for f, lab, w in found[:20]]
            raise ReleaseError("solution or hidden-test text would be given to students; "
                               "nothing was written:\n" + "\n".join(lines))
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip() or "unknown"
        (stage / MARK).write_text(f"a student release of hpclab {commit}\n")
        dest.mkdir(parents=True, exist_ok=True)
        for old in dest.iterdir():
            if old.name != ".git":
                shutil.rmtree(old) if old.is_dir() and not old.is_symlink() else old.unlink()
        for item in stage.iterdir():
            shutil.move(str(item), dest / item.name)
    return len(names)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dest", help="a new or empty folder outside the repository, or an earlier "
                   "student release to replace")
    args = p.parse_args(argv)
    try:
        n = release(args.dest)
    except ReleaseError as exc:
        print(f"make student-release: {exc}", file=sys.stderr)
        return 2
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    print(f"{n} files written to {Path(args.dest).resolve()}: the book, the released labs, "
          "the package and the environment, without solutions, hidden tests or grading.")
    if dirty:
        print("(the repository has uncommitted changes: the release holds them)")
    print("Students run `make lab` there. To publish it: cd there, `git init` (once), "
          "`git add -A`, `git commit`, and push to the students' repository.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
