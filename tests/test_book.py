"""The book builds with warnings as errors, shows its figures, and leaks no solutions.

The build itself is the session fixture ``book`` (conftest.py); chapter-specific
checks of a page live in that chapter's test file.
"""
import pytest

from hpclab.kernels import registry

CHAPTERS = registry.chapter_order()


def _unmeasured(html, slug):
    """Skip a check of what chapter ``slug``'s page measured when the chapter cannot measure
    here (:func:`hpclab.chapters.unready`), once its page is found to say so."""
    from hpclab import chapters
    from readiness import skip_if_unready

    why = chapters.unready(slug)
    if why:
        page = (html / "book" / slug / "index.html").read_text()
        assert "Nothing was measured on this machine" in page, f"{slug}: {why}, and the page " \
            "does not say that nothing was measured"
        skip_if_unready(slug, f"what the {slug} page measured", why)


def test_book_builds_without_warnings(book):
    html, r = book
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert (html / "index.html").exists()


def test_getting_started_lists_what_each_chapter_needs_from_the_declarations(book):
    """The table is made from the declarations at build time (no hand-kept list)."""
    from hpclab.kernels import registry

    html, _ = book
    page = (html / "book" / "getting-started.html").read_text()
    for slug, k in registry.kernels().items():
        assert f"labs/{slug}/{slug}.ipynb" in page and k.lab_needs.split(";")[0] in page, slug
    assert "made from the chapters" not in page, "the marker was left in the page"


@pytest.mark.parametrize("slug", CHAPTERS)
def test_every_chapter_has_figures_a_machine_line_and_its_lab(book, slug):
    html, _ = book
    _unmeasured(html, slug)
    page = (html / "book" / slug / "index.html").read_text()
    assert page.count("<img") >= 2
    assert "Measured on" in page
    assert f"{slug}.ipynb" in page
    assert "{glue" not in page and "glue:text" not in page
    assert list((html / "_downloads").rglob(f"{slug}.ipynb"))


@pytest.mark.parametrize("slug", CHAPTERS)
def test_book_run_saved_its_records(book, slug):
    html, _ = book
    _unmeasured(html, slug)
    results = html.parents[1] / "results"
    assert list(results.glob(f"{slug}-*.csv")) and list(results.glob(f"{slug}-*.json"))


@pytest.mark.parametrize("slug", CHAPTERS)
def test_every_chapter_offers_its_data_for_download(book, root, slug):
    """The build machine's records and metadata, and every reference dataset the page loads."""
    import re

    html, _ = book
    downloads = {p.name for p in (html / "_downloads").rglob("*") if p.is_file()}
    assert {f"{slug}-records.csv", f"{slug}-records.json"} <= downloads
    text = (root / "book" / slug / "index.md").read_text()
    for name in set(re.findall(r'reference\.load\("(\w+)"\)', text)):
        assert f"{name}.csv" in downloads, f"{slug} loads {name} but does not offer it"
    _unmeasured(html, slug)
    from hpclab import records

    df, meta = records.load(root / "book" / slug / "data" / f"{slug}-records.csv")
    assert set(df["experiment"]) == {slug} and meta["experiment"] == slug


def test_no_solution_or_hidden_test_text_in_the_build(book):
    html, _ = book
    for path in html.parent.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".ipynb", ".md", ".txt", ".js", ".py"}:
            text = path.read_text(errors="replace")
            for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
                assert marker not in text, f"{marker} in {path}"


def _page_text(path):
    """The words a reader sees on a built page: no scripts, styles or tags."""
    import html as html_lib
    import re

    text = re.sub(r"<script.*?</script>|<style.*?</style>", "", path.read_text(), flags=re.S)
    return re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", " ", text)))


def test_no_page_quotes_an_interval_below_zero(book):
    """Every quantity a page quotes with an interval (a latency, a bandwidth, a ratio, a
    serial fraction) lies at zero or above: an interval is cut to its domain and said not
    to determine the quantity (hpclab.stats.estimate_words), never printed below zero."""
    import re

    html, _ = book
    for path in sorted((html / "book").rglob("*.html")):
        text = _page_text(path)
        for m in re.finditer(r"interval\s+[-\u2212]\d", text):
            raise AssertionError(f"{path.relative_to(html)}: {text[m.start():m.start() + 200]}")


