"""hpclab: measure MPI kernels, fit performance models, compare with published clusters."""

__version__ = "0.1.0"
