"""Autograde submissions one by one in a process that loaded nbgrader once.

grade.py starts ``--jobs`` of these (a process pool) for the first step of grading, which
runs each submission in its sandbox against a course folder of its own. Starting nbgrader
costs about 2.5 s of imports here, paid once per worker instead of once per submission.
Each call is nbgrader's own autograde (its API, as the formgrader calls it), with the
log of that submission only. A worker dies with the grader that started it.
"""
from __future__ import annotations

import os
import signal
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
_config = None


def init(slots=None):
    """In each new worker: die with the grader; Ctrl-C is the grader's to handle; take a
    slot from ``slots`` (a queue of 0 .. jobs-1): the sandboxes of this worker run as the
    dedicated user id plus the slot, so that the process limit of one sandbox, which counts
    the processes of its user, is never used up by a neighbour's; load nbgrader and this
    course's configuration."""
    from sandbox import die_with_parent

    global _config
    if slots is not None:
        base = int(os.environ.get("HPCLAB_GRADER_UID", "64123"))
        os.environ["HPCLAB_GRADER_UID"] = str(base + slots.get(timeout=60))
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # nbgrader's own use of SQLAlchemy warns on every submission (objects "not in session");
    # its command line keeps them out of sight, and so does this worker
    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)
    from nbgrader.apps.api import NbGraderAPI  # noqa: F401  (the import is the cost)
    from traitlets.config.loader import PyFileConfigLoader

    _config = PyFileConfigLoader("nbgrader_config.py", path=str(HERE)).load_config()


def _with(config, options):
    """A copy of ``config`` with nbgrader's command-line options (--Section.name=value)."""
    import copy

    out = copy.deepcopy(config)
    for option in options:
        key, value = option[2:].split("=", 1)
        section, name = key.split(".", 1)
        out[section][name] = value
    return out


def autograde(lab, student, options, env):
    """nbgrader autograde of one student, with ``options`` (--Section.name=value) on top of
    the course's configuration and ``env`` set for the sandbox; {"success", "log", "error"}."""
    import tempfile

    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    before = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    tempfile.tempdir = None  # TMPDIR may have changed: tempfile caches it
    cwd = os.getcwd()
    os.chdir(HERE)
    try:
        config = _with(_config, options)
        coursedir = CourseDirectory(config=config)
        api = NbGraderAPI(coursedir, config=config)
        result = api.autograde(lab, student, force=True, create=True)
    except Exception as exc:  # nbgrader could not even start on it: that is its result
        result = {"success": False, "log": "", "error": f"{type(exc).__name__}: {exc}"}
    finally:
        os.chdir(cwd)
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        tempfile.tempdir = None
    return {"success": bool(result.get("success")), "log": result.get("log") or "",
            "error": result.get("error") or ""}
