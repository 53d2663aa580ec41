"""An hpclab course on a real JupyterHub, on this machine.

    python hub/hub.py start [--demo] [--port 8000]    # make hub [DEMO=1] [PORT=8000]
    python hub/hub.py release LAB                     # make hub-release LAB=pingpong
    python hub/hub.py grade LAB                       # make hub-grade LAB=pingpong

``start`` (as root: it starts servers as other users) starts JupyterHub 6 with
configurable-http-proxy (installed with npm into ``build/hub/proxy`` when missing), PAM
logins of the local accounts in the Unix groups ``hpclab-students`` and
``hpclab-instructors``, nbgrader's exchange in ``build/hub/exchange``, and each instructor's
course folder ``~/hpclab-course`` (the labs' sources and releases, and nbgrader's
configuration, which is the grader's with the exchange added). Students get a student release
(``make student-release``) as ``~/hpclab``, and may not read this repository's solutions,
grader or tests (their group becomes ``hpclab-instructors``, other users lose their access).
``--demo`` creates the accounts ``instructor``, ``student1`` and ``student2`` with new
passwords, printed. It prints the URL and runs until Ctrl-C, which stops the hub, the users'
servers and every process they started.

``release LAB`` (an instructor, or root as the first instructor) generates the lab from its
source into the course's gradebook and releases it to the exchange: students see it in their
Assignments tab. ``grade LAB`` (an instructor, e.g. in a terminal of their JupyterLab; as
root it runs as the first instructor) collects the newest submission of each student from
the exchange
(nbgrader collect; a student who submitted more than once is listed with every time),
grades them with the course's own grader (autograder/grade.py: the same sandbox, checks and
gradebook as ``make grade``) and releases the feedback, hidden tests removed, through the
exchange, where students fetch it from their Assignments tab.
"""
from __future__ import annotations

import argparse
import grp
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "autograder"))  # student_release
HUB_DIR = Path(os.environ.get("HPCLAB_HUB_DIR", ROOT / "build" / "hub"))
BIN = ROOT / ".venv" / "bin"
STUDENTS, INSTRUCTORS = "hpclab-students", "hpclab-instructors"
DEMO = {"instructor": INSTRUCTORS, "student1": STUDENTS, "student2": STUDENTS}
COURSE_ID = "hpclab"
COURSE = "hpclab-course"  # the instructor's course folder, in their home
PROXY_VERSION = "5.3.0"


class HubError(Exception):
    """What stops the hub, in words that say what to do."""


def _run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600, **kw)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _port_problem(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return f"port {port} is in use by another program"
    return None


def proxy():
    """configurable-http-proxy's command: the one on PATH, else npm's install in HUB_DIR."""
    found = shutil.which("configurable-http-proxy")
    local = HUB_DIR / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
    if found or local.exists():
        return found or str(local)
    if not shutil.which("npm"):
        raise HubError("configurable-http-proxy is not installed and npm is missing to install "
                       "it: apt-get install npm (Debian), then make hub again")
    print(f"installing configurable-http-proxy {PROXY_VERSION} with npm into {local.parents[2]}")
    _run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
          str(HUB_DIR / "proxy"), f"configurable-http-proxy@{PROXY_VERSION}"])
    return str(local)


def _group_members(name):
    try:
        group = grp.getgrnam(name)
    except KeyError:
        return []
    members = set(group.gr_mem) | {p.pw_name for p in pwd.getpwall() if p.pw_gid == group.gr_gid}
    return sorted(members)


def accounts(demo):
    """The Unix groups, and with ``demo`` the demo accounts with new passwords: {name: password}."""
    for group in (STUDENTS, INSTRUCTORS):
        if subprocess.run(["getent", "group", group], capture_output=True).returncode:
            _run(["groupadd", group])
    made = {}
    if demo:
        for name, group in DEMO.items():
            if subprocess.run(["id", name], capture_output=True).returncode:
                _run(["useradd", "--create-home", "--shell", "/bin/bash", name])
            _run(["usermod", "-a", "-G", group, name])
            made[name] = secrets.token_urlsafe(9)
            _run(["chpasswd"], input=f"{name}:{made[name]}\n")
    return made


