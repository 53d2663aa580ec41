"""nbgrader's Execute step, run in the sandbox (sandbox.py): the preprocessor
nbgrader_config.py puts in place of nbgrader's Execute."""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Integer

from returned import add_own_run, read_untrusted
from sandbox import Limits, graded_tests, run


class SandboxedExecute(Preprocessor):
    """nbgrader's Execute step, run in the sandbox (see the module's doc).

    Configured in nbgrader_config.py in place of nbgrader's Execute. With
    HPCLAB_GRADE_STATUS set, writes what happened as JSON to <student>.json in that folder
    and the executed notebook to <student>.ipynb, for grade.py. With HPCLAB_GRADE_EXECUTED
    set instead, runs nothing: it takes <student>.ipynb from that folder, a notebook this
    step executed before (grade.py runs each submission on its own first, then records the
    class in the gradebook in one process).
    """

    enabled = Bool(True)  # nbconvert's preprocessors are off unless told
    timeout = Integer(180, help="seconds one cell may run").tag(config=True)

    def preprocess(self, nb, resources):
        student = resources.get("nbgrader", {}).get("student", "submission")
        done = os.environ.get("HPCLAB_GRADE_EXECUTED")
        if done:
            path = Path(done) / f"{student}.ipynb"
            if not path.is_file():
                raise RuntimeError(f"{student} has no executed notebook in {done}")
            return nbformat.read(path, as_version=4), resources
        path = resources.get("metadata", {}).get("path")
        limits = Limits.from_env()
        limits.cell = min(self.timeout, limits.wall)
        names = [n for n in os.environ.get("HPCLAB_GRADE_VALUES", "").split(",") if n]
        result = run(nb, limits, files_from=path, log=self.log.warning, values=names,
                     inputs_from=os.environ.get("HPCLAB_GRADE_INPUTS") or None)
        # the student's own outputs, beside the graded run's, for whoever grades by hand
        own = os.environ.get("HPCLAB_GRADE_SUBMITTED")
        if own:
            add_own_run(result.notebook, read_untrusted(Path(own), limits.output),
                        graded_tests(nb), text=limits.text // 10)
        folder = os.environ.get("HPCLAB_GRADE_STATUS")
        if folder:
            nbformat.write(result.notebook, os.path.join(folder, f"{student}.ipynb"))
            with open(os.path.join(folder, f"{student}.json"), "w") as fh:
                json.dump({"status": result.status, "reason": result.reason,
                           "isolation": result.isolation, "values": result.values,
                           "seconds": round(result.seconds, 1)}, fh)
        self.log.info("sandbox (%s): %s %s", result.isolation, result.status, result.reason)
        return result.notebook, resources
