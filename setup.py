"""Build the hpclab kernels with the MPI compiler wrapper.

The wrapper is ``$MPICC`` when set, else ``mpicc`` on PATH: the ``mpich``
wheel's in a virtual environment, a system Open MPI or MPICH, or a cluster's
module. Which kernels exist, which need OpenMP and which extra flags they want
comes from their declarations (``src/hpclab/chapters/<slug>/declaration.py``, read
through ``hpclab.kernels.registry`` without importing compiled code); the build
checks that the compiler supports OpenMP before compiling the kernels that need it.
"""
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
CHAPTERS_DIR = Path("src/hpclab/chapters")
COMMON = Path("src/hpclab/kernels/common")
# the kernels' optimisation: $HPCLAB_OPT replaces -O3 (-O0 builds several times faster: the
# Open MPI test stage, which checks results, not speed; -Og for a debugger)
OPT_ENV = "HPCLAB_OPT"
OPT = os.environ.get(OPT_ENV, "").strip() or "-O3"
if OPT not in ("-O0", "-O1", "-O2", "-O3", "-Os", "-Og", "-Ofast"):
    sys.exit(f"{OPT_ENV}={OPT!r}: give one optimisation flag, such as -O3 (the default), -O2 "
             "or -O0")
CFLAGS = [OPT]
# what every kernel links: allocation, fail-together errors, build info, topology
COMMON_C = ("hpclab_common.c", "hpclab_topo.c")
OPENMP_FLAG = "-fopenmp"
# a kernel that declares -march=native is compiled for the instruction set of the CPU that
# builds it; HPCLAB_MARCH names another (x86-64-v3, say, for the oldest node of a cluster
# whose login node is newer than its compute nodes), and "none" keeps the compiler's default
MARCH_ENV = "HPCLAB_MARCH"


def march_flag(flag):
    """A declared -march=native with $HPCLAB_MARCH applied: the flag to try, or None."""
    if not flag.startswith("-march="):
        return flag
    chosen = os.environ.get(MARCH_ENV, "").strip()
    if chosen.lower() == "none":
        return None
    return f"-march={chosen}" if chosen else flag


sys.path.insert(0, str(HERE / "src"))
from hpclab.kernels import cpu_isa  # noqa: E402  (pure Python, as is the registry)
from hpclab.kernels.registry import kernels as _declared  # noqa: E402

# the chapters whose kernels are an extension of the package (not the MPI libraries' programs)
DECLARED = {slug: k for slug, k in _declared().items() if k.extension}
# per-kernel flags, used when the compiler accepts them (recorded in build_info.json)
KERNEL_FLAGS = {slug: list(k.cflags) for slug, k in DECLARED.items() if k.cflags}
OPENMP_EXTENSIONS = {f"hpclab.chapters.{slug}.kernels._{slug}" for slug, k in DECLARED.items()
                     if k.openmp}


class BuildError(SystemExit):
    """A build problem the user can fix; printed without a traceback."""

    def __init__(self, message):
        super().__init__("\nhpclab build error: " + message + "\n")


def find_mpicc():
    mpicc = os.environ.get("MPICC") or shutil.which("mpicc")
    if not mpicc:
        raise BuildError(
            "no MPI C compiler wrapper found (looked at $MPICC and for `mpicc` on PATH).\n"
            "  Install one of:\n"
            "    pip install mpich             # MPI from PyPI, inside this environment\n"
            "    apt-get install libmpich-dev  # or libopenmpi-dev (Debian/Ubuntu)\n"
            "    module load <your MPI>        # on a cluster\n"
            "  or point MPICC at the wrapper: MPICC=/path/to/mpicc make setup")
    path = shutil.which(mpicc)
    if not path:
        raise BuildError(f"MPICC={mpicc!r} is not an executable; point it at your mpicc.")
    return path


def try_compile(cmd, source, flags=()):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(source)
        proc = subprocess.run([*cmd, *flags, str(src), "-o", str(Path(tmp) / "probe")],
                              capture_output=True, text=True)
        return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


MPI_PROBE = ("#include <mpi.h>\n"
             "int main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n")
OPENMP_PROBE = "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n"


def check_toolchain(mpicc, need_openmp):
    cmd = [mpicc]
    ok, log = try_compile(cmd, MPI_PROBE)
    if not ok:
        raise BuildError(
            f"{mpicc} cannot compile an MPI program:\n{log}\n"
            "  The wrapper needs a working C compiler underneath: install gcc\n"
            "  (apt-get install gcc, or build-essential) or clang, then run `make setup` again.")
    if need_openmp:
        ok, log = try_compile(cmd, OPENMP_PROBE, [OPENMP_FLAG])
        if not ok:
            raise BuildError(
                f"{mpicc} does not support OpenMP ({OPENMP_FLAG}):\n{log}\n"
                "  With gcc, install libgomp (part of gcc on most systems);\n"
                "  with clang, install libomp (apt-get install libomp-dev, brew install libomp).")


