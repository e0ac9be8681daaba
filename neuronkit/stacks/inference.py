"""The inference stack: one InferenceFleet (with its rebalancer) per entry of the file's ``inference`` list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_cdk import aws_autoscaling as autoscaling
from constructs import Construct

from neuronkit.adoption import pilot_serving
from neuronkit.catalog import serving
from neuronkit.config import Environment, pool_releases
from neuronkit.config import InferenceFleet as FleetConfig
from neuronkit.config import pilot as pilot_config
from neuronkit.constructs.inference_fleet import (
    HealthCheckSpec,
    InferenceFleet,
    ScheduleSpec,
    ServeSpec,
    TlsSpec,
    _version_of,
)
from neuronkit.constructs.node_pool import FleetNodesSpec
from neuronkit.constructs.notifications import NotificationTopic, arn_of
from neuronkit.stacks.base import NeuronkitStack, bucket_names
from neuronkit.stacks.network import NetworkStack
from neuronkit.stacks.serving import serving_spec
from neuronkit.stacks.storage import StorageStack
from neuronkit.stacks.training import ami_spec

if TYPE_CHECKING:
    from neuronkit.constructs.pilot import PilotLoadJob


class InferenceStack(NeuronkitStack):
    """Inference fleets behind internal load balancers; reads models from the storage stack's artifacts bucket."""

    def __init__(
        self, scope: Construct, id: str, *, config: Environment, network: NetworkStack, storage: StorageStack, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, config=config, description="inference fleets with GPU fallback", **kwargs)
        self.add_stack_dependency(network)
        self.add_stack_dependency(storage)
        self.events = NotificationTopic(self, "FleetEvents", display_name=f"neuronkit {config.name} inference events")
        self.fleets: dict[str, InferenceFleet] = {}
        for fleet in config.inference:
            if not fleet.internal:
                raise ValueError(
                    f"inference[{fleet.name}].internal: internet-facing load balancers are not supported; "
                    "set internal: true and front the fleet with your own edge (API Gateway, CloudFront)"
                )
            self.fleets[fleet.name] = self._fleet(config, fleet, network, storage)
        self.pilot_load_job: PilotLoadJob | None = None
        if config.pilot is not None and config.pilot.serving is not None:
            self._serving_pilot(config, network, storage)

    def _serving_pilot(self, config: Environment, network: NetworkStack, storage: StorageStack) -> None:
        """The serving pilot: the named fleet is the Neuron side; a GPU twin serves the same model on the GPU type
        (the catalog's pinned GPU image and profile), and a load job in the fleet's first AZ ID measures both."""
        pilot = config.pilot
        assert pilot is not None and pilot.serving is not None
        s = pilot.serving
        f = next(x for x in config.inference if x.name == s.fleet)
        gpu = pilot_config.gpu_type(s, f)
        assert gpu is not None  # validated
        # The twin runs the upstream vLLM the Neuron image is built on, where the catalog pairs one (catalog/pilot.yaml).
        pairing = pilot_serving.gpu_pairing(self.fleets[f.name].profiles[f.neuron_types[0]].image)
        images = f.images
        if images.gpu is None and pairing is not None and pairing.get("gpu_image"):
            images = images.model_copy(update={"gpu": pairing["gpu_image"]})
        twin_config = f.model_copy(
            update={
                "name": pilot_config.GPU_TWIN, "fallback_types": [gpu], "min_size": s.nodes, "max_size": s.nodes,
                "desired_size": s.nodes, "scheduled_actions": [], "precompile": False, "images": images,
            }
        )  # fmt: skip
        twin = self._fleet(config, twin_config, network, storage, rebalance=False, release_of=f.name)
        # The twin must launch its GPU type only: its group's overrides keep the GPU type's template alone
        # (the construct always puts a fleet's Neuron types first; the L1 property is set again here).
        group = twin.auto_scaling_group
        only_gpu = _version_of(twin.launch_templates[gpu])
        group.mixed_instances_policy = autoscaling.CfnAutoScalingGroup.MixedInstancesPolicyProperty(
            launch_template=autoscaling.CfnAutoScalingGroup.LaunchTemplateProperty(
                launch_template_specification=only_gpu,
                overrides=[
                    autoscaling.CfnAutoScalingGroup.LaunchTemplateOverridesProperty(
                        instance_type=gpu, launch_template_specification=only_gpu
                    )
                ],
            ),
            instances_distribution=autoscaling.CfnAutoScalingGroup.InstancesDistributionProperty(
                on_demand_allocation_strategy="prioritized",
                on_demand_base_capacity=0,
                on_demand_percentage_above_base_capacity=100,
            ),
        )
        self.pilot_twin = twin
        neuron = self.fleets[f.name]
        n_type = f.neuron_types[0]
        n_profile, g_profile = neuron.profiles[n_type], twin.profiles[gpu]
        n_in, n_out = pilot_config.lengths(s, f)
        facts = pilot_serving.facts()
        task = facts["task"]
        from neuronkit.constructs.pilot import LoadJobSpec, LoadSide, PilotLoadJob  # aws-cdk-lib ECS: with a pilot only

        spec = LoadJobSpec(
            pilot=pilot.name, model_id=f.model.id if f.model else "", model_s3_prefix=f.model.s3_prefix if f.model else "",
            neuron=LoadSide(_url(neuron), n_type, f.desired_size or f.min_size or 1, n_profile.image, serving.vllm_version(n_profile.image),
                            str((pilot_serving.gpu_pairing(n_profile.image) or {}).get("plugin", ""))),
            gpu=LoadSide(_url(twin), gpu, s.nodes, g_profile.image, serving.vllm_version(g_profile.image)),
            client_image=twin.image_uri(g_profile.image), helper_image=twin.image_uri(facts["aws_cli_image"]),
            seed=s.seed, input_len=n_in, output_len=n_out, rates=tuple(s.request_rates), prompts=s.prompts_per_rate,
            warmup_requests=s.warmup_requests, dataset_s3_key=s.dataset_s3_key, evalset_s3_key=s.evalset_s3_key,
            resolution=s.rate_resolution or float(facts["sweep"]["resolution_rps"]),
            max_rate=max(s.max_rate or float(facts["sweep"]["max_rate_rps"]), max(s.request_rates)),
            max_extra_runs=int(facts["sweep"]["max_extra_runs"]),
            compile_marker_key=(n_profile.cache_key + "_COMPLETE") if n_profile.cache_key else None,
            terms={"slo_ttft_ms": pilot.slo_ttft_ms, "slo_itl_ms": pilot.slo_itl_ms, "max_quality_drop_points": s.max_quality_drop_points},
            health_timeout_seconds=facts["health_timeout_seconds"], cpu_units=task["cpu_units"], memory_mib=task["memory_mib"],
            ephemeral_gib=task["ephemeral_gib"],
        )  # fmt: skip
        az = f.az_ids[0]
        self.pilot_load_job = PilotLoadJob(
            self, "PilotLoadJob", environment=config.name, spec=spec, vpc=network.network.vpc, subnet_id=network.network.subnet_ids[az],
            artifacts_bucket=bucket_names(config)["artifacts"], datasets_bucket=bucket_names(config)["datasets"],
            vpc_cidr=config.network.cidr, log_retention_days=config.monitoring.log_retention_days,
        )  # fmt: skip

    def _fleet(
        self,
        config: Environment,
        f: FleetConfig,
        network: NetworkStack,
        storage: StorageStack,
        rebalance: bool = True,
        release_of: str | None = None,
    ) -> InferenceFleet:
        hc = f.health_check
        pool = release_of or f.name
        return InferenceFleet(
            self,
            f"Fleet-{f.name}",
            environment=config.name,
            name=f.name,
            nodes=FleetNodesSpec(
                neuron_types=f.neuron_types,
                fallback_types=f.fallback_types,
                min_size=f.min_size,
                max_size=f.max_size,
                desired_size=f.desired_size,
                neuron_ami=ami_spec(f.neuron_ami, "neuron", pool_releases(config).get(pool)),
                gpu_ami=ami_spec(f.gpu_ami, "gpu"),
                root_volume_gib=f.root_volume_gib,
            ),
            vpc=network.network.vpc,
            subnet_ids={az: network.network.subnet_ids[az] for az in f.az_ids},
            artifacts_bucket=bucket_names(config)["artifacts"],
            serving=serving_spec(config, f, pool),
            serve=ServeSpec(neuron=f.serve.neuron, gpu=f.serve.gpu) if f.serve else None,
            model_s3_prefix=f.model_s3_prefix,
            gpu_model_s3_prefix=f.gpu_model_s3_prefix,
            load_balancer=f.load_balancer,
            idle_timeout_seconds=f.idle_timeout_seconds,
            port=f.port,
            tls=TlsSpec(certificate_arn=f.tls.certificate_arn, port=f.tls.port) if f.tls else None,
            health_check=HealthCheckSpec(**hc.model_dump()),  # same fields as the file's health_check
            health_check_grace_seconds=f.health_check_grace_seconds,
            warmup_seconds=f.warmup_seconds,
            requests_per_target=f.requests_per_target,
            min_healthy_percentage=f.min_healthy_percentage,
            scheduled_actions=[
                ScheduleSpec(name=s.name, cron=s.cron, min_size=s.min_size, max_size=s.max_size, desired_size=s.desired_size)
                for s in f.scheduled_actions
            ],
            ingress_cidr=config.network.cidr,
            access_logs_bucket=storage.storage.access_logs,
            notifications_topic_arn=arn_of(self.events.topic),
            rebalance_minutes=f.rebalance_minutes if rebalance else None,
            metrics_namespace=config.monitoring.namespace,
            log_retention_days=config.monitoring.log_retention_days,
            tags={"neuronkit:environment": config.name, "cost-center": config.cost_center},
        )


def _url(fleet: InferenceFleet) -> str:
    return f"http://{fleet.dns_name}:{fleet.listener_port}"
