"""Stencils: finite differences of order 2 to 16 on a 3D grid (report 003, hpcscan)."""
