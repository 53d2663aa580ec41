"""Keep hidden tests out of the feedback students get back.

nbgrader's feedback HTML shows the autograded notebook, hidden tests included.
This preprocessor removes the hidden region from every test cell and cuts the
traceback of a failed test cell down to its last line (exception and message),
so a student learns which check failed, not what it computes.
"""
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

BEGIN, END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


def strip_hidden(source):
    out, hidden = [], False
    for line in source.split("\n"):
        if BEGIN in line:
            hidden = True
        elif END in line:
            hidden = False
        elif not hidden:
            out.append(line)
    return "\n".join(out), hidden


class HideHiddenTests(Preprocessor):
    enabled = Bool(True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or BEGIN not in cell.source:
            return cell, resources
        cell.source, _ = strip_hidden(cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename')}: {output.get('evalue')}"]
        return cell, resources
