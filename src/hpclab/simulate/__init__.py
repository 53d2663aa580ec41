"""Simulated clusters: the C kernels, compiled unchanged, under SimGrid's SMPI.

A laptop has two cores and no network; the chapters' scaling curves need nodes.
``python -m hpclab simulate <kernel> --platform <name>`` compiles the chapter's small
driver (``chapters/<slug>/smpi_driver.c``) around its C kernel with ``smpicc`` and runs
it under ``smpirun`` on a platform described in ``platforms/<name>.json`` (hosts, and the
latency and bandwidth of each kind of link, each with its source). It writes the usual
records (the chapter's ``simulation.py`` makes them), with ``launcher: smpi`` and the
platform in the metadata::

    python -m hpclab simulate pingpong --platform two-host --out results
    python -m hpclab simulate ring --platform orfeo --ranks 2,12,24,48

The times are simulated, not measured: SMPI runs every rank as a thread of one
process and advances a simulated clock by its network model. The flow model
used here (CM02, no cross-traffic) gives a message of n bytes the time
``latency + n / bandwidth`` of its route, and computation is not simulated
(``smpi/simulate-computation:no``): these kernels communicate, and the real
machine's speed would otherwise leak into the simulated clock. mpi4py cannot run
under SMPI, so only the C implementations are simulated.

Hosts are sockets, named ``n<node>s<socket>``: a message between two ranks of one
socket takes the socket's loopback link (intrasocket), between the sockets of a
node the node's intersocket link, between nodes the sending and receiving nodes'
network links (half the internode latency each). Ranks fill a socket's cores,
then the next socket, then the next node (``--bind-to core --map-by core``).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PLATFORMS = HERE / "platforms"
CHAPTERS = HERE.parent / "chapters"
COMMON = HERE.parent / "kernels" / "common"
# what every driver links beside its chapter's kernel (kernels/<slug>.c): allocation,
# fail-together errors, the process grids
COMMON_SOURCES = ("hpclab_common.c", "hpclab_topo.c")
# SMPI settings every simulation uses (see the module's doc); recorded in the metadata
NETWORK = ["--cfg=network/model:CM02", "--cfg=network/crosstraffic:0"]
CONFIG = [*NETWORK, "--cfg=smpi/simulate-computation:no"]
# kernels that compute: each burst between two MPI calls is timed on this machine and, with
# the platform's hosts as fast as the one it is timed on (1 Gflop/s both), takes as long on
# the simulated clock. Ranks run one at a time, so each has a core and its memory to itself.
COMPUTE_CONFIG = [*NETWORK, "--cfg=smpi/host-speed:1Gf"]


def compute_config(speedup):
    """The configuration of a simulation whose hosts compute ``speedup`` times as fast as this
    machine: SMPI turns a measured CPU burst into work at smpi/host-speed and runs it on the
    platform's 1 Gf hosts, so a host speed of 1 / speedup Gf divides every burst by it."""
    if not speedup > 0:
        raise SimulationError(f"a host's speed-up over this machine must be > 0, got {speedup}")
    return [*NETWORK, f"--cfg=smpi/host-speed:{1.0 / speedup:.6g}Gf"]
LINKS = ("intrasocket", "intersocket", "internode")
INSTALL_HINT = ("SimGrid's SMPI (smpicc, smpirun) is not installed. On Debian or Ubuntu: "
                "apt-get install libsimgrid-dev; elsewhere see SimGrid's installation guide.")


class SimulationError(RuntimeError):
    """A simulation could not be built or run, or its platform is wrong."""


def available():
    """True when smpicc and smpirun are on PATH."""
    return bool(shutil.which("smpicc") and shutil.which("smpirun"))


def simgrid_version():
    """SimGrid's version string ('SimGrid version 3.32'), or None."""
    if not available():
        return None
    done = subprocess.run(["smpirun", "-version"], capture_output=True, text=True, timeout=60)
    text = (done.stdout + done.stderr).strip()
    return text.splitlines()[0] if text else None


# --------------------------------------------------------------------------- platforms

def platform_names():
    return sorted(p.stem for p in PLATFORMS.glob("*.json"))


