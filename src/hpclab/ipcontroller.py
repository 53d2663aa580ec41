"""ipyparallel's controller, with its heart monitor started as a fresh Python.

``python -m hpclab.ipcontroller [ipcontroller's options]`` is ``ipcontroller`` but for one
thing: the heart monitor (the process that pings every engine and counts the answers) is
started by spawn, not fork. With ``IPController.use_threads`` (see engines.THREADED) the
controller's schedulers are threads, already running when the monitor is started; a fork
copies the process with whatever lock one of those threads held at that instant, never to
be released in the copy. A CI run once lost a start that way: both engines registered, then
heard no ping for 50 s and stopped ("No heartbeat in the last 1000 ms (50 time(s) in a
row)"). A spawned monitor imports what it needs afresh and holds no lock of the
controller's.
"""

from __future__ import annotations

import multiprocessing


def main() -> None:
    multiprocessing.set_start_method("spawn", force=True)
    from ipyparallel.controller.app import main as ipcontroller

    ipcontroller()


if __name__ == "__main__":
    main()
