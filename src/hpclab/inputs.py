"""Declared inputs: which saved run a chapter takes another chapter's measurement from.

A chapter that uses another's measurement (Jacobi: PingPong's λ and B and STREAM's add
bandwidth) declares it in its experiment module (``INPUTS``) and gets the run through
:func:`resolve`, never "the newest file in results/". A run qualifies when it was measured

- on this host,
- with the MPI library this process loads,
- not simulated (a SimGrid run describes a platform, not this machine),
- not oversubscribed (more ranks than cores measure their turns on a core),
- the profile's whole sweep, not a probe of a few chosen sizes (``subset`` in its metadata),
- with the profile asked for (any profile when none is asked for),
- within this book build, when one is under way (``HPCLAB_BUILD``, set by the book's site
  extension for the whole build), so that every page of one build uses one measurement of
  each quantity, whichever page runs first;

and the newest qualifying run wins. :func:`measured` measures when none qualifies, saves what
it measured (so the next page finds it), and says so. ``python -m hpclab inputs <slug>``
prints what each declared input resolves to and why.
"""
from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hpclab import records

BUILD_ENV = "HPCLAB_BUILD"


@dataclass
class Resolved:
    """The run an input resolves to (None when none qualifies), and why."""

    experiment: str
    run: records.Run | None
    path: Path | None
    why: str
    rejected: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def source(self) -> str:
        """Where the measurement came from, in words a page can print."""
        if self.run is None:
            return f"no saved {self.experiment} run ({self.why})"
        from hpclab.kernels import registry

        meta = self.run.meta
        title = registry.get(self.experiment).title
        return (f"the {title} records of {meta.get('utc_time', '?')} "
                f"({self.path.name if self.path else 'not saved'}, profile "
                f"{meta.get('profile', '?')})")

    def report(self) -> str:
        """Every candidate with the reason it was taken or passed over."""
        lines = [f"{self.experiment}: " + (f"{self.path} ({self.why})" if self.run is not None
                                           else f"none qualifies ({self.why})")]
        lines += [f"  passed over {p.name}: {why}" for p, why in self.rejected]
        return "\n".join(lines)


def here() -> dict:
    """What a qualifying run must match: this host and the MPI library loaded here."""
    from hpclab import machine

    return {"hostname": socket.gethostname(), "mpi": (machine.mpi() or {}).get("library")}


def build_id() -> str | None:
    """The book build under way, if any."""
    return os.environ.get(BUILD_ENV) or None


def _rejection(meta: dict, want: dict, profile: str | None, build: str | None) -> str | None:
    if meta.get("simulated"):
        return f"simulated on platform {meta.get('platform', '?')}, not measured on this machine"
    if meta.get("subset"):
        return f"a probe of {meta['subset']}, not the profile's sweep"
    if meta.get("oversubscribed"):
        return "run with more ranks than cores (oversubscribed): its timings measure the turns"
    m = meta.get("machine") or {}
    if m.get("hostname") != want["hostname"]:
        return f"measured on another host ({m.get('hostname')})"
    lib = (m.get("mpi") or {}).get("library")
    if lib != want["mpi"]:
        return f"measured with another MPI library ({lib})"
    if profile is not None and meta.get("profile") != profile:
        return f"profile {meta.get('profile')}, not the {profile} asked for"
    if build is not None and meta.get("build") != build:
        return "from another book build"
    return None


