"""The labs in a real JupyterLab, driven in headless Chromium as a student uses them.

JupyterLab serves a copy of labs/ on 127.0.0.1 with a token; Playwright (from PyPI) drives
Debian's chromium. One lab runs in full up to its first measurement, its engine cell runs a
second time, it is saved and reopened; the others are opened and their engine cell run.
The test fails on a JavaScript error, a widget error on reopening, more engine processes
than one set, and any process left after the kernel is shut down. Screenshots go to
``$HPCLAB_SCREENSHOTS`` (default: a temporary folder).
"""
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

import leftovers

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LABS = sorted(p.name for p in (ROOT / "labs").iterdir() if list(p.glob("*.ipynb")))
FULL = "pingpong"  # the lab run in full (the others: opened, engine cell run)
CELL_TIMEOUT_MS = 180_000

playwright = pytest.importorskip("playwright.sync_api",
                                 reason="Playwright is not installed (pip install playwright)")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM, reason="no chromium: apt-get install chromium "
                                 "(Debian), or see the README")]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]

def _on_panel(args, body):
    """A JavaScript function of ``args`` (``path`` first) that finds the open notebook at
    ``path`` (JupyterLab may have other tabs open) and runs ``body`` with ``app`` and
    ``panel`` defined."""
    head, _, params = args.partition("(")
    return (f"{head}({params} => {{\n"
            "  const app = window.jupyterapp;\n"
            "  const panel = Array.from(app.shell.widgets('main'))"
            ".find(w => w.context && w.context.path === path);\n"
            "  if (!panel) { throw new Error('no open notebook ' + path); }\n"
            f"{body}\n}}")


RUN_CELL = _on_panel("async ([path, i, seconds])", """  await panel.sessionContext.ready;
  app.shell.activateById(panel.id);
  panel.content.activeCellIndex = i;
  const cell = panel.content.widgets[i];
  const before = cell.model.executionCount;
  await app.commands.execute('notebook:run-cell');
  const kernel = () => panel.sessionContext.session && panel.sessionContext.session.kernel;
  const deadline = Date.now() + seconds * 1000;
  // the command may return before the kernel has finished: wait for a new count and idle
  while (cell.model.type === 'code' && (cell.model.executionCount === before
         || cell.model.executionCount === null || !kernel() || kernel().status !== 'idle')) {
    if (Date.now() > deadline) {
      throw new Error('cell ' + i + ' did not finish within ' + seconds + ' s (kernel: '
                      + (kernel() ? kernel().status : 'none') + ', count: '
                      + cell.model.executionCount + ')');
    }
    await new Promise(r => setTimeout(r, 200));
  }
  const outputs = cell.model.outputs ? cell.model.outputs.toJSON() : [];
  return outputs.filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue);""")
START_CELL = _on_panel("([path, i])", """  app.shell.activateById(panel.id);
  panel.content.activeCellIndex = i;
  window.hpclabBefore = panel.content.widgets[i].model.executionCount;
  app.commands.execute('notebook:run-cell');""")
CELL_DONE = _on_panel("([path, i])", """
  const count = panel.content.widgets[i].model.executionCount;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return count !== window.hpclabBefore && count !== null && !!kernel
    && kernel.status === 'idle';""")
CELL_ERRORS = _on_panel("([path, i])", """  return panel.content.widgets[i].model.outputs.toJSON()
    .filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue);""")
SAVE = _on_panel("async (path)", """  await panel.context.save();""")
SHUTDOWN = _on_panel("async (path)", """  await panel.sessionContext.shutdown();""")
TEXT = _on_panel("(path)", """  return panel.node.innerText;""")
READY = _on_panel("async (path)", """  await panel.sessionContext.ready;
  return true;""")


STATUS_BAR = "() => document.querySelector('#jp-main-statusbar').innerText"


def _path(lab):
    return f"{lab}/{lab}.ipynb"


def _run(page, lab, i):
    """Run cell i of a lab and wait for it (at most the cell timeout); its errors as
    'Name: value'. On a timeout the page is saved as a screenshot first."""
    try:
        return page.evaluate(RUN_CELL, [_path(lab), i, CELL_TIMEOUT_MS / 1000])
    except Exception:
        page.screenshot(path=str(_shots() / f"jupyterlab-stuck-at-cell-{i}.png"))
        raise


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(server, port, token, deadline):
    """True once this server (still running) answers its status request with its token."""
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5) as reply:
                if reply.status == 200 and "started" in json.loads(reply.read()):
                    return server.poll() is None
        except (OSError, ValueError, http.client.HTTPException):
            pass
        time.sleep(0.5)
    return False


def _stop(server):
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _index(lab, needle):
    cells = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and needle in c.source)


