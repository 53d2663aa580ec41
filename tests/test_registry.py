"""One declaration per kernel, read by everything else: build, experiments, CLI, profiles, tests."""
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

from hpclab import chapters, profiles
from hpclab.kernels import registry

ROOT = Path(__file__).resolve().parents[1]
SLUGS = registry.slugs()


def test_the_three_chapters_are_declared_in_book_order():
    assert registry.chapter_order()[:3] == ("pingpong", "ring", "stream")
    declared = (ROOT / "src/hpclab/chapters").glob("*/declaration.py")
    assert set(SLUGS) == {p.parent.name for p in declared}


@pytest.mark.parametrize("slug", registry.extensions())
def test_the_generated_api_follows_the_declaration(slug):
    kernel = registry.get(slug)
    module = importlib.import_module(f"hpclab.chapters.{slug}.kernels")
    assert tuple(module.RUNNERS) == kernel.implementations
    for impl, run in module.RUNNERS.items():
        assert run.__name__ == f"run_{impl}" and getattr(module, f"run_{impl}") is run
        names = list(inspect.signature(run).parameters)
        params = [p.name for p in kernel.params]
        assert names == (["comm"] + params if kernel.comm == "first" else params + ["comm"])
        doc = run.__doc__
        assert "Parameters\n----------" in doc and "Returns\n-------" in doc
        for p in kernel.params:
            assert f"\n{p.name} : " in doc, f"{slug}.run_{impl} does not document {p.name}"
        for m in kernel.metrics:
            assert m.name in doc
    assert callable(module.check_cases) and callable(module.inject_fault)
    assert importlib.import_module(f"hpclab.chapters.{slug}.analysis").KERNEL is kernel


def test_a_chapter_of_its_own_programs_is_not_built_checked_or_run_as_an_extension():
    """The MPI libraries' program is compiled by each library's mpicc: setup.py, the
    correctness matrix and ``python -m hpclab check`` leave it out; ``python -m hpclab run``
    hands it to the chapter's own sweep."""
    from hpclab import cli

    assert "mpilibs" in SLUGS and "mpilibs" not in registry.extensions()
    assert set(registry.extensions()) == {s for s in SLUGS if registry.get(s).extension}
    assert not (ROOT / "src/hpclab/chapters/mpilibs/kernels/_mpilibs.pyx").exists()
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["check", "mpilibs"])
    calls = []
    sweep = chapters.sweep("mpilibs")
    original = sweep.main
    try:
        sweep.main = lambda argv: calls.append(argv) or 0
        assert cli.main(["run", "mpilibs", "--profile", "quick", "--out", "x"]) == 0
    finally:
        sweep.main = original
    assert calls == [["--profile", "quick", "--out", "x", "--no-setup"]]


def test_a_chapter_of_its_own_programs_refuses_to_run_under_a_launcher(monkeypatch, capsys):
    from hpclab import cli

    monkeypatch.setenv("PMI_RANK", "0")
    assert cli.main(["run", "mpilibs", "--profile", "quick", "--out", "x"]) == 2
    assert "without mpiexec or srun" in capsys.readouterr().err


def test_declared_limits_match_the_compiled_ones():
    from hpclab.chapters.stream import kernels as stream

    assert registry.get("stream").param("ntimes").high == stream._stream.MAX_NTIMES


@pytest.mark.parametrize("slug", SLUGS)
def test_every_profile_of_every_kernel_is_complete(slug):
    assert registry.get(slug).check_profiles() == []
    for p in profiles.PROFILES:
        assert profiles.timeout(slug, p) > 0


def test_profile_problems_are_reported():
    bad = registry.Kernel(slug="x", title="X", summary="x", implementations=("c",), params=(),
                          metrics=(), profiles={"quick": {"timeout": 10}, "standard": {},
                                                "full": {"timeout": 5, "n": 1}})
    problems = " | ".join(bad.check_profiles())
    assert "standard has no positive timeout" in problems
    assert "quick profile allows more time than full" in problems and "has the keys" in problems


def test_parameter_checks_say_what_is_allowed():
    p = registry.Param("nbytes", "int", "bytes", low=4, high=64, multiple_of=4, note="int32")
    assert p.check(8) == 8
    with pytest.raises(ValueError, match=r"multiple of 4 between 4 and 64 \(int32\), got 6"):
        p.check(6)
    with pytest.raises(TypeError, match="must be an integer, got 4.0"):
        p.check(4.0)
    with pytest.raises(TypeError, match="must be an integer, got True"):
        p.check(True)
    c = registry.Param("variant", "choice", "how", choices=("a", "b"))
    with pytest.raises(ValueError, match="unknown ring variant 'z': choose one of a, b"):
        c.check("z", "ring")


