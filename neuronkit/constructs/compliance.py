"""cdk-nag (AwsSolutions) over the whole app, with every acknowledged finding explained.

Acknowledgements live next to the code that causes them (``acknowledge(scope, rule, reason)``), so
the reason stays true when the code changes. This module registers the plugin.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from neuronkit.constructs import pseudo

# Validations.of(scope) per scope, made once: a scope (a role, say) is acknowledged several times, and each
# Validations.of is a round trip to the jsii kernel (docs/performance.md). The wrapper holds no state.
_VALIDATIONS: weakref.WeakKeyDictionary[IConstruct, Validations] = weakref.WeakKeyDictionary()


def apply(app: App) -> None:
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (``AwsSolutions-IAM5[Resource::...]``) with its reason."""
    acknowledge_each(scope, {rule: reason})


def iam5(resource: str) -> str:
    """The id cdk-nag gives a wildcard-resource finding on ``resource`` (``AwsSolutions-IAM5[Resource::...]``), with
    the partition, region and account tokens printed as cdk-nag prints them."""
    rendered = (
        resource.replace(pseudo.PARTITION, "<AWS::Partition>")
        .replace(pseudo.REGION, "<AWS::Region>")
        .replace(pseudo.ACCOUNT_ID, "<AWS::AccountId>")
    )
    return f"AwsSolutions-IAM5[Resource::{rendered}]"


def acknowledge_each(scope: IConstruct, reasons: Mapping[str, str]) -> None:
    """Acknowledge several cdk-nag findings on one scope (rule -> reason), in one round trip to the jsii kernel."""
    acknowledgments = []
    for rule, reason in reasons.items():
        if "${Token[" in rule:  # CDK's string token marker; checked here, not in the jsii kernel (66 calls a synth)
            # The finding names a deploy-time value (e.g. an IBucket's generated name): match it the way cdk-nag
            # prints it (<LogicalId>, <LogicalId.Attr>, <AWS::Partition>); a value it cannot print is left for the
            # app that owns it to review.
            rendered = _nag_rendering(scope, rule)
            if rendered is None:
                continue
            rule = rendered
        if not reason.strip():
            raise ValueError(f"{rule}: an acknowledgement needs a reason")
        # The plugin's prefix: without it CDK files the rule under annotations instead of the cdk-nag pack.
        acknowledgments.append(Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))
    if not acknowledgments:
        return
    validations = _VALIDATIONS.get(scope)
    if validations is None:
        validations = _VALIDATIONS[scope] = Validations.of(scope)
    validations.acknowledge(*acknowledgments)


def _nag_rendering(scope: IConstruct, text: str) -> str | None:
    """``text`` with its tokens as cdk-nag prints them in finding ids, or None when one cannot be printed."""
    from aws_cdk import Stack

    def render(value: object) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and "Ref" in value:
            return f"<{value['Ref']}>"
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            logical, attribute = value["Fn::GetAtt"]
            return f"<{logical}.{attribute}>"
        if isinstance(value, dict) and "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return str(separator).join(render(p) for p in parts)
        raise ValueError(value)

    try:
        return render(Stack.of(scope).resolve(text))
    except ValueError:
        return None


# cfn-lint's rule that an instance type is offered in the template's region (its own recorded data).
CFN_LINT_REGION_RULE = "E3628"
CFN_LINT_REASONS = "neuronkit:cfn-lint"


def acknowledge_cfn_lint(scope: IConstruct, rule: str, reason: str, resource_type: str = "AWS::EC2::LaunchTemplate") -> int:
    """Acknowledge one cfn-lint rule on every ``resource_type`` resource under ``scope``, with its reason next to it
    in the template (cfn-lint reads ``Metadata.cfn-lint.config.ignore_checks``); returns how many it marked."""
    from aws_cdk import CfnResource

    if not reason.strip():
        raise ValueError(f"{rule}: an acknowledgement needs a reason")
    marked = 0
    for child in scope.node.find_all():
        if isinstance(child, CfnResource) and child.cfn_resource_type == resource_type:
            child.add_metadata("cfn-lint", {"config": {"ignore_checks": [rule]}})
            child.add_metadata(CFN_LINT_REASONS, {rule: reason})
            marked += 1
    return marked
