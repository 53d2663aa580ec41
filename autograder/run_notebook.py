"""Execute one notebook inside the grading sandbox (see sandbox.py); nothing else runs here.

    python -I run_notebook.py IN.ipynb FILES CELL_TIMEOUT NAMES TESTS_FD JUDGED_FD OUT_FD VALUES_FD
                              CAP

The plain files submitted beside the notebook (folder FILES, read-only) are copied into the
working folder first. The student's cells run in the notebook's kernel, one by one, with
errors allowed and a per-cell timeout; the executed notebook is rewritten to OUT_FD after
each cell, so a submission stopped by its wall budget or its limits still leaves the
outputs of the cells it finished.

The graded test cells do not run in the kernel: their code (which IN holds only as empty
cells) is read from the file descriptor TESTS_FD, run here by judge.py, and their outputs are
written as JSON lines to JUDGED_FD. Both descriptors were opened by the grader outside the
sandbox; before the kernel starts, this process closes the first, keeps the second from
being inherited and makes itself undumpable, so the kernel (same user) can neither read the
hidden tests nor write a verdict, nor reach this process's memory or descriptors.

A cell that writes more than CAP characters of output is stopped (CappedClient).

The NAMEs (comma-separated) are variables read from the kernel after the last cell (as
floats, None when missing) into VALUES_FD: the student's measured numbers, for the
class report; the grader does not trust them. This file, judge.py and kernel_side.py are
copied into the sandbox: they cannot import the grader. All four descriptors were opened by
the grader outside the sandbox, and none is inherited by the kernel.
"""
import ctypes
import json
import os
import shutil
import sys

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # judge.py; after the library
# the IRI grammar jsonschema compiles at import, 2 s of every run (see sandbox.py)
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

import judge  # noqa: E402

MARK = "HPCLAB-VALUES "
READ = """
def _hpclab_value(x):
    try:
        return float(x)
    except Exception:
        return None
print({mark!r}
      + __import__("json").dumps({{n: _hpclab_value(globals().get(n)) for n in {names!r}}}))
"""
PR_SET_DUMPABLE = 4


def _undumpable():
    """No other process of this user may read this one's memory or open its descriptors."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _read_tests(fd):
    with os.fdopen(int(fd), "r") as fh:
        raw = json.load(fh)
    return {int(k): str(v) for k, v in raw.items()}


def _rewrite(fd, text):
    """Replace the whole content of the file open at ``fd``."""
    data = text.encode()
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class CappedClient(NotebookClient):
    """A NotebookClient that keeps at most ``cap`` characters of output per cell: past it,
    the cell gets a note, the rest is dropped and the kernel is interrupted (the cell is
    stopped by the output limit, whatever it writes: print, sys.stdout or the raw fd 1)."""

    def __init__(self, *args, cap, **kwargs):
        super().__init__(*args, **kwargs)
        self.cap, self.sent, self.stopped = cap, {}, set()

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        text = content.get("text")
        size = len(str(text or "")) + len(json.dumps(content.get("data", {})))
        before = self.sent.get(cell_index, 0)
        self.sent[cell_index] = before + size
        if self.sent[cell_index] <= self.cap:
            return super().output(outs, msg, display_id, cell_index)
        out = None
        if isinstance(text, str) and before < self.cap:  # the part below the cap
            msg = {**msg, "content": {**content, "text": text[:self.cap - before]}}
            out = super().output(outs, msg, display_id, cell_index)
        if cell_index not in self.stopped:
            self.stopped.add(cell_index)
            outs.append(nbformat.v4.new_output(
                "stream", name="stderr",
                text=f"\n[stopped: this cell wrote more than {self.cap:,} characters of output, "
                     "the limit of a graded cell]\n"))
            import asyncio

            from jupyter_core.utils import ensure_async
            asyncio.ensure_future(ensure_async(self.km.interrupt_kernel()))
        return out


def _copy_in(files, dest):
    """The submitted plain files (contents only: the folders here are not ours to chmod)."""
    for root, _, names in os.walk(files):
        where = os.path.join(dest, os.path.relpath(root, files))
        os.makedirs(where, exist_ok=True)
        for name in names:
            shutil.copyfile(os.path.join(root, name), os.path.join(where, name))


def main(src, files, cell_timeout, names="", tests_fd=None, judged_fd=None, out_fd=None,
         values_fd=None, cap=str(16 << 20)):
    _undumpable()
    tests = _read_tests(tests_fd) if tests_fd else {}
    out_fd, values_fd = int(out_fd), int(values_fd)
    for fd in (judged_fd, out_fd, values_fd):
        if fd is not None:
            os.set_inheritable(int(fd), False)
    judged = os.fdopen(int(judged_fd), "w") if judged_fd else None
    _copy_in(files, os.getcwd())
    nb = nbformat.read(src, as_version=4)
    names = [n for n in names.split(",") if n.isidentifier()]
    ncells = len(nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell(""))  # the slot nbclient writes scratch cells to
    too_big = []

    def save(**_):
        out = nbformat.from_dict(dict(nb, cells=nb.cells[:ncells]))
        try:  # unvalidated (after every cell, a third of the time): the grader validates it
            _rewrite(out_fd, nbformat.v4.writes(out))
        except OSError as exc:  # the file-size limit: say so once, keep running
            if not too_big:
                too_big.append(exc)
                print(f"the executed notebook could not be saved: {exc}", file=sys.stderr,
                      flush=True)

    client = CappedClient(nb, cap=int(cap), timeout=float(cell_timeout), allow_errors=True,
                            interrupt_on_timeout=True, kernel_name="python3",
                            resources={"metadata": {"path": os.getcwd()}},
                            on_cell_executed=save)
    bridge_dir = os.path.join(os.environ.get("TMPDIR", os.getcwd()), "bridge")

    def in_kernel(code):
        """Run code in the kernel (for the bridge); its outputs."""
        cell = nbformat.v4.new_code_cell(code)
        try:
            client.execute_cell(cell, ncells, store_history=False)
        except Exception as exc:  # a timeout, a dead kernel: the graded cell fails
            raise judge.BridgeError(f"the notebook's kernel did not answer: "
                                    f"{type(exc).__name__}: {str(exc)[:300]}") from None
        return cell.get("outputs", [])

    bridge = judge.Bridge(in_kernel, bridge_dir)
    values = {}
    client.reset_execution_trackers()
    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells[:ncells]):
                if cell.cell_type != "code":
                    continue
                if index in tests:
                    cell.outputs = judge.run_test(tests[index], bridge, index)
                    cell.execution_count = (max((c.get("execution_count") or 0)
                                                for c in nb.cells[:index + 1]
                                                if c.cell_type == "code") or 0) + 1
                    if judged is not None:
                        judged.write(json.dumps({"index": index, "outputs": cell.outputs,
                                                 "execution_count": cell.execution_count})
                                     + "\n")
                        judged.flush()
                    save()
                else:
                    client.execute_cell(cell, index)
            if names:
                cell = nbformat.v4.new_code_cell(READ.format(mark=MARK, names=names))
                client.execute_cell(cell, ncells, store_history=False)
                for out in cell.get("outputs", []):
                    for line in str(out.get("text", "")).splitlines():
                        if line.startswith(MARK):
                            values = line[len(MARK):]
    except Exception as exc:  # a dead kernel, a kernel that would not start: the grader
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)  # reads this line
    save()
    _rewrite(values_fd, values if isinstance(values, str) else "{}")
    if judged is not None:
        judged.close()
    if too_big:
        sys.exit(3)


if __name__ == "__main__":
    main(*sys.argv[1:10])
