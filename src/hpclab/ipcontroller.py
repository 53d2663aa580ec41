"""ipyparallel's controller, its heart monitor started before the scheduler threads.

``python -m hpclab.ipcontroller [ipcontroller's options]`` is ``ipcontroller`` but for when
the heart monitor (the process that pings every engine and counts the answers) is forked:
at the end of the controller's set-up, before its schedulers start, instead of after them.
With ``IPController.use_threads`` (see engines.THREADED) the schedulers are threads of the
controller, and ipyparallel forks the monitor once they run; a fork copies the process with
whatever lock one of them held at that instant, never to be released in the copy. A CI run
once lost a start that way, as far as its output tells: both engines had their registration
answered, then heard no ping for 50 s and stopped ("No heartbeat in the last 1000 ms (50
time(s) in a row)"); the controller answers a registration before the monitor has seen the
engine's heart, and counts the engine only once it has. Forked before the threads, the
monitor is made as in ipyparallel's own default (schedulers as processes: no Python thread
runs when it forks), and costs no more than before; spawning it instead (a fresh Python) would
import ipyparallel once more at every start of engines.
"""

from __future__ import annotations

from ipyparallel.controller.app import IPController


class Controller(IPController):
    def initialize(self, argv=None):
        super().initialize(argv)
        monitor = self.heartmonitor_process
        monitor.start()  # forked now, while the schedulers' threads are made but not started
        monitor.start = lambda: None  # IPController.start() would start it again


def main() -> None:
    Controller.launch_instance()


if __name__ == "__main__":
    main()
