"""AWS Batch for multi-node training (``training.scheduler: batch``): compute environment, queue, job definition.

AWS Batch has its own rules for the pieces the plain cluster (``training_cluster.py``) uses, from the Batch
user guide ("Use Amazon EC2 launch templates with AWS Batch", "Elastic Fabric Adapter", "Compute environment
considerations for MNP"):

- nodes boot an ECS-capable AMI (the ECS-optimized Neuron or GPU AMI, a CDK context lookup pinned in
  cdk.context.json like the rest of the kit's images); Batch adds the user data part that joins the node to
  the compute environment's ECS cluster, so ours must be a MIME multi-part archive;
- Batch ignores a launch template's instance type, instance role, interface subnets and market options:
  the instance type, instance profile, subnet and cluster placement group are set on the compute
  environment, which is On-Demand (multi-node parallel jobs do not run on Spot);
- the launch template still carries the EFA interfaces from the catalog (EC2's multi-card layout, shared
  with the plain cluster through :func:`efa_network_interfaces`), with the security groups on every
  interface: Batch refuses security groups on the compute environment when the launch template defines
  network interfaces ("Either compute environment Security Groups or Network Interfaces in Launch
  template are exclusively allowed"); types without EFA put their groups on the compute environment;
- the job definition passes every Neuron device (``/dev/neuron*``) and EFA device
  (``/dev/infiniband/uverbs*``) of the type through, with an unlimited ``memlock`` ulimit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from aws_cdk import CfnTag, Fn, Stack, Token
from aws_cdk import aws_batch as batch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from neuronkit import catalog, userdata
from neuronkit.config.addressing import addresses_per_node, batch_addresses_per_node  # noqa: F401 - re-exported
from neuronkit.constructs import pseudo, values
from neuronkit.constructs.launch_template import (
    IMAGE_METADATA,
    USER_DATA_LIMIT_BYTES,
    AmiSpec,
    efa_network_interfaces,
)
from neuronkit.constructs.network import log_group
from neuronkit.constructs.node_pool import NodePoolSpec
from neuronkit.constructs.node_role import node_role
from neuronkit.constructs.security import EfaSecurityGroup
from neuronkit.constructs.storage import StorageAccess
from neuronkit.reports.pools import pool_metadata

# ECS registers less memory than the instance has (kernel, agent); a job asking for all of it is never
# placed. Jobs ask for this share of the instance's memory (Batch user guide, "Compute resource memory
# management").
JOB_MEMORY_SHARE = 0.9
# /dev/shm of the container: Docker's 64 MiB default breaks PyTorch data loader workers.
SHARED_MEMORY_SHARE = 0.25
_MIME_BOUNDARY = "==NEURONKIT-BATCH=="
# Room left for the part AWS Batch merges into the user data (its ECS cluster configuration, a few
# hundred bytes) under EC2's 16 KB limit.
BATCH_PART_RESERVE_BYTES = 2048
# Batch's limits on jobStateTimeLimitActions.maxTimeSeconds (10 minutes to 1 day).
_TIME_LIMIT_MINUTES = (10, 1440)
# torchrun's store and the Neuron runtime's root communicator on ports of their own (catalog/software.yaml).
MASTER_PORT = int(catalog.software_facts()["collectives"]["master_port"])
ROOT_COMM_PORT = int(catalog.software_facts()["collectives"]["root_comm_port"])


def mime_multipart(script: str) -> str:
    """``script`` as the single ``text/x-shellscript`` part of a MIME multi-part archive (what Batch merges)."""
    if _MIME_BOUNDARY in script:
        raise ValueError(f"user data: the script contains the MIME boundary {_MIME_BOUNDARY}")
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{_MIME_BOUNDARY}"\n'
        "\n"
        f"--{_MIME_BOUNDARY}\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\n'
        "\n"
        f"{script.rstrip()}\n"
        "\n"
        f"--{_MIME_BOUNDARY}--\n"
    )


# The default command of the job definition: Batch's multi-node variables mapped to what torchrun and the
# Neuron runtime read, then the command the job was submitted with (NEURONKIT_TRAIN_COMMAND).
_LAUNCHER = """set -euo pipefail
export NNODES="${AWS_BATCH_JOB_NUM_NODES:-1}"
export NODE_RANK="${AWS_BATCH_JOB_NODE_INDEX:-0}"
export MASTER_ADDR="${AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS:-$(hostname -i | awk '{print $1}')}"
export MASTER_PORT="${MASTER_PORT:-@MASTER_PORT@}"
export NEURON_RT_ROOT_COMM_ID="${MASTER_ADDR}:${NEURON_RT_ROOT_COMM_PORT:-@ROOT_COMM_PORT@}"
echo "neuronkit: node ${NODE_RANK} of ${NNODES}, main node ${MASTER_ADDR}:${MASTER_PORT}, root communicator ${NEURON_RT_ROOT_COMM_ID}"
exec bash -c "${NEURONKIT_TRAIN_COMMAND}"
""".replace("@MASTER_PORT@", str(MASTER_PORT)).replace("@ROOT_COMM_PORT@", str(ROOT_COMM_PORT))


def _efa_installer_url() -> str:
    """The pinned EFA installer (catalog/software.yaml)."""
    efa = catalog.software_facts()["efa_installer"]
    return str(efa["url"]).format(version=efa["version"])


class BatchTrainingCluster(Construct):
    """An AWS Batch managed EC2 compute environment for one accelerator type, its job queue and a
    multi-node parallel job definition template, so that ``aws batch submit-job`` starts a training job.

    Capacity and placement live on the compute environment (Batch ignores them in launch templates): On-
    Demand only, ``nodes.instance_type`` only, ``nodes.min_size``..``nodes.max_size`` nodes (as vCPUs), one
    subnet, a cluster placement group, an instance profile with the ECS and Session Manager policies.
    Allocation is ``BEST_FIT_PROGRESSIVE``, which lets a deploy update the compute environment in place
    (a new launch template version or AMI) without terminating running jobs.

    The launch template carries the catalog's EFA interfaces with the security groups on each (the
    cluster's EFA group, the Lustre client group of ``storage``, ``extra_security_group_ids``), an
    encrypted gp3 root volume (the catalog's minimum for the accelerator unless ``root_volume_gib`` is
    larger), IMDSv2 and MIME multi-part user data (``neuronkit/userdata/batch-node.sh``: device check,
    local NVMe at ``/local``, Lustre at ``/fsx``).

    The queue cancels a job that waits in RUNNABLE for capacity longer than ``capacity_wait_minutes``
    (default 4 hours) or that can never run (larger than the compute environment, or than one node), so a
    stuck multi-node job does not block the jobs behind it.

    The job definition (named like the queue, ``ENVIRONMENT-NAME``) runs ``container_image`` on
    ``nodes.max_size`` nodes by default (submit with fewer through node overrides), with every accelerator and
    EFA device of the type, ``memlock`` unlimited, ``JOB_MEMORY_SHARE`` of the instance's memory, the host
    volumes ``/fsx`` (with Lustre) and ``/local``, storage paths as environment variables
    (``NEURONKIT_DATASETS``, ``NEURONKIT_CHECKPOINTS``, ``NEURONKIT_CHECKPOINT_DIR``, ``NEURONKIT_ARTIFACTS``,
    ``NEURON_COMPILE_CACHE_URL``), a job role that reads datasets and artifacts and writes checkpoints,
    and container logs in the log group ``/neuronkit/ENVIRONMENT/batch/NAME`` (``log_retention_days``,
    default 30). Its default command maps Batch's multi-node variables to ``NNODES``, ``NODE_RANK``,
    ``MASTER_ADDR``, ``MASTER_PORT`` and ``NEURON_RT_ROOT_COMM_ID`` and runs ``$NEURONKIT_TRAIN_COMMAND``.

    The compute environment names no service role: AWS Batch then uses its service-linked role
    (AWSServiceRoleForBatch, created on first use), the only way Batch performs infrastructure updates
    (launch template, AMI, instance types) in place (docs/batch.md). ``ami`` defaults to the catalog's ECS-optimized AMI for the
    accelerator (``ecs-neuron`` or ``ecs-gpu``). ``checkpoint_dir`` is where jobs should write checkpoints
    (default: ``NEURONKIT_CHECKPOINTS``, the pool's prefix of the checkpoints bucket; pass the Lustre path
    that auto-exports to that bucket when there is one). ``az_id`` (optional) is only recorded in the
    compute environment's ``neuronkit`` Metadata, the pool contract of :mod:`neuronkit.reports.pools`.

    Public attributes: ``compute_environment``, ``job_queue``, ``job_definition``, ``launch_template``
    (L1 resources), ``security_group``, ``placement_group`` (or None), ``instance_role``, ``job_role``,
    ``log_group``, ``queue_name``, ``job_definition_name``, ``instance_type`` (catalog facts).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        name: str,
        nodes: NodePoolSpec,
        vpc: ec2.IVpc,
        subnet_id: str,
        container_image: str,
        storage: StorageAccess | None = None,
        checkpoint_dir: str | None = None,
        compile_cache: Literal["local", "s3"] = "local",
        extra_security_group_ids: Sequence[str] = (),
        capacity_wait_minutes: int = 240,
        log_retention_days: int = 30,
        az_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        facts, min_size, max_size = nodes.facts, nodes.min_size, nodes.max_size
        ami = self._checked(facts, name, nodes, container_image, capacity_wait_minutes)
        root_gib = nodes.root_gib
        self.instance_type = facts
        self.queue_name = f"{environment}-{name}"
        self.job_definition_name = f"{environment}-{name}"
        pool_tags = {**(tags or {}), "neuronkit:pool": name}

        groups = self._network(vpc, facts, storage, extra_security_group_ids)
        profile = self._roles(name, facts, storage, compile_cache)
        interfaces = efa_network_interfaces(facts, groups) if facts.efa_supported else None
        self._launch_template(environment, name, facts, storage, ami, root_gib, interfaces, pool_tags)
        self._compute_environment(
            environment, name, facts, min_size, max_size, subnet_id, groups, interfaces, profile, ami, az_id, pool_tags
        )
        self._queue(capacity_wait_minutes)
        self._job_definition(
            environment, name, facts, max_size, container_image, storage, checkpoint_dir, compile_cache, log_retention_days
        )

    @staticmethod
    def _checked(
        facts: catalog.InstanceType, name: str, nodes: NodePoolSpec, container_image: str, capacity_wait_minutes: int
    ) -> AmiSpec:
        """Refuse what Batch would refuse (the spec checked its sizes); the AMI (default: the catalog's ECS image)."""
        if nodes.desired_size is not None:
            raise ValueError(f"{name}: desired_size does not apply to Batch, which starts nodes for queued jobs only")
        if not Token.is_unresolved(container_image) and not container_image.strip():
            raise ValueError(f"{name}: container_image is required (the training image of the job definition)")
        low, high = _TIME_LIMIT_MINUTES
        if not low <= capacity_wait_minutes <= high:
            raise ValueError(f"{name}: capacity_wait_minutes {capacity_wait_minutes} must lie between {low} and {high}")
        if nodes.ami is not None:
            return nodes.ami
        return AmiSpec.family(catalog.default_ami_family(f"ecs-{'neuron' if facts.is_neuron else 'gpu'}"))  # own driver

    def _network(
        self, vpc: ec2.IVpc, facts: catalog.InstanceType, storage: StorageAccess | None, extra: Sequence[str]
    ) -> list[str]:
        """The EFA group (shared construct with the plain cluster), the placement group; the nodes' groups."""
        self.security_group = EfaSecurityGroup(
            self, "EfaSecurityGroup", vpc=vpc, description=f"{self.queue_name}: EFA and collectives within the Batch nodes"
        ).security_group
        groups = [self.security_group.security_group_id, *extra]
        if storage is not None and storage.client_security_group_id is not None:
            groups.append(storage.client_security_group_id)
        self.placement_group: ec2.CfnPlacementGroup | None = None
        if "cluster" in facts.placement_strategies:
            self.placement_group = ec2.CfnPlacementGroup(self, "PlacementGroup", strategy="cluster")
        return groups

    def _roles(
        self, name: str, facts: catalog.InstanceType, storage: StorageAccess | None, compile_cache: str
    ) -> iam.CfnInstanceProfile:
        """Node instance profile and job role (Batch itself acts through its service-linked role)."""
        self.instance_role = node_role(
            self,
            "InstanceRole",
            description=f"{self.queue_name} Batch nodes (ECS container instances)",
            also_managed={
                "service-role/AmazonEC2ContainerServiceforEC2Role": "AWS-maintained ECS container instance policy: "
                "the ECS agent registers the node, pulls images and writes job logs"
            },
        )
        profile = iam.CfnInstanceProfile(self, "InstanceProfile", roles=[self.instance_role.role_name])
        self.job_role = iam.Role(
            self,
            "JobRole",
            assumed_by=values.service_principal("ecs-tasks.amazonaws.com"),
            description=f"{self.queue_name} training jobs (datasets, checkpoints, artifacts)",
        )
        cache_prefix = f"neuron-compile-cache/{name}/" if compile_cache == "s3" and facts.is_neuron else None
        if storage is not None:
            storage.grant_node_access(self.job_role, compile_cache_prefix=cache_prefix, pool=name)
        return profile

    def _launch_template(
        self,
        environment: str,
        name: str,
        facts: catalog.InstanceType,
        storage: StorageAccess | None,
        ami: AmiSpec,
        root_gib: int,
        interfaces: list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty] | None,
        pool_tags: Mapping[str, str],
    ) -> None:
        """EFA interfaces, root volume, IMDSv2, MIME user data; no image, type, profile or market options
        (the compute environment sets them)."""
        script = userdata.render(
            "batch-node.sh",
            {
                "ENVIRONMENT": environment,
                "POOL": name,
                "ACCELERATOR": "neuron" if facts.is_neuron else "gpu",
                "EXPECTED_ACCELERATORS": facts.neuron_devices if facts.is_neuron else facts.gpus,
                "EXPECTED_EFA": facts.efa_max_interfaces,
                "LUSTRE_DNS": (storage.lustre_dns_name or "") if storage else "",
                "LUSTRE_MOUNT": (storage.lustre_mount_name or "") if storage else "",
                # The ECS-optimized AMI carries its own driver, not tied to a Neuron release: reported, not checked.
                **userdata.boot_values(),
                "EFA_INSTALLER_URL": _efa_installer_url(),
            },
        )
        user_data = mime_multipart(script)
        if len(user_data.encode()) > USER_DATA_LIMIT_BYTES - BATCH_PART_RESERVE_BYTES:
            # Batch merges its own part (the node's ECS cluster configuration) into ours; leave it room.
            raise ValueError(f"{name}: user data of {len(user_data.encode())} bytes leaves AWS Batch no room for its part")
        tag_list = [CfnTag(key=k, value=v) for k, v in sorted(pool_tags.items())] if pool_tags else []
        self.launch_template = ec2.CfnLaunchTemplate(
            self,
            "LaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                network_interfaces=interfaces,
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_tokens="required", http_put_response_hop_limit=2, http_endpoint="enabled"
                ),
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name=ami.root_device_name,
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_size=root_gib,
                            volume_type="gp3",
                            encrypted=True,
                            delete_on_termination=True,
                            iops=6000,
                            throughput=500,
                        ),
                    )
                ],
                ebs_optimized=True,
                monitoring=ec2.CfnLaunchTemplate.MonitoringProperty(enabled=True),
                user_data=Fn.base64(user_data),
                tag_specifications=[
                    ec2.CfnLaunchTemplate.TagSpecificationProperty(resource_type=rt, tags=tag_list)
                    for rt in ("volume", "network-interface")
                ]
                or None,
            ),
        )

    def _compute_environment(
        self,
        environment: str,
        name: str,
        facts: catalog.InstanceType,
        min_size: int,
        max_size: int,
        subnet_id: str,
        groups: list[str],
        interfaces: list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty] | None,
        profile: iam.CfnInstanceProfile,
        ami: AmiSpec,
        az_id: str | None,
        pool_tags: Mapping[str, str],
    ) -> None:
        """Type, subnet, placement, profile and AMI; the pool contract of neuronkit.reports.pools in its Metadata."""
        # "Environment" (was "ComputeEnvironment" with a custom service role): a new logical ID, so that an
        # upgrade replaces the environment instead of switching its role in place, which Batch refuses.
        self.compute_environment = batch.CfnComputeEnvironment(
            self,
            "Environment",
            type="MANAGED",  # upper case: moto's Batch accepts nothing else, and it is the documented value
            state="ENABLED",
            # An update (new launch template version, new AMI) updates the instances in place instead of
            # replacing the compute environment; running jobs are not terminated.
            replace_compute_environment=False,
            update_policy=batch.CfnComputeEnvironment.UpdatePolicyProperty(terminate_jobs_on_update=False),
            compute_resources=batch.CfnComputeEnvironment.ComputeResourcesProperty(
                type="EC2",  # On-Demand: multi-node parallel jobs are not supported on Spot
                allocation_strategy="BEST_FIT_PROGRESSIVE",
                instance_types=[facts.name],
                minv_cpus=min_size * facts.vcpus,
                maxv_cpus=max_size * facts.vcpus,
                subnets=[subnet_id],
                security_group_ids=None if interfaces else groups,
                instance_role=profile.attr_arn,
                placement_group=self.placement_group.ref if self.placement_group else None,
                launch_template=batch.CfnComputeEnvironment.LaunchTemplateSpecificationProperty(
                    launch_template_id=self.launch_template.ref,
                    version=self.launch_template.attr_latest_version_number,
                ),
                ec2_configuration=[
                    batch.CfnComputeEnvironment.Ec2ConfigurationObjectProperty(
                        image_type="ECS_AL2023" if facts.is_neuron else "ECS_AL2023_NVIDIA",
                        image_id_override=ami.image_id(self),
                    )
                ],
                update_to_latest_image_version=False,  # the AMI changes with a deploy, never on its own
                tags=dict(sorted(pool_tags.items())),
            ),
        )
        # The pool contract of neuronkit.reports.pools (the same keys as on Auto Scaling groups), plus the scheduler.
        self.compute_environment.cfn_options.metadata = {
            "neuronkit": pool_metadata(
                environment=environment,
                region=Stack.of(self).region,
                pool=name,
                role="training" if facts.is_neuron else "training-gpu",
                neuron_types=[facts.name] if facts.is_neuron else [],
                fallback_types=[] if facts.is_neuron else [facts.name],
                min_size=min_size,
                max_size=max_size,
                desired_size=min_size,  # Batch starts nodes for queued jobs only
                capacity="on-demand",
                az_id=az_id,
                scheduler="batch",
            )
        }
        self.compute_environment.add_metadata(IMAGE_METADATA, ami.metadata())

    def _queue(self, capacity_wait_minutes: int) -> None:
        """One compute environment; jobs stuck in RUNNABLE are cancelled."""
        wait = capacity_wait_minutes * 60
        never = _TIME_LIMIT_MINUTES[0] * 60
        self.job_queue = batch.CfnJobQueue(
            self,
            "JobQueue",
            job_queue_name=self.queue_name,
            priority=1,
            state="ENABLED",
            compute_environment_order=[
                batch.CfnJobQueue.ComputeEnvironmentOrderProperty(
                    compute_environment=self.compute_environment.ref,
                    order=1,  # Ref is the ARN
                )
            ],
            job_state_time_limit_actions=[
                batch.CfnJobQueue.JobStateTimeLimitActionProperty(
                    action="CANCEL", state="RUNNABLE", reason=reason, max_time_seconds=seconds
                )
                for reason, seconds in (
                    ("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", wait),
                    ("MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE", never),
                    ("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT", never),
                )
            ],
        )

    def _job_definition(
        self,
        environment: str,
        name: str,
        facts: catalog.InstanceType,
        max_size: int,
        container_image: str,
        storage: StorageAccess | None,
        checkpoint_dir: str | None,
        compile_cache: str,
        log_retention_days: int,
    ) -> None:
        """The multi-node job definition template and its log group."""
        # Logs expire anyway; a retained group of this name would block the next deploy of the stack.
        self.log_group = log_group(self, "JobLogs", log_retention_days, name=f"/neuronkit/{environment}/batch/{name}")
        self.job_definition = batch.CfnJobDefinition(
            self,
            "JobDefinition",
            type="multinode",
            job_definition_name=self.job_definition_name,
            platform_capabilities=["EC2"],
            propagate_tags=True,
            # Retry once when EC2 took the host away (e.g. a failed node), never for a failure of the job.
            retry_strategy=batch.CfnJobDefinition.RetryStrategyProperty(
                attempts=2,
                evaluate_on_exit=[
                    batch.CfnJobDefinition.EvaluateOnExitProperty(on_status_reason="Host EC2*", action="RETRY"),
                    batch.CfnJobDefinition.EvaluateOnExitProperty(on_reason="*", action="EXIT"),
                ],
            ),
            node_properties=batch.CfnJobDefinition.NodePropertiesProperty(
                num_nodes=max_size,
                main_node=0,
                node_range_properties=[
                    batch.CfnJobDefinition.NodeRangePropertyProperty(
                        target_nodes="0:",
                        container=self._container(
                            facts=facts,
                            name=name,
                            environment=environment,
                            image=container_image,
                            storage=storage,
                            lustre=storage is not None and storage.lustre_dns_name is not None,
                            checkpoint_dir=checkpoint_dir,
                            compile_cache=compile_cache,
                        ),
                    )
                ],
            ),
        )

    def _container(
        self,
        *,
        facts: catalog.InstanceType,
        name: str,
        environment: str,
        image: str,
        storage: StorageAccess | None,
        lustre: bool,
        checkpoint_dir: str | None,
        compile_cache: str,
    ) -> batch.CfnJobDefinition.ContainerPropertiesProperty:
        memory = int(facts.memory_mib * JOB_MEMORY_SHARE)
        resources = [
            batch.CfnJobDefinition.ResourceRequirementProperty(type="VCPU", value=str(facts.vcpus)),
            batch.CfnJobDefinition.ResourceRequirementProperty(type="MEMORY", value=str(memory)),
        ]
        if facts.gpus:
            resources.append(batch.CfnJobDefinition.ResourceRequirementProperty(type="GPU", value=str(facts.gpus)))
        rw = ["READ", "WRITE", "MKNOD"]
        devices = [
            batch.CfnJobDefinition.DeviceProperty(host_path=path, container_path=path, permissions=rw)
            for path in device_paths(facts)
        ]
        env: dict[str, str] = {
            "NEURONKIT_ENVIRONMENT": environment,
            "NEURONKIT_POOL": name,
            "NEURONKIT_TRAIN_COMMAND": "echo 'submit with NEURONKIT_TRAIN_COMMAND set to the training command (docs/batch.md)'",
        }
        if facts.efa_supported:
            env.update({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"})
        if storage is not None:
            checkpoints = f"s3://{storage.checkpoints_bucket}/{name}/"
            env.update(
                {
                    "NEURONKIT_DATASETS": f"s3://{storage.datasets_bucket}/",
                    "NEURONKIT_ARTIFACTS": f"s3://{storage.artifacts_bucket}/",
                    "NEURONKIT_CHECKPOINTS": checkpoints,
                    "NEURONKIT_CHECKPOINT_DIR": checkpoint_dir or checkpoints,
                }
            )
        if facts.is_neuron:
            env["NEURON_COMPILE_CACHE_URL"] = (
                f"s3://{storage.artifacts_bucket}/neuron-compile-cache/{name}/"
                if compile_cache == "s3" and storage is not None
                else "/local/neuron-compile-cache"
            )
        volumes = [("local", "/local")] + ([("fsx", "/fsx")] if lustre else [])
        return batch.CfnJobDefinition.ContainerPropertiesProperty(
            image=image,
            command=["bash", "-c", _LAUNCHER],
            job_role_arn=self.job_role.role_arn,
            resource_requirements=resources,
            environment=[batch.CfnJobDefinition.EnvironmentProperty(name=k, value=v) for k, v in sorted(env.items())],
            ulimits=[batch.CfnJobDefinition.UlimitProperty(name="memlock", soft_limit=-1, hard_limit=-1)],
            linux_parameters=batch.CfnJobDefinition.LinuxParametersProperty(
                devices=devices, shared_memory_size=int(memory * SHARED_MEMORY_SHARE)
            ),
            volumes=[
                batch.CfnJobDefinition.VolumesProperty(
                    name=vol, host=batch.CfnJobDefinition.VolumesHostProperty(source_path=path)
                )
                for vol, path in volumes
            ],
            mount_points=[
                batch.CfnJobDefinition.MountPointsProperty(source_volume=vol, container_path=path, read_only=False)
                for vol, path in volumes
            ],
            log_configuration=batch.CfnJobDefinition.LogConfigurationProperty(
                log_driver="awslogs",
                options={
                    "awslogs-group": self.log_group.log_group_name,
                    "awslogs-region": pseudo.REGION,
                    "awslogs-stream-prefix": name,
                },
            ),
        )


def device_paths(facts: catalog.InstanceType) -> list[str]:
    """Host devices a job needs on this type: every Neuron device, then every EFA device (from the catalog)."""
    neuron = [f"/dev/neuron{i}" for i in range(facts.neuron_devices)] if facts.is_neuron else []
    return neuron + [f"/dev/infiniband/uverbs{i}" for i in range(facts.efa_max_interfaces)]
