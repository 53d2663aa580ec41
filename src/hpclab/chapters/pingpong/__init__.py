"""The PingPong chapter (see :mod:`hpclab.chapters`)."""