def _session_of(pid):
    """The notebook whose kernel started process ``pid``: JupyterLab gives each kernel
    JPY_SESSION_NAME, and the kernel's engines inherit it ('' for any other process)."""
    try:
        entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    return next((e.split(b"=", 1)[1].decode(errors="replace") for e in entries
                 if e.startswith(b"JPY_SESSION_NAME=")), "")


def _engines(tag, lab):
    """The engine processes of the lab's kernel (not those of other tests of the session)."""
    return [p for p in leftovers.tagged(tag) if "ipyparallel.engine" in p[1]
            and "nanny" not in p[1] and _session_of(p[0]).endswith(f"{lab}.ipynb")]


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """JupyterLab on a copy of labs/ (the app exposed to the page so it can be driven)."""
    root = tmp_path_factory.mktemp("jupyterlab")
    shutil.copytree(ROOT / "labs", root / "labs")
    token = secrets.token_hex(12)
    env = {**os.environ, "HPCLAB_PROFILE": "quick", "HPCLAB_RESULTS_DIR": str(root / "results")}
    log = open(root / "server.log", "w")
    # The free port is found, then released, then bound by the server: another process
    # (another worker's controller or mpiexec) can take it in between. The server then exits
    # and the port answers with something that is not JupyterLab; so the server counts as up
    # only when it is still running and answers its own token's status request, and it is
    # started again on another port when it exits.
    for _ in range(5):
        port = _free_port()
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
               f"--port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root / 'labs'}", "--LabApp.expose_app_in_browser=True",
               "--ServerApp.open_browser=False",
               # a workspace and settings of its own: no tabs restored from another session
               f"--LabApp.workspaces_dir={root / 'workspaces'}",
               f"--LabApp.user_settings_dir={root / 'settings'}"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)
        if _answers(server, port, token, deadline=time.monotonic() + 90):
            break
        _stop(server)
    else:
        log.close()
        pytest.fail(f"JupyterLab did not start on five ports; see {root / 'server.log'}")
    try:
        yield f"http://127.0.0.1:{port}", token, root
    finally:
        _stop(server)
        log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


# JupyterLab's own errors that say nothing about a lab: its debugger panel asks a kernel for
# its state when a notebook opens, and logs this when the kernel shuts down first; its comms
# (the widget manager's, when a saved notebook reopens) ask an ipykernel 7 for a subshell, and
# the request's future is cancelled, uncaught, when the kernel shuts down before it replies
BENIGN = ("Could not restore the debugger state",
          "Canceled future for create_subshell_request message before replies were done")


def _open(browser, server, lab, errors):
    url, token, _ = server
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(CELL_TIMEOUT_MS)
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}")
            if m.type == "error" and not any(x in m.text for x in BENIGN) else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}")
            if not any(x in str(e) for x in BENIGN) else None)
    # a fresh workspace for every page: no tabs restored from an earlier one
    workspace = f"w{secrets.token_hex(4)}"
    page.goto(f"{url}/lab/workspaces/{workspace}/tree/{_path(lab)}?token={token}&reset")
    page.wait_for_function("(path) => window.jupyterapp && Array.from(window.jupyterapp.shell"
                           ".widgets('main')).some(w => w.context && w.context.path === path)",
                           arg=_path(lab))
    page.evaluate(READY, _path(lab))
    return page


