"""Old import paths of modules that moved in 0.2 (docs/layout.md). Each old module is the new one, with a
DeprecationWarning when imported; the old paths are removed in 0.3."""

from __future__ import annotations

import importlib
import sys
import warnings

MOVED = {
    "neuronkit.summary": "neuronkit.reports.summary",
    "neuronkit.review": "neuronkit.reports.review",
    "neuronkit.cost": "neuronkit.reports.cost",
    "neuronkit.pools": "neuronkit.reports.pools",
    "neuronkit.assess": "neuronkit.adoption.assess",
    "neuronkit.pilot": "neuronkit.adoption.pilot",
    "neuronkit.pilot_metrics": "neuronkit.adoption.pilot_metrics",
    "neuronkit.preflight": "neuronkit.account.preflight",
    "neuronkit.compliance": "neuronkit.constructs.compliance",
    "neuronkit.addressing": "neuronkit.config.addressing",
    "neuronkit.serving": "neuronkit.catalog.serving",
}


def alias(old: str) -> None:
    """Make ``old`` the module it moved to, warning the importer once."""
    new = MOVED[old]
    warnings.warn(f"{old} moved to {new}; the old path is removed in neuronkit 0.3", DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    sys.modules[old] = module
    package, _, name = old.rpartition(".")
    setattr(sys.modules[package], name, module)
