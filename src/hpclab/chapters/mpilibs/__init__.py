"""MPI libraries side by side (report 002): MPICH, Open MPI and Intel MPI, each in its own
environment, running one C program (see :mod:`.libraries` and :mod:`.sweep`)."""


def sandbox_folders():
    """The libraries of ``make mpilibs``, which the lab runs: the grading sandbox mounts them
    read-only and tells the lab where (``HPCLAB_MPILIBS``)."""
    from hpclab.chapters.mpilibs import libraries

    return {"HPCLAB_MPILIBS": libraries.mpilibs_root().resolve()}
