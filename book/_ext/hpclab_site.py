"""Small fixes of the generated site, as a Sphinx extension (see _config.yml).

* An inline script that a page carries twice is written once. Jupyter Book 1 registers the
  configuration snippets of sphinx-thebe and sphinx-togglebutton twice, and the second copy of
  ``const THEBE_JS_URL = ...`` fails in the browser ("Identifier 'THEBE_JS_URL' has already
  been declared"). The pages are fixed after the build, when every handler has added its
  scripts.
"""
import re
from pathlib import Path

INLINE_SCRIPT = re.compile(r"^\s*<script>[^\n]*</script>\s*$")


def without_repeated_scripts(text):
    """The page with every repeated one-line inline <script> after its first removed."""
    seen, out = set(), []
    for line in text.splitlines(keepends=True):
        if INLINE_SCRIPT.match(line):
            key = line.strip()
            if key in seen:
                continue
            seen.add(key)
        out.append(line)
    return "".join(out)


def dedupe_pages(app, exc):
    if exc is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = without_repeated_scripts(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def setup(app):
    app.connect("build-finished", dedupe_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