def _shots():
    folder = Path(os.environ.get("HPCLAB_SCREENSHOTS") or "/tmp/hpclab-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shutdown(page, lab):
    page.evaluate(SHUTDOWN, _path(lab))


def test_a_lab_runs_reruns_its_engines_saves_and_reopens_cleanly(lab_server, browser):
    tag = os.environ["HPCLAB_RUN_TAG"]
    lab = FULL
    engine_cell, measure_cell = _index(lab, "launch.cluster("), _index(lab, f"{lab}.run(")
    errors = []
    page = _open(browser, lab_server, lab, errors)
    ran = {}
    for i in range(measure_cell):
        ran[i] = _run(page, lab, i)
    # the measurement, watched: the status bar must say Busy while it runs (progress bars
    # that are widgets made the kernel report idle throughout)
    page.evaluate(START_CELL, [_path(lab), measure_cell])
    busy = []
    deadline = time.monotonic() + CELL_TIMEOUT_MS / 1000
    while not page.evaluate(CELL_DONE, [_path(lab), measure_cell]) and time.monotonic() < deadline:
        busy.append("Busy" in page.evaluate(STATUS_BAR))
        time.sleep(0.25)
    ran[measure_cell] = page.evaluate(CELL_ERRORS, [_path(lab), measure_cell])
    # the lab saved its run where later labs look for it, and they find it
    from hpclab import inputs
    from hpclab.kernels import registry

    saved = sorted((lab_server[2] / "results").glob(f"{lab}-*.json"))
    assert len(saved) == 1, f"the measurement saved {saved}, not one run"
    later = registry.consumers(lab)
    assert later, f"no chapter takes {lab}'s measurements"
    found = inputs.resolve(lab, out_dir=lab_server[2] / "results")
    assert found.path == saved[0].with_suffix(".csv"), found.report()
    text = inputs.report(later[0], lab_server[2] / "results")
    assert str(found.path) in text, text
    # the bar may take a look or two to turn Busy on a loaded machine (a CI run once saw False,
    # False, then True to the end); from the first Busy on, it must stay Busy
    first = busy.index(True) if True in busy else len(busy)
    during = busy[first:-1]
    assert len(busy) >= 4 and first <= max(2, len(busy) // 4) \
        and sum(during) >= 0.9 * len(during), \
        (f"the status bar said Busy in {sum(busy)} of {len(busy)} looks while the cell ran, "
         f"the first at look {first}: {busy}")
    # only the unanswered exercises may fail, and they say so
    failed = {i: e for i, e in ran.items() if e}
    assert failed, "the untouched lab raised nowhere: are its exercises stubs?"
    assert all(all("NotImplementedError" in x for x in e) for e in failed.values()), failed
    # where the stub ran on the engines, the error shows the student's own line
    remote = [x for e in failed.values() for x in e if "on the engine" in x]
    assert remote and all("raise NotImplementedError()" in x for x in remote), remote
    assert not ran[engine_cell] and not ran[measure_cell], (ran[engine_cell], ran[measure_cell])
    n = len(_engines(tag, lab))
    assert n >= 2, "the engine cell started no engines"
    assert _run(page, lab, engine_cell) == []  # a student runs it again
    time.sleep(2)
    assert len(_engines(tag, lab)) == n, "running the engine cell again left two sets of engines"
    page.evaluate(SAVE, _path(lab))
    page.screenshot(path=str(_shots() / f"jupyterlab-{lab}-run.png"))
    _shutdown(page, lab)
    assert not leftovers.wait_gone_matching(lambda: _engines(tag, lab), 30), \
        "engines outlived the kernel"
    page.close()
    # reopen the saved notebook: no widget errors, no console errors
    page = _open(browser, lab_server, lab, errors)
    page.wait_for_timeout(2000)
    text = page.evaluate(TEXT, _path(lab))
    assert "Error displaying widget" not in text and "model not found" not in text
    page.screenshot(path=str(_shots() / f"jupyterlab-{lab}-reopened.png"))
    _shutdown(page, lab)
    page.close()
    assert not [e for e in errors if "widget" in e.lower()], errors
    assert not errors, errors


def _engine_starts(lab):
    """A lab's lines that start engines, with the name they give them blanked."""
    import re

    cells = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4).cells
    return tuple(re.sub(r'what="[^"]*"', 'what=""', line) for c in cells
                 if c.cell_type == "code" for line in c.source.splitlines()
                 if "launch.cluster(" in line)


# the labs whose engine start differs from every earlier lab's but for the engines' name: the
# others start theirs with the same line (run in a kernel by the grading and wrong-answer
# tests, with the rest of their cells), so the browser starts engines once per distinct line
_SEEN = {_engine_starts(FULL), ()}
ENGINES_IN_BROWSER = set()
for _lab in LABS:
    if _engine_starts(_lab) not in _SEEN:
        _SEEN.add(_engine_starts(_lab))
        ENGINES_IN_BROWSER.add(_lab)


@pytest.mark.parametrize("lab", [lab for lab in LABS if lab != FULL])
def test_every_other_lab_opens_and_a_new_engine_start_runs(lab_server, browser, lab):
    """Every lab opens and runs its first cell; a lab whose engine start is new (see
    ENGINES_IN_BROWSER) also runs its engine cell, and its engines stop with its kernel."""
    tag = os.environ["HPCLAB_RUN_TAG"]
    cells = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4).cells
    errors = []
    page = _open(browser, lab_server, lab, errors)
    setup = next(i for i, c in enumerate(cells) if c.cell_type == "code")
    assert _run(page, lab, setup) == []
    starts = [i for i, c in enumerate(cells) if lab in ENGINES_IN_BROWSER
              and c.cell_type == "code" and "launch.cluster(" in c.source]
    for i in starts:
        assert _run(page, lab, i) == []
        assert _engines(tag, lab), "the engine cell started no engines"
    page.screenshot(path=str(_shots() / f"jupyterlab-{lab}.png"))
    _shutdown(page, lab)
    assert not leftovers.wait_gone_matching(lambda: _engines(tag, lab), 30), \
        "engines outlived the kernel"
    page.close()
    assert not errors, errors