def test_unknown_names_list_the_known_ones():
    with pytest.raises(ValueError, match="choose one of " + ", ".join(registry.slugs())):
        registry.get("nope")
    with pytest.raises(ValueError, match="unknown kernel or experiment"):
        chapters.analysis("nope")


def test_setup_py_builds_what_the_declarations_say():
    code = ("import sys, runpy; sys.argv = ['setup.py', '--version']; "
            "ns = runpy.run_path('setup.py'); "
            "print(sorted(ns['OPENMP_EXTENSIONS'])); print(ns['KERNEL_FLAGS'])")
    import subprocess

    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    want = sorted(f"hpclab.chapters.{s}.kernels._{s}" for s in SLUGS if registry.get(s).openmp)
    assert str(want) in r.stdout
    assert str({s: list(registry.get(s).cflags) for s in SLUGS if registry.get(s).cflags}) \
        in r.stdout


SHARED_FILES = ["setup.py", "Makefile", "src/hpclab/cli.py",
                "src/hpclab/profiles.py", "src/hpclab/check.py", "src/hpclab/kernels/api.py",
                "src/hpclab/kernels/registry.py", "src/hpclab/exercises/__init__.py",
                "src/hpclab/bench.py", "src/hpclab/tables.py", "src/hpclab/stats.py",
                "src/hpclab/sweeps.py", "src/hpclab/chapters/__init__.py",
                "src/hpclab/models.py", "src/hpclab/plots.py",
                "tests/test_kernels.py",
                "tests/test_notebooks.py", "tests/test_book.py", "tests/test_packaging.py"]


@pytest.mark.parametrize("path", SHARED_FILES)
def test_no_shared_file_names_a_chapter(path):
    text = (ROOT / path).read_text().lower()
    for slug in SLUGS:
        assert not re.search(rf"\b{slug}\b", text), f"{path} names the chapter {slug!r}"


# a chapter's own folders; everything else is shared
OWN = re.compile(r"(src/hpclab/chapters|book|labs|solutions)/[a-z]+/|tests/")
# names in shared code that are not the chapters: nbformat's output type "stream"
NOT_A_CHAPTER = {'"stream"'}
# still per-chapter, to move into the chapters (issue: a chapter is one folder): none
STILL_SHARED: set[str] = set()


def _code_words(source):
    """(line, token) of the names and strings of Python ``source`` that are code: not its
    comments, not its docstrings."""
    import io
    import tokenize

    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL)]
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.STRING:
            alone = (i == 0 or tokens[i - 1].type in (tokenize.NEWLINE, tokenize.INDENT,
                                                       tokenize.DEDENT)) \
                and i + 1 < len(tokens) and tokens[i + 1].type == tokenize.NEWLINE
            if not alone and tok.string not in NOT_A_CHAPTER:
                yield tok.start[0], tok.string
        elif tok.type == getattr(tokenize, "FSTRING_MIDDLE", None):  # f-strings, Python 3.12+
            yield tok.start[0], tok.string
        elif tok.type == tokenize.NAME:
            yield tok.start[0], tok.string.replace("_", " ")


def test_no_shared_python_code_names_a_chapter():
    """Every tracked Python file outside a chapter's folders (and tests/): no name or string
    of its code names a chapter (its comments and docstrings may, as examples)."""
    import subprocess

    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    shared = [f for f in files if not OWN.match(f) and f not in STILL_SHARED]
    assert "src/hpclab/models.py" in shared and "autograder/grade.py" in shared
    found = []
    for path in shared:
        for line, word in _code_words((ROOT / path).read_text()):
            found += [f"{path}:{line}: {word[:60]}" for slug in SLUGS
                      if re.search(rf"\b{slug}\b", word, re.IGNORECASE)]
    assert not found, "shared code names a chapter:\n" + "\n".join(found)


def test_the_guard_finds_a_chapter_in_code_not_in_docstrings():
    source = ('"""Uses the jacobi chapter."""\n# jacobi too\nX = 1\n'
              'def f():\n    """jacobi"""\n    return get("jacobi"), RING_MODEL\n')
    words = [w for _, w in _code_words(source)]
    assert '"jacobi"' in words and "RING MODEL" in words
    assert not any("Uses" in w or w == '"""jacobi"""' for w in words)