def platform(name):
    """A platform's description (the JSON file, checked), with its ``hosts`` in rank order."""
    path = PLATFORMS / f"{name}.json"
    if not path.exists():
        raise ValueError(f"no platform {name!r}: choose from {', '.join(platform_names())}")
    spec = json.loads(path.read_text())
    for key in ("nodes", "sockets_per_node", "cores_per_socket"):
        if not isinstance(spec.get(key), int) or spec[key] < 1:
            raise SimulationError(f"platform {name}: {key} must be a positive integer")
    needed = ["internode"] if spec["nodes"] > 1 else []
    needed += ["intrasocket"] if spec["cores_per_socket"] > 1 else []
    needed += ["intersocket"] if spec["sockets_per_node"] > 1 else []
    for link in needed:
        if link not in spec or not all(spec[link].get(k, 0) > 0
                                       for k in ("latency_us", "bandwidth_MBps")):
            raise SimulationError(f"platform {name}: the {link} link needs a positive "
                                  "latency_us and bandwidth_MBps")
        if not spec[link].get("source"):
            raise SimulationError(f"platform {name}: the {link} link names no source")
    spec["hosts"] = [f"n{n}s{s}" for n in range(spec["nodes"])
                     for s in range(spec["sockets_per_node"])]
    spec["cores"] = spec["nodes"] * spec["sockets_per_node"] * spec["cores_per_socket"]
    return spec


def _link(spec, kind, ident, share_latency=1.0):
    link = spec[kind]
    return (f'    <link id="{ident}" latency="{link["latency_us"] * share_latency:.6g}us" '
            f'bandwidth="{link["bandwidth_MBps"]:.8g}MBps" sharing_policy="SHARED"/>')


def platform_xml(spec):
    """The SimGrid platform file of a description (see the module's doc for the routes)."""
    lines = ["<?xml version='1.0'?>",
             '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
             '<platform version="4.1">', f'  <!-- {spec["title"]} -->',
             '  <zone id="cluster" routing="Full">']
    hosts = spec["hosts"]
    for h in hosts:
        lines.append(f'    <host id="{h}" speed="1Gf" core="{spec["cores_per_socket"]}"/>')
    for h in hosts:
        if "intrasocket" in spec:
            lines.append(_link(spec, "intrasocket", f"{h}-loop"))
    for n in range(spec["nodes"]):
        if spec["sockets_per_node"] > 1:
            lines.append(_link(spec, "intersocket", f"n{n}-sockets"))
        if spec["nodes"] > 1:
            lines.append(_link(spec, "internode", f"n{n}-net", 0.5))
    for i, a in enumerate(hosts):
        if "intrasocket" in spec:
            lines.append(f'    <route src="{a}" dst="{a}"><link_ctn id="{a}-loop"/></route>')
        for b in hosts[i + 1:]:
            na, nb = a[1:].split("s")[0], b[1:].split("s")[0]
            via = [f"n{na}-sockets"] if na == nb else [f"n{na}-net", f"n{nb}-net"]
            ctn = "".join(f'<link_ctn id="{v}"/>' for v in via)
            lines.append(f'    <route src="{a}" dst="{b}">{ctn}</route>')
    lines += ["  </zone>", "</platform>", ""]
    return "\n".join(lines)


