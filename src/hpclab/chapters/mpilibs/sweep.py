"""The MPI libraries sweep: the same C program under each library, interleaved.

``python -m hpclab.chapters.mpilibs.sweep --profile quick`` (``make mpilibs``) sets up each
library (:mod:`.libraries`), then, round after round, runs every test at every size under
every library and placement, in an order drawn anew each round, so that the machine's
drift falls on all of them alike. Records name the library (its version string), the
placement asked for and the cores each rank was allowed to run on, as the ranks report
them. Two ranks, never more than the usable cores.
"""
from __future__ import annotations

import argparse
import json
import random
import sys

from hpclab.chapters.mpilibs import libraries
from hpclab.chapters.mpilibs.declaration import KERNEL

NAME = "mpilibs"
TESTS = ("pingpong", "ring", "exchange", "allreduce")
RANKS = 2
PROFILES = KERNEL.profiles  # the declaration's (quick, standard, full)


class SweepError(RuntimeError):
    """A library's run that failed, with what it said."""


def iterations(nbytes: int, scale: int = 1) -> int:
    """Operations per timed batch: about 64 MiB moved (messages under 4 KiB counted as 4 KiB),
    at least 20 (then fewer by ``scale``, at least 2)."""
    return max(2, max(20, (64 << 20) // max(nbytes, 4096)) // scale)


def program_args(test: str, settings: dict) -> list[str]:
    sizes = [s for s in settings["sizes"] if test != "allreduce" or s % 8 == 0]
    return [test, str(settings["repetitions"]), "10",
            *(f"{s}:{iterations(s, settings['scale'])}" for s in sizes)]


def parse(stdout: str, what: str) -> tuple[dict, list[dict]]:
    """The program's header and result lines; SweepError on its error line or none."""
    header, results = None, []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue  # a launcher's own words
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise SweepError(f"{what} printed a line that is not the program's JSON (output "
                             f"of two ranks mixed?): {line[:200]}") from None
        if "error" in obj:
            raise SweepError(f"{what}: {obj['error']}")
        if "library" in obj:
            header = obj
        else:
            results.append(obj)
    if header is None or not results:
        raise SweepError(f"{what} printed no results:\n{stdout[-2000:]}")
    return header, results


def run_one(slug: str, placement: str, test: str, settings: dict, root=None):
    """One mpiexec of the program: (header, results)."""
    from hpclab import launch, mpirun

    cmd, env = libraries.launch_args(slug, placement, RANKS, root)
    what = f"{libraries.get(slug).name} {test} ({placement} binding)"
    res = launch.run_process(cmd + program_args(test, settings), timeout=settings["timeout"],
                             what=what, env=env, where=f" on {RANKS} MPI ranks")
    if res.returncode != 0:
        # the program's own error line when it printed one, else what the launcher said
        errors = [line for line in res.stdout.splitlines() if line.startswith('{"error"')]
        if errors:
            raise SweepError(f"{what}: {json.loads(errors[0])['error']} (exit code "
                             f"{res.returncode})")
        raise SweepError(f"{what} failed (exit code {res.returncode}):\n"
                         f"{mpirun.output_tail(res.stderr) or mpirun.output_tail(res.stdout)}")
    return parse(res.stdout, what)


def version_of(header):
    """The first line of a library's version string, its spaces squeezed."""
    return " ".join(header["library"].split(";")[0].split())


def records_of(slug, placement, rnd, header, results):
    from hpclab import records

    version = version_of(header)
    cpus = "|".join(",".join(map(str, c)) for c in header["cpus"])
    out = []
    for r in results:
        params = {"test": r["test"], "nbytes": int(r["nbytes"]),
                  "iterations": int(r["iterations"]), "placement": placement, "cpus": cpus,
                  "library": version, "round": rnd}
        row = records.rows(NAME, NAME, slug, header["ranks"], 1, params, [r["seconds"]],
                           "time", "s")[0]
        row["rep"] = int(r["rep"])
        out.append(row)
    return out


def run(profile="quick", slugs=None, root=None, setup=True, progress=print, timeout=None,
        tests=None):
    """Set up (unless ``setup`` is False: only the libraries installed), then measure. Returns a
    :class:`hpclab.records.Run`; its metadata lists the libraries measured and skipped.
    ``timeout``: seconds for any one launch of the program; ``tests``: some of :data:`TESTS`
    (default: the profile's)."""
    from hpclab import launch, records

    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: choose from {', '.join(PROFILES)}")
    unknown = sorted(set(tests or ()) - set(TESTS))
    if unknown or (tests is not None and not tests):
        raise ValueError(f"unknown test(s) {unknown or tests}: choose from {', '.join(TESTS)}")
    settings = {**PROFILES[profile], **({"timeout": timeout} if timeout else {}),
                **({"tests": list(tests)} if tests else {})}
    # without setup, the libraries already installed (their program rebuilt if its
    # source changed: a local compile, nothing downloaded)
    ready, skipped = libraries.setup_all(slugs, root, progress, install=setup)
    if not ready:
        raise SweepError(f"no MPI library is ready: {reasons(skipped)}")
    cores = launch.usable_cores()
    if cores < RANKS:
        raise SweepError(f"the sweep times {RANKS} ranks and this machine lets this process use "
                         f"{cores} core(s): timings with more ranks than cores measure the "
                         f"scheduler, not the library. Run it where it may use {RANKS} cores "
                         "(taskset, or a job that asks for them)")
    rows, versions, failed = [], {}, {}
    seed = random.SystemRandom().randrange(2**32)
    draw = random.Random(seed)
    for rnd in range(settings["rounds"]):
        order = [(s, p, t) for s in ready for p in libraries.PLACEMENTS
                 for t in settings["tests"]]
        draw.shuffle(order)
        for i, (slug, placement, test) in enumerate(order):
            if slug in failed:
                continue
            try:
                header, results = run_one(slug, placement, test, settings, root)
            except (SweepError, TimeoutError) as exc:
                failed[slug] = str(exc)
                progress(f"{libraries.get(slug).name} is stopped here (its records so far are "
                         f"kept): {exc}")
                continue
            versions[slug] = version_of(header)
            rows += records_of(slug, placement, rnd, header, results)
            progress(f"round {rnd + 1}/{settings['rounds']}: {i + 1}/{len(order)} "
                     f"({libraries.get(slug).name}, {test}, {placement})")
    if not rows:
        raise SweepError(f"every library failed: {reasons({**skipped, **failed})}")
    meta = records.metadata(NAME, profile, extra={
        "libraries": {s: {"name": libraries.get(s).name, "version": versions[s],
                          "packages": list(libraries.get(s).packages)} for s in versions},
        # skipped: never measured; failed: stopped during the sweep, its records kept
        "skipped": {s: why for s, why in {**skipped, **failed}.items() if s not in versions},
        "failed": {s: why for s, why in failed.items() if s in versions},
        "ranks": RANKS, "order_seed": seed})
    return records.Run(rows, meta)


def reasons(why_of):
    """'Name: the line of its words that says why' for each library, joined."""
    def line(text):
        lines = [x for x in text.splitlines() if x.strip()]
        return lines[-1] if len(lines) > 1 and lines[0].endswith(":") else lines[0]
    return "; ".join(f"{libraries.get(s).name}: {line(why)}" for s, why in why_of.items())


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hpclab.chapters.mpilibs.sweep",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="quick", choices=list(PROFILES))
    p.add_argument("--libraries", nargs="+", choices=list(libraries.LIBRARIES), default=None)
    p.add_argument("--no-setup", dest="setup", action="store_false",
                   help="measure only the libraries already installed (nothing downloaded)")
    p.add_argument("--out", default=None, help="the results folder (default: results/)")
    args = p.parse_args(argv)
    from hpclab import records

    try:
        run_ = run(args.profile, args.libraries, setup=args.setup,
                   progress=lambda m: print(m, file=sys.stderr))
    except SweepError as exc:
        print(f"mpilibs: {exc}", file=sys.stderr)
        return 1
    path = records.save(run_, out_dir=args.out)
    if run_.meta["skipped"]:
        print(f"skipped: {reasons(run_.meta['skipped'])}")
    if run_.meta["failed"]:
        print(f"stopped during the sweep (records so far kept): {reasons(run_.meta['failed'])}")
    measured = [f"{i['name']} ({i['version']})" for i in run_.meta["libraries"].values()]
    print(f"records of {', '.join(measured)} written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
