"""A one-node Slurm on this machine, in a folder of its own: for the tests, and for trying
the README's batch scripts on a laptop before a cluster.

    python -m hpclab.localslurm start [--dir build/slurm]   # then: export SLURM_CONF=...
    python -m hpclab.localslurm status [--dir build/slurm]
    python -m hpclab.localslurm stop [--dir build/slurm]

It runs munged, slurmctld and slurmd in the foreground of their own process groups (no
systemd, no cgroups: ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/affinity``,
``SelectType=select/cons_tres`` with ``CR_CPU``), with every socket, key, spool, state and log
file inside the folder, and stops them by the process ids it wrote there. It needs root and
Debian's ``slurm-wlm`` and ``munge`` packages (``apt-get install slurm-wlm munge``).

MPI under ``srun`` needs the right PMI plugin: the ``mpich`` package works with
``srun --mpi=pmi2``, Debian's Open MPI with ``--mpi=pmix``; a bare ``srun`` gives every task
an MPI world of its own (size 1). ``srun --mpi=list`` shows what a site offers.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from hpclab.processes import alive

DEFAULT_DIR = Path("build") / "slurm"
DAEMONS = ("munged", "slurmctld", "slurmd")
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "squeue", "sacct")
INSTALL_HINT = ("a local Slurm needs root and Debian's slurm-wlm and munge packages "
                "(apt-get install slurm-wlm munge)")


class SlurmError(RuntimeError):
    """The local Slurm could not be started or used."""


def missing():
    """Why a local Slurm cannot run here, or None when it can."""
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "not root: " + INSTALL_HINT
    absent = [p for p in PROGRAMS[:5] if not shutil.which(p)]
    if absent:
        return f"{', '.join(absent)} not found: " + INSTALL_HINT
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_line():
    """This machine as slurmd sees it (NodeName=... CPUs=... RealMemory=...)."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=60).stdout
    line = next((ln for ln in out.splitlines() if ln.startswith("NodeName=")), None)
    if not line:
        raise SlurmError(f"slurmd -C did not describe this node:\n{out}")
    return line


def first_job_id():
    """Where this cluster's job ids start: a range of 1000 ids of its own, chosen by the clock
    (a new range every second; the ranges come round after 60,000 s, within Slurm's limit of
    67,108,863), so that no two clusters started here a second apart reuse a job and step id."""
    return 1000 + (int(time.time()) % 60_000) * 1000


