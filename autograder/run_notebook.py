"""Execute one notebook inside the grading sandbox (see sandbox.py); nothing else runs here.

    python run_notebook.py IN.ipynb OUT.ipynb CELL_TIMEOUT

Every cell runs with errors allowed and a per-cell timeout; OUT is rewritten after each
cell, so a submission stopped by its wall budget or its limits still leaves the outputs of
the cells it finished. This file is copied into the sandbox: it cannot import the grader.
"""
import json
import os
import sys

import nbformat
from nbclient import NotebookClient


def main(src, dest, cell_timeout):
    nb = nbformat.read(src, as_version=4)
    tmp = dest + ".part"

    def save(**_):
        with open(tmp, "w") as fh:
            nbformat.write(nb, fh)
        os.replace(tmp, dest)

    client = NotebookClient(nb, timeout=float(cell_timeout), allow_errors=True,
                            interrupt_on_timeout=True, kernel_name="python3",
                            resources={"metadata": {"path": os.getcwd()}},
                            on_cell_executed=save)
    status = "finished"
    try:
        client.execute()
    except Exception as exc:  # a dead kernel, a kernel that would not start
        status = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    save()
    with open(dest + ".status", "w") as fh:
        json.dump({"runner": status}, fh)


if __name__ == "__main__":
    main(*sys.argv[1:4])
