"""A course on a real JupyterHub (make hub: hub/hub.py), driven in headless Chromium.

The hub starts with its demo accounts. The instructor logs in and, in a terminal of their
JupyterLab, releases the PingPong lab; two students log in, fetch it from their Assignments
tab, run its engine cell, answer (one with the solution, one with a loop that returns the
round trip instead of the one-way time) and submit, the first twice; the instructor collects
and grades with the course's grader (the sandbox of make grade); the students fetch their
feedback and read their scores in it. Then the hub stops and nothing it started is left.
Needs root (local accounts), chromium, Playwright and configurable-http-proxy or npm.
"""
import html as html_module
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "hub"))
sys.path.insert(0, str(ROOT / "autograder"))
import hub  # noqa: E402
import others  # noqa: E402
import student_release  # noqa: E402
import test_jupyterlab  # noqa: E402
from test_jupyterlab import RUN_CELL, _on_panel  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
browser = test_jupyterlab.browser  # the JupyterLab test's fixture: one headless Chromium
LAB = "pingpong"
WRONG = ("pingpong_loop", "/ (2 * iterations)", "/ iterations")  # the round trip, not one way
GRADING_S = 900
# an instructor's command in their JupyterLab terminal (a login shell: PATH is the system's)
COMMAND = '"$HPCLAB_ROOT/.venv/bin/python" "$HPCLAB_ROOT/hub/hub.py"'


def _skip_reason():
    if os.geteuid() != 0:
        return "the hub makes local accounts and starts servers as them: run as root"
    if not CHROMIUM:
        return "no chromium (apt-get install chromium)"
    if not (shutil.which("configurable-http-proxy") or shutil.which("npm")):
        return "neither configurable-http-proxy nor npm (apt-get install npm)"
    return others.why_not_as_another_user()


playwright = pytest.importorskip("playwright.sync_api",
                                 reason="Playwright is not installed (pip install playwright)")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(_skip_reason()),
                                                   reason=_skip_reason() or "")]


def _free_port():
    """A port p with p + 1 and p + 81 free too (the proxy's API and the hub's own)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000 and not any(hub._port_problem(p) for p in (port, port + 1, port + 81)):
            return port
    raise RuntimeError("no free ports")


def _source_answers(wrong=None):
    """{grade_id: source} of the solution cells of the lab's source notebook; ``wrong``
    (grade_id, old, new) edits one of them."""
    nb = nbformat.read(ROOT / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    answers = {k: re.sub(r"\n?[ \t]*### (BEGIN|END) SOLUTION[ \t]*", "", v)
               for k, v in answers.items()}  # what a student writes has no markers
    if wrong:
        grade_id, old, new = wrong
        assert old in answers[grade_id]
        answers[grade_id] = answers[grade_id].replace(old, new)
    return answers


def _hidden_lines():
    """The distinctive lines of the lab's hidden tests (30 characters or more, and not also
    in a visible test)."""
    source = ROOT / "solutions" / LAB / f"{LAB}.ipynb"
    nb = nbformat.read(source, as_version=4)
    given = student_release.regions(source)[1]
    lines = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line or "END HIDDEN TESTS" in line:
                inside = "BEGIN" in line
            elif inside and len(line.strip()) >= 30 and line.strip() not in given:
                lines.append(line.strip())
    assert lines
    return lines


def _points():
    """(points of the autograded tests, points of test_pingpong_loop)."""
    nb = nbformat.read(ROOT / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)
    tests = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"].get("points", 0)
             for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata["nbgrader"].get("solution")}
    return sum(tests.values()), tests["test_pingpong_loop"]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The hub, started by hub.py as make hub DEMO=1 does; yields (url, passwords, hub dir)."""
    # the students must reach the exchange: a folder under the repository (open to others),
    # not pytest's own temporary folders (closed to them)
    hub_dir = ROOT / "build" / f"hub-test-{os.getpid()}"
    shutil.rmtree(hub_dir, ignore_errors=True)
    hub_dir.mkdir(parents=True)
    # the demo accounts: those this test makes are removed after it; a course or lab folder
    # left in one by an earlier run goes first
    made = [u for u in hub.DEMO if subprocess.run(["id", u], capture_output=True).returncode]
    for user in set(hub.DEMO) - set(made):
        home = Path(os.path.expanduser(f"~{user}"))
        for left in (hub.COURSE, LAB):
            shutil.rmtree(home / left, ignore_errors=True)
    port = _free_port()
    env = {**os.environ, "HPCLAB_HUB_DIR": str(hub_dir), "HPCLAB_HUB_DRIVEN": "1",
           "HPCLAB_PROFILE": "quick"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "hub" / "hub.py"), "start", "--demo",
                             "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("Real users:"):
            break
    passwords = dict(re.findall(r"^  (\S+)\s+password (\S+)", "".join(lines), re.M))
    try:
        assert set(passwords) == {"instructor", "student1", "student2"}, "".join(lines)
        yield f"http://127.0.0.1:{port}", passwords, hub_dir, proc, env
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)  # Ctrl-C
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(hub_dir, ignore_errors=True)
        for user in made:
            subprocess.run(["userdel", "--remove", user], capture_output=True, timeout=60)


