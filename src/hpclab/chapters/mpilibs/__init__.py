"""MPI libraries side by side (report 002): MPICH, Open MPI and Intel MPI, each in its own
environment, running one C program (see :mod:`.libraries` and :mod:`.sweep`)."""
