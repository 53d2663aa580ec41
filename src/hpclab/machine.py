"""What this machine is: attached to every record so that a number keeps its context.

``describe()`` returns a JSON-ready dict: CPU model, logical and physical
cores, sockets, NUMA nodes, caches, memory, the transparent-huge-page
setting, the MPI library mpi4py loads and the one the kernels were compiled
against, mpi4py/numpy/Python versions and the compiler. Everything is read
from /proc and /sys where available (Linux) and left ``None`` elsewhere.
"""
from __future__ import annotations

import os
import platform
import re
import socket
from pathlib import Path

SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")


def _read(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _parse_size(text):
    """'32K' -> 32768, '4096K' -> 4194304, '1M' -> 1048576."""
    if not text:
        return None
    m = re.fullmatch(r"(\d+)\s*([KMG]?)B?", text.strip(), re.IGNORECASE)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def _cpu_list(text):
    """'0-3,8' -> [0, 1, 2, 3, 8]."""
    cpus = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def cpu_model():
    text = _read("/proc/cpuinfo") or ""
    for key in ("model name", "Processor", "cpu model", "uarch"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if m:
            return m.group(1).strip()
    return platform.processor() or None


def topology():
    """Logical CPUs, physical cores and sockets, from /sys (None where unknown)."""
    cpus = sorted(int(p.name[3:]) for p in SYS_CPU.glob("cpu[0-9]*")) if SYS_CPU.exists() else []
    cores, sockets = set(), set()
    for cpu in cpus:
        topo = SYS_CPU / f"cpu{cpu}" / "topology"
        pkg, core = _read(topo / "physical_package_id"), _read(topo / "core_id")
        if pkg is not None and core is not None:
            sockets.add(pkg)
            cores.add((pkg, core))
    return {
        "logical_cpus": len(cpus) or os.cpu_count(),
        "physical_cores": len(cores) or None,
        "sockets": len(sockets) or None,
    }


def numa_nodes():
    """NUMA nodes with their CPUs, or a single node holding every CPU when /sys has none."""
    nodes = {}
    for node in sorted(SYS_NODE.glob("node[0-9]*")) if SYS_NODE.exists() else []:
        nodes[int(node.name[4:])] = _cpu_list(_read(node / "cpulist"))
    return nodes


def caches():
    """Caches seen by cpu0: level, type, size in bytes and how many CPUs share each."""
    out = []
    for index in sorted((SYS_CPU / "cpu0" / "cache").glob("index[0-9]*")):
        shared = _cpu_list(_read(index / "shared_cpu_list"))
        out.append({
            "level": int(_read(index / "level") or 0),
            "type": _read(index / "type"),
            "size_bytes": _parse_size(_read(index / "size")),
            "shared_by_cpus": len(shared) or None,
        })
    return out


def _data_caches(described=None):
    """The data (or unified) caches of known size: of this machine, or of a machine
    description (:func:`describe`)."""
    found = (described.get("caches") or []) if described else caches()
    return [c for c in found if c["size_bytes"] and c["type"] != "Instruction"]


def total_cache_bytes():
    """Sum of all distinct cache instances on the machine (for STREAM's array rule)."""
    ncpus = topology()["logical_cpus"] or 1
    return sum(c["size_bytes"] * max(1, ncpus // (c["shared_by_cpus"] or 1))
               for c in _data_caches())


def last_level_cache_bytes():
    """Size of one instance of the last-level data (or unified) cache, in bytes; None when
    the machine does not say."""
    sizes = [c["size_bytes"] for c in _data_caches()]
    return max(sizes) if sizes else None


def cache_bytes(level, described=None):
    """Size of one instance of the data (or unified) cache of ``level`` (1, 2, 3), in bytes;
    None when the machine does not say. ``described``: a machine description
    (:func:`describe`) instead of this one."""
    found = [c["size_bytes"] for c in _data_caches(described) if c.get("level") == level]
    return max(found) if found else None


def last_level_caches(described=None):
    """The last-level caches of this machine (or the ``described`` one): its cores over the
    cores that share one (1 where it does not say)."""
    topo = described if described else topology()
    per_core = max(1, (topo["logical_cpus"] or 1) // (topo["physical_cores"] or 1))
    found = _data_caches(described)
    if not found:
        return 1
    last = max(found, key=lambda c: (c["level"], c["size_bytes"]))
    sharing = max(1, (last["shared_by_cpus"] or 1) // per_core)
    return max(1, (topo["physical_cores"] or 1) // sharing)


def last_level_share_bytes(described=None):
    """One core's share of the last-level data (or unified) cache: its size over the cores
    that share it (SMT siblings count as one core), in bytes; None when the machine does not
    say. ``described``: a machine description (:func:`describe`) instead of this one."""
    topo = described if described else topology()
    per_core = max(1, (topo["logical_cpus"] or 1) // (topo["physical_cores"] or 1))
    found = _data_caches(described)
    if not found:
        return None
    last = max(found, key=lambda c: (c["level"], c["size_bytes"]))
    cores = max(1, (last["shared_by_cpus"] or 1) // per_core)
    return last["size_bytes"] // cores


# Streaming stores (kernels/common/hpclab_simd.h): where the arrays of the ranks on a node
# together take more than the node's caches can keep, each rank writes its output past the
# cache: it would not stay there until it is read again, and a plain store first reads each
# line it writes. Arrays that fit stay in the cache, where a store past it would send them to
# memory. The node counts a share of the last level for each of its cores, busy or not (a
# rank alone has a last-level cache to itself, and one only: on a node of several, a rank's
# part is at most one cache's), at most STREAMING_L2_CAP times the
# core's own L2: a virtual machine sees its host's whole last level (480 MiB over two cores
# on one) but shares it with cores it does not see. Measured there (Jacobi, C with streaming
# stores over plain ones, in the same runs): two ranks, 0.73 at 7.5 MiB of fields per rank,
# 0.97 at 23 MiB, 1.06-1.31 at 53 MiB; one rank, 0.84 at 53 MiB and 1.45 at 402 MiB. The cap
# (32 MiB a core there, 64 MiB for the node) streams from where it no longer costs.
STREAMING_L2_CAP = 16


def streaming_threshold_bytes(described=None):
    """The bytes of the arrays of a node's ranks together above which a kernel stores past
    the cache: for each core of the node, its share of the last-level cache, at most
    STREAMING_L2_CAP times its L2; None when the machine (or the ``described`` one) does not
    report its caches."""
    share = last_level_share_bytes(described)
    if not share:
        return None
    l2 = cache_bytes(2, described)
    topo = described if described else topology()
    cores = max(1, topo.get("physical_cores") or 1)
    return int((min(share, STREAMING_L2_CAP * l2) if l2 else share) * cores)


# a memory-bound timing's working set per rank is at least this many times the last-level
# cache (one instance; 32 MiB where the machine does not say): the one rule by which the labs
# size what they time
CACHE_FACTOR = 2
UNKNOWN_CACHE_BYTES = 32 << 20


def beyond_cache(bytes_of, least, step, factor=CACHE_FACTOR):
    """The smallest size ``least + k * step`` (k = 0, 1, ...) whose working set per rank,
    ``bytes_of(size)`` bytes, is at least ``factor`` times this machine's last-level cache,
    so that even one rank streams it from memory."""
    if step <= 0 or bytes_of(least + step) <= bytes_of(least):
        raise ValueError("beyond_cache needs a positive step that grows the working set")
    cache = last_level_cache_bytes() or UNKNOWN_CACHE_BYTES
    size = least
    while bytes_of(size) < factor * cache:
        size += step
    return size


def memory_bytes():
    m = re.search(r"^MemTotal:\s+(\d+) kB", _read("/proc/meminfo") or "", re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def transparent_hugepages():
    """The kernel's THP policy: 'always', 'madvise' or 'never' (None when not Linux)."""
    text = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    if not text:
        return None
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else text


def mpi():
    """The MPI library mpi4py loads, mpi4py's version, and what the kernels were built with."""
    info = {"library": None, "library_version": None, "standard": None, "mpi4py": None,
            "kernels_built_with": None, "compiler": None, "mpicc": None}
    try:
        import mpi4py

        from hpclab.launch import mpi_library

        lib = mpi_library()
        info.update(library=" ".join(lib["version"].splitlines()[0].split()),
                    library_version=lib["version"], standard=lib["standard"],
                    mpi4py=mpi4py.__version__)
    except Exception as exc:  # no MPI at all is worth recording, not crashing on
        info["library"] = f"unavailable: {exc}"
    try:
        from hpclab.kernels import build_info

        built = build_info()
        info.update(kernels_built_with=built.get("mpi_library"), compiler=built.get("compiler"),
                    mpicc=built.get("mpicc"), mpicc_show=built.get("mpicc_show"),
                    cflags=built.get("cflags"), kernel_flags=built.get("kernel_flags"))
    except Exception as exc:
        info["kernels_built_with"] = f"unavailable: {exc}"
    return info


def describe():
    """Everything above in one JSON-ready dict."""
    import numpy

    from hpclab import launch

    return {
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        **topology(),
        # the cores the job may use on this node, and those of this process's own binding
        "usable_cores": launch.usable_cores(),
        "rank_cpus": launch.rank_cores(),
        "numa_nodes": len(numa_nodes()) or 1,
        "numa_cpus": {str(k): v for k, v in numa_nodes().items()},
        "caches": caches(),
        "memory_bytes": memory_bytes(),
        "transparent_hugepages": transparent_hugepages(),
        "mpi": mpi(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }


def count_words(n, one, many=None):
    """'one socket', 'two sockets', '12 sockets' (``many``: the plural when not one + s)."""
    words = {1: "one", 2: "two"}
    return f"{words.get(n, n)} {one if n == 1 else many or one + 's'}"


def listing(names, conjunction="and"):
    """'a', 'a and b', 'a, b and c' (or 'or')."""
    names = list(names)
    return names[0] if len(names) == 1 else \
        ", ".join(names[:-1]) + f" {conjunction} " + names[-1]


def layout_words(info=None):
    """'2 cores on one socket of one node': what a run's machine description says of its
    shape (the cores the job may use; a description is of one node)."""
    info = info or describe()
    cores = info.get("usable_cores") or info.get("physical_cores") or "?"
    sockets = info.get("sockets") or 1
    cores = count_words(cores, "core") if isinstance(cores, int) else f"{cores} cores"
    return f"{cores} on {count_words(sockets, 'socket')} of one node"


def cannot_show(info, wanted):
    """The sentence of what a machine cannot show of ``wanted``, (words, needs) pairs whose
    ``needs`` is a dict of least ``cores``, ``sockets`` or ``nodes``: computed from the
    run's machine description, never typed into a page."""
    info = info or describe()
    have = {"cores": info.get("usable_cores") or info.get("physical_cores") or 1,
            "sockets": info.get("sockets") or 1, "nodes": 1}
    lacks = [words for words, needs in wanted if any(have[k] < v for k, v in needs.items())]
    shows = [words for words, _ in wanted if words not in lacks]
    text = f"This machine has {layout_words(info)}"
    if lacks:
        text += f", so it cannot show {listing(lacks, 'or')}"
    if shows:
        text += f"{'; it can show' if lacks else ', enough to show'} {listing(shows)}"
    return text + "."


def summary(info=None):
    """One line for figure captions: CPU, cores, MPI."""
    info = info or describe()
    mpi_lib = (info.get("mpi") or {}).get("library") or "unknown MPI"
    return (f"{info.get('cpu_model') or 'unknown CPU'}, {info.get('physical_cores') or '?'} cores, "
            f"{info.get('sockets') or '?'} socket(s), {info.get('numa_nodes')} NUMA node(s), "
            f"{mpi_lib}")
