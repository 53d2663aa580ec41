"""How a submission is shut in: bubblewrap's command line (the course and every home and
temporary folder emptied, the environment and the sources read-only, sized in-memory
folders, no network, its own process namespace), or without bubblewrap the dedicated user;
the limits set on its processes before they start; and how this machine can do it
(:func:`isolation`). What runs inside, and what comes back, is sandbox.py's.
"""
from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
INNER = "/tmp/grading"  # where the sandbox sees its folder (its /tmp is an empty tmpfs)


def remove_tree(path):
    """Remove a folder of the grader's even where the sandbox (or a submission) left parts of
    it read-only or closed (the runner folder is 0o555): without root a file in a read-only
    folder cannot be removed. After a first pass, every folder inside ``path`` that is ours is
    made writable and searchable, then a second pass removes what is left; nothing above
    ``path`` is touched, and nothing raises (a folder that cannot be removed stays)."""
    top = os.path.abspath(path)
    if not os.path.lexists(top):
        return
    shutil.rmtree(top, ignore_errors=True)
    if not os.path.lexists(top) or os.path.islink(top):
        return
    with contextlib.suppress(OSError):
        os.chmod(top, 0o700)
    for root, dirs, _ in os.walk(top, onerror=lambda exc: None):
        for d in dirs:  # before os.walk goes into them (top-down)
            with contextlib.suppress(OSError):
                if not os.path.islink(os.path.join(root, d)):
                    os.chmod(os.path.join(root, d), 0o700)
    shutil.rmtree(top, ignore_errors=True)


def grader_uid():
    return int(os.environ.get("HPCLAB_GRADER_UID", "64123"))


def uid_note():
    return f"uid {grader_uid()} (HPCLAB_GRADER_UID)"


def _mount_points():
    """Folders the sandbox needs read-only: the interpreter, the environment, the sources,
    the published reference datasets and what the chapters' labs need besides
    (:func:`hpclab.chapters.sandbox_folders`: another MPI library's environment, say)."""
    import hpclab
    from hpclab import chapters, reference

    need = {Path(sys.base_prefix), Path(os.path.abspath(sys.prefix)),
            Path(hpclab.__file__).resolve().parents[1], reference.data_dir().resolve(),
            *(Path(p) for p in chapters.sandbox_folders().values())}
    for name in ("numpy", "mpi4py", "nbclient"):
        try:
            mod = __import__(name)
            need.add(Path(mod.__file__).resolve().parents[1])
        except ImportError:
            pass
    return sorted(p.resolve() for p in need if p.exists())


def _hidden():
    """Trees replaced by empty folders: homes, temporary folders, the course, /work, /srv,
    /mnt, /media, /opt and /root (whatever of them exists)."""
    out = {Path.home(), HERE.parent, Path(tempfile.gettempdir())}
    out |= {Path(p) for p in ("/home", "/root", "/tmp", "/var/tmp", "/work", "/srv", "/mnt",
                              "/media", "/opt", "/run/user")}
    return sorted(p for p in out if p.exists() and p != Path("/"))


def bwrap_args(box, limits):
    """bubblewrap's command line: the box read-only at INNER, a sized tmpfs (memory) for the
    working folder, its temporary folder, /dev/shm and every emptied tree."""
    size = ["--size", str(limits.disk)]
    args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--perms", "1777", *size,
            "--tmpfs", "/dev/shm", "--proc", "/proc"]
    hidden = _hidden()
    for p in hidden:
        args += [*size, "--tmpfs", str(p)]
    mounts, made = _mount_points(), set()
    for p in mounts + [Path(INNER)]:
        # folders on the way to a mount point inside an emptied tree: traversable by anyone
        for parent in reversed(p.parents):
            if parent not in made and any(h in parent.parents for h in hidden):
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
    for p in mounts:
        args += ["--ro-bind", str(p), str(p)]
    args += ["--ro-bind", str(box), INNER]
    for writable in ("work", "tmp"):
        args += ["--perms", "1777", *size, "--tmpfs", f"{INNER}/{writable}"]
    # nothing writable but the sized folders: /dev and the emptied trees read-only (run as
    # an ordinary user, the sandbox's user owns them), and no user namespace of its own
    # inside, in which it could mount a tmpfs of any size
    args += ["--remount-ro", "/dev"]
    for p in hidden:
        args += ["--remount-ro", str(p)]
    args += ["--chdir", f"{INNER}/work",
             "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--die-with-parent", "--new-session"]
    if os.geteuid() != 0:
        args += ["--unshare-user", "--disable-userns"]
    return args


def _probe_bwrap():
    """Can this system run a bubblewrap sandbox? Returns None or why not."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--unshare-net", "--unshare-pid", "--die-with-parent"]
    if os.geteuid() != 0:
        args.append("--unshare-user")
    try:
        r = subprocess.run(args + ["true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap did not run ({exc})"
    return None if r.returncode == 0 else f"bubblewrap refused: {r.stderr.strip()[:300]}"


def install_bwrap(log=print):
    """Install Debian's bubblewrap when it is missing and this process may (root, apt-get)."""
    if shutil.which("bwrap") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    log("bubblewrap is missing: installing it (apt-get install bubblewrap)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "bubblewrap"]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if r.returncode:
            log(f"could not install bubblewrap: {r.stderr.strip()[-300:]}")
            return


def _user_can_run_python(uid):
    """Without namespaces the dedicated user needs the interpreter readable (a Python under
    /root is not)."""
    try:
        r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                            os.path.abspath(sys.executable), "-c", "import nbclient, hpclab"],
                           capture_output=True, timeout=60, cwd="/")
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def isolation():
    """('bwrap' | 'user' | 'none', why not bwrap or '')."""
    why = _probe_bwrap()
    if why is None:
        return "bwrap", ""
    if os.geteuid() == 0 and shutil.which("setpriv") and _user_can_run_python(grader_uid()):
        return "user", why
    return "none", why


def process_limits(limits, uid, group=None):
    def apply():
        if group is not None:  # before anything starts: every descendant is in it too
            group.join()
        os.setsid()
        die_with_parent()
        for what, value in ((resource.RLIMIT_AS, limits.memory),
                            (resource.RLIMIT_CPU, limits.cpu),
                            (resource.RLIMIT_FSIZE, limits.output),
                            (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(what, (value, value))
        nproc = limits.processes
        if uid is None:  # the instructor's own user: its processes count too
            nproc += _processes_of(os.getuid())
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    return apply


def die_with_parent():
    """This process is killed when the one that started it ends (killed or not)."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def run_group(cmd, timeout, env=None, cwd=None):
    """Run a helper of the grader (nbgrader, a measurement) in a process group of its own
    that dies with the grader; when it ends, by itself or after ``timeout`` seconds (return
    code -9, and a line that says so), whatever it left in its group is killed too. Its
    output and errors, merged, as a CompletedProcess."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=die_with_parent)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return subprocess.CompletedProcess(cmd, -9, (out or "") + f"\n[stopped after {timeout} s]")
    finally:
        try:  # anything the run left in its group (mpiexec's ranks, kernels)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out)


def _processes_of(uid):
    n = 0
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                n += sum(1 for line in (d / "status").read_text().splitlines()
                         if line.startswith("Uid:") and int(line.split()[1]) == uid) * \
                    len(list((d / "task").iterdir()))
            except (OSError, ValueError):
                pass
    return n


def kill_uid(uid):
    """Every process of the dedicated user (only a fallback without namespaces leaves any)."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if d.stat().st_uid == uid and int(d.name) != os.getpid():
                    os.kill(int(d.name), signal.SIGKILL)
            except (OSError, ValueError):
                pass
