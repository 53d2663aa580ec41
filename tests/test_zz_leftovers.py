"""Runs last (see conftest): nothing the suite started may still be running."""
import os

import leftovers
from conftest import stop_leftover_clusters


def test_no_mpi_or_engine_process_left_running():
    stop_leftover_clusters()
    left = leftovers.wait_gone(os.environ["HPCLAB_RUN_TAG"], seconds=30)
    leftovers.kill(left)
    assert not left, "processes started by the test suite are still running:\n" + "\n".join(
        f"  {pid}: {cmd}" for pid, cmd in left)