def resolve(experiment: str, profile: str | None = None, out_dir: str | Path | None = None,
            accept: Callable[[records.Run], str | None] | None = None) -> Resolved:
    """The newest saved run of ``experiment`` that qualifies (see the module's doc).
    ``accept`` may pass over a run for what its records lack (returning why, else None)."""
    out = Path(out_dir) if out_dir is not None else records.results_dir()
    want, build = here(), build_id()
    found: list[tuple[Path, dict | None, str | None]] = []
    for js in sorted(out.glob(f"{experiment}-*.json")):
        try:
            meta = json.loads(js.read_text())
        except (OSError, ValueError) as exc:
            found.append((js, None, f"unreadable ({exc})"))
            continue
        if meta.get("experiment") != experiment:
            continue
        found.append((js, meta, _rejection(meta, want, profile, build)))
    rejected = [(p, why) for p, _, why in found if why]
    ok = sorted(((m.get("utc_time", ""), p) for p, m, why in found if not why and m is not None),
                reverse=True)
    for _, js in ok:
        try:
            run = records.load(js)
        except (OSError, ValueError, records.RecordError) as exc:
            rejected.append((js, f"unreadable ({exc})"))
            continue
        why = accept(run) if accept else None
        if why:
            rejected.append((js, why))
            continue
        return Resolved(experiment, run, js.with_suffix(".csv"),
                        "the newest run of this host and MPI library, not simulated"
                        + (f", profile {profile}" if profile else "")
                        + (", of this book build" if build else ""), rejected)
    why = ("no saved run" if not found else
           f"none of the {len(found)} saved runs qualifies")
    return Resolved(experiment, None, None, why, rejected)


def measured(experiment: str, measure: Callable[[], records.Run], profile: str | None = None,
             out_dir: str | Path | None = None,
             accept: Callable[[records.Run], str | None] | None = None
             ) -> tuple[records.Run, str]:
    """The run :func:`resolve` picks, else ``measure()``'s, saved now so that later pages and
    labs take the same one: (run, where it came from in words)."""
    r = resolve(experiment, profile, out_dir, accept)
    if r.run is not None:
        return r.run, r.source
    from hpclab.kernels import registry

    run = measure()
    path = run.save(out_dir)
    return run, (f"the {registry.get(experiment).title} run measured now ({r.why}; saved as "
                 f"{Path(path).name}, profile {run.meta.get('profile', '?')})")


def shared_words(slug: str, source: str) -> str:
    """The sentence a producing chapter's page prints under its run: which run it shows and
    which chapters of this build take their numbers from the same one (from the
    declarations)."""
    from hpclab.kernels import registry

    users = [registry.get(s).title for s in registry.consumers(slug)]
    if not users:
        return f"This page shows {source}."
    listed = users[0] if len(users) == 1 else ", ".join(users[:-1]) + " and " + users[-1]
    return (f"This page shows {source}; the {listed} chapter{'s' if len(users) > 1 else ''} "
            f"of this build take{'' if len(users) > 1 else 's'} "
            f"{registry.get(slug).title}'s numbers from the same run.")


def producer(source: str) -> Callable[..., tuple[records.Run, str]]:
    """The function a producing chapter gives its consumers: ``measurement(profile=None,
    engines=None, out_dir=None)`` in its analysis module, which resolves or measures and
    saves (in ``out_dir``, else the results folder)."""
    from importlib import import_module

    analysis = import_module(f"hpclab.chapters.{source}.analysis")
    return analysis.measurement


def measure(slug: str, profile: str | None = None, out_dir: str | Path | None = None
            ) -> list[str]:
    """Every input chapter ``slug`` declares, resolved, else measured now and saved, as its
    page or lab would on first use (``python -m hpclab inputs <slug> --measure``; the grader
    does this once for a class): a line per input saying where it came from."""
    from hpclab.kernels import registry

    return [f"{source}: {producer(source)(profile=profile, out_dir=out_dir)[1]}"
            for source in registry.get(slug).inputs]


def report(slug: str, out_dir: str | Path | None = None, profile: str | None = None) -> str:
    """What each declared input of chapter ``slug`` resolves to and why (``python -m hpclab
    inputs``): the record file, or what would be measured."""
    from hpclab.kernels import registry

    kernel = registry.get(slug)
    if not kernel.inputs:
        return f"{slug} declares no inputs from other chapters"
    lines = []
    for source, what in kernel.inputs.items():
        r = resolve(source, profile, out_dir)
        lines.append(f"{source} ({what}):")
        lines += ["  " + line for line in r.report().splitlines()]
        if r.run is None:
            lines.append(f"  would measure: the {source} experiment, profile "
                         f"{profile or 'from HPCLAB_PROFILE'}, saved to "
                         f"{Path(out_dir) if out_dir else records.results_dir()}")
    return "\n".join(lines)