def instructor_config(home):
    """nbgrader's configuration of an instructor's course folder: the grader's, with the
    course folder as its root and the hub's exchange."""
    course = Path(home) / COURSE
    return (f'"""nbgrader for the hpclab course on this hub (written by hub/hub.py)."""\n'
            f"c = get_config()  # noqa: F821\n"
            f"load_subconfig({str(ROOT / 'autograder' / 'nbgrader_config.py')!r})  # noqa: F821\n"
            f"c.CourseDirectory.root = {str(course)!r}\n"
            f"c.CourseDirectory.source_directory = 'source'\n"
            f"c.CourseDirectory.release_directory = 'release'\n"
            f"c.CourseDirectory.submitted_directory = 'submitted'\n"
            f"c.CourseDirectory.autograded_directory = 'autograded'\n"
            f"c.CourseDirectory.feedback_directory = 'feedback'\n"
            f"c.CourseDirectory.db_url = {'sqlite:///' + str(course / 'gradebook.db')!r}\n"
            f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
            f"c.Exchange.root = {str(HUB_DIR / 'exchange')!r}\n")


# what students on the hub may not read: the solutions and hidden tests, the grader and its
# configuration, the tests (their wrong answers hold the solutions' lines)
INSTRUCTORS_ONLY = ("solutions", "autograder", "hub", "tests", ".ci")


def protect():
    """The repository's instructors-only folders to root and the instructors' group: the
    students' servers run this repository's environment, and would otherwise read them."""
    gid = grp.getgrnam(INSTRUCTORS).gr_gid
    for name in INSTRUCTORS_ONLY:
        top = ROOT / name
        if not top.exists():
            continue
        for path in [top, *top.rglob("*")]:
            if path.is_symlink():
                continue
            os.chown(path, -1, gid)
            os.chmod(path, os.stat(path).st_mode & ~0o007)


def students_copy():
    """A student release (autograder/student_release.py) in the hub's folder, linked as
    ~/hpclab in every student's home: the book's sources, the labs and the README, as a
    student's clone has them."""
    import student_release

    dest = HUB_DIR / "students" / "hpclab"
    student_release.release(dest, inside_ok=True)
    for path in [dest.parent, dest, *dest.rglob("*")]:
        os.chmod(path, os.stat(path).st_mode | (0o005 if path.is_dir() else 0o004))
    for name in _group_members(STUDENTS):
        user = pwd.getpwnam(name)
        link = Path(user.pw_dir) / "hpclab"
        if not link.exists() and not link.is_symlink():
            link.symlink_to(dest)
            os.lchown(link, user.pw_uid, user.pw_gid)


def course_folders():
    """The exchange (everyone writes, nobody removes another's files), the students' config,
    and each instructor's course folder with the labs' sources and releases."""
    exchange = HUB_DIR / "exchange"
    exchange.mkdir(parents=True, exist_ok=True)
    os.chmod(exchange, 0o1777)
    for p in (HUB_DIR, *HUB_DIR.parents):  # users reach the exchange through these
        if p == Path("/"):
            break
        if not os.stat(p).st_mode & 0o001:
            raise HubError(f"{p} is not open to other users (o+x), so students cannot reach "
                           f"the exchange in {exchange}: chmod o+x {p}, or set HPCLAB_HUB_DIR")
    students = HUB_DIR / "etc" / "students"  # the students' servers' configuration
    (students / "labconfig").mkdir(parents=True, exist_ok=True)
    (students / "nbgrader_config.py").write_text(
        f"c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n")
    (students / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": {
        "@jupyter/nbgrader:course-list": True, "@jupyter/nbgrader:create-assignment": True,
        "@jupyter/nbgrader:menu": True}}, indent=1))
    (students / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {
        "jpserver_extensions": {"nbgrader.server_extensions.formgrader": False,
                                "nbgrader.server_extensions.course_list": False}}}, indent=1))
    (HUB_DIR / "etc" / "jupyter").mkdir(parents=True, exist_ok=True)  # instructors': defaults
    for name in _group_members(INSTRUCTORS):
        user = pwd.getpwnam(name)
        course = Path(user.pw_dir) / COURSE
        for kind, src in (("source", ROOT / "solutions"), ("release", ROOT / "labs")):
            if not (course / kind).exists():
                shutil.copytree(src, course / kind)
        (course / "nbgrader_config.py").write_text(instructor_config(user.pw_dir))
        # formgrader reads the user's Jupyter configuration, not the course folder's
        jupyter = Path(user.pw_dir) / ".jupyter"
        jupyter.mkdir(exist_ok=True)
        (jupyter / "nbgrader_config.py").write_text(
            f"c = get_config()  # noqa: F821\n"
            f"load_subconfig({str(course / 'nbgrader_config.py')!r})  # noqa: F821\n")
        _run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(course), str(jupyter)])


