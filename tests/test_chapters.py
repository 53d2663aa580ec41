"""A chapter's sweep is what every MPI rank runs: it loads none of the analysis libraries."""
import sys
import textwrap

import pytest

from hpclab import launch
from hpclab.kernels import registry

ANALYSIS = ("pandas", "scipy", "matplotlib")
PROBE = textwrap.dedent(f"""
    import sys
    from hpclab import cli
    code = cli.main(["run", sys.argv[1], "--profile", "quick", "--out", sys.argv[2], "--quiet",
                     "--impl", sys.argv[3]])
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == 1:
        print("RANK1 LOADED", sorted(m for m in {ANALYSIS!r} if m in sys.modules), flush=True)
    sys.exit(code)
""")


@pytest.mark.slow
@pytest.mark.parametrize("slug", [s for s in registry.chapter_order()
                                  if s in registry.extensions()])
def test_rank_1_of_python_m_hpclab_run_loads_no_analysis_library(slug, tmp_path):
    impls = registry.get(slug).implementations
    impl = "c" if "c" in impls else impls[0]
    r = launch.mpirun([sys.executable, "-c", PROBE, slug, str(tmp_path), impl], n=2,
                      timeout=300, what=f"python -m hpclab run {slug}")
    loaded = [line for line in r.stdout.splitlines() if line.startswith("RANK1 LOADED")]
    assert loaded == ["RANK1 LOADED []"], r.stdout[-3000:] + r.stderr[-2000:]
    assert list(tmp_path.glob(f"{slug}-*.csv")), "rank 0 saved no records"


def test_the_getting_started_table_is_made_from_the_declarations():
    """The page carries the marker, not a hand-kept table; the site's extension puts the
    table there, in the book's order, with the chapters whose records help from ``inputs``."""
    import importlib.util
    import re
    from pathlib import Path
    from types import SimpleNamespace

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("hpclab_site",
                                                  root / "book" / "_ext" / "hpclab_site.py")
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)
    page = (root / "book" / "getting-started.md").read_text()
    assert site.NEEDS_MARKER in page and "| chapter |" not in page
    source = [page]
    site.needs_table(SimpleNamespace(srcdir=str(root)), "book/getting-started", source)
    rows = [line for line in source[0].splitlines() if line.startswith("| ")][1:]
    kernels = registry.kernels()
    order = re.findall(r"file:\s*book/([\w-]+)/index", (root / "_toc.yml").read_text())
    assert sorted(order) == sorted(kernels), "every chapter has its page in the book's order"
    assert [r.split("|")[1].strip() for r in rows] == [kernels[s].title for s in order]
    for slug, k in kernels.items():
        row = next(r for r in rows if f"labs/{slug}/" in r)
        assert k.lab_needs in row
        assert all(kernels[s].title in row for s in k.inputs), (slug, row)


@pytest.mark.parametrize("slug", registry.chapter_order())
def test_a_chapters_analysis_names_its_sweeps_public_names_where_linters_see_them(slug):
    """Pages and labs call ``analysis.run`` and the like: each of the sweep's public names is
    imported into the analysis module by name (no ``__getattr__`` that linters cannot see)."""
    import importlib
    import inspect

    sweep = importlib.import_module(f"hpclab.chapters.{slug}.sweep")
    analysis = importlib.import_module(f"hpclab.chapters.{slug}.analysis")
    assert not hasattr(analysis, "__getattr__")
    public = [n for n, v in vars(sweep).items() if not n.startswith("_")
              and not inspect.ismodule(v) and getattr(v, "__module__", sweep.__name__)
              in (sweep.__name__, None, "builtins")]
    missing = [n for n in public if n not in vars(analysis)]
    assert not missing, f"{slug}/analysis.py does not import {missing} from its sweep"


def test_the_readmes_list_of_chapters_is_made_from_the_declarations(tmp_path):
    """README's chapters come from each declaration's ``teaches``, in the book's order,
    between markers that ``make readme`` rewrites: a chapter added or changed without
    ``make readme`` fails here."""
    import shutil
    from pathlib import Path

    from hpclab import chapters

    root = Path(__file__).resolve().parents[1]
    for name in ("README.md", "_toc.yml"):
        shutil.copy(root / name, tmp_path / name)
    assert not chapters.write_readme(tmp_path / "README.md"), \
        "README.md's list of chapters is not the declarations': run make readme"
    kernels = registry.kernels()
    text = (root / "README.md").read_text()
    listed = text.split(chapters.README_BEGIN, 1)[1].split(chapters.README_END, 1)[0]
    positions = [listed.index(f"**{kernels[s].title}**") for s in chapters.book_order(root)]
    assert positions == sorted(positions) and len(positions) == len(kernels)
    assert all(k.teaches for k in kernels.values()), "every chapter says what it teaches"
    # and the copy does change when a declaration does
    (tmp_path / "README.md").write_text(text.replace("Hockney models", "something else"))
    assert chapters.write_readme(tmp_path / "README.md")


def test_a_chapters_shared_simulations_run_into_the_cache_a_sandbox_reads():
    """What a lab simulates alike for every student runs once (the grader's step) and leaves
    its runs in this account's cache (the account's own: the grading round trip then finds
    them there, and the half minute is not paid twice); a chapter without any says so, an
    unknown one is refused."""
    from hpclab import chapters, simulate

    with pytest.raises(ValueError, match="unknown kernel"):
        chapters.shared_simulations("no-such-chapter")
    with_hook = [s for s in registry.chapter_order()
                 if hasattr(__import__(f"hpclab.chapters.{s}", fromlist=["x"]),
                            "shared_simulations")]
    without = [s for s in registry.chapter_order() if s not in with_hook]
    assert with_hook and without
    assert chapters.shared_simulations(without[0]) is False
    if not simulate.available():
        pytest.skip(simulate.INSTALL_HINT)
    assert chapters.shared_simulations(with_hook[0]) is True
    assert list((simulate._cache_dir() / "outputs").glob("*.out")), "nothing was kept"
