"""Run a submission's notebook in a throwaway sandbox, outside the course folder.

The notebook is executed (run_notebook.py) in a fresh folder under the system's temporary
directory that holds only the notebook and the plain files submitted beside it, under
bubblewrap (Debian: ``apt-get install bubblewrap``):

* the course folder, the instructor's home, /tmp and /work-like trees are replaced by empty
  folders; only the Python installation, the virtual environment and the hpclab sources are
  mounted back, read-only, so ``solutions/``, the gradebook and other submissions are not
  there to be read;
* no network (a namespace with loopback only: MPI and the lab's engines still run);
* its own process namespace: when the run ends or is stopped, every process it started ends;
* run as root, it drops to a dedicated unprivileged user id (``HPCLAB_GRADER_UID``,
  default 64123) so that the process limit holds;
* limits on address space per process, processes, CPU seconds per process and file size
  (output), and a wall budget for the whole submission;
* run as root, a memory cgroup caps all of its processes together (cgroup.py).

When the system refuses bubblewrap's namespaces, the run falls back to the dedicated user
without namespaces (root) or to limits alone (any other user), and says so. How the run is
shut in (bubblewrap's command line, the dedicated user, the limits) is confinement.py's;
this module runs the notebook in it. What comes back is read by returned.py, and
execute.py is the nbgrader step that calls :func:`run`.

The graded test cells are not given to the sandbox's notebook (they are empty there): their
code goes to the runner through a descriptor opened here, the runner runs them in its own
process against the kernel's values (judge.py), and their outputs come back through a second
descriptor, into a file outside the sandbox.

The notebook that comes back is not trusted (returned.py): only the outputs and execution
counts of the other cells are taken, cell by cell, onto the grader's own copy, and only when
the cells' sources are unchanged. A graded test cell that did not run gets an error output, so it
scores 0.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# jsonschema, which nbformat imports, compiles a grammar of IRIs at import when the optional
# package rfc3987-syntax is installed (2 s here, in every process that reads a notebook);
# no notebook check uses it. The grader, its workers and its nbgrader runs go without it.
SLOW_OPTIONAL = "rfc3987_syntax"
sys.modules.setdefault(SLOW_OPTIONAL, None)  # type: ignore[arg-type]

import nbformat  # noqa: E402

import cgroup  # noqa: E402
from confinement import (  # noqa: E402, F401 (grade.py, the tests and the workers use these)
    INNER,
    bwrap_args,
    die_with_parent,
    grader_uid,
    install_bwrap,
    isolation,
    kill_uid,
    process_limits,
    remove_tree,
    uid_note,
)
from hpclab.mpirun import mpi_settings  # noqa: E402
from returned import (  # noqa: E402
    ended,
    last_bytes,
    mark_not_run,
    merge,
    read_judged,
    read_untrusted,
    read_values,
)

HERE = Path(__file__).resolve().parent
GiB = 1 << 30
MiB = 1 << 20


@dataclass
class Limits:
    """What one submission may use. ``wall`` and ``cell`` in seconds, ``memory`` bytes of
    address space per process, ``output`` bytes per file written (the runner's own output
    and the executed notebook included), ``cpu`` CPU seconds per process, ``processes``
    processes and threads of the sandbox's user, ``files`` total bytes of the plain files
    copied in beside the notebook, ``disk`` bytes of each writable folder (the working
    folder, its temporary folder, /dev/shm: memory-backed, sized), ``text`` characters of
    one output kept in the graded notebook (the rest is cut, with a note), ``memory_total``
    bytes of memory of all the submission's processes together (a memory cgroup, where
    one can be made: see cgroup.py)."""

    wall: float = 300.0
    cell: float = 120.0
    memory: int = 6 * GiB
    processes: int = 512
    cpu: int = 600
    output: int = 64 * MiB
    files: int = 64 * MiB
    disk: int = 256 * MiB
    text: int = 100_000
    memory_total: int = 8 * GiB

    @classmethod
    def from_env(cls, **override):
        """Defaults, then HPCLAB_GRADE_<FIELD> variables, then ``override``."""
        values = {}
        for name, default in asdict(cls()).items():
            raw = os.environ.get(f"HPCLAB_GRADE_{name.upper()}")
            if raw:
                try:
                    values[name] = type(default)(float(raw))
                except ValueError:
                    raise ValueError(f"HPCLAB_GRADE_{name.upper()}={raw!r}") from None
        values.update({k: v for k, v in override.items() if v is not None})
        return cls(**values)


@dataclass
class Result:
    status: str           # finished | timed out | failed
    reason: str           # what happened, in words, for the instructor and the status file
    isolation: str        # bwrap | user | none
    notebook: object      # the trusted notebook with the sandbox's outputs merged in
    seconds: float
    values: dict | None = None  # the variables asked for, as the submission left them (untrusted)


# The grader's MPI settings the sandbox keeps (hpclab.mpirun.MPI_SETTINGS): a cluster may need
# them for MPI to start at all, and they say how a waiting rank polls. A job's identity
# (PMI_RANK, OMPI_COMM_WORLD_RANK, OMPI_MCA_ess_*, ...) never passes
# (hpclab.mpirun.clean_environment): an engine that inherits one takes itself for a rank of the
# grader's job. OpenMP's thread count and wait policy pass too (how a waiting thread polls,
# as for ranks; the count defaults to one).


def _environment(box_path, venv_bin):
    from hpclab import chapters

    home = f"{box_path}/work"
    mpi = mpi_settings()
    # what the chapters' labs need besides the sources, mounted read-only
    # (confinement._mount_points), and where: inside, the source tree that locates them is not
    return mpi | chapters.sandbox_folders() | {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home, "TMPDIR": f"{box_path}/tmp", "LANG": "C.UTF-8",
        "JUPYTER_RUNTIME_DIR": f"{box_path}/tmp/runtime", "IPYTHONDIR": f"{box_path}/tmp/ipython",
        "MPLCONFIGDIR": f"{box_path}/tmp/mpl", "MPLBACKEND": "Agg",
        "HPCLAB_PROFILE": os.environ.get("HPCLAB_PROFILE", "quick"),
        "HPCLAB_IPP_DIR": f"{box_path}/tmp/ipp", "NBGRADER_EXECUTION": "autograde",
        # a lab saves its runs (records.results_dir): into the working folder, not the course's
        "HPCLAB_RESULTS_DIR": f"{home}/results",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    } | ({"OMP_WAIT_POLICY": os.environ["OMP_WAIT_POLICY"]} if "OMP_WAIT_POLICY" in os.environ
         else {})


def _copy_files(src, dest, budget, skip=()):
    """The plain files submitted beside the notebook (no links, no folders deeper than
    the submission's, none under the top folders ``skip``, at most ``budget`` bytes);
    returns what was left out."""
    left = []
    if src is None or not Path(src).is_dir():
        return left
    for p in sorted(Path(src).rglob("*")):
        rel = p.relative_to(src)
        if rel.parts[0] in skip:
            if len(rel.parts) == 1:
                left.append(f"{rel}/ (saved runs: the grader measured this machine's inputs)")
            continue
        if p.is_symlink() or not p.is_file() or p.suffix == ".ipynb" or \
                any(part.startswith(".") for part in rel.parts):
            if p.is_symlink():
                left.append(f"{rel} (a link)")
            continue
        size = p.stat().st_size
        if size > budget:
            left.append(f"{rel} ({size} bytes, over the budget)")
            continue
        budget -= size
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest / rel)
    return left


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def graded_tests(nb):
    """{cell index: source} of the graded test cells (graded, not an answer, code)."""
    out = {}
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            out[i] = cell.source
    return out


def without_tests(nb, tests):
    """A copy of ``nb`` whose graded test cells are empty: what the sandbox gets."""
    bare = nbformat.from_dict(json.loads(json.dumps(nb)))
    for i in tests:
        bare.cells[i].source = ""
        bare.cells[i].outputs = []
    return bare


def run(nb, limits, files_from=None, log=print, values=(), inputs_from=None):
    """Execute notebook ``nb`` (nbformat node, not modified) in a sandbox; Result.
    ``values``: names of variables to read from the kernel after the last cell;
    ``inputs_from``: a folder of saved runs the lab starts with in its results folder (this
    machine's inputs, measured once for the class), in place of any the submission brings."""
    mode, why = isolation()
    if mode != "bwrap":
        log(f"grading WITHOUT a sandbox ({why}); "
            + (f"falling back to the dedicated user {uid_note()} with limits: it can read "
               "what any user can" if mode == "user"
               else "only limits apply: the submission can read what you can"))
    uid = grader_uid() if mode in ("bwrap", "user") and os.geteuid() == 0 else None
    # under bubblewrap the box is bound in; without it the dedicated user must reach it
    # through every folder above, which the grader's own scratch folder does not allow
    box = Path(tempfile.mkdtemp(prefix="hpclab-sandbox-",
                                dir=None if mode == "bwrap" else "/tmp"))
    private = Path(tempfile.mkdtemp(prefix="hpclab-judge-"))  # 0700, never in the sandbox
    tests = graded_tests(nb)
    bare = without_tests(nb, tests)
    fds = []
    group = None
    t0 = time.monotonic()
    try:
        group = cgroup.create(limits.memory_total)
        if group is None and cgroup.available()[0]:
            log("no memory cgroup could be made for this submission: its memory is capped "
                "per process only")
        for sub in ("work", "tmp", "runner", "files"):
            (box / sub).mkdir()
        for name in ("run_notebook.py", "judge.py", "kernel_side.py"):
            shutil.copyfile(HERE / name, box / "runner" / name)
            os.chmod(box / "runner" / name, 0o444)
        os.chmod(box / "runner", 0o555)
        with open(box / "in.ipynb", "w") as fh:
            nbformat.write(bare, fh)
        (private / "tests.json").write_text(json.dumps({str(i): src for i, src in tests.items()}))
        # what the runner reads and writes, through descriptors the kernel cannot reach:
        # the tests, the verdicts, the executed notebook and the values
        fds = [os.open(private / "tests.json", os.O_RDONLY)]
        for name in ("judged.jsonl", "executed.ipynb", "values.json"):
            fds.append(os.open(private / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        # this machine's inputs, measured once for the class (machine_inputs.py), go where
        # the lab's runs are saved; a submitted results/ could otherwise stand in for them
        left = _copy_files(files_from, box / "files", limits.files,
                           skip=("results",) if inputs_from else ())
        if inputs_from:  # plain copies, readable by the sandbox's user
            (box / "files" / "results").mkdir(exist_ok=True)
            for p in sorted(Path(inputs_from).glob("*")):
                if p.is_file() and not p.is_symlink():
                    shutil.copyfile(p, box / "files" / "results" / p.name)
        for p in [box / "work", box / "tmp"]:
            os.chmod(p, 0o1777)
        os.chmod(box, 0o755)
        box_path = INNER if mode == "bwrap" else str(box)
        python = os.path.abspath(sys.executable)  # not resolved: the environment's own
        venv_bin = os.path.dirname(python)
        inner = [python, "-I", f"{box_path}/runner/run_notebook.py", f"{box_path}/in.ipynb",
                 f"{box_path}/files", str(limits.cell), ",".join(values), *map(str, fds),
                 str(min(limits.output // 4, 16 * MiB))]
        if uid is not None:
            inner = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                     "--inh-caps=-all", "--bounding-set=-all", *inner]
        cmd = (bwrap_args(box, limits) + inner) if mode == "bwrap" else inner
        env = _environment(box_path, venv_bin)
        if mode != "bwrap":
            env["HOME"] = str(box / "work")
            env["HPCLAB_RESULTS_DIR"] = str(box / "work" / "results")
            # the grader's cache of simulations is shared read-only under bubblewrap only:
            # without it a submission may run as the grader, and could write there
            from hpclab import simulate

            env.pop(simulate.SHARED_ENV, None)
        # the runner's and the kernel's raw output go to a file outside the sandbox, capped
        # by the file-size limit; the grader reads its last lines only
        with open(private / "output.log", "wb") as log_file:
            proc = subprocess.Popen(cmd, cwd=box / "work", env=env, stdin=subprocess.DEVNULL,
                                    stdout=log_file, stderr=subprocess.STDOUT,
                                    preexec_fn=process_limits(limits, uid, group), pass_fds=fds)
        for fd in fds:
            os.close(fd)
        fds = []
        status, reason = "finished", ""
        try:
            proc.wait(timeout=limits.wall)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            status = "timed out"
            reason = f"stopped after its wall budget of {limits.wall:g} s"
        finally:
            _kill_group(proc)
            if uid is not None and mode != "bwrap":
                kill_uid(uid)
        out = last_bytes(private / "output.log", 4000)
        executed = read_untrusted(private / "executed.ipynb", limits.output)
        merged, problem = merge(nb, executed, tests,
                                read_judged(private / "judged.jsonl", tests, limits.output),
                                text=limits.text)
        if problem and status == "finished":
            status, reason = "failed", problem
            tail = out.strip().splitlines()[-3:]
            if proc.returncode != 0 and tail:
                reason += f" (the runner ended with code {proc.returncode}: {' | '.join(tail)})"
        elif status == "finished" and proc.returncode != 0:
            status = "failed"
            errors = [x for x in out.splitlines() if "Error" in x or "Killed" in x]
            reason = f"the notebook's runner ended with {ended(proc.returncode)}" + \
                (f": {errors[-1].strip()[:200]}" if errors else "")
        if group is not None and group.oom_kills():
            memory = (f"a process was stopped at the memory limit of the whole submission "
                      f"({limits.memory_total / GiB:g} GiB, all its processes together)")
            reason = memory + ("; " + reason if reason else "")
        not_run = mark_not_run(merged, reason or status)
        if not_run and status == "finished":
            status, reason = "failed", f"{not_run} graded cell(s) did not run"
        if left:
            reason = (reason + "; " if reason else "") + "not copied: " + ", ".join(left)
        return Result(status, reason, mode, merged, time.monotonic() - t0,
                      read_values(private / "values.json", values))
    finally:
        for fd in fds:
            os.close(fd)
        if group is not None:
            group.remove()
        remove_tree(box)
        remove_tree(private)
