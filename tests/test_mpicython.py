"""%%mpi_cython: a notebook cell of Cython with mpi4py's cimports, compiled once in the
notebook's process and called on the MPI engines."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpclab import mpicython

CELL = textwrap.dedent('''\
    # cython: language_level=3
    from mpi4py cimport MPI
    from mpi4py.libmpi cimport MPI_Allreduce, MPI_Comm, MPI_INT, MPI_SUM

    cdef int _twice(int x) noexcept nogil:
        return 2 * x

    def rank_sum(MPI.Comm comm, int k):
        """The sum over ranks of (rank + k), by MPI_Allreduce on the C handle."""
        cdef int mine = comm.Get_rank() + k, total = 0
        MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, comm.ob_mpi)
        return total

    cpdef int doubled(int x):
        return _twice(x)

    def fails(int k):
        raise ValueError(f"raised in the cell with {k}")
    ''')


def test_the_functions_of_a_cell_are_its_top_level_def_and_cpdef():
    assert mpicython.function_names(CELL) == ["rank_sum", "doubled", "fails"]
    assert mpicython.function_names("cdef double f(double x):\n    return x\n") == []
    assert mpicython.function_names("cpdef unsigned long f(int n):\n    pass\n"
                                    "def g():\n    def inner():\n        pass\n") == ["f", "g"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, monkeypatch_module):
    where = tmp_path_factory.mktemp("cy")
    monkeypatch_module.setattr(mpicython, "build_dir", lambda create=True: where)
    return mpicython.functions(CELL)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_a_magic_line_asks_for_an_optimisation_level_and_nothing_else():
    assert mpicython.cell_flags("") == ["-O0"]
    assert mpicython.cell_flags(" -O3 -march=native ") == ["-O3", "-march=native"]
    assert mpicython.cell_flags("-march=native") == ["-O0", "-march=native"]
    with pytest.raises(mpicython.CythonCellError, match="does not take -ffast-math"):
        mpicython.cell_flags("-O3 -ffast-math")
    with pytest.raises(mpicython.CythonCellError, match="2 optimisation levels"):
        mpicython.cell_flags("-O2 -O3")


def test_native_code_follows_hpclab_march_as_the_kernels_do(monkeypatch):
    monkeypatch.delenv("HPCLAB_MARCH", raising=False)
    monkeypatch.delenv("HPCLAB_OPT", raising=False)
    assert mpicython._for_this_cpu(["-O3", "-march=native"]) == ["-O3", "-march=native"]
    monkeypatch.setenv("HPCLAB_MARCH", "x86-64-v3")
    assert mpicython._for_this_cpu(["-O3", "-march=native"]) == ["-O3", "-march=x86-64-v3"]
    assert mpicython._for_this_cpu(["-O0"]) == ["-O0"]
    monkeypatch.setenv("HPCLAB_MARCH", "none")
    assert mpicython._for_this_cpu(["-O3", "-march=native"]) == ["-O3"]
    monkeypatch.setenv("HPCLAB_MARCH", "x86; rm")
    with pytest.raises(mpicython.CythonCellError, match="not a CPU target"):
        mpicython._for_this_cpu(["-march=native"])


def test_a_cells_optimisation_follows_hpclab_opt_as_the_kernels_do(monkeypatch):
    """Where results are checked and nothing is timed (the wrong answers' test, say),
    HPCLAB_OPT=-O0 builds a cell that asks for -O3 without the optimiser, as setup.py builds
    the kernels."""
    monkeypatch.delenv("HPCLAB_MARCH", raising=False)
    monkeypatch.setenv("HPCLAB_OPT", "-O0")
    assert mpicython._for_this_cpu(["-O3", "-march=native"]) == ["-O0", "-march=native"]
    assert mpicython._for_this_cpu(["-O0"]) == ["-O0"]
    monkeypatch.setenv("HPCLAB_OPT", "-O9")
    with pytest.raises(mpicython.CythonCellError, match="HPCLAB_OPT='-O9'"):
        mpicython._for_this_cpu(["-O3"])
    monkeypatch.setenv("HPCLAB_OPT", "")
    assert mpicython._for_this_cpu(["-O3"]) == ["-O3"]


def test_a_cell_compiles_once_and_its_functions_run_on_every_engine(compiled):
    from hpclab import launch

    assert set(compiled) == {"rank_sum", "doubled", "fails"}
    first = compiled["rank_sum"]
    assert mpicython.compile_cell(CELL) == (first.module, Path(first.path))  # found, not built
    with launch.cluster(n=2, timeout=60, what="mpi_cython test") as engines:
        # 0 + 10 and 1 + 10 summed over the two ranks, computed in the compiled module
        assert engines.run(_call_on_world, first, 10, timeout=30) == [21, 21]
        assert engines.run(_call, compiled["doubled"], 4, timeout=30) == [8, 8]
        # an error raised in the cell shows the cell's line (line 1 is the magic's)
        with pytest.raises(ValueError) as err:
            engines.run(_call, compiled["fails"], 3, timeout=30, what="a failing cell")
        line = CELL.splitlines().index('    raise ValueError(f"raised in the cell with {k}")') + 2
        assert f'File "your %%mpi_cython cell", line {line}, in fails' in str(err.value), err.value
        assert 'raise ValueError(f"raised in the cell with {k}")' in str(err.value), err.value


def _call_on_world(func, k):
    from mpi4py import MPI

    return func(MPI.COMM_WORLD, k)


def _call(func, *args):
    return func(*args)


def test_compiling_does_not_start_mpi_in_the_notebooks_process(compiled):
    where = str(Path(compiled["rank_sum"].path).parent)  # built there: the compiler is asked
    code = textwrap.dedent(f'''
        import sys
        from hpclab import mpicython
        mpicython.build_dir = lambda create=True: __import__("pathlib").Path({where!r})
        made = mpicython.functions({CELL!r})
        print(sorted(made), "mpi4py.MPI" in sys.modules)
        ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['doubled',", "'fails',", "'rank_sum']", "False"], \
        done.stdout


def test_a_compile_error_names_the_cells_own_line(tmp_path, monkeypatch):
    monkeypatch.setattr(mpicython, "build_dir", lambda create=True: tmp_path)
    # the cell's line 1 is its magic; the misspelt call is on line 5 of the cell
    source = "from mpi4py cimport MPI\n\ndef f(MPI.Comm comm):\n    MPI_Barier(comm.ob_mpi)\n"
    with pytest.raises(mpicython.CythonCellError) as err:
        mpicython.functions(source)
    text = str(err.value)
    assert "Cython rejected the cell" in text and "cell:5:" in text, text
    assert "MPI_Barier" in text and str(tmp_path) not in text, text
    assert not list(tmp_path.glob("*.so")), "a cell that did not compile left a library"


def test_two_processes_compiling_one_cell_at_once_both_get_a_whole_library(compiled):
    """Notebooks and graders of one user share the build folder: each build runs in a folder
    of its own and moves its results in whole, so neither breaks the other's."""
    where = Path(compiled["rank_sum"].path).parent / "race"
    where.mkdir()
    source = CELL + "\ndef raced():\n    return 1\n"
    code = textwrap.dedent(f'''
        from pathlib import Path
        from hpclab import mpicython
        mpicython.build_dir = lambda create=True: Path({str(where)!r})
        print(mpicython.compile_cell({source!r})[1])
        ''')
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    libs = {o[0].strip() for o in outs}
    assert len(libs) == 1 and Path(libs.pop()).exists()
    assert sorted(p.suffix for p in where.iterdir()) == [".pyx", ".so"], list(where.iterdir())


LOOP = """
def loop(MPI.Comm comm, unsigned char[::1] s, unsigned char[::1] r, int n):
    cdef MPI_Comm c = comm.ob_mpi
    with nogil:
        for i in range(n):
            MPI_Send(&s[0], 1, MPI_BYTE, 1, 0, c)
            MPI_Recv(&r[0], 1, MPI_BYTE, 1, 0, c, MPI_STATUS_IGNORE)
    return 0.0
"""


@pytest.mark.parametrize("source, says", [
    (LOOP, None),
    (LOOP.replace("with nogil:", "if True:"), "MPI_Send(&s[0], 1, MPI_BYTE, 1, 0, c) is not"),
    (LOOP.replace("            MPI_Recv", "            with gil:\n                MPI_Recv"),
     "MPI_Recv(&r[0], 1, MPI_BYTE, 1, 0, c, MPI_STATUS_IGNORE) is not"),
    ("cdef double loop(int n) noexcept nogil:\n    MPI_Send(x)\n", None),
    ("def other():\n    MPI_Send(x)\n" + LOOP, None),  # another function's calls are not loop's
    (LOOP.replace("    cdef MPI_Comm", '    """MPI_Send(...) then\n\n    MPI_Recv(...)."""\n'
                  '    x = "MPI_Send(#"\n    cdef MPI_Comm'), None),  # strings are not calls
    (LOOP.replace("with nogil:", "with nogil, parallel():"), None),
    ("cpdef int loop(int n) except? -1 nogil:\n    MPI_Send(x)\n", None),
])
def test_a_loops_mpi_calls_must_be_inside_nogil(source, says):
    f = mpicython.EngineFunction("m", "/nonexistent.so", "loop", source)
    problem = mpicython.nogil_problem(f)
    assert problem is None if says is None else says in problem and "with nogil:" in problem
    assert mpicython.nogil_problem(mpicython.EngineFunction("m", "/x.so", "loop")) is None
