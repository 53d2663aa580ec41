"""Execute one notebook inside the grading sandbox (see sandbox.py); nothing else runs here.

    python run_notebook.py IN.ipynb OUT.ipynb CELL_TIMEOUT [NAME,NAME,...]

Every cell runs with errors allowed and a per-cell timeout; OUT is rewritten after each
cell, so a submission stopped by its wall budget or its limits still leaves the outputs of
the cells it finished. The NAMEs are variables read from the kernel after the last cell
(as floats, None when missing) into OUT.values.json: the student's measured numbers, for
the class report; the grader does not trust them. This file is copied into the sandbox: it
cannot import the grader.
"""
import os
import sys

import nbformat
from nbclient import NotebookClient


MARK = "HPCLAB-VALUES "
READ = """
def _hpclab_value(x):
    try:
        return float(x)
    except Exception:
        return None
print({mark!r} + __import__("json").dumps({{n: _hpclab_value(globals().get(n)) for n in {names!r}}}))
"""


def main(src, dest, cell_timeout, names=""):
    nb = nbformat.read(src, as_version=4)
    names = [n for n in names.split(",") if n.isidentifier()]
    ncells = len(nb.cells)
    if names:
        nb.cells.append(nbformat.v4.new_code_cell(READ.format(mark=MARK, names=names)))
    tmp = dest + ".part"

    def save(**_):
        out = nbformat.from_dict(dict(nb, cells=nb.cells[:ncells]))
        with open(tmp, "w") as fh:
            nbformat.write(out, fh)
        os.replace(tmp, dest)

    client = NotebookClient(nb, timeout=float(cell_timeout), allow_errors=True,
                            interrupt_on_timeout=True, kernel_name="python3",
                            resources={"metadata": {"path": os.getcwd()}},
                            on_cell_executed=save)
    try:
        client.execute()
    except Exception as exc:  # a dead kernel, a kernel that would not start: the grader
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)  # reads this line
    save()
    values = {}
    for out in (nb.cells[-1].get("outputs", []) if names else []):
        for line in str(out.get("text", "")).splitlines():
            if line.startswith(MARK):
                values = line[len(MARK):]
    with open(dest + ".values.json", "w") as fh:
        fh.write(values if isinstance(values, str) else "{}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
