"""Bring a zip of submissions exported from a learning-management system into the course.

    python autograder/grade.py import-zip LAB FILE.zip [--lms canvas|moodle|folders]
                                                       [--pattern REGEX]

Each file of the zip is matched by its path against a pattern with named groups ``student``
(the student id the course uses) and ``file`` (the file's own name), and optionally
``timestamp`` (the hand-in time, written to nbgrader's ``timestamp.txt``). The presets:

* ``canvas``: ``doejane_12345_67890_ring.ipynb`` (``doejane_LATE_12345_...`` when late): the
  student id is Canvas's user id (12345), which its grade import matches; the lab's notebook
  handed in again is named ``ring-1.ipynb``, ``ring-2.ipynb``, and the highest number is kept
  (between equal numbers, the later date in the zip).
* ``moodle``: ``Jane Doe_4711_assignsubmission_file_/ring.ipynb``: the student id is the name,
  lower case, its spaces turned into dots (``jane.doe``); two participants of one name are
  reported and neither is imported.
* ``folders``: ``<student>/<file>``.

Each student's files go to ``submitted/<student>/<lab>/``; a submission already there is moved
to ``replaced/`` first (nothing recorded is lost). A notebook of another name than the lab's is
kept under its own name and reported here (grading reports it too, as ``ungradable``, with
what to do); links, special files, files over the notebook limit, paths that match no
pattern and unsafe student ids are reported and not written. A student's entries are all
read before anything of theirs is written or moved: one that cannot be read (damaged,
encrypted) is reported and that student's submission in the course stays as it was. Part of
the grader (grade.py).
"""
from __future__ import annotations

import re
import shutil
import stat
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import screen

PRESETS = {
    "canvas": r"(?:.*/)?[^/_]+_(?:LATE_)?(?P<student>\d+)_\d+_(?P<file>[^/]+)",
    "moodle": r"(?:.*/)?(?P<student>[^/_]+)_(?P<participant>\d+)_assignsubmission_file_/?"
              r"(?P<file>[^/]+)",
    "folders": r"(?:.*/)?(?P<student>[^/]+)/(?P<file>[^/]+)",
}
FILE_LIMIT = 32 << 20  # bytes of one file (the screen's notebook limit)
ZIP_LIMIT = 4 << 30  # bytes of the whole export, uncompressed
_AGAIN = re.compile(r"^(?P<stem>.+?)-(?P<n>\d+)(?P<ext>\.[^.]+)$")  # Canvas: ring-1.ipynb


class ExportError(Exception):
    """What stops an import, in words that say what to do."""


@dataclass
class Imported:
    """What an import did: the students written, and each thing reported, in words."""

    students: list[str] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)


def _student(raw, lms):
    if lms == "moodle":
        return re.sub(r"\s+", ".", raw.strip().lower())
    return raw.strip()


def _again(name, lms, lab):
    """(the file's name without Canvas's resubmission number, that number: 0 for the first).
    Only the lab's own notebook loses it: ``results-1.csv`` may be a file of its own."""
    m = _AGAIN.match(name) if lms == "canvas" else None
    if m and m["stem"] + m["ext"] == f"{lab}.ipynb":
        return f"{lab}.ipynb", int(m["n"])
    return name, 0


