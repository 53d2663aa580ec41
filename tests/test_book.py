"""The book builds with warnings as errors, shows its figures, and leaks no solutions."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    env = {**os.environ, "HPCLAB_PROFILE": "quick", "HPCLAB_RESULTS_DIR": str(out / "results")}
    r = subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", "--all",
                        "-W", "-n", "--keep-going", "--path-output", str(out), str(ROOT)],
                       capture_output=True, text=True, env=env, timeout=1200)
    return out / "_build" / "html", r


def test_book_builds_without_warnings(book):
    html, r = book
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert (html / "index.html").exists()


def test_pingpong_chapter_has_its_figures_numbers_and_lab(book):
    html, _ = book
    page = (html / "book" / "pingpong" / "index.html").read_text()
    assert page.count("<img") >= 4
    assert "Measured on" in page and "MPICH" in page
    assert "report 004" in page and "report 001" in page and "report 002" in page
    assert "pingpong.ipynb" in page
    assert "{glue" not in page and "glue:text" not in page
    assert list((html / "_downloads").rglob("pingpong.ipynb"))


def test_book_run_saved_its_records(book):
    html, _ = book
    results = html.parents[1] / "results"
    assert list(results.glob("pingpong-*.csv")) and list(results.glob("pingpong-*.json"))


def test_no_solution_or_hidden_test_text_in_the_build(book):
    html, _ = book
    for path in html.parent.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".ipynb", ".md", ".txt", ".js", ".py"}:
            text = path.read_text(errors="replace")
            for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
                assert marker not in text, f"{marker} in {path}"