def _tagged(tag):
    """Processes whose environment carries HPCLAB_HUB=tag."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"HPCLAB_HUB={tag}".encode() in env:
            found.append(int(entry.name))
    return found


def stop_tagged(tag, grace=10):
    """Stop every process that carries the hub's tag (users' servers, kernels, engines)."""
    pids = [p for p in _tagged(tag) if p != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return


def start(port=8000, demo=False, ready=None):
    """Start the hub and wait until it stops (Ctrl-C or SIGTERM); see the module's text.
    ``ready``: called with the URL once the hub answers (tests)."""
    if os.geteuid() != 0:
        raise HubError("make hub starts each user's server as that user: run it as root "
                       "(sudo make hub)")
    python = Path(os.path.realpath(BIN / "python"))
    closed = [p for p in python.parents if not os.stat(p).st_mode & 0o001]
    if closed:
        raise HubError(f"the users' servers run {python}, which other users cannot reach "
                       f"through {closed[-1]} (not o+x): chmod o+x {' '.join(map(str, closed))}, "
                       "or make setup with a Python they can run (PYTHON=/usr/bin/python3)")
    HUB_DIR.mkdir(parents=True, exist_ok=True)
    pidfile = HUB_DIR / "hub.pid"
    try:
        other = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        other = None
    if other and _alive(other):
        raise HubError(f"a hub already runs (process {other}, {pidfile.read_text().split()[1]}):"
                       f" stop it with Ctrl-C where it runs, or kill {other}")
    ports = {"PORT": port, "the hub's own port": port + 81, "the proxy's API port": port + 1}
    for what, p in ports.items():
        problem = _port_problem(p)
        if problem:
            raise HubError(f"{problem} ({what}): make hub PORT=<another port>")
    command = proxy()
    made = accounts(demo)
    course_folders()
    students_copy()
    protect()
    url = f"http://127.0.0.1:{port}"
    pidfile.write_text(f"{os.getpid()} {url}\n")
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    env = {**os.environ, "HPCLAB_ROOT": str(ROOT), "HPCLAB_HUB_DIR": str(HUB_DIR),
           "HPCLAB_HUB_PORT": str(port), "HPCLAB_HUB_API_PORT": str(port + 81),
           "HPCLAB_HUB_PROXY_PORT": str(port + 1), "HPCLAB_HUB_PROXY": command,
           "HPCLAB_HUB": tag, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    log = open(HUB_DIR / "jupyterhub.log", "ab")
    config = ROOT / "hub" / "jupyterhub_config.py"
    hub = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(config)], cwd=HUB_DIR, env=env,
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stopping = []

    def stop(signum, frame):
        stopping.append(signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        deadline = time.time() + 120
        while not _answers(url):
            if hub.poll() is not None or stopping or time.time() > deadline:
                raise HubError(f"JupyterHub did not start: see {HUB_DIR / 'jupyterhub.log'}")
            time.sleep(0.5)
        print(f"hpclab's course hub is at {url}/ (log: {HUB_DIR / 'jupyterhub.log'})")
        for name, password in made.items():
            print(f"  {name:<11} password {password}  ({DEMO[name]})")
        print(f"Real users: useradd -m <name> && passwd <name>, then usermod -aG {STUDENTS} "
              f"<name> (or {INSTRUCTORS}). Ctrl-C stops the hub and everything it started.")
        sys.stdout.flush()
        if ready:
            ready(url)
        while hub.poll() is None and not stopping:
            time.sleep(0.5)
    finally:
        if hub.poll() is None:
            os.killpg(hub.pid, signal.SIGTERM)  # JupyterHub stops the users' servers
            try:
                hub.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(hub.pid, signal.SIGKILL)
                hub.wait()
        stop_tagged(tag)
        log.close()
        pidfile.unlink(missing_ok=True)
        for s, handler in old.items():
            signal.signal(s, handler)
    print("the hub and everything it started have stopped")
    return 0


def _answers(url):
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/hub/api/", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _instructor_home():
    if os.geteuid() != 0:
        return Path.home()
    names = _group_members(INSTRUCTORS)
    if not names:
        raise HubError(f"no instructor: usermod -aG {INSTRUCTORS} <name> (or make hub DEMO=1)")
    return Path(pwd.getpwnam(names[0]).pw_dir)


def submissions(lab, exchange=None):
    """{student: [hand-in times, oldest first]} of ``lab`` in the exchange's inbound folder."""
    inbound = Path(exchange or HUB_DIR / "exchange") / COURSE_ID / "inbound"
    found: dict[str, list[str]] = {}
    for entry in sorted(inbound.glob(f"*+{lab}+*")) if inbound.is_dir() else []:
        student, _, rest = entry.name.partition(f"+{lab}+")
        found.setdefault(student, []).append(rest.rsplit("+", 1)[0])
    return {s: sorted(t) for s, t in found.items()}


