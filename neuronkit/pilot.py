"""Deprecated path: this module moved to ``neuronkit.adoption.pilot`` (removed in neuronkit 0.3)."""

from neuronkit._moved import alias

alias(__name__)
