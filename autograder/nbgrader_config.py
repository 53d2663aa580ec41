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

from feedback import HideHiddenTests  # noqa: E402
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import GetGrades  # noqa: E402

c = get_config()  # noqa: F821

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

# Every MPI call in a lab has its own timeout (at most TIMEOUT = 120 s); a cell may make a few
# of them, so nbgrader's per-cell limit sits well above.
c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Feedback shows each test's result but not the hidden tests' code or tracebacks.
c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
