"""Small fixes of the generated site, as a Sphinx extension (see _config.yml).

* An inline script that a page carries twice is written once. Jupyter Book 1 registers the
  configuration snippets of sphinx-thebe and sphinx-togglebutton twice, and the second copy of
  ``const THEBE_JS_URL = ...`` fails in the browser ("Identifier 'THEBE_JS_URL' has already
  been declared"). The pages are fixed after the build, when every handler has added its
  scripts.
* The repository's address on every page (footer, and the theme's header button for the
  hosts it knows), when the site knows it: ``$HPCLAB_REPOSITORY_URL``, or else the clone's
  ``origin`` remote (an https or ssh address of a hosted repository). A clone of a local
  folder has none, and the link is left out rather than pointing nowhere.
* The site's own style sheet, ``book/_static/hpclab.css``: printed text wraps on a phone,
  wide tables get smaller type there and a shadow on the side that scrolls.
* The *Getting started* table of what each chapter's lab needs is made from the chapters'
  declarations (:func:`hpclab.chapters.needs_table`), in the book's order, where the page has
  its marker.
* One build, one measurement of each quantity: the build gets an id (``HPCLAB_BUILD``,
  inherited by every page's kernel), the runs its pages save carry it, and a page that takes
  another chapter's measurement (``hpclab.inputs``) takes that build's, whichever page ran
  first.
"""
import os
import re
import subprocess
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


SSH_REMOTE = re.compile(r"^(?:ssh://)?git@([^:/]+)[:/](.+?)(?:\.git)?/?$")
HTTPS_REMOTE = re.compile(r"^https://(?:[^@/]+@)?([^/]+)/(.+?)(?:\.git)?/?$")


KNOWN_HOSTS = ("github.com", "gitlab.com", "bitbucket.org")


def web_address(remote):
    """The web address of a hosted repository from a git remote (https or ssh), or None for
    anything else (a local path, a file:// remote)."""
    remote = (remote or "").strip()
    for pattern in (HTTPS_REMOTE, SSH_REMOTE):
        m = pattern.match(remote)
        if m:
            return f"https://{m.group(1)}/{m.group(2)}"
    return None


def _git(srcdir, *args):
    try:
        r = subprocess.run(["git", "-C", str(srcdir), *args], capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def repository_button(app, config):
    """Show the repository button when the address is known (see the module's notes)."""
    given = os.environ.get("HPCLAB_REPOSITORY_URL")
    url = given.strip() if given is not None else web_address(
        _git(app.srcdir, "remote", "get-url", "origin"))
    if not url:
        return
    options = dict(config.html_theme_options or {})
    # every host: a line in the footer; the hosts the theme knows: its button in the header
    # too (it draws their logo, so it is not asked to guess one for any other)
    options["extra_footer"] = (options.get("extra_footer", "")
                               + f'<p>Source code, labs and data: <a href="{url}">{url}</a></p>')
    if any(host in url.split("/")[2] for host in KNOWN_HOSTS):
        options.update(repository_url=url, use_repository_button=True,
                       repository_branch=_git(app.srcdir, "rev-parse", "--abbrev-ref", "HEAD")
                       or "main", path_to_docs="")
    config.html_theme_options = options


STATIC = Path(__file__).resolve().parent.parent / "_static"


def style_sheet(app, config):
    config.html_static_path = [*config.html_static_path, str(STATIC)]


NEEDS_MARKER = "<!-- the table of what each chapter needs: made from the chapters' declarations -->"


def needs_table(app, docname, source):
    """Put the table of what each chapter needs where a page has NEEDS_MARKER."""
    if NEEDS_MARKER not in source[0]:
        return
    from hpclab.chapters import book_order, needs_table as table

    source[0] = source[0].replace(NEEDS_MARKER, table(book_order(app.srcdir)))


def build_id(app, config):
    import uuid

    os.environ.setdefault("HPCLAB_BUILD", uuid.uuid4().hex[:12])


def setup(app):
    app.connect("config-inited", build_id)
    app.connect("config-inited", repository_button)
    app.connect("config-inited", style_sheet)
    app.add_css_file("hpclab.css")
    app.connect("build-finished", dedupe_pages)
    app.connect("source-read", needs_table)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
