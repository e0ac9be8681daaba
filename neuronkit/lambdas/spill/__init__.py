"""Spill and return of an inference fleet on EKS (see handler.py)."""
