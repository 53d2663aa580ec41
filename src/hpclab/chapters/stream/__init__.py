"""The STREAM chapter (see :mod:`hpclab.chapters`)."""
