"""The built site in a real browser (headless Chromium through Playwright), every page at
1280 px and at 400 px, offline: no console error, no request that leaves the machine, every
image loaded and described by its alt text, no horizontal overflow on a phone (display
equations and printed text fit the column; a wider table scrolls inside its frame), mathematics
rendered (no raw TeX left), every internal link resolves, no solution text. Screenshots go to
``$HPCLAB_SCREENSHOTS`` (default /tmp/hpclab-screenshots)."""
import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from hpclab import plots

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTHS = (1280, 400)
MIN_TEXT_PX = 9  # CSS px: the least a reader should have to read in a figure

playwright = pytest.importorskip("playwright.sync_api",
                                 reason="Playwright is not installed (pip install playwright)")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM, reason="no chromium: apt-get install chromium "
                                 "(Debian), or see the README")]

PAGE_STATE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  const main = document.querySelector('main') || document.body;
  const imgs = [...main.querySelectorAll('img')];
  return {
    images: imgs.map(i => ({src: i.getAttribute('src'), alt: i.getAttribute('alt') || '',
                            loaded: i.complete && i.naturalWidth > 0,
                            shown: i.getBoundingClientRect().width, natural: i.naturalWidth})),
    overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    text: main.innerText,
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
    column: (main.querySelector('section') || main).clientWidth,
    // display equations and printed text (citations, machine lines) must fit the column
    wide_math: [...main.querySelectorAll('mjx-container[display="true"]')]
      .filter(m => m.scrollWidth > m.clientWidth + 1)
      .map(m => m.textContent.slice(0, 60)),
    wide_text: [...main.querySelectorAll('div.output.stream pre, div.output.text_plain pre')]
      .filter(p => p.scrollWidth > p.clientWidth + 1)
      .map(p => p.innerText.slice(0, 60)),
    // a table wider than the column must sit in a frame that scrolls, never be cut off
    cut_tables: [...main.querySelectorAll('table')].filter(t => {
      const column = (main.querySelector('section') || main).clientWidth;
      if (t.getBoundingClientRect().width <= column + 1)
        return false;
      for (let e = t.parentElement; e && e !== main; e = e.parentElement) {
        const o = getComputedStyle(e).overflowX;
        if (o === 'auto' || o === 'scroll') return false;
      }
      return true;
    }).map(t => t.innerText.slice(0, 60)),
  };
}"""


def _pages(html):
    """Every page of the site (not the search page, the index, or a bare redirect)."""
    skip = {"search.html", "genindex.html"}
    return sorted(p for p in html.rglob("*.html")
                  if not {"_static", "_sources", "_downloads"} & set(p.parts)
                  and p.name not in skip
                  and 'http-equiv="refresh"' not in p.read_text(errors="replace").lower())


def _shots():
    folder = Path(os.environ.get("HPCLAB_SCREENSHOTS") or "/tmp/hpclab-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _broken_links(page_path, links):
    broken = []
    for href in links:
        url = urlparse(href)
        if url.scheme or href.startswith(("#", "mailto:")):
            continue
        target = (page_path.parent / unquote(url.path)).resolve() if url.path else page_path
        if not target.exists():
            broken.append(href)
    return broken


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM,
                               args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        yield b
        b.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_reads_well_offline(book, browser, width):
    html, build = book
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    pages = _pages(html)
    assert len(pages) >= 5
    problems = []
    context = browser.new_context(viewport={"width": width, "height": 900})
    for path in pages:
        name = str(path.relative_to(html))
        page = context.new_page()
        errors, outside = [], []
        page.on("console", lambda m, errors=errors:
                errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))

        def route(r, outside=outside):
            if r.request.url.startswith(("file:", "data:", "blob:")):
                r.continue_()
            else:  # the site must not need the network
                outside.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.goto(path.as_uri(), wait_until="load")
        state = page.evaluate(PAGE_STATE)
        page.screenshot(path=str(_shots() / f"site-{name.replace('/', '-')}-{width}.png"),
                        full_page=True)
        page.close()
        for text in errors:
            problems.append(f"{name} at {width} px: console error {text!r}")
        for url in outside:
            problems.append(f"{name}: asks the network for {url}")
        for img in state["images"]:
            if not img["loaded"]:
                problems.append(f"{name}: image {img['src']} did not load")
            alt = img["alt"].strip()
            if len(alt) < 20 or alt.endswith((".png", ".svg", ".jpg")) or "_images/" in alt:
                problems.append(f"{name}: image {img['src']} has no real alt text ({alt!r})")
            if img["loaded"] and img["natural"]:
                # the smallest text of a figure (plots.MIN_PT at its dpi) as the reader sees it
                px = plots.MIN_PT * plots.RC["figure.dpi"] / 72 * img["shown"] / img["natural"]
                if px < MIN_TEXT_PX:
                    problems.append(f"{name} at {width} px: figure {img['src']} is shown at "
                                    f"{img['shown']:.0f} of its {img['natural']} px, so its "
                                    f"smallest text is {px:.1f} px (at least {MIN_TEXT_PX})")
        if width <= 400 and state["overflow"] > 1:
            problems.append(f"{name}: {state['overflow']} px wider than a {width} px screen")
        for what in ("wide_math", "wide_text"):
            problems += [f"{name} at {width} px: {what.replace('wide_', '')} wider than its "
                         f"{state['column']} px column: {x!r}" for x in state[what]]
        problems += [f"{name} at {width} px: a table wider than the column, cut off with no "
                     f"frame to scroll: {x!r}" for x in state["cut_tables"]]
        for raw in ("\\(", "\\[", "$$", "\\frac"):
            if raw in state["text"]:
                problems.append(f"{name}: raw TeX {raw!r} left in the text")
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            if marker in state["text"]:
                problems.append(f"{name}: solution or hidden-test text ({marker})")
        problems += [f"{name}: broken link {href}" for href in _broken_links(path, state["links"])]
    context.close()
    assert not problems, "\n".join(problems)
