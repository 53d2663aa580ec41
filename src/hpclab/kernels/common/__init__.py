"""Pieces every kernel shares: buffers, build information."""