def config(folder, node_line):
    """slurm.conf for one node, everything under folder."""
    f = Path(folder).resolve()
    host = node_line.split()[0].split("=", 1)[1]
    return "\n".join([
        "ClusterName=hpclab",
        f"SlurmctldHost={host}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={f / 'munge' / 'munge.socket'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "MpiDefault=none",
        # a task that fails (in MPI_Init, say) ends its step, rather than leaving the others
        # waiting for it until the job's time limit
        "KillOnBadExit=1",
        # job ids of their own: MPICH names its shared memory after the job and step, and a
        # step of an earlier cluster that died left its segment in /dev/shm; a new cluster
        # counting from job 1 again attached to it and failed in MPI_Init ("failed to unpack
        # address, invalid bandwidth 0.00") or hung
        f"FirstJobId={first_job_id()}",
        "SchedulerType=sched/backfill",
        "ReturnToService=2",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        f"SlurmctldPidFile={f / 'slurmctld.pid'}",
        f"SlurmdPidFile={f / 'slurmd.pid'}",
        f"SlurmdSpoolDir={f / 'spool'}",
        f"StateSaveLocation={f / 'state'}",
        f"SlurmctldLogFile={f / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={f / 'log' / 'slurmd.log'}",
        f"{node_line} State=UNKNOWN",
        f"PartitionName=local Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def environment(folder=DEFAULT_DIR):
    """The variables a Slurm client needs for this cluster."""
    return {"SLURM_CONF": str((Path(folder) / "slurm.conf").resolve())}


def _pids_file(folder):
    return Path(folder) / "pids.json"


def _start(cmd, folder, name, env):
    log = open(Path(folder) / "log" / f"{name}.out", "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=env)


def status(folder=DEFAULT_DIR):
    """{daemon: pid or None}, and the node's state in sinfo when slurmctld answers."""
    path = _pids_file(folder)
    pids = json.loads(path.read_text()) if path.exists() else {}
    out = {d: (pids[d] if d in pids and alive(pids[d]) else None) for d in DAEMONS}
    state = None
    if out["slurmctld"]:
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                           timeout=30, env={**os.environ, **environment(folder)})
        state = r.stdout.strip() or None
    out["state"] = state
    return out


def start(folder=DEFAULT_DIR, timeout=60):
    """Start munged, slurmctld and slurmd; return the client environment once the node is
    idle. Stops what it started when anything fails."""
    why = missing()
    if why:
        raise SlurmError(why)
    folder = Path(folder)
    if any(status(folder)[d] for d in DAEMONS):
        raise SlurmError(f"a local Slurm already runs from {folder}: "
                         f"python -m hpclab.localslurm stop --dir {folder}")
    for sub in ("munge", "spool", "state", "log"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    munge = (folder / "munge").resolve()
    os.chmod(folder, 0o755)
    os.chmod(munge, 0o755)  # munged refuses a socket directory others can write to
    key = munge / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    (folder / "slurm.conf").write_text(config(folder, _node_line()))
    env = {**os.environ, **environment(folder)}
    started = {}
    try:
        started["munged"] = _start(
            ["munged", "-F", "-f", f"--socket={munge / 'munge.socket'}", f"--key-file={key}",
             f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
             f"--seed-file={munge / 'munged.seed'}"], folder, "munged", env)
        _wait_for(lambda: (munge / "munge.socket").exists(), 20, "munged's socket",
                  folder, started)
        conf = str((folder / "slurm.conf").resolve())
        started["slurmctld"] = _start(["slurmctld", "-D", "-f", conf], folder, "slurmctld", env)
        started["slurmd"] = _start(["slurmd", "-D", "-f", conf], folder, "slurmd", env)
        _pids_file(folder).write_text(json.dumps({k: p.pid for k, p in started.items()}))
        _wait_for(lambda: status(folder)["state"] == "idle", timeout, "an idle node", folder,
                  started)
    except BaseException:
        _stop_pids({k: p.pid for k, p in started.items()})
        raise
    return environment(folder)


def _wait_for(ready, timeout, what, folder, started):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for name, proc in started.items():
            if proc.poll() is not None:
                raise SlurmError(f"{name} exited ({proc.returncode}) before {what}:\n"
                                 + _tail(Path(folder) / "log" / f"{name}.out"))
        if ready():
            return
        time.sleep(0.25)
    raise SlurmError(f"no {what} within {timeout} s; logs in {Path(folder) / 'log'}:\n"
                     + _tail(Path(folder) / "log" / "slurmctld.log"))


def _tail(path, n=2000):
    try:
        return Path(path).read_text()[-n:]
    except OSError:
        return ""


def _stop_pids(pids, grace=10.0):
    """SIGTERM each daemon's process group (it was started as its leader), then SIGKILL."""
    order = [d for d in ("slurmd", "slurmctld", "munged") if d in pids]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for d in order:
            try:
                os.killpg(pids[d], sig)
            except (ProcessLookupError, PermissionError):
                pass
        end = time.monotonic() + wait
        while time.monotonic() < end and any(alive(pids[d]) for d in order):
            for d in order:  # reap our own children
                try:
                    os.waitpid(pids[d], os.WNOHANG)
                except ChildProcessError:
                    pass
            time.sleep(0.2)
        if not any(alive(pids[d]) for d in order):
            return


def stop(folder=DEFAULT_DIR):
    """Stop the daemons started from folder (by their process ids); True when any ran."""
    path = _pids_file(folder)
    if not path.exists():
        return False
    pids = json.loads(path.read_text())
    _stop_pids(pids)
    path.unlink()
    return True


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hpclab.localslurm",
                                description=__doc__.split("\n")[0])
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument("--dir", default=str(DEFAULT_DIR), help="the cluster's folder")
    args = p.parse_args(argv)
    try:
        if args.action == "start":
            env = start(args.dir)
            print(f"a one-node Slurm runs from {args.dir}; for sbatch and srun:")
            print(f"  export SLURM_CONF={env['SLURM_CONF']}")
            print(f"stop it with: python -m hpclab.localslurm stop --dir {args.dir}")
        elif args.action == "stop":
            print("stopped" if stop(args.dir) else f"no local Slurm runs from {args.dir}")
        else:
            print(json.dumps(status(args.dir)))
    except SlurmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
