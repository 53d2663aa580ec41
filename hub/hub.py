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
    """Running (a zombie, dead and not yet reaped by its parent, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


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
# configuration, the tests (their wrong answers hold the solutions' lines), the history
# (which holds all of them), and every build folder but the hub's (build/openmpi is a copy)
INSTRUCTORS_ONLY = ("solutions", "autograder", "hub", "tests", ".ci", ".git")


def protect():
    """Close the repository's instructors-only folders to other users (group
    hpclab-instructors, mode 0750 at their top: below it nobody else can go): the students'
    servers run this repository's environment, and would otherwise read them."""
    gid = grp.getgrnam(INSTRUCTORS).gr_gid
    closed = [ROOT / name for name in INSTRUCTORS_ONLY]
    if (ROOT / "build").is_dir():
        keep = {HUB_DIR.resolve(), *HUB_DIR.resolve().parents}
        closed += [p for p in (ROOT / "build").iterdir() if p.resolve() not in keep]
    for top in closed:
        if top.is_dir() and not top.is_symlink():
            os.chown(top, -1, gid)
            os.chmod(top, (os.stat(top).st_mode & ~0o007) | 0o050)


def setup_user(name):
    """One account's part of the course (at the hub's start, and before a server of an account
    added since starts): its home closed to others (students cannot read each other's work
    nor an instructor's gradebook); a student's ~/hpclab, the student release; an
    instructor's course folder ~/hpclab-course and the Jupyter configuration that points
    formgrader at it."""
    user = pwd.getpwnam(name)
    home = Path(user.pw_dir)
    if not home.is_dir():
        raise HubError(f"{name} has no home folder {home}: useradd -m {name}")
    os.chmod(home, 0o700)
    if role(name) == "instructor":
        course = home / COURSE
        for kind, src in (("source", ROOT / "solutions"), ("release", ROOT / "labs")):
            if not (course / kind).exists():
                shutil.copytree(src, course / kind)
        (course / "nbgrader_config.py").write_text(instructor_config(user.pw_dir))
        # formgrader reads the user's Jupyter configuration, not the course folder's
        jupyter = home / ".jupyter"
        jupyter.mkdir(exist_ok=True)
        (jupyter / "nbgrader_config.py").write_text(
            f"c = get_config()  # noqa: F821\n"
            f"load_subconfig({str(course / 'nbgrader_config.py')!r})  # noqa: F821\n")
        _run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(course), str(jupyter)])
        os.chmod(course, 0o700)
    else:
        link = home / "hpclab"
        if not link.exists() and not link.is_symlink():
            link.symlink_to(HUB_DIR / "students" / "hpclab")
            os.lchown(link, user.pw_uid, user.pw_gid)


def role(name):
    """'instructor' for a member of hpclab-instructors (its primary group or not), else
    'student' (the hub lets in only the members of the two groups)."""
    return "instructor" if name in _group_members(INSTRUCTORS) else "student"


def students_copy():
    """A student release (autograder/student_release.py) in the hub's folder, which every
    student's ~/hpclab links to: the book's sources, the labs and the README, read-only (copy
    it to work in it: cp -r ~/hpclab ~/my-hpclab)."""
    import student_release

    dest = HUB_DIR / "students" / "hpclab"
    try:
        student_release.release(dest, inside_ok=True)
    except student_release.ReleaseError as exc:
        raise HubError(f"the students' copy of the course: {exc}") from None
    for path in [dest.parent, dest, *dest.rglob("*")]:
        os.chmod(path, os.stat(path).st_mode | (0o005 if path.is_dir() else 0o004))


def course_folders():
    """The exchange: its root open to all (nbgrader's requirement) but sticky, and the
    course's folders in it made now, owned by the first instructor, so that no student can
    make them first; the students' servers' configuration."""
    exchange = HUB_DIR / "exchange"
    exchange.mkdir(parents=True, exist_ok=True)
    os.chmod(exchange, 0o1777)
    for p in (HUB_DIR, *HUB_DIR.parents):  # users reach the exchange through these
        if p == Path("/"):
            break
        if not os.stat(p).st_mode & 0o001:
            raise HubError(f"{p} is not open to other users (o+x), so students cannot reach "
                           f"the exchange in {exchange}: chmod o+x {p}, or set HPCLAB_HUB_DIR")
    instructors = _group_members(INSTRUCTORS)
    if not instructors:
        raise HubError(f"no instructor: usermod -aG {INSTRUCTORS} <name> (or make hub DEMO=1)")
    owner = pwd.getpwnam(instructors[0])
    # nbgrader's own modes: the course and its outbound readable, inbound writable and not
    # listable by students (set-group-id), feedback only reachable by its hashed names
    for sub, mode in (("", 0o755), ("outbound", 0o755), ("inbound", 0o2733),
                      ("feedback", 0o711)):
        folder = exchange / COURSE_ID / sub
        if folder.is_symlink() or (folder.exists() and folder.stat().st_uid != owner.pw_uid):
            raise HubError(f"{folder} is not {owner.pw_name}'s (made by someone else?): "
                           "remove it and start the hub again")
        folder.mkdir(exist_ok=True)
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        os.chmod(folder, mode)
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
        if f"HPCLAB_HUB={tag}".encode() in env and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def stop_tagged(tag, grace=10):
    """Stop every process that carries the hub's tag (users' servers, kernels, engines)."""
    for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGKILL):
        pids = [p for p in _tagged(tag) if p != os.getpid()]  # again: some forked meanwhile
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)


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
    for name in sorted(set(_group_members(STUDENTS)) | set(_group_members(INSTRUCTORS))):
        setup_user(name)
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


def forged(lab, exchange=None):
    """The inbound submissions of ``lab`` whose owner is not the student their name says, in
    words."""
    inbound = Path(exchange or HUB_DIR / "exchange") / COURSE_ID / "inbound"
    found = []
    for entry in sorted(inbound.glob(f"*+{lab}+*")) if inbound.is_dir() else []:
        student = entry.name.split("+", 1)[0]
        try:
            owner = pwd.getpwuid(entry.lstat().st_uid).pw_name
        except KeyError:
            owner = str(entry.lstat().st_uid)
        if owner != student:
            found.append(f"{entry.name} was made by {owner}")
    return found


def grade(lab):
    """Collect, grade and return feedback for ``lab`` (see the module's text)."""
    if os.geteuid() == 0:  # the course folder is the instructor's: work as them
        return _as_instructor("grade", lab)
    course = _course(lab)
    wrong = forged(lab)
    if wrong:  # nbgrader's collect trusts the name: one student could hand in as another
        raise HubError("submissions named for another student than the one who made them "
                       f"(nothing was graded): {'; '.join(wrong)}. Remove them from "
                       f"{HUB_DIR / 'exchange' / COURSE_ID / 'inbound'} (as root) and grade again")
    sys.path.insert(0, str(ROOT / "autograder"))
    import confinement

    mode, why = confinement.isolation()
    if mode == "none":
        raise HubError(f"students' code would run without a sandbox ({why}): install "
                       "bubblewrap (apt-get install bubblewrap) and allow it user namespaces, "
                       "then grade again")
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
    except subprocess.CalledProcessError as exc:  # npm, useradd, chpasswd, chown
        said = (exc.stderr or exc.stdout or "").strip()
        print(f"make hub: {' '.join(map(str, exc.cmd[:3]))} failed (exit {exc.returncode})"
              + (f": {said}" if said else ""), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
