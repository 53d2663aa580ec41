"""The Jacobi chapter (see :mod:`hpclab.chapters`)."""
