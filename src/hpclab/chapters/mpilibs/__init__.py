"""MPI libraries side by side (report 002): MPICH, Open MPI and Intel MPI, each in its own
environment, running one C program (see :mod:`.libraries` and :mod:`.sweep`)."""


def sandbox_folders():
    """The libraries of ``make mpilibs``, which the lab runs: the grading sandbox mounts them
    read-only and tells the lab where (``HPCLAB_MPILIBS``)."""
    from hpclab.chapters.mpilibs import libraries

    return {"HPCLAB_MPILIBS": libraries.mpilibs_root().resolve()}


def unready():
    """Why the lab and the page cannot measure here, or None: they need a library that make
    mpilibs set up, with the packages it pins now."""
    from hpclab.chapters.mpilibs import libraries

    if any(libraries.runnable(s) for s in libraries.LIBRARIES):
        return None
    return (f"no MPI library is set up in {libraries.mpilibs_root()} with the packages it pins "
            "(make mpilibs sets them up)")


def shared_simulations():
    """What every submission of the lab simulates alike, and with the same arguments: report
    002's IMB Exchange on the simulated cluster (160 ranks; half a minute here). The grader
    runs it once before the submissions (autograder/machine_inputs.py), and each grading
    sandbox reads the result from the grader's cache."""
    from hpclab.chapters.mpilibs import simulation

    simulation.exchange_beside_report()