def _login(browser, url, user, password, errors):
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.on("pageerror", lambda exc: errors.append(f"{user}: {exc}"))
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url("**/lab**", timeout=180_000)
    page.wait_for_function("window.jupyterapp !== undefined && window.jupyterapp.started",
                           timeout=180_000)
    page.evaluate("window.jupyterapp.restored")
    return page


def _shots():
    folder = Path(os.environ.get("HPCLAB_SCREENSHOTS", "/tmp/hpclab-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _terminal(page, command, done_file, timeout_s):
    """Type ``command`` into a new terminal of this JupyterLab; wait for ``done_file``.

    On a loaded machine the keys typed into a new terminal were once lost (its prompt stayed
    empty for 900 s): the command is typed again, after Ctrl-C clears the line, while it has
    not started within a minute, and a file it makes when it starts keeps a late first
    typing from running it twice."""
    started = done_file.with_name(f".{done_file.name}.started")
    started.unlink(missing_ok=True)
    guarded = f"[ -e {started} ] || {{ touch {started}; {command}; }}"
    before = page.locator(".jp-Terminal .xterm-helper-textarea").count()
    page.evaluate("window.jupyterapp.commands.execute('terminal:create-new')")
    page.wait_for_function("n => document.querySelectorAll('.jp-Terminal "
                           ".xterm-helper-textarea').length > n", arg=before, timeout=60_000)
    time.sleep(2)  # the shell's prompt
    for attempt in range(3):
        page.locator(".jp-Terminal .xterm-screen").nth(before).click()
        page.locator(".jp-Terminal .xterm-helper-textarea").nth(before).focus()
        if attempt:
            page.keyboard.press("Control+c")
        page.keyboard.type(guarded + "\n")
        typed = time.monotonic()
        while not started.exists() and time.monotonic() < typed + 60:
            time.sleep(1)
        if started.exists():
            break
    else:
        page.screenshot(path=str(_shots() / "hub-terminal-stuck.png"))
        raise AssertionError(f"{command!r} was typed into a new terminal three times and never "
                             "started")
    deadline = time.monotonic() + timeout_s
    while not done_file.exists():
        if time.monotonic() > deadline:
            page.screenshot(path=str(_shots() / "hub-terminal-stuck.png"))
            raise AssertionError(f"{command!r} did not finish within {timeout_s} s")
        time.sleep(1)
    return int(done_file.read_text().strip() or "-1")


def _assignments(page):
    page.evaluate("window.jupyterapp.commands.execute('nbgrader:open-assignment-list')")
    page.wait_for_selector("#released_assignments_list", timeout=60_000)


def _click_in(page, section, name, button, timeout_ms=120_000):
    """Click ``button`` on the row of assignment ``name`` in a section of the Assignments tab."""
    row = page.locator(f"#{section} .list_item", has_text=name).first
    row.get_by_role("button", name=button).click(timeout=timeout_ms)


# a student's answers, written into the cells of the same grade id, then saved
ANSWER = _on_panel("async ([path, answers])", """  let n = 0;
  for (const cell of panel.content.widgets) {
    const id = (cell.model.getMetadata('nbgrader') || {}).grade_id;
    if (id in answers) { cell.model.sharedModel.setSource(answers[id]); n += 1; }
  }
  await panel.context.save();
  return n;""")


def _work(page, answers):
    """Open the fetched lab, run it up to its engine cell, answer, save."""
    path = f"{LAB}/{LAB}.ipynb"
    page.evaluate(f"window.jupyterapp.commands.execute('docmanager:open', {{path: '{path}'}})")
    page.wait_for_function(
        "p => Array.from(window.jupyterapp.shell.widgets('main'))"
        ".some(w => w.context && w.context.path === p)", arg=path, timeout=60_000)
    cells = nbformat.read(ROOT / "labs" / LAB / f"{LAB}.ipynb", as_version=4).cells
    engines = next(i for i, c in enumerate(cells)
                   if c.metadata.get("nbgrader", {}).get("grade_id") == "start_engines")
    for i in range(engines + 1):  # the lab's set-up, then its engine cell
        if cells[i].cell_type == "code":
            errors = page.evaluate(RUN_CELL, [path, i, 180])
            assert not errors, (i, errors)
    assert page.evaluate(ANSWER, [path, answers]) == len(answers)


def _score(html):
    """(score, maximum) from a feedback page's 'Score: x / y'."""
    text = re.sub(r"<[^>]+>", " ", html)
    m = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", text)
    assert m, text[:500]
    return float(m[1]), float(m[2])


def test_a_course_on_jupyterhub_from_release_to_feedback(course, browser):
    url, passwords, hub_dir, proc, env = course
    errors = []
    home = {u: Path(os.path.expanduser(f"~{u}")) for u in passwords}
    for f in ("released", "graded", "grade.log", "release.log"):
        (home["instructor"] / f).unlink(missing_ok=True)
    for u in ("student1", "student2"):
        shutil.rmtree(home[u] / LAB, ignore_errors=True)

    teacher = _login(browser, url, "instructor", passwords["instructor"], errors)
    rc = _terminal(teacher, f'{COMMAND} release {LAB} > ~/release.log 2>&1; echo $? > ~/released',
                   home["instructor"] / "released", 300)
    assert rc == 0, (home["instructor"] / "release.log").read_text()
    teacher.screenshot(path=str(_shots() / "hub-instructor-released.png"))

    students = {}
    for user, wrong in (("student1", None), ("student2", WRONG)):
        page = _login(browser, url, user, passwords[user], errors)
        _assignments(page)
        _click_in(page, "released_assignments_list", LAB, "Fetch")
        page.wait_for_selector("#fetched_assignments_list .list_item", timeout=120_000)
        assert (home[user] / LAB / f"{LAB}.ipynb").is_file()
        _work(page, _source_answers(wrong))
        _assignments(page)
        _click_in(page, "fetched_assignments_list", LAB, "Submit")
        page.wait_for_selector("#submitted_assignments_list .list_item", timeout=120_000)
        students[user] = page
    # student1 hands in again: the newest is graded, both times are listed
    time.sleep(1.1)
    _click_in(students["student1"], "fetched_assignments_list", LAB, "Submit")
    deadline = time.monotonic() + 120
    while len(hub.submissions(LAB, hub_dir / "exchange").get("student1", [])) < 2:
        assert time.monotonic() < deadline, "student1's second submission did not arrive"
        time.sleep(1)

    rc = _terminal(teacher, f"{COMMAND} grade {LAB} > ~/grade.log 2>&1; echo $? > ~/graded",
                   home["instructor"] / "graded", GRADING_S)
    log = (home["instructor"] / "grade.log").read_text()
    assert rc == 0, log
    assert re.search(r"student1 submitted pingpong 2 times \(.+, .+\): the newest", log), log

    # formgrader (the written answers are graded there) sees the course and both students
    teacher.goto(f"{url}/user/instructor/formgrader")
    row = teacher.locator("tr", has_text=LAB).first
    row.wait_for(timeout=60_000)
    assert re.search(r"\breleased\b.*\b2\b", row.inner_text(), re.S), row.inner_text()
    teacher.screenshot(path=str(_shots() / "hub-formgrader.png"))

    total, loop_points = _points()
    for user, expected in (("student1", total), ("student2", total - loop_points)):
        page = students[user]
        _assignments(page)
        _click_in(page, "submitted_assignments_list", LAB, "Fetch Feedback")
        deadline = time.monotonic() + 120
        while not list((home[user] / LAB / "feedback").glob(f"*/{LAB}.html")):
            assert time.monotonic() < deadline, f"{user} got no feedback"
            time.sleep(1)
        (feedback,) = (home[user] / LAB / "feedback").glob(f"*/{LAB}.html")
        html = feedback.read_text()
        text = html_module.unescape(re.sub(r"<[^>]+>", "", html))
        for line in _hidden_lines():
            assert line not in text, f"{user}'s feedback shows a hidden test: {line}"
        rel = feedback.relative_to(home[user])
        page.goto(f"{url}/user/{user}/files/{rel}")
        page.screenshot(path=str(_shots() / f"hub-{user}-feedback.png"), full_page=False)
        score, _ = _score(page.content())
        assert score == pytest.approx(expected), (user, score, expected)
    assert not errors, errors


def test_a_second_hub_and_a_port_in_use_are_refused(course, tmp_path):
    url, _, hub_dir, _, env = course
    port = int(url.rsplit(":", 1)[1])
    res = subprocess.run([sys.executable, str(ROOT / "hub" / "hub.py"), "start", "--port",
                          str(port + 5)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "a hub already runs" in res.stderr
    other = {**env, "HPCLAB_HUB_DIR": str(ROOT / "build" / f"hub-test-other-{os.getpid()}")}
    try:
        res = subprocess.run([sys.executable, str(ROOT / "hub" / "hub.py"), "start", "--port",
                              str(port)], env=other, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and f"port {port} is in use" in res.stderr
    finally:
        shutil.rmtree(other["HPCLAB_HUB_DIR"], ignore_errors=True)


def test_students_read_a_student_release_not_the_solutions(course):
    """On the hub students run this repository's environment: its solutions, grader and
    tests are closed to them; their ~/hpclab is a student release."""
    def as_student(*cmd):
        return subprocess.run(["runuser", "-u", "student1", "--", *cmd], capture_output=True,
                              text=True, timeout=60)
    home = Path(os.path.expanduser("~student1"))
    teacher = Path(os.path.expanduser("~instructor"))
    secrets = [ROOT / "solutions" / LAB / f"{LAB}.ipynb", ROOT / "tests" / "wrong_answers",
               ROOT / "autograder" / "nbgrader_config.py", ROOT / ".git" / "HEAD",
               teacher / hub.COURSE / "source" / LAB / f"{LAB}.ipynb",
               teacher / hub.COURSE / "gradebook.db",
               Path(os.path.expanduser("~student2")) / LAB / f"{LAB}.ipynb"]
    secrets += [p / "solutions" for p in (ROOT / "build").iterdir()
                if (p / "solutions").is_dir() and not p.name.startswith("hub")]  # openmpi's
    for secret in secrets:
        res = as_student("cat" if secret.is_file() else "ls", str(secret))
        assert res.returncode != 0 and "Permission denied" in res.stderr, (secret, res)
    res = as_student("cat", str(home / "hpclab" / "labs" / LAB / f"{LAB}.ipynb"))
    assert res.returncode == 0 and "BEGIN SOLUTION" not in res.stdout
    assert not (home / "hpclab" / "solutions").exists()
    assert (home / "hpclab" / "README.md").is_file()
    # the instructor still reads them (the grader runs as the instructor)
    res = subprocess.run(["runuser", "-u", "instructor", "--", "cat",
                          str(ROOT / "autograder" / "nbgrader_config.py")], capture_output=True,
                         timeout=60)
    assert res.returncode == 0


def test_a_submission_in_another_students_name_stops_grading(course):
    """nbgrader's collect trusts an inbound submission's name: one made by student1 in
    student2's name is refused, with what to do, and nothing is graded."""
    _, _, hub_dir, _, env = course
    inbound = hub_dir / "exchange" / hub.COURSE_ID / "inbound"
    forged = inbound / f"student2+{LAB}+2099-01-01 00:00:00.000000 UTC+forged"
    res = subprocess.run(["runuser", "-u", "student1", "--", "mkdir", str(forged)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    try:
        assert hub.forged(LAB, hub_dir / "exchange") == [f"{forged.name} was made by student1"]
        res = subprocess.run([sys.executable, str(ROOT / "hub" / "hub.py"), "grade", LAB],
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 2 and "named for another student" in res.stderr, res
    finally:
        forged.rmdir()


def test_the_hub_stops_everything_it_started(course):
    """Last: Ctrl-C stops the hub, the users' servers, their kernels and engines."""
    url, _, hub_dir, proc, _ = course
    tagged_before = [p for p in Path("/proc").iterdir() if p.name.isdigit()
                     and _user_of(p) in ("student1", "student2", "instructor")]
    assert tagged_before, "the users' servers were not running"
    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0 and "everything it started have stopped" in out
    left = [_described(p) for p in Path("/proc").iterdir() if p.name.isdigit()
            and _user_of(p) in ("student1", "student2", "instructor") and not _zombie(p)]
    assert not left, f"processes of the hub's users left: {left}"
    assert not hub._answers(url)
    assert not (hub_dir / "hub.pid").exists()


def _zombie(proc_dir):
    """Dead and waiting to be reaped (a container's first process may be slow to)."""
    try:
        return (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


def _described(proc_dir):
    try:
        cmd = (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        tagged = b"HPCLAB_HUB=" in (proc_dir / "environ").read_bytes()
    except OSError:
        return f"{proc_dir.name} (gone)"
    return f"{proc_dir.name} {cmd!r}{'' if tagged else ' (untagged)'}"


def _user_of(proc_dir):
    import pwd

    try:
        return pwd.getpwuid(proc_dir.stat().st_uid).pw_name
    except (OSError, KeyError):
        return None


def test_students_servers_hide_the_instructors_tools(course):
    _, _, hub_dir, _, _ = course
    page_config = json.loads((hub_dir / "etc" / "students" / "labconfig" /
                              "page_config.json").read_text())
    assert page_config["disabledExtensions"]["@jupyter/nbgrader:course-list"]
    server = json.loads((hub_dir / "etc" / "students" / "jupyter_server_config.json").read_text())
    assert server["ServerApp"]["jpserver_extensions"]["nbgrader.server_extensions.formgrader"] \
        is False
