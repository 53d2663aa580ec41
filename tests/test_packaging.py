"""Set-up: one dependency set in pyproject.toml and environment.yml, clear build errors."""
import os
import re
import subprocess
import sys
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_ONLY = {"python", "c-compiler", "pip"}


def _name(spec):
    return re.split(r"[<>=!;\[ ]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _spec(spec):
    return re.sub(r"\s+", "", spec.split(";")[0]).lower()


def pyproject_deps():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = list(meta["dependencies"])
    for items in meta["optional-dependencies"].values():
        deps += [d for d in items if not d.startswith("hpclab")]
    return {_name(d): _spec(d) for d in deps}


def conda_deps():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    for d in env["dependencies"]:  # what conda-forge lacks comes from pip
        if isinstance(d, dict):
            deps += d.get("pip", [])
    return {_name(d): _spec(d) for d in deps if _name(d) not in CONDA_ONLY}


def test_environment_yml_has_the_same_dependencies_as_pyproject():
    assert pyproject_deps() == conda_deps()


def test_jupyter_book_is_pinned_below_2():
    assert "<2" in pyproject_deps()["jupyter-book"]


def test_readme_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    # the test command in a block of its own, which a student release leaves out
    # (autograder/student_release.py)
    first_block, second_block = readme.split("```")[1], readme.split("```")[3]
    assert "make book" in first_block and "make test" in second_block
    assert readme.index("make test") < readme.index("## Students")
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _setup_py(env, tmp_path):
    return subprocess.run([sys.executable, str(ROOT / "setup.py"), "build_ext", "-b",
                           str(tmp_path)],
                          cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=300)


def test_missing_mpi_wrapper_says_what_to_install(tmp_path):
    # a PATH with no MPI at all (/usr/bin may hold a system MPI's mpicc)
    (tmp_path / "no-mpi").mkdir()
    r = _setup_py({"MPICC": "", "PATH": str(tmp_path / "no-mpi")}, tmp_path)
    assert r.returncode != 0
    assert "no MPI C compiler wrapper found" in r.stderr and "pip install mpich" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_wrapper_without_a_c_compiler_says_so(tmp_path):
    fake = tmp_path / "mpicc"
    fake.write_text("#!/bin/sh\necho 'cc: command not found' >&2\nexit 127\n")
    fake.chmod(0o755)
    r = _setup_py({"MPICC": str(fake)}, tmp_path)
    assert r.returncode != 0
    assert "cannot compile an MPI program" in r.stderr and "install gcc" in r.stderr


def test_openmp_check_says_what_to_install(tmp_path):
    """A wrapper that compiles MPI but refuses -fopenmp (clang without libomp, say)."""
    import shutil

    real = shutil.which("mpicc")
    fake = tmp_path / "mpicc"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -fopenmp ] && '
                    '{ echo "unsupported option -fopenmp" >&2; exit 1; }; done\n'
                    f'exec {real} "$@"\n')
    fake.chmod(0o755)
    code = ("import sys; sys.argv=['setup.py','--version']; import runpy; "
            "ns = runpy.run_path('setup.py'); ns['check_toolchain'](sys.argv[1], True)")
    r = subprocess.run([sys.executable, "-c", code.replace("sys.argv[1]", repr(str(fake)))],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    assert "does not support OpenMP" in r.stderr and "libomp" in r.stderr, r.stderr[-2000:]


def test_make_lab_starts_jupyterlab_as_root_too():
    r = subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    line = [ln for ln in r.stdout.splitlines() if "jupyter lab labs/" in ln][0]
    assert ("--allow-root" in line) == (os.geteuid() == 0)


def test_hpclab_march_chooses_the_target_or_none():
    code = ("import sys, os, runpy; sys.argv=['setup.py','--version']; "
            "ns = runpy.run_path('setup.py'); print([ns['march_flag'](f) for f in "
            "('-march=native', '-fopenmp-simd')])")
    def flags(value):
        env = {**os.environ, "HPCLAB_MARCH": value}
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, timeout=300, env=env)
        return r.stdout.strip().splitlines()[-1]
    assert flags("") == "['-march=native', '-fopenmp-simd']"
    assert flags("x86-64-v3") == "['-march=x86-64-v3', '-fopenmp-simd']"
    assert flags("none") == "[None, '-fopenmp-simd']"


def test_make_book_runs_every_page_again_when_the_profile_or_package_changes(tmp_path):
    """Jupyter Book's execution cache keys a page by its code cells only: `make book` clears
    it when the profile (or the package, or the reference data) changed since the last
    build, and keeps it otherwise."""
    import time

    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "runs.txt"
    (fake / "jupyter-book").write_text(
        f"#!/bin/sh\n[ -d _build/.jupyter_cache ] && echo kept >> {log} || echo cleared >> {log}\n")
    (fake / "jupyter-book").chmod(0o755)
    for name in ("pyproject.toml", "setup.py"):
        (tmp_path / name).write_text("")
    subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "-n", "help"], cwd=tmp_path,
                   capture_output=True, timeout=60)  # creates the target-CPU file
    time.sleep(1.1)
    (tmp_path / "stamp").write_text("")

    def book(profile):
        (tmp_path / "_build" / ".jupyter_cache").mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "book",
                            f"BIN={fake}", f"STAMP={tmp_path / 'stamp'}", f"PROFILE={profile}"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return log.read_text().split()[-1]

    assert book("quick") == "cleared"   # no record of an earlier build
    assert book("quick") == "kept"
    assert book("standard") == "cleared"
