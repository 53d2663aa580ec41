"""The Amdahl chapter (see :mod:`hpclab.chapters`)."""
