"""Security group for EFA traffic between the nodes of one cluster."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from neuronkit.constructs import values


class EfaSecurityGroup(Construct):
    """A security group that allows all traffic to and from itself, in and out (EFA requires both).

    A 0.0.0.0/0 egress rule alone does not authorize EFA traffic between nodes, so the self-referencing
    egress rule is explicit. Outbound HTTPS and HTTP (package mirrors) to anywhere are allowed by
    default (``allow_web_egress``); no ingress from outside the group.

    Public attribute: ``security_group``.
    """

    def __init__(self, scope: Construct, id: str, *, vpc: ec2.IVpc, description: str, allow_web_egress: bool = True) -> None:
        super().__init__(scope, id)
        sg = ec2.SecurityGroup(self, "Group", vpc=vpc, description=description, allow_all_outbound=False)
        sg.add_ingress_rule(sg, values.all_traffic(), "EFA and collectives: all traffic from the cluster itself")
        sg.add_egress_rule(sg, values.all_traffic(), "EFA and collectives: all traffic to the cluster itself")
        if allow_web_egress:
            sg.add_egress_rule(values.any_ipv4(), values.tcp(443), "HTTPS to AWS APIs and registries")
            sg.add_egress_rule(values.any_ipv4(), values.tcp(80), "HTTP package mirrors (apt)")
        self.security_group = sg
