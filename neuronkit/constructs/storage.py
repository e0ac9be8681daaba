"""Training storage: S3 buckets (datasets, checkpoints, artifacts) and FSx for Lustre 2.15."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from neuronkit import catalog
from neuronkit.constructs import durations, pseudo, values
from neuronkit.constructs.compliance import acknowledge_each, iam5
from neuronkit.constructs.policy import add_statement

# Lustre's LNET port and the ports its servers and clients use (FSx user guide, "File system access
# control with Amazon VPC").


@dataclass(frozen=True)
class LustreSpec:
    """What the file system looks like (validated by neuronkit.config before it gets here)."""

    deployment_type: str = "SCRATCH_2"
    size_gib: int = 1200
    throughput_mbps_per_tib: int | None = None
    link_checkpoints: bool = True


class TrainingStorage(Construct):
    """Stateful storage for training; everything here is retained when the stack is deleted.

    Creates three S3 buckets (datasets, checkpoints with versioning, artifacts), all encrypted, TLS-only,
    public access blocked, access-logged to a fourth bucket, and retained. With ``lustre`` it adds an
    FSx for Lustre 2.15 file system in ``subnet_id`` (deployment type and version set explicitly; a KMS
    key only on PERSISTENT_2, the type that accepts one) linked to the datasets bucket (import) and,
    unless ``link_checkpoints`` is off, the checkpoints bucket (import and automatic export) through data
    repository associations; automatic backups are off (FSx does not back up file systems linked to
    S3). Also a security group for the file system and a client security group that nodes attach.

    Public attributes: ``datasets``, ``checkpoints``, ``artifacts`` (``s3.Bucket``), ``file_system``
    (``fsx.CfnFileSystem`` or None), ``lustre_mount_name``, ``lustre_dns_name``,
    ``client_security_group`` (None without Lustre). Logical IDs of the buckets and file system are a
    public contract: renaming them would replace stateful resources.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        subnet_id: str | None = None,
        lustre: LustreSpec | None = None,
        checkpoint_noncurrent_days: int = 30,
        datasets_versioned: bool = True,
        bucket_names: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        # Access logging into a bucket with ACLs disabled needs a bucket policy, not the LogDeliveryWrite ACL;
        # set the flag on this construct's own subtree so it works in any app, whatever its cdk.json says.
        self.node.set_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", True)
        self._names = dict(bucket_names or {})
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[s3.LifecycleRule(expiration=durations.days(365))],
        )
        # Versioned by default: an overwritten or deleted training file can be recovered (and the dataset a run
        # used can be told apart from today's); datasets_versioned=False for very large, regenerable data.
        self.datasets = self._bucket("Datasets", versioned=datasets_versioned)
        self.checkpoints = self._bucket(
            "Checkpoints",
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    noncurrent_version_expiration=durations.days(checkpoint_noncurrent_days),
                    abort_incomplete_multipart_upload_after=durations.days(7),
                )
            ],
        )
        self.artifacts = self._bucket("Artifacts", versioned=True)

        self.file_system: fsx.CfnFileSystem | None = None
        self.client_security_group: ec2.SecurityGroup | None = None
        self.lustre_dns_name: str | None = None
        self.lustre_mount_name: str | None = None
        if lustre is not None:
            if subnet_id is None:
                raise ValueError("storage.lustre: a subnet is needed for the file system")
            self._lustre(vpc, subnet_id, lustre)

    def _bucket(self, id: str, *, versioned: bool, lifecycle_rules: list[s3.LifecycleRule] | None = None) -> s3.Bucket:
        return s3.Bucket(
            self,
            id,
            bucket_name=self._names.get(id.lower()),
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=versioned,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=f"{id.lower()}/",
            lifecycle_rules=lifecycle_rules,
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _lustre(self, vpc: ec2.IVpc, subnet_id: str, spec: LustreSpec) -> None:
        fs_sg = ec2.SecurityGroup(
            self, "LustreSecurityGroup", vpc=vpc, description="FSx for Lustre servers", allow_all_outbound=False
        )
        client_sg = ec2.SecurityGroup(
            self, "LustreClientSecurityGroup", vpc=vpc, description="Lustre clients (attached to nodes)", allow_all_outbound=False
        )
        for low, high in catalog.software_facts()["lustre"]["tcp_ports"]:
            port = values.tcp_ports(low, high)
            fs_sg.add_ingress_rule(fs_sg, port, "Lustre traffic between file servers")
            fs_sg.add_ingress_rule(client_sg, port, "Lustre traffic from clients")
            fs_sg.add_egress_rule(fs_sg, port, "Lustre traffic between file servers")
            fs_sg.add_egress_rule(client_sg, port, "Lustre traffic to clients")
            client_sg.add_egress_rule(fs_sg, port, "Lustre traffic to the file system")
            client_sg.add_ingress_rule(fs_sg, port, "Lustre traffic from the file system")
        persistent = spec.deployment_type.startswith("PERSISTENT")
        key = None
        if persistent:
            key = kms.Key(
                self, "LustreKey", enable_key_rotation=True, removal_policy=RemovalPolicy.RETAIN, description="FSx for Lustre"
            )
        config = fsx.CfnFileSystem.LustreConfigurationProperty(
            deployment_type=spec.deployment_type,
            per_unit_storage_throughput=spec.throughput_mbps_per_tib if persistent else None,
            data_compression_type="LZ4",
            # FSx does not back up file systems linked to S3: durability comes from the versioned
            # checkpoints bucket the file system exports to.
            automatic_backup_retention_days=0 if persistent else None,
            weekly_maintenance_start_time="7:03:00",
        )
        fs = fsx.CfnFileSystem(
            self,
            "Lustre",
            file_system_type="LUSTRE",
            file_system_type_version=str(catalog.software_facts()["lustre"]["version"]),
            storage_capacity=spec.size_gib,
            storage_type="SSD",
            subnet_ids=[subnet_id],
            security_group_ids=[fs_sg.security_group_id],
            lustre_configuration=config,
            kms_key_id=key.key_id if key else None,
        )
        fs.apply_removal_policy(RemovalPolicy.RETAIN)
        links = [("Datasets", self.datasets, "/datasets", False)]
        if spec.link_checkpoints:
            links.append(("Checkpoints", self.checkpoints, "/checkpoints", True))
        for name, bucket, path, export in links:
            events = ["NEW", "CHANGED", "DELETED"]
            fsx.CfnDataRepositoryAssociation(
                self,
                f"{name}Link",
                file_system_id=fs.ref,
                file_system_path=path,
                data_repository_path=f"s3://{bucket.bucket_name}/",
                batch_import_meta_data_on_create=True,
                s3=fsx.CfnDataRepositoryAssociation.S3Property(
                    auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(events=events),
                    auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(events=events)
                    if export
                    else None,
                ),
            )
        self.file_system = fs
        self.client_security_group = client_sg
        self.lustre_dns_name = fs.attr_dns_name
        self.lustre_mount_name = fs.attr_lustre_mount_name

    def access(self) -> StorageAccess:
        """Plain names and endpoints a node needs (usable from another stack)."""
        return StorageAccess(
            datasets_bucket=self.datasets.bucket_name,
            checkpoints_bucket=self.checkpoints.bucket_name,
            artifacts_bucket=self.artifacts.bucket_name,
            lustre_dns_name=self.lustre_dns_name,
            lustre_mount_name=self.lustre_mount_name,
            client_security_group_id=self.client_security_group.security_group_id if self.client_security_group else None,
        )


@dataclass(frozen=True)
class StorageAccess:
    """What a node needs to reach the storage: bucket names, the Lustre endpoint, the client group.

    With literal bucket names (the environment's stacks name their buckets) the node policies carry
    literal ARNs, so their object-level wildcards can be reviewed and acknowledged one by one.
    """

    datasets_bucket: str
    checkpoints_bucket: str
    artifacts_bucket: str
    lustre_dns_name: str | None = None
    lustre_mount_name: str | None = None
    client_security_group_id: str | None = None

    def grant_node_access(self, role: iam.IRole, *, compile_cache_prefix: str | None = None, pool: str | None = None) -> None:
        """Read datasets and artifacts, read every checkpoint, write and delete checkpoints under the pool's own
        prefix (``POOL/``, where ``NEURONKIT_CHECKPOINTS`` points; the whole bucket without ``pool``), and write
        the compile cache prefix."""

        def arn(bucket: str, path: str = "") -> str:
            return f"arn:{pseudo.PARTITION}:s3:::{bucket}{path}"

        buckets = [self.datasets_bucket, self.checkpoints_bucket, self.artifacts_bucket]
        statements = [
            iam.PolicyStatement(
                sid="ListBuckets", actions=["s3:ListBucket", "s3:GetBucketLocation"], resources=[arn(b) for b in buckets]
            ),
            iam.PolicyStatement(
                sid="ReadData",
                actions=["s3:GetObject"],
                resources=[arn(self.datasets_bucket, "/*"), arn(self.artifacts_bucket, "/*")],
            ),
            iam.PolicyStatement(
                sid="Checkpoints",
                actions=["s3:GetObject"],
                resources=[arn(self.checkpoints_bucket, "/*")],
            ),
            iam.PolicyStatement(
                sid="WriteOwnCheckpoints",
                actions=["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                resources=[arn(self.checkpoints_bucket, f"/{pool}/*" if pool else "/*")],
            ),
        ]
        if compile_cache_prefix:
            statements.append(
                iam.PolicyStatement(
                    sid="CompileCache",
                    actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                    resources=[arn(self.artifacts_bucket, f"/{compile_cache_prefix}*")],
                )
            )
        for statement in statements:
            add_statement(role, statement)
        reasons = {
            arn(self.datasets_bucket, "/*"): "read any object of the datasets bucket (training data)",
            arn(self.artifacts_bucket, "/*"): "read any object of the artifacts bucket (compiled models, code)",
            arn(self.checkpoints_bucket, "/*"): "jobs read any checkpoint (to resume or compare runs)",
        }
        if pool:
            reasons[arn(self.checkpoints_bucket, f"/{pool}/*")] = (
                "jobs write and rotate checkpoints under their pool's prefix only"
            )
        if compile_cache_prefix:
            reasons[arn(self.artifacts_bucket, f"/{compile_cache_prefix}*")] = "write the pool's own Neuron compile cache prefix"
        acknowledge_each(role, {iam5(resource): reason for resource, reason in reasons.items()})
