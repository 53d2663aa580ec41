"""The Poisson chapter (see :mod:`hpclab.chapters`)."""
