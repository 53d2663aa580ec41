"""This machine's inputs of a class's labs, measured once before any submission runs.

A lab that predicts from another chapter's measurement (Jacobi and Poisson from PingPong's
λ and B and STREAM's bandwidth, Amdahl from STREAM's, Ring from PingPong's latency) measures
it on first use, as its page does (``hpclab.inputs``). Graded, each submission would measure
its own, side by side with the others: seconds per submission, taken on a machine loaded by
the neighbours' runs, and a different number for each student. The grader instead measures
each declared input once, on this machine before the submissions start, and each sandbox
starts with those records in its results folder: every submission of a grading run is
graded against the same numbers. When a measurement fails, the labs that need it measure
their own, as before, and the grader says so. Likewise what a lab simulates alike for every
student is simulated once (:func:`simulate_once`), into the grader's cache, which each
sandbox reads.
"""
import importlib
import os
import sys
from pathlib import Path

TIMEOUT = 600  # seconds for one chapter's inputs (a quick-profile PingPong and STREAM)


def measure(names, folder, profile, timeout=TIMEOUT, log=print):
    """{lab: folder} for each lab of ``names`` that is a chapter declaring inputs and whose
    inputs were measured (or found) in ``folder``; the other labs are left out."""
    from confinement import run_group  # the measurement dies with the grader
    from hpclab.kernels import registry

    chapters = set(registry.chapter_order())
    wanted = [n for n in names if n in chapters and registry.get(n).inputs]
    if not wanted:
        return {}
    Path(folder).mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "HPCLAB_PROFILE": profile}
    done = {}
    for name in wanted:
        done_run = run_group([sys.executable, "-m", "hpclab", "inputs", name, "--measure",
                              "--profile", profile, "--results", str(folder)], timeout, env=env)
        code, out = done_run.returncode, done_run.stdout
        if code == 0:
            done[name] = Path(folder)
            for line in out.strip().splitlines():
                log(f"{name} input, the same for every submission: {line}")
        else:
            last = (out.strip().splitlines() or ["no output"])[-1]
            log(f"{name}: its inputs could not be measured once for the class ({last}); "
                "each submission measures its own")
    return done


def simulate_once(names, profile, timeout=TIMEOUT, log=print):
    """Run, once and before the submissions, what each lab of ``names`` simulates alike for
    every student (:func:`hpclab.chapters.shared_simulations`): a simulated run is a function
    of its program and arguments, kept in the grader's cache, which every grading sandbox
    reads (read-only) before it simulates anything itself. A lab whose simulations fail here
    runs its own, as before."""
    from confinement import run_group
    from hpclab.kernels import registry

    chapters = set(registry.chapter_order())
    env = {**os.environ, "HPCLAB_PROFILE": profile}
    code = ("import sys\nfrom hpclab import chapters\n"
            "print('ran' if chapters.shared_simulations(sys.argv[1]) else 'none')")
    for name in (n for n in names if n in chapters and hasattr(
            importlib.import_module(f"hpclab.chapters.{n}"), "shared_simulations")):
        done = run_group([sys.executable, "-c", code, name], timeout, env=env)
        last = (done.stdout.strip().splitlines() or ["no output"])[-1]
        if done.returncode == 0 and last == "ran":
            log(f"{name}: its simulations, the same for every submission, were run once for "
                "the class")
        elif done.returncode != 0:
            log(f"{name}: its simulations could not be run once for the class ({last}); each "
                "submission runs its own")
