"""cdk-nag (AwsSolutions) over the whole app, with every acknowledged finding explained.

Acknowledgements live next to the code that causes them (``acknowledge(scope, rule, reason)``), so
the reason stays true when the code changes. This module registers the plugin.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def apply(app: App) -> None:
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (``AwsSolutions-IAM5[Resource::...]``) with its reason."""
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))
