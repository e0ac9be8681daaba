"""Adding a statement to a role in one jsii call.

``IRole.add_to_principal_policy`` returns a struct whose two fields Python reads back from the jsii kernel
(two more round trips per statement, about 140 per whole-app synth); ``Role.add_to_policy`` adds the same
statement to the same default policy and returns a boolean (docs/performance.md).
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam


def add_statement(role: iam.IRole, statement: iam.PolicyStatement) -> None:
    if isinstance(role, iam.Role):
        role.add_to_policy(statement)
    else:  # an imported role: only the interface's method exists
        role.add_to_principal_policy(statement)
