"""nbgrader's steps in processes that loaded nbgrader once.

grade.py starts ``--jobs`` of these (a process pool). They run each submission in its
sandbox against a course folder of its own, then the steps that run no student code:
recording the assignments, recording the class in the gradebook, writing the feedback.
Starting nbgrader costs about 2.5 s of imports, and creating a gradebook 4 s more (nbgrader
runs the ``alembic`` command for its schema version; here it is read in this process),
paid once per worker instead of once per step. Each call is one of nbgrader's own steps
(its API, as the formgrader calls it), with the log of that step only. A worker dies with
the grader that started it, and names itself for the step it runs (``ps -o comm``:
hpclab-autograd, hpclab-record, hpclab-feedback, hpclab-release).
"""
from __future__ import annotations

import contextlib
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
    import nbgrader.api
    from nbgrader.apps.api import NbGraderAPI  # noqa: F401  (the import is the cost)
    from traitlets.config.loader import PyFileConfigLoader

    _config = PyFileConfigLoader("nbgrader_config.py", path=str(HERE)).load_config()
    nbgrader.api.get_alembic_version = _alembic_head
    _check_schemas_once()
    _title("hpclab-worker")


def _with(config, options):
    """A copy of ``config`` with nbgrader's command-line options (--Section.name=value)."""
    import copy

    out = copy.deepcopy(config)
    for option in options:
        key, value = option[2:].split("=", 1)
        section, name = key.split(".", 1)
        out[section][name] = value
    return out


@contextlib.contextmanager
def _inside(env):
    """In the autograder folder with ``env`` set (TMPDIR included), for one nbgrader run."""
    import tempfile

    before = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    tempfile.tempdir = None  # TMPDIR may have changed: tempfile caches it
    cwd = os.getcwd()
    os.chdir(HERE)
    try:
        yield
    finally:
        os.chdir(cwd)
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        tempfile.tempdir = None


PR_SET_NAME = 15


def _title(name):
    """Name this process ``name`` (its comm: ``ps -o comm`` shows it; 15 bytes at most)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def _titled(step):
    """While a step runs, the worker is named for it (15 bytes at most): hpclab-autograd,
    hpclab-record, hpclab-feedback or hpclab-release; hpclab-worker otherwise."""
    _title(f"hpclab-{step}"[:15])
    try:
        yield
    finally:
        _title("hpclab-worker")


def _api(options):
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = _with(_config, options)
    return NbGraderAPI(CourseDirectory(config=config), config=config)


def _result(result):
    return {"success": bool(result.get("success")), "log": result.get("log") or "",
            "error": result.get("error") or ""}


def autograde(lab, student, options, env):
    """nbgrader autograde of one student, with ``options`` (--Section.name=value) on top of
    the course's configuration and ``env`` set for the sandbox; {"success", "log", "error"}."""
    return step("autograde", lab, student, options, env)


def step(kind, lab, student, options, env):
    """One of nbgrader's steps as its command line would run it, in this process (nbgrader
    is loaded already): ``generate_assignment`` of ``lab`` (a name, or "*"), ``autograde``
    or ``generate_feedback`` of ``student`` (an id, or "*"); {"success", "log", "error"}."""
    if kind == "autograde":
        title = "record" if student == "*" else "autograde"
    else:
        title = {"generate_assignment": "release", "generate_feedback": "feedback"}.get(kind, "")
    with _inside(env), _titled(title):
        try:
            api = _api(options)
            if kind == "generate_assignment":
                result = api.generate_assignment(lab, force=True, create=True)
            elif kind == "autograde":
                result = api.autograde(lab, student, force=True, create=True)
            elif kind == "generate_feedback":
                result = api.generate_feedback(lab, student, force=True)
            else:
                raise ValueError(f"not an nbgrader step of the grader: {kind!r}")
        except Exception as exc:  # nbgrader could not even start on it: that is its result
            result = {"success": False, "log": "", "error": f"{type(exc).__name__}: {exc}"}
    return _result(result)


class _SchemaOnce:
    """nbgrader's ``jsonschema`` with ``validate`` checking each schema once: nbgrader
    validates every graded cell's metadata with ``jsonschema.validate``, which checks the
    schema itself each time (0.2 to 0.5 s of every step); an invalid instance still raises
    the error ``jsonschema.validate`` raises."""

    def __init__(self, module):
        self._module, self._validators = module, {}

    def __getattr__(self, name):
        return getattr(self._module, name)

    def validate(self, instance, schema, *args, **kwargs):
        import json

        if args or kwargs:
            return self._module.validate(instance, schema, *args, **kwargs)
        key = json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            cls = self._module.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self._validators[key] = cls(schema)
        error = self._module.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error
        return None


def _check_schemas_once():
    import jsonschema
    from nbgrader.nbgraderformat import common

    if getattr(common, "jsonschema", None) is jsonschema:
        common.jsonschema = _SchemaOnce(jsonschema)


def _alembic_head():
    """The head revision of nbgrader's gradebook schema, read here: nbgrader itself runs
    the ``alembic`` command for it (4 s of a new Python) whenever it creates a gradebook."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    return ScriptDirectory.from_config(config).get_current_head()
