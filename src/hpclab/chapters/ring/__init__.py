"""The Ring chapter (see :mod:`hpclab.chapters`)."""
