"""The pilot's comparison dashboard: one workload on Trainium and on GPUs, side by side."""

from __future__ import annotations

from aws_cdk import Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from neuronkit.adoption.pilot_metrics import NAMESPACE, SIDES
from neuronkit.catalog import pricing
from neuronkit.constructs import durations


class PilotDashboard(Construct):
    """A CloudWatch dashboard ``neuronkit-<environment>-pilot-<pilot>``: loss, tokens per second and step time
    of both sides (the metrics ``neuronkit.adoption.pilot_metrics`` reports), and the cost per million tokens of each
    side from the catalog's On-Demand price of its instance type times ``nodes``.

    ``instance_types`` maps a side (``neuron``, ``gpu``) to its type. Works in any stack with a concrete
    region (prices are per region; an environment-agnostic stack gets no cost widget). Public attributes:
    ``dashboard``, ``cost_per_million_tokens`` (side -> math expression, absent when a type has no price).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        pilot: str,
        instance_types: dict[str, str],
        nodes: int = 1,
    ) -> None:
        super().__init__(scope, id)
        if set(instance_types) != set(SIDES):
            raise ValueError(f"instance_types: give a type for each side ({', '.join(SIDES)})")
        if nodes < 1:
            raise ValueError("nodes: at least 1")

        def metric(name: str, side: str, statistic: str = "Average") -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=name,
                dimensions_map={"Environment": environment, "Pilot": pilot, "Side": side},
                statistic=statistic,
                period=durations.minutes(5),
                label=f"{side} ({instance_types[side]})",
            )

        region = Stack.of(self).region
        table = pricing.load_prices()
        self.cost_per_million_tokens: dict[str, cloudwatch.MathExpression] = {}
        notes: list[str] = []
        for side in SIDES:
            price = None if Token.is_unresolved(region) else table.hourly(instance_types[side], region)
            if price is None:
                notes.append(f"{instance_types[side]} has no list price here: no cost line for {side}")
                continue
            # $/hour of the side's nodes over the tokens it processes an hour, per million tokens.
            self.cost_per_million_tokens[side] = cloudwatch.MathExpression(
                expression=f"{nodes * price:.6g} / (tps_{side} * 3600) * 1000000",
                using_metrics={f"tps_{side}": metric("TokensPerSecond", side)},
                label=f"{side}: $ per million tokens ({nodes} x {instance_types[side]} at ${price:g}/h)",
                period=durations.minutes(5),
            )
        text = (
            f"# Pilot {pilot}: Trainium against GPU\n"
            f"Neuron side: {nodes} x {instance_types['neuron']}; GPU side: {nodes} x {instance_types['gpu']}. "
            f"Metrics from `neuronkit.adoption.pilot_metrics` (namespace `{NAMESPACE}`); prices from catalog/prices.json "
            f"as of {table.as_of}. `neuronkit pilot report` compares runs step by step (docs/adoption.md)."
            + ("".join(f"\n- {n}" for n in notes))
        )
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.TextWidget(markdown=text, width=24, height=3),
            cloudwatch.GraphWidget(title="Loss", left=[metric("Loss", s) for s in SIDES], width=12, height=6),
            cloudwatch.GraphWidget(
                title="Tokens per second", left=[metric("TokensPerSecond", s) for s in SIDES], width=12, height=6
            ),
            cloudwatch.GraphWidget(title="Step time (s)", left=[metric("StepTime", s) for s in SIDES], width=12, height=6),
        ]
        if self.cost_per_million_tokens:
            widgets.append(
                cloudwatch.GraphWidget(
                    title="$ per million tokens", left=list(self.cost_per_million_tokens.values()), width=12, height=6
                )
            )
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"neuronkit-{environment}-pilot-{pilot}")
        self.dashboard.add_widgets(*widgets)
