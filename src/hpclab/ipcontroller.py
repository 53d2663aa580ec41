"""ipyparallel's controller, with its heart monitor started as a fresh Python.

``python -m hpclab.ipcontroller [ipcontroller's options]`` is ``ipcontroller`` with
multiprocessing's spawn start method: the heart monitor (the process that pings every engine
and counts the answers) is started as a fresh Python, not forked (and so would the
schedulers' processes be without ``use_threads``, which hpclab always sets). With
``IPController.use_threads`` (see engines.THREADED) the controller's schedulers are threads,
already running when the monitor is started; a fork copies the process with whatever lock
one of those threads held at that instant, never to be released in the copy. A CI run once
lost a start that way, as far as its output tells: both engines had their registration
answered, then heard no ping for 50 s and stopped ("No heartbeat in the last 1000 ms (50
time(s) in a row)"); the controller answers a registration before the monitor has seen the
engine's heart, and counts the engine only once it has. A spawned monitor imports what it
needs afresh and holds no lock of the controller's.
"""

from __future__ import annotations

import multiprocessing


def main() -> None:
    multiprocessing.set_start_method("spawn", force=True)
    from ipyparallel.controller.app import main as ipcontroller

    ipcontroller()


if __name__ == "__main__":
    main()
