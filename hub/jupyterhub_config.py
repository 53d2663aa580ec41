"""JupyterHub for an hpclab course on one machine (started by ``make hub``: hub/hub.py).

Local Unix accounts log in with their passwords (PAM): members of the group
``hpclab-students`` as students, of ``hpclab-instructors`` as instructors (also the hub's
admins). Every user's server is JupyterLab from the repository's environment (.venv), so the
labs' kernel has hpclab, its kernels and MPI. nbgrader's exchange lives in the hub's folder;
the students' servers find the course and the exchange from ``etc/jupyter`` there, an
instructor's from the course folder in their home (nbgrader_config.py, written by hub.py).
Idle servers are stopped by jupyterhub-idle-culler, and their kernels and MPI engines with
them. Every value that changes between hubs comes from hub.py through the environment.
"""
import os
import sys

ROOT = os.environ["HPCLAB_ROOT"]
HUB_DIR = os.environ["HPCLAB_HUB_DIR"]
PORT = int(os.environ.get("HPCLAB_HUB_PORT", "8000"))
IDLE = int(os.environ.get("HPCLAB_HUB_IDLE", "3600"))  # seconds before an idle server stops
STUDENTS, INSTRUCTORS = "hpclab-students", "hpclab-instructors"

c = get_config()  # type: ignore[name-defined]  # noqa: F821

c.JupyterHub.bind_url = f"http://127.0.0.1:{PORT}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("HPCLAB_HUB_API_PORT", "8081"))
PROXY_API = int(os.environ.get("HPCLAB_HUB_PROXY_PORT", "8001"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PROXY_API}"
c.ConfigurableHTTPProxy.command = [os.environ.get("HPCLAB_HUB_PROXY", "configurable-http-proxy")]
c.JupyterHub.db_url = f"sqlite:///{os.path.join(HUB_DIR, 'jupyterhub.sqlite')}"
c.JupyterHub.cookie_secret_file = os.path.join(HUB_DIR, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(HUB_DIR, "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # the users' servers stop with the hub

c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {STUDENTS, INSTRUCTORS}
c.PAMAuthenticator.admin_groups = {INSTRUCTORS}

c.Spawner.cmd = [os.path.join(ROOT, ".venv", "bin", "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 120
if os.environ.get("HPCLAB_HUB_DRIVEN"):  # the hub's test drives JupyterLab through its app
    c.Spawner.args = ["--LabApp.expose_app_in_browser=True"]
c.Spawner.environment = {
    "PATH": os.path.join(ROOT, ".venv", "bin") + os.pathsep + "/usr/local/bin:/usr/bin:/bin",
    # every process a user's server starts carries the hub's tag (hub.py stops what is left)
    "HPCLAB_HUB": os.environ.get("HPCLAB_HUB", ""),
    # the engine cell and the records say how busy other users keep the cores
    "HPCLAB_SHARED_SERVER": "1",
    # an instructor's terminal finds the course's commands (hub/hub.py release|grade LAB)
    "HPCLAB_ROOT": ROOT,
    "HPCLAB_HUB_DIR": HUB_DIR,
}
# a profile or MPI setting given to make hub reaches the users' kernels (the tests: quick)
c.Spawner.env_keep = ["LANG", "LC_ALL", "HPCLAB_PROFILE", "MPIR_CVAR_ENABLE_HEAVY_YIELD",
                      "OMPI_MCA_mpi_yield_when_idle"]



def _by_role(spawner):
    """An instructor's server opens in their course folder (whose nbgrader_config.py is the
    course's) with every nbgrader tool; a student's in their home, with the Assignments tab
    but neither formgrader nor the course list (etc/students, written by hub.py). An account
    added to a group since the hub started gets its part of the course first."""
    sys.path.insert(0, os.path.join(ROOT, "hub"))
    import hub as course

    name = spawner.user.name
    course.setup_user(name)
    instructor = course.role(name) == "instructor"
    spawner.notebook_dir = "~/hpclab-course" if instructor else "~"
    spawner.environment["JUPYTER_CONFIG_PATH"] = os.path.join(
        HUB_DIR, "etc", "jupyter" if instructor else "students")


c.Spawner.pre_spawn_hook = _by_role

c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={IDLE}",
                f"--cull-every={max(10, min(600, IDLE // 4))}"],
}]