@pytest.mark.parametrize("slug", CHAPTERS)
def test_a_page_leaves_quoting_an_interval_to_the_package(slug, root):
    """A page that wrote '95% interval {low} to {high}' from two glued numbers would print
    whatever the run gave, outside the quantity's domain too: intervals reach a page as the
    words of hpclab.stats.estimate_words (one ``*_words`` value), which know the domain."""
    import re

    text = (root / "book" / slug / "index.md").read_text()
    own = re.findall(r"interval\s+\{glue:text\}`[^`]+`\s+to\s+\{glue", text)
    own += re.findall(r"\(\{glue:text\}`\w+_lo\w*(?::[^`]*)?`\s+to\s+\{glue:text\}`\w+_hi", text)
    assert not own, f"{slug} formats an interval itself: {own}"


@pytest.mark.parametrize("slug", CHAPTERS)
def test_a_page_types_no_fact_of_the_build_machine(slug, root):
    """What the build machine has (cores, sockets, nodes) and so what it cannot show comes
    from the run's machine description (hpclab.machine.cannot_show), never typed: a page
    built elsewhere would state another machine's facts."""
    import re

    text = (root / "book" / slug / "index.md").read_text()
    typed = re.findall(r"[Tt]his\s+machine\s+has\s+(?:[^.]*?\b(?:one|two)\s+(?:sockets?|nodes?|"
                       r"cores?)\b|\d)[^.]*", text)
    typed += re.findall(r"[Ww]hat\s+(?:one|two|three|four)\s+cores\s+can", text)
    typed += re.findall(r"with\s+(?:one|two)\s+degrees?\s+of\s+freedom", text)
    assert not typed, f"{slug}: {typed}"


def test_no_table_cell_is_cut_short(book):
    """pandas cuts a text cell longer than its display width to '...': a note or a name
    a reader cannot finish is no note."""
    import re

    html, _ = book
    for path in sorted((html / "book").rglob("*.html")):
        cut = re.findall(r"<td>([^<]*\.\.\.)</td>", path.read_text())
        assert not cut, f"{path.relative_to(html)}: {cut[:3]}"


def test_every_page_links_to_the_repository_when_its_address_is_known(book, repository_url):
    html, _ = book
    for path in sorted((html / "book").rglob("*.html")):
        assert f'href="{repository_url}"' in path.read_text(), path.relative_to(html)


def test_a_remote_gives_the_repository_web_address(root):
    import importlib.util

    spec = importlib.util.spec_from_file_location("hpclab_site",
                                                  root / "book" / "_ext" / "hpclab_site.py")
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)
    want = "https://example.org/group/lab"
    for remote in ("https://example.org/group/lab.git", "https://user@example.org/group/lab",
                   "git@example.org:group/lab.git", "ssh://git@example.org/group/lab.git"):
        assert site.web_address(remote) == want, remote
    for remote in ("/work/main", "file:///srv/lab.git", "", None):
        assert site.web_address(remote) is None, remote


def _code_and_prose(text):
    """(code lines, prose lines) of a page, blank lines not counted: the lines inside code
    cells, and those outside any fenced block (front matter, the options of directives
    such as literalinclude and a cell's YAML options, its alt text say, are neither)."""
    body = text.split("---", 2)[2] if text.startswith("---") else text
    code = prose = 0
    fence = None  # None outside a block, else "code" or "other"
    options = False  # inside a code cell's --- YAML options ---
    first = False  # the line after a code cell's fence
    for line in body.splitlines():
        if line.startswith("```"):
            if fence is None:
                fence = "code" if line.startswith("```{code-cell}") else "other"
                first = fence == "code"
            elif line.strip() == "```":
                fence = None
            continue
        if fence == "code" and line.strip() == "---" and (first or options):
            options, first = not options, False
            continue
        first = False
        if options or not line.strip() or line.startswith(":"):
            continue
        if fence == "code":
            code += 1
        elif fence is None:
            prose += 1
    return code, prose


def code_cells(text):
    """The source of every code cell of a page."""
    import re

    return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", text, flags=re.S)


@pytest.mark.parametrize("slug", CHAPTERS)
def test_a_page_is_prose_and_short_calls_into_the_package(slug, root):
    text = (root / "book" / slug / "index.md").read_text()
    cells = "\n".join(code_cells(text))
    assert "matplotlib" not in cells, "figures come from hpclab.plots"
    assert "def " not in cells, "helpers belong in the package, not on a page"
    code, prose = _code_and_prose(text)
    assert code * 2 <= prose, f"{slug}: {code} lines of code against {prose} of prose"
