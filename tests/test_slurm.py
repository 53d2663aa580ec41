"""Slurm for real: a one-node cluster (hpclab.localslurm) runs the README's batch script as
printed, a chapter sweep, and refuses a step whose tasks came up as separate MPI worlds."""
import os
import re
from pathlib import Path

import pytest

from hpclab import launch, localslurm, records

ROOT = Path(__file__).resolve().parents[1]


def readme_script():
    """The README's Slurm batch script, exactly as printed."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    script = [b for b in blocks if "#SBATCH --job-name=hpclab-pingpong" in b]
    assert len(script) == 1, "the README prints one PingPong batch script"
    return script[0]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    why = localslurm.missing()
    if why:
        pytest.skip(why)
    folder = tmp_path_factory.mktemp("slurm")
    env = localslurm.start(folder)
    try:
        yield {**os.environ, **env}
    finally:
        localslurm.stop(folder)
        assert not any(localslurm.status(folder)[d] for d in localslurm.DAEMONS)


def submit(env, script, tmp_path, timeout=600):
    """sbatch a script from the repository's folder and wait for it; (exit code, output).
    (``sbatch --wait`` polls every 10 s; scontrol answers as soon as the job ends.)"""
    import time

    path = tmp_path / "job.sh"
    path.write_text(script)
    cmd = ["sbatch", "--parsable", f"--output={tmp_path}/job-%j.out",
           f"--export=ALL,HPCLAB_PROFILE=quick,SCRATCH={tmp_path}", str(path)]
    r = launch.run_process(cmd, timeout=60, env=env, cwd=ROOT, what="sbatch")
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip().split(";")[0]
    end = time.monotonic() + timeout
    while True:
        show = launch.run_process(["scontrol", "show", "job", job], timeout=30, env=env).stdout
        state = re.search(r"JobState=(\w+)", show)
        if state and state.group(1) not in ("PENDING", "CONFIGURING", "RUNNING",
                                            "COMPLETING"):
            break
        if time.monotonic() > end:
            launch.run_process(["scancel", job], timeout=30, env=env)
            raise TimeoutError(f"Slurm job {job} did not end within {timeout} s")
        time.sleep(0.5)
    code = int(re.search(r"ExitCode=(\d+):", show).group(1))
    out = tmp_path / f"job-{job}.out"
    # the job's stdout and stderr share the file, each with its own buffer: on a loaded
    # machine their writes interleave inside a progress bar's multi-byte characters
    return code, (out.read_text(errors="replace") if out.exists() else show)


def test_readme_batch_script_runs_as_printed(slurm, tmp_path):
    code, out = submit(slurm, readme_script(), tmp_path)
    assert code == 0, out[-3000:]
    csv = next((tmp_path / "hpclab").glob("pingpong-*.csv"))
    df, meta = records.load(csv)
    assert (df["nprocs"] == 2).all() and (df["value"] > 0).all()
    assert meta["launcher"] == "srun"
    assert [p["rank"] for p in meta["placement"]] == [0, 1]
    # the cores Slurm gave the job on the node, not one rank's binding
    assert meta["machine"]["usable_cores"] == int(
        localslurm._node_line().split("CPUs=")[1].split()[0])


def test_a_chapter_sweep_runs_under_srun(slurm, tmp_path):
    script = readme_script().replace("run pingpong", "run ring")
    code, out = submit(slurm, script, tmp_path)
    assert code == 0, out[-3000:]
    df, meta = records.load(next((tmp_path / "hpclab").glob("ring-*.csv")))
    assert set(df["nprocs"]) == {1, 2} and meta["launcher"] == "srun"


def test_tasks_that_came_up_as_singletons_fail_loudly(slurm, tmp_path):
    script = re.sub(r'srun --mpi=("\$\([^)]*\)"|\S+)', "srun --mpi=none", readme_script())
    assert "--mpi=none" in script
    code, out = submit(slurm, script, tmp_path)
    assert code != 0
    assert "each one started as its own MPI world of size 1" in out and "--mpi=pmi2" in out
    assert not list((tmp_path / "hpclab").glob("*.csv")) if (tmp_path / "hpclab").exists() \
        else True


def test_srun_mpi_names_the_plugin_of_this_mpi(slurm, monkeypatch):
    for key, value in slurm.items():
        monkeypatch.setenv(key, value)
    plugin, warning = launch.srun_mpi_plugin()
    assert plugin == ("pmix" if launch.mpi_family() == "openmpi" else "pmi2")
    assert warning is None  # Debian's Slurm lists both
    from hpclab import ranks  # where srun_mpi_plugin looks them up

    monkeypatch.setattr(ranks, "mpi_family", lambda: "other")
    monkeypatch.setattr(ranks.subprocess, "run", lambda *a, **k: type(
        "R", (), {"stdout": "MPI plugin types are...\n\tnone\n\tcray_shasta\n", "stderr": ""})())
    plugin, warning = launch.srun_mpi_plugin()
    assert plugin == "pmi2" and "does not list --mpi=pmi2" in warning


def test_local_slurm_says_what_it_needs(monkeypatch):
    monkeypatch.setattr(localslurm.shutil, "which", lambda name: None)
    why = localslurm.missing()
    if os.geteuid() == 0:
        assert "apt-get install slurm-wlm munge" in why and "munged" in why


def test_notebook_engines_through_slurm(slurm, monkeypatch, tmp_path):
    """launch.cluster(launcher='slurm'): the engines are one batch job whose tasks form one
    MPI world (srun --mpi=pmi2), in rank order; a call that times out cancels the job and the
    next call runs on a fresh one; the job ends with the block."""
    import subprocess
    import time

    for key, value in slurm.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    with launch.cluster(n=2, timeout=60, launcher="slurm", what="slurm engines",
                        sbatch_options=["--time=00:10:00"]) as engines:
        first = engines.run(launch.whoami)
        with pytest.raises(TimeoutError):
            engines.run(time.sleep, 120, timeout=3, what="a stuck call")
        seen = engines.run(launch.whoami, timeout=120)
    assert [w["rank"] for w in first] == [0, 1]
    # fresh engines: other processes than the stuck ones
    assert {w["pid"] for w in seen}.isdisjoint(w["pid"] for w in first)
    # the batch script and the job's output went to the engines' own folder, now removed
    assert not list(tmp_path.iterdir())
    assert [w["rank"] for w in seen] == [0, 1] and {w["size"] for w in seen} == {2}
    assert {w["thread_level"] for w in seen} == {"funneled"}
    end = time.monotonic() + 60
    while time.monotonic() < end:
        queue = subprocess.run(["squeue", "-h", "-o", "%j %T"], capture_output=True, text=True,
                               env=slurm, timeout=30).stdout
        if "hpclab-engines" not in queue:
            break
        time.sleep(1)
    assert "hpclab-engines" not in queue, queue
