"""What a node needs to run ``neuronkit/userdata/observability.sh``: log groups, the publisher, permissions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from aws_cdk import CfnTag, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from neuronkit import userdata
from neuronkit.config import LOG_RETENTION_DAYS
from neuronkit.constructs import arns, pseudo
from neuronkit.constructs.compliance import acknowledge_each, iam5
from neuronkit.constructs.policy import add_statement

PUBLISHER = "neuron_monitor_publisher.py"
KIT_DIR = "kit"
# The node kit: the publisher and neuronkit/userdata/kit/ (agent configuration, systemd units, scripts),
# zipped from neuronkit/userdata with everything else left out.
KIT_EXCLUDE = ["*", f"!{PUBLISHER}", f"!{KIT_DIR}", f"!{KIT_DIR}/*", "__pycache__", "*.pyc"]
DEFAULT_NAMESPACE = "Neuronkit"
DEFAULT_LOG_RETENTION_DAYS = 30


@dataclass(frozen=True)
class ObservabilitySpec:
    """Where a pool's node metrics and logs go: the CloudWatch namespace and the log retention.

    Defaults: namespace ``Neuronkit``, 30 days of logs (the environment file's ``monitoring`` defaults).
    """

    namespace: str = DEFAULT_NAMESPACE
    log_retention_days: int = DEFAULT_LOG_RETENTION_DAYS


def log_group_names(environment: str, pool: str) -> dict[str, str]:
    """The deterministic log group names of a pool: ``/neuronkit/ENV/POOL/boot`` and ``.../server``."""
    return {kind: f"/neuronkit/{environment}/{pool}/{kind}" for kind in ("boot", "server")}


class NodeObservability(Construct):
    """The log groups, the neuron-monitor publisher and the permissions behind ``observability.sh``.

    Creates the pool's two log groups (``/neuronkit/ENV/POOL/boot`` for ``/var/log/neuronkit-boot.log``
    and ``/neuronkit/ENV/POOL/server`` for the server's journal), each with ``log_retention_days``
    (default 30), tagged ``neuronkit:pool``, and deleted with the stack (their contents expire anyway). Uploads the node kit
    (``neuronkit/userdata/neuron_monitor_publisher.py`` and ``neuronkit/userdata/kit/``) as a zipped S3
    asset that nodes fetch at boot: the user data stays small (EC2 caps it at 16 KB) and the publisher is
    the file the unit tests ran. Grants ``role``: ``cloudwatch:PutMetricData`` only into ``namespace``
    (default ``Neuronkit``), writing log streams of its two log groups only, and reading the kit object only.

    ``server_log_units`` (default: none = the whole journal) are the systemd units whose journal goes to
    the server log group, e.g. the model server's unit on inference nodes.

    Public attributes: ``boot_log_group``, ``server_log_group`` (``logs.CfnLogGroup``), ``kit``
    (``s3_assets.Asset``), ``namespace``. :meth:`userdata_values` returns the values observability.sh reads.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        pool: str,
        role: iam.IRole,
        spec: ObservabilitySpec | None = None,
        server_log_units: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        spec = spec or ObservabilitySpec()
        if spec.log_retention_days not in LOG_RETENTION_DAYS:
            allowed = ", ".join(map(str, LOG_RETENTION_DAYS))
            raise ValueError(
                f"{pool}: log retention {spec.log_retention_days} days is not one CloudWatch Logs accepts ({allowed})"
            )
        self.environment = environment
        self.pool = pool
        self.namespace = spec.namespace
        self.server_log_units = tuple(server_log_units)
        names = log_group_names(environment, pool)
        # The pool tag as a property of each group, not Tags.of(group).add: two round trips to the jsii kernel fewer
        # per group, the same Tags in the template.
        tags = [CfnTag(key="neuronkit:pool", value=pool)]
        self.boot_log_group = logs.CfnLogGroup(
            self, "BootLogs", log_group_name=names["boot"], retention_in_days=spec.log_retention_days, tags=tags
        )
        self.server_log_group = logs.CfnLogGroup(
            self, "ServerLogs", log_group_name=names["server"], retention_in_days=spec.log_retention_days, tags=tags
        )
        for group in (self.boot_log_group, self.server_log_group):
            group.apply_removal_policy(RemovalPolicy.DESTROY)
        self._refs: tuple[str, str, str] | None = None
        self.kit = s3_assets.Asset(self, "NodeKit", path=str(Path(userdata.script_path(PUBLISHER)).parent), exclude=KIT_EXCLUDE)

        self._grants(role, names, spec.namespace)

    def _grants(self, role: iam.IRole, names: dict[str, str], namespace: str) -> None:
        """Let the nodes publish metrics in the namespace, ship to the two log groups and read the node kit."""
        stream_arns = [
            arns.format_arn(self, service="logs", resource="log-group", resource_name=f"{name}:*", sep=":")
            for name in names.values()
        ]
        add_statement(
            role,
            iam.PolicyStatement(
                sid="PublishMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource-level permissions; the namespace condition scopes it
                conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
            ),
        )
        add_statement(
            role,
            iam.PolicyStatement(
                sid="ShipLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=stream_arns,
            ),
        )
        add_statement(
            role,
            iam.PolicyStatement(
                sid="ReadNodeKit",
                actions=["s3:GetObject"],
                resources=[self.kit.bucket.arn_for_objects(self.kit.s3_object_key)],
            ),
        )
        reasons = {
            "AwsSolutions-IAM5[Resource::*]": "cloudwatch:PutMetricData has no resource-level permissions; a "
            "cloudwatch:namespace condition scopes it"
        }
        for arn in stream_arns:
            reasons[iam5(arn)] = (
                "the CloudWatch agent creates one log stream per instance in this log group; the ARN is fixed to the group"
            )
        acknowledge_each(role, reasons)

    def userdata_values(self, *, accelerator: Literal["neuron", "gpu"]) -> dict[str, str | int]:
        """The values ``observability.sh`` requires (besides REGION, which the caller's script sets too)."""
        if self._refs is None:  # read from the jsii kernel once: a pool asks once per launch template
            self._refs = (self.boot_log_group.ref, self.server_log_group.ref, self.kit.s3_object_url)
        boot, server, kit = self._refs
        return {
            "ENVIRONMENT": self.environment,
            "POOL": self.pool,
            "REGION": pseudo.REGION,
            "ACCELERATOR": accelerator,
            "METRICS_NAMESPACE": self.namespace,
            "BOOT_LOG_GROUP": boot,  # Ref: the name, and nodes launch after the group exists
            "SERVER_LOG_GROUP": server,
            "SERVER_LOG_UNITS": " ".join(self.server_log_units),
            "NODE_KIT_S3_URI": kit,
        }