def placement_hosts(spec, nranks, placement=None):
    """The host of every rank: a named placement of the platform (two ranks), or the
    cores filled in order."""
    if placement:
        named = spec.get("placements", {})
        if placement not in named:
            raise ValueError(f"platform {spec['name']} has no placement {placement!r}: "
                             f"choose from {', '.join(named) or 'none'}")
        if nranks != len(named[placement]):
            raise ValueError(f"placement {placement} places {len(named[placement])} ranks, "
                             f"not {nranks}")
        return list(named[placement])
    if nranks > spec["cores"]:
        raise ValueError(f"platform {spec['name']} has {spec['cores']} cores; {nranks} ranks "
                         "would oversubscribe it: choose at most that many")
    per = spec["cores_per_socket"]
    return [spec["hosts"][r // per] for r in range(nranks)]


def links_crossed(spec, nranks):
    """The kinds of link (:data:`LINKS`) that messages among ``nranks`` ranks placed in core
    order can cross: 'intrasocket' when two share a socket, 'intersocket' when two sockets
    of a node hold ranks, 'internode' when more than one node does."""
    hosts = placement_hosts(spec, nranks)
    nodes = {h.split("s")[0] for h in hosts}
    out = []
    if len(hosts) > len(set(hosts)):
        out.append("intrasocket")
    if any(sum(h.startswith(n + "s") for h in set(hosts)) > 1 for n in nodes):
        out.append("intersocket")
    if len(nodes) > 1:
        out.append("internode")
    return out


def placement_words(spec, nranks):
    """Where ``nranks`` ranks sit on the platform and which of its links, with the values
    the platform assumes and their sources, their messages can cross: the assumption a
    simulated communication time follows from."""
    hosts = placement_hosts(spec, nranks)
    nodes = len({h.split("s")[0] for h in hosts})
    sockets = len(set(hosts))
    where = (f"{nranks} rank{'s' if nranks > 1 else ''} on {sockets} socket"
             f"{'s' if sockets > 1 else ''} of {nodes} node{'s' if nodes > 1 else ''}")
    crossed = links_crossed(spec, nranks)
    if not crossed:
        return f"{where}: no message leaves the rank"
    parts = [f"the {k} link ({spec[k]['latency_us']:g} µs, {spec[k]['bandwidth_MBps']:,.0f} "
             f"MB/s; {spec[k]['source']})" for k in crossed]
    return f"{where}, so messages cross " + "; ".join(parts)


def change_words(p0, p1, comm, compute, comm_what, compute_what, unit="ms"):
    """How a simulated time changed from P = ``p0`` to ``p1``, split by its own numbers into
    communication (``comm``: the times at p0 and p1 of the phases that send messages, which
    the simulated network decides) and computation (``compute``: timed on this machine):
    the sentence that says which share of the change is which, instead of naming a cause."""
    d_comm, d_comp = comm[1] - comm[0], compute[1] - compute[0]
    total = d_comm + d_comp
    head = (f"From P = {p0} to P = {p1} the time changes by {total:+,.3g} {unit}: "
            f"{d_comm:+,.3g} {unit} in {comm_what} (messages, so the simulated platform's "
            f"links) and {d_comp:+,.3g} {unit} in {compute_what} (arithmetic, timed on this "
            "machine)")
    if total > 0 and d_comm > 0 and d_comp > 0:
        head += f"; communication is {d_comm / total:.0%} of the growth"
    return head + "."


# --------------------------------------------------------------------------- build and run

def _cache_dir():
    root = os.environ.get("HPCLAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hpclab")
    path = Path(root) / "smpi"
    path.mkdir(parents=True, exist_ok=True)
    return path


# a cache of another account's, read and never written: the grader's, mounted read-only in
# each grading sandbox (sandbox_folders), so that a class's submissions take the programs and
# runs the grader's machine has made instead of building and simulating each one again
SHARED_ENV = "HPCLAB_CACHE_SHARED"


def sandbox_folders():
    """{variable: folder} the grading sandbox mounts read-only (under bubblewrap only: a
    sandbox without it runs as the grader or as a user that cannot read it): this account's
    cache, its real path (the one mounted)."""
    return {SHARED_ENV: str(_cache_dir().resolve())}


def _cached(name):
    """The file ``name`` of the shared cache (:data:`SHARED_ENV`), else of this account's;
    None when neither has it (or it cannot be read)."""
    shared = os.environ.get(SHARED_ENV)
    for folder in ([Path(shared)] if shared else []) + [_cache_dir()]:
        try:
            if (folder / name).is_file() and os.access(folder / name, os.R_OK):
                return folder / name
        except OSError:  # a folder this account may not enter
            continue
    return None


def build(kernel):
    """Compile the SMPI driver of a kernel (once per version of its sources); its path.
    The driver is the chapter's ``smpi_driver.c``, linked with its C kernel unchanged."""
    if kernel not in chapters():
        raise ValueError(f"no simulation driver for {kernel!r}: simulated kernels are "
                         f"{', '.join(chapters())}")
    folder = CHAPTERS / kernel
    sources = [folder / "smpi_driver.c", folder / "kernels" / f"{kernel}.c",
               *(COMMON / s for s in COMMON_SOURCES)]
    return compile_program(kernel, sources, (HERE, folder / "kernels", COMMON))


def compile_program(name, sources, include_dirs=()):
    """Compile C sources with ``smpicc`` (once per version of them, their headers in
    ``include_dirs`` and SimGrid); the program's path in the cache."""
    if not available():
        raise SimulationError(INSTALL_HINT)
    headers = sorted({p for d in include_dirs for p in Path(d).glob("*.h")})
    digest = hashlib.sha256()
    for path in [*sources, *headers]:
        digest.update(Path(path).read_bytes())
    digest.update((simgrid_version() or "").encode())
    exe = _cache_dir() / f"{name}-{digest.hexdigest()[:16]}"
    found = _cached(exe.name)
    if found is not None:
        return found
    includes = [f"-I{d}" for d in include_dirs]
    tmp = exe.with_name(exe.name + f".{os.getpid()}.tmp")
    cmd = ["smpicc", "-O2", "-std=c99", "-D_POSIX_C_SOURCE=200809L", *includes,
           *map(str, sources), "-o", str(tmp)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not tmp.exists():
        raise SimulationError(f"smpicc could not build the {name} program:\n"
                              f"{(done.stderr or done.stdout)[-2000:]}")
    os.replace(tmp, exe)
    return exe


def smpirun(exe, spec, nranks, args, placement=None, timeout=600, config=CONFIG, what=None):
    """Run a program built by :func:`compile_program` on nranks simulated ranks of a
    platform; its standard output. Under :data:`CONFIG` (no computation simulated) the output
    is a function of the program, platform, placement and arguments alone (the simulated
    clock repeats itself to the last digit): it is kept in the cache beside the program and
    read from there the next time (report 002's 160 ranks took half a minute here). A run that
    times this machine's computation (:data:`COMPUTE_CONFIG`) runs every time."""
    what = what or f"simulated {Path(exe).name} on {nranks} ranks of {spec['name']}"
    hosts = placement_hosts(spec, nranks, placement)
    if list(config) != CONFIG:
        return _smpirun(exe, spec, nranks, args, hosts, timeout, config, what)
    key = hashlib.sha256("\0".join([Path(exe).name, platform_xml(spec), *hosts, *config,
                                    *map(str, args)]).encode()).hexdigest()[:24]
    kept = _cache_dir() / "outputs" / f"{key}.out"
    found = _cached(f"outputs/{key}.out")
    if found is not None:
        return found.read_text()
    out = _smpirun(exe, spec, nranks, args, hosts, timeout, config, what)
    kept.parent.mkdir(exist_ok=True)
    tmp = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
    tmp.write_text(out)
    os.replace(tmp, kept)
    return out


def _smpirun(exe, spec, nranks, args, hosts, timeout, config, what):
    from hpclab import launch

    # a folder of its own: process ids repeat across sandboxes that share a cache
    work = Path(tempfile.mkdtemp(prefix="run-", dir=_cache_dir()))
    try:
        (work / "platform.xml").write_text(platform_xml(spec))
        (work / "hostfile").write_text("\n".join(hosts) + "\n")
        cmd = ["smpirun", "-np", str(nranks), "-platform", str(work / "platform.xml"),
               "-hostfile", str(work / "hostfile"), *config, "--log=root.thres:warning",
               str(exe), *map(str, args)]
        done = launch.run_process(cmd, timeout=timeout, cwd=work, what=what)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0:
        raise SimulationError(f"{what} failed (exit code {done.returncode}):\n"
                              f"{(done.stderr or done.stdout)[-2000:]}")
    return done.stdout


def run_driver(kernel, spec, nranks, args, placement=None, timeout=600, config=CONFIG):
    """Run a kernel's driver on nranks simulated ranks; the results it printed."""
    from hpclab import protocol

    return protocol.parse(smpirun(build(kernel), spec, nranks, args, placement, timeout,
                                  config, what=f"simulated {kernel} on {nranks} ranks of "
                                               f"{spec['name']}"))


def meta(kernel, spec, profile, extra, config=CONFIG):
    from hpclab import profiles, records

    public = {k: v for k, v in spec.items() if k not in ("hosts",)}
    return records.metadata(kernel, profiles.name(profile), {
        "launcher": "smpi", "platform": spec["name"], "platform_spec": public,
        "simgrid": simgrid_version(), "smpi_config": list(config), "simulated": True,
        "computation": ("timed on this machine" if config is COMPUTE_CONFIG else
                        "not simulated" if config is CONFIG else
                        "timed on this machine, scaled by the host speed of smpi_config"),
        **extra})


# --------------------------------------------------------------------------- chapters

def default_ranks(spec):
    """1, 2, then every socket and node boundary and one rank past it, up to all cores."""
    per, cores = spec["cores_per_socket"], spec["cores"]
    out = {1, 2, cores}
    for k in range(per, cores, per):
        out |= {k, k + 1}
    return sorted(r for r in out if 1 <= r <= cores)


def choices(kernel, param):
    """A declared parameter's choices, in the order of the C enum they index."""
    from hpclab.kernels.registry import get

    return get(kernel).param(param).choices


def computed(kernel, spec, ranks, repetitions, case, profile, extra, timeout,
             config=COMPUTE_CONFIG):
    """Run a computing kernel's driver at every P (``case(p)`` gives its arguments and its
    record parameters) with the arithmetic timed here (scaled as ``config`` says: see
    :func:`compute_config`); the records.Run. ``ranks`` may hold (P, case key) pairs: then
    ``case`` gets both."""
    from hpclab import records

    rows = []
    for item in ranks:
        p, args_params = (item[0], case(*item)) if isinstance(item, tuple) else (item, case(item))
        args, params = args_params
        results = run_driver(kernel, spec, p, args, timeout=timeout, config=config)
        if len(results) != 1:
            raise SimulationError(f"the simulated {kernel} on {p} ranks returned no result")
        times = np.asarray(results[0]["times"], float).reshape(-1, repetitions)
        rows += records.timings(kernel, "c", p, 1,
                                {"kind": "simulated", **params, "oversubscribed": False}, times)
    p_all = sorted({item[0] if isinstance(item, tuple) else item for item in ranks})
    return records.Run(records.frame(rows), meta(kernel, spec, profile, {
        "ranks": p_all, **extra, "implementations": ["c"]}, config=config))


def chapters():
    """The chapters that run on a simulated cluster: those whose folder has a driver
    (``smpi_driver.c``) and its runner (``simulation.py``), in book order."""
    from hpclab.kernels import registry

    return [slug for slug in registry.chapter_order()
            if (CHAPTERS / slug / "smpi_driver.c").exists()
            and (CHAPTERS / slug / "simulation.py").exists()]


def chapter(kernel):
    """The simulation module of a chapter (``hpclab.chapters.<slug>.simulation``)."""
    from importlib import import_module

    if kernel not in chapters():
        raise ValueError(f"no simulation of {kernel!r}: simulated kernels are "
                         f"{', '.join(chapters())}")
    return import_module(f"hpclab.chapters.{kernel}.simulation")


def run(kernel, platform_name, ranks=None, profile=None, placement=None, timeout=None):
    """``python -m hpclab simulate``: one kernel on one platform; a records.Run."""
    module = chapter(kernel)
    if placement and not getattr(module, "PLACEMENTS", False):
        raise ValueError("--placement names where two ranks sit, for the simulations of two "
                         "ranks; this one fills cores in order")
    kw = {"timeout": timeout} if timeout else {}
    return module.run(platform_name, ranks=ranks, profile=profile, placement=placement, **kw)


def summary(run):
    """Lines that say what a simulation found (the chapter's ``summary``, when it has one)."""
    module = chapter(run.meta["experiment"])
    return list(module.summary(run)) if hasattr(module, "summary") else []


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m hpclab simulate <kernel> --platform <name>")