def collect(zip_path, lab, submitted, replaced, lms="canvas", pattern=None):
    """Read the export ``zip_path`` for ``lab`` into ``submitted`` (see the module's text);
    returns an :class:`Imported`."""
    if pattern is None and lms not in PRESETS:
        raise ExportError(f"--lms {lms}: choose one of {', '.join(PRESETS)} or give --pattern")
    try:
        regex = re.compile(pattern or PRESETS[lms])
    except re.error as exc:
        raise ExportError(f"--pattern {pattern!r} is not a regular expression: {exc}") from exc
    if not {"student", "file"} <= set(regex.groupindex):
        raise ExportError("--pattern needs the named groups (?P<student>...) and (?P<file>...)")
    try:
        archive = zipfile.ZipFile(zip_path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ExportError(f"{zip_path} cannot be read as a zip file ({exc}): export the "
                           "submissions again as one zip") from exc
    done = Imported()
    chosen: dict[str, dict[str, tuple]] = {}  # student -> file -> (number, info, when)
    participants: dict[str, set[str]] = {}  # student -> the export's own ids (Moodle's)
    with archive:
        infos = [i for i in archive.infolist() if not i.is_dir()]
        if sum(i.file_size for i in infos) > ZIP_LIMIT:
            raise ExportError(f"{zip_path} holds more than {ZIP_LIMIT >> 30} GiB uncompressed: "
                               "export one lab at a time")
        for info in infos:
            name = info.filename
            if name.startswith("__MACOSX/") or Path(name).name.startswith("."):
                continue
            m = regex.fullmatch(name)
            if not m:
                done.reports.append(f"{name}: matches no {pattern and 'pattern' or lms} file "
                                    "name, not imported (--lms or --pattern)")
                continue
            student = _student(m["student"], lms if not pattern else "")
            why = screen.unsafe_id(student)
            if why:
                done.reports.append(f"{name}: {why.split(':')[0]}, not imported")
                continue
            kind = stat.S_IFMT(info.external_attr >> 16)  # 0: a zip from elsewhere than Unix
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                done.reports.append(f"{name}: a link or special file, not imported (hand in "
                                    "the file itself)")
                continue
            if info.file_size > FILE_LIMIT:
                done.reports.append(f"{name}: {info.file_size >> 20} MiB, over the "
                                    f"{FILE_LIMIT >> 20} MiB a file may have, not imported")
                continue
            participants.setdefault(student, set()).add(m.groupdict().get("participant") or "")
            file, number = _again(m["file"], lms if not pattern else "", lab)
            if "/" in file or file in ("", ".", "..") or file == "timestamp.txt":
                done.reports.append(f"{name}: not a file name the course can keep, not imported")
                continue
            when = m.groupdict().get("timestamp")
            previous = chosen.setdefault(student, {}).get(file)
            if previous is not None:  # the later hand-in: its number, else its zip date
                keep, drop = ((number, info, when), previous) \
                    if (number, info.date_time) > (previous[0], previous[1].date_time) \
                    else (previous, (number, info, when))
                done.reports.append(f"{student}: {file} handed in more than once; kept "
                                    f"{keep[1].filename} ({_when(keep)}), not "
                                    f"{drop[1].filename} ({_when(drop)})")
                chosen[student][file] = keep
            else:
                chosen[student][file] = (number, info, when)
        for student, files in sorted(chosen.items()):
            ids = sorted(participants[student] - {""})
            if len(ids) > 1:  # two people of one name: neither is imported under it
                done.reports.append(f"{student}: {len(ids)} participants of this name "
                                    f"({', '.join(ids)}): not imported; import them with "
                                    "--pattern, the participant id as the student")
                continue
            data = _read(archive, student, files, done)
            if data is not None:
                _write(lab, student, data, Path(submitted), Path(replaced), done)
    return done


def _read(archive, student, files, done):
    """{file: (bytes, hand-in time)} of a student's chosen entries, or None (reported) when one
    cannot be read: nothing of that student is then written or moved."""
    data = {}
    for file, (_, info, when) in sorted(files.items()):
        try:
            with archive.open(info) as src:
                data[file] = (src.read(FILE_LIMIT + 1), when)
        except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError,
                zlib.error) as exc:
            done.reports.append(f"{student}: {info.filename} cannot be read from the zip "
                                f"({exc}): nothing of {student} imported; export it again")
            return None
    return data


def _when(entry):
    number, info, when = entry
    return when or ("its hand-in " + (f"number {number}" if number else "first") +
                    ", zipped " + "%04d-%02d-%02d %02d:%02d" % info.date_time[:5])


def _write(lab, student, files, submitted, replaced, done):
    folder = submitted / student / lab
    if folder.exists() or folder.is_symlink():
        dest = replaced / f"{student}-{lab}-{time.strftime('%Y%m%d-%H%M%S')}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), dest)
        done.reports.append(f"{student}: the submission already in the course moved to {dest}")
    folder.mkdir(parents=True)
    stamps = set()
    for file, (content, when) in sorted(files.items()):
        (folder / file).write_bytes(content)
        if when:
            stamps.add(when)
    if len(stamps) == 1:
        (folder / "timestamp.txt").write_text(stamps.pop() + "\n")
    notebooks = [f for f in files if f.endswith(".ipynb")]
    if f"{lab}.ipynb" not in notebooks:
        done.reports.append(
            f"{student}: no {lab}.ipynb in the export (" +
            (f"handed in {', '.join(sorted(notebooks))}" if notebooks else "no notebook") +
            f"): grading will report it ungradable; if it is this lab, rename it "
            f"{folder / (lab + '.ipynb')} and grade again")
    done.students.append(student)
