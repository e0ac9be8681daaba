"""Deprecated path: this module moved to ``neuronkit.reports.cost`` (removed in neuronkit 0.3)."""

from neuronkit._moved import alias

alias(__name__)
