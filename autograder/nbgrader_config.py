"""nbgrader configuration of hpclab: source = solutions/, release = labs/.

Run nbgrader from this folder (``make release`` and ``make grade`` do), or
pass ``--config autograder/nbgrader_config.py``. No JupyterHub and no
exchange are needed: submissions are copied into
``autograder/submitted/<student>/<assignment>/``.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from execute import SandboxedExecute  # noqa: E402
from feedback import HideHiddenTests  # noqa: E402
from latepolicy import PerDayPenalty  # noqa: E402

# get_config is defined by the traitlets loader that reads this file
c = get_config()  # type: ignore[name-defined]  # noqa: F821

c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
c.CourseDirectory.submitted_directory = os.path.join("autograder", "submitted")
c.CourseDirectory.autograded_directory = os.path.join("autograder", "autograded")
c.CourseDirectory.feedback_directory = os.path.join("autograder", "feedback")
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")
# Instructor-only files never reach labs/ (every non-notebook file in a source folder would).
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.instructor.*",
                            "results", ".*"]

# Submissions run in a sandbox (sandbox.py): nbgrader's Execute step is replaced, and the
# gradebook is written by the grader's steps only (one at a time, in its workers), after
# the runs. Every MPI call in a lab has its
# own timeout (at most 300 s, STREAM's sweep), so the per-cell limit sits above it; grade.py sets
# the wall budget of a whole submission.
c.Autograde.autograde_preprocessors = [SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor,
                                       LimitOutput, SaveAutoGrades, AssignLatePenalties,
                                       CheckCellMetadata]
c.SandboxedExecute.timeout = 360

# Late submissions (latepolicy.py; due dates: grade.py duedate LAB DATE)
c.AssignLatePenalties.plugin_class = PerDayPenalty
c.PerDayPenalty.fraction_per_day = 0.1
c.PerDayPenalty.zero_after_days = 7

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Feedback shows each test's result but not the hidden tests' code or tracebacks.
c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
