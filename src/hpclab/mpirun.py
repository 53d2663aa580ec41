"""A process or an MPI job with a timeout, its whole process group stopped on timeout and
its shared memory removed: :func:`mpirun` (``mpiexec -n N ...``, for scripts and tests) and
:func:`run_process` (any command, say what was running when it times out).

Part of :mod:`hpclab.launch`, which pages and labs import.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess

from hpclab import shm
from hpclab.ranks import (
    MPILaunchError,
    allow_overload,
    check_ranks,
    find_mpiexec,
    mpiexec_options,
)

DEFAULT_TIMEOUT = 120.0


def _kill_group(proc, grace=3.0):
    """Stop a process started with start_new_session=True, and its group, and remove the
    shared-memory segments its ranks leave behind (see :mod:`hpclab.shm`)."""
    left = shm.Leftovers(proc.pid)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # ranks that outlive mpiexec still carry its process group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    left.remove()


def mpirun(args, n, timeout=DEFAULT_TIMEOUT, what=None, mpi_args=(), env=None, check=True,
           cwd=None):
    """Run ``mpiexec -n n *args`` and return the CompletedProcess (text output).

    Parameters
    ----------
    args : list of str
        The program and its arguments, e.g. ``[sys.executable, "-m", "hpclab", "run", ...]``.
    n : int
        Number of MPI ranks.
    timeout : float
        Seconds before the run is stopped and :class:`TimeoutError` raised.
    what : str, optional
        What is running, for messages.
    mpi_args : list of str
        Extra mpiexec options (binding, mapping), placed before ``-n``.
    env : dict, optional
        Variables added to this process's environment.
    check : bool
        Raise :class:`MPILaunchError` when the program exits non-zero.
    """
    what = what or " ".join(map(str, args))
    check_ranks(n, what)
    extra_args, extra_env = mpiexec_options(n)
    cmd = [find_mpiexec(), *extra_args, *allow_overload(mpi_args, n), "-n", str(n),
           *map(str, args)]
    result = run_process(cmd, timeout=timeout, what=what, where=f" on {n} MPI ranks",
                         env={**os.environ, **extra_env, **(env or {})}, cwd=cwd)
    if check and result.returncode != 0:
        raise MPILaunchError(
            f"{what} failed on {n} MPI ranks (exit code {result.returncode}):\n"
            f"{output_tail(result.stderr) or output_tail(result.stdout)}")
    return result


_JOB_PREFIXES = ("PMIX_", "PMI_", "ORTE_", "HYDRA_", "OMPI_COMM_WORLD_", "OMPI_APP_CTX",
                 "OMPI_MCA_ess", "OMPI_MCA_orte_", "OMPI_MCA_pmix", "OMPI_UNIVERSE_SIZE",
                 "OMPI_NUM_APP_CTX", "OMPI_FIRST_RANKS", "OMPI_FILE_LOCATION",
                 "OMPI_MCA_initial_wdir", "MPI_LOCALNRANKS", "MPI_LOCALRANKID")


# The MPI libraries' tuning and transport variables: MPICH's, Open MPI's (with PMIx's and
# PRRTE's), Intel MPI's, libfabric's and UCX's. They say how a rank polls and which transport
# it takes, so they change a timing: runs record them, the grading sandbox keeps them.
MPI_SETTINGS = ("MPIR_CVAR_", "MPICH_", "OMPI_MCA_", "PMIX_MCA_", "PRTE_MCA_", "I_MPI_", "FI_",
                "UCX_")


def mpi_settings(env=None):
    """The MPI settings of ``env`` (default: this process's), without a job's identity."""
    env = os.environ if env is None else env
    return clean_environment({k: v for k, v in env.items() if k.startswith(MPI_SETTINGS)})


def clean_environment(env):
    """env without the variables an MPI launcher (or Open MPI's singleton start) sets for
    its ranks. A child started with them believes it is one of those ranks: under Open MPI,
    an mpiexec started from a process that initialised MPI exits 1 without a word. The
    user's own settings (OMPI_MCA_btl, MPICH's MPIR_CVAR_*, ...) stay. Python's
    ``os.environ`` does not see what MPI set at C level, so it is the default source."""
    return {k: v for k, v in env.items() if not k.startswith(_JOB_PREFIXES)}


def without_job_identity(cmd, env=None):
    """``cmd`` preceded by ``env -u NAME`` for each variable of ``env`` (default: this
    process's) by which an MPI job describes itself (:func:`clean_environment`).
    ipyparallel starts the engines' mpiexec with a copy of ``os.environ``, and a Python
    started by a process that had initialised MPI (Open MPI's singleton sets PMIX_*/OMPI_*
    at C level) inherits them: with them, Open MPI's mpiexec exits without a word. This
    process's own environment is left as it is."""
    env = os.environ if env is None else env
    unset = sorted(k for k in env if k.startswith(_JOB_PREFIXES))
    return ["env", *(a for k in unset for a in ("-u", k)), *cmd] if unset else list(cmd)


def run_process(cmd, timeout, what=None, env=None, cwd=None, where=""):
    """Run a command in its own process group and return the CompletedProcess (text).

    At the timeout (or on Ctrl-C) the whole group is stopped and TimeoutError
    (or KeyboardInterrupt) raised: nothing it started is left running.
    ``env`` is the complete environment (default: this one), without the variables by which
    an MPI job describes itself to its ranks (see :func:`clean_environment`).
    """
    what = what or " ".join(map(str, cmd))
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=clean_environment(os.environ if env is None else env), cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise TimeoutError(
            f"{what} did not finish within {timeout:g} s{where} (a deadlock, or a run too long "
            f"for its timeout); all of its processes were stopped.\n"
            f"last output:\n{output_tail(out)}{output_tail(err)}") from None
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def output_tail(text, lines=20):
    if not text:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:]) + "\n"