def show_flags(mpicc):
    for flag in ("-show", "--showme"):
        proc = subprocess.run([mpicc, flag], capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    return ""


class MPIBuildExt(build_ext):
    """build_ext that compiles and links every kernel with the MPI wrapper."""

    def finalize_options(self):
        super().finalize_options()
        # the kernels compile side by side, one per core (`-j N` or `parallel` still choose)
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def own_common_sources(self):
        """Give each extension its own copy of the shared C sources.

        Every kernel links the common C files, and an object's path in build_temp follows its
        source's path: compiled side by side, two extensions would write and link the same
        object file at once. A copy per extension (made here, before the parallel part) gives
        each its own object.
        """
        shared = {str(COMMON / name) for name in COMMON_C}
        for ext in self.extensions:
            own = Path(self.build_temp) / "common-sources" / ext.name
            own.mkdir(parents=True, exist_ok=True)
            sources = []
            for src in ext.sources:
                if src in shared:
                    copy = own / Path(src).name
                    shutil.copyfile(src, copy)
                    src = str(copy)
                sources.append(src)
            ext.sources = sources

    def build_extensions(self):
        mpicc = find_mpicc()
        self.own_common_sources()
        need_openmp = any(ext.name in OPENMP_EXTENSIONS for ext in self.extensions)
        check_toolchain(mpicc, need_openmp)
        cc = self.compiler
        for attr in ("compiler", "compiler_so", "compiler_cxx", "linker_so"):
            old = getattr(cc, attr, None)
            if old:
                cc.set_executable(attr, [mpicc] + old[1:])
        self.kernel_flags = {}
        for ext in self.extensions:
            slug = ext.name.rsplit(".", 1)[-1].removeprefix("_")  # chapters.<slug>.kernels._<slug>
            if ext.name in OPENMP_EXTENSIONS:
                ext.extra_compile_args.append(OPENMP_FLAG)
                ext.extra_link_args.append(OPENMP_FLAG)
            for declared in KERNEL_FLAGS.get(slug, []):
                flag = march_flag(declared)
                if flag is None:
                    continue
                ok, _ = try_compile([mpicc], "int main(void) { return 0; }\n", [flag, "-Werror"])
                self.kernel_flags.setdefault(slug, {})[flag] = ok
                if ok:
                    ext.extra_compile_args.append(flag)
        super().build_extensions()
        self.write_build_info(mpicc)

    def write_build_info(self, mpicc):
        info = {"mpicc": mpicc, "mpicc_show": show_flags(mpicc), "cflags": CFLAGS,
                "openmp_flag": OPENMP_FLAG, "kernel_flags": self.kernel_flags,
                "openmp_kernels": sorted(s for s, k in DECLARED.items() if k.openmp),
                # what a kernel built with -march=native may use, checked when it is loaded
                "cpu_isa": sorted(cpu_isa() or ()),
                "python": sys.version.split()[0]}
        # the source tree (editable installs import from it) and the build tree
        for root in {HERE / "src", Path(self.build_lib)}:
            target = root / "hpclab" / "kernels"
            if target.is_dir():
                (target / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")


def extensions():
    import mpi4py
    from Cython.Build import cythonize

    include = [str(COMMON), mpi4py.get_include()]
    common_c = [str(COMMON / name) for name in COMMON_C]
    exts = [Extension("hpclab.kernels.common._common", [str(COMMON / "_common.pyx"), *common_c],
                      include_dirs=include, extra_compile_args=list(CFLAGS))]
    for slug in DECLARED:
        kdir = CHAPTERS_DIR / slug / "kernels"
        ext = Extension(f"hpclab.chapters.{slug}.kernels._{slug}",
                        [str(kdir / f"_{slug}.pyx"), str(kdir / f"{slug}.c"), *common_c],
                        include_dirs=[str(kdir), *include], extra_compile_args=list(CFLAGS))
        exts.append(ext)
    # Cython translates the modules side by side in forked processes; where processes are
    # spawned instead (macOS, newer Pythons), the workers would run this file again
    forks = multiprocessing.get_start_method() == "fork"
    return cythonize(exts, include_path=[str(COMMON), mpi4py.get_include()],
                     compiler_directives={"language_level": 3}, quiet=True,
                     nthreads=(os.cpu_count() or 1) if forks else 0)


setup(ext_modules=extensions(), cmdclass={"build_ext": MPIBuildExt})