def _as_instructor(command, lab):
    """Run this script's ``command`` as the first instructor (from root): their course."""
    home = _instructor_home()
    return subprocess.run(["runuser", "-u", home.owner(), "--", sys.executable, __file__,
                           command, lab], cwd=home).returncode


def _course(lab):
    course = Path.home() / COURSE
    if not (course / "nbgrader_config.py").exists():
        raise HubError(f"{course} is not a course folder: start the hub (make hub) once")
    if not (course / "source" / lab).is_dir():
        labs = sorted(p.name for p in (course / "source").iterdir())
        raise HubError(f"no lab {lab!r} in {course / 'source'}: choose from {', '.join(labs)}")
    return course


def _steps(steps, course):
    # a login shell's PATH is the system's: nbgrader runs alembic from the environment
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for step in steps:
        res = subprocess.run(step, cwd=course, env=env)
        if res.returncode:
            print(f"make hub: {' '.join(step[2:4])} failed (exit {res.returncode})",
                  file=sys.stderr)
            return res.returncode
    return 0


def release(lab):
    """Generate ``lab`` into the gradebook and release it to the exchange."""
    if os.geteuid() == 0:
        return _as_instructor("release", lab)
    course = _course(lab)
    nbgrader = [str(BIN / "python"), "-m", "nbgrader"]
    failed = _steps([nbgrader + ["generate_assignment", lab, "--force"],
                     nbgrader + ["release_assignment", lab, "--force"]], course)
    if not failed:
        print(f"{lab} released: students fetch it from their Assignments tab")
    return failed


def grade(lab):
    """Collect, grade and return feedback for ``lab`` (see the module's text)."""
    if os.geteuid() == 0:  # the course folder is the instructor's: work as them
        return _as_instructor("grade", lab)
    course = _course(lab)
    for student, times in sorted(submissions(lab).items()):
        if len(times) > 1:
            print(f"{student} submitted {lab} {len(times)} times ({', '.join(times)}): the newest "
                  f"({times[-1]}) is graded")
    nbgrader = [str(BIN / "python"), "-m", "nbgrader"]
    failed = _steps([
        nbgrader + ["collect", lab, "--update"],
        [str(BIN / "python"), str(ROOT / "autograder" / "grade.py"), "grade", lab,
         "--workdir", str(course), "--source", str(course / "source")],
        nbgrader + ["release_feedback", lab],
    ], course)
    if failed:
        return failed
    print(f"{lab}: graded, and its feedback released: students fetch it in their Assignments "
          f"tab; the grades are in {course / 'grades.csv'} (make export there: grade.py export)")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("start", help="start the course hub (as root)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--demo", action="store_true", help="create the demo accounts")
    for name, what in (("release", "generate and release a lab to the students"),
                       ("grade", "collect, grade and release feedback of a lab")):
        sub.add_parser(name, help=what).add_argument("lab")
    args = p.parse_args(argv)
    try:
        if args.command == "start":
            return start(args.port, args.demo)
        return (release if args.command == "release" else grade)(args.lab)
    except HubError as exc:
        print(f"make hub: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
