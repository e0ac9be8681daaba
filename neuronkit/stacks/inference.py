"""The inference stack: one InferenceFleet (with its rebalancer) per entry of the file's ``inference`` list."""

from __future__ import annotations

from typing import Any

from constructs import Construct

from neuronkit.catalog import serving
from neuronkit.config import Environment, pool_releases
from neuronkit.config import InferenceFleet as FleetConfig
from neuronkit.config.inference import model_spec
from neuronkit.constructs.inference_fleet import HealthCheckSpec, InferenceFleet, ScheduleSpec, ServeSpec, ServingSpec, TlsSpec
from neuronkit.constructs.node_pool import FleetNodesSpec
from neuronkit.constructs.notifications import NotificationTopic
from neuronkit.stacks.base import NeuronkitStack, bucket_names
from neuronkit.stacks.network import NetworkStack
from neuronkit.stacks.storage import StorageStack
from neuronkit.stacks.training import ami_spec


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

    def _fleet(self, config: Environment, f: FleetConfig, network: NetworkStack, storage: StorageStack) -> InferenceFleet:
        hc = f.health_check
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
                neuron_ami=ami_spec(f.neuron_ami, "neuron", pool_releases(config).get(f.name)),
                gpu_ami=ami_spec(f.gpu_ami, "gpu"),
                root_volume_gib=f.root_volume_gib,
            ),
            vpc=network.network.vpc,
            subnet_ids={az: network.network.subnet_ids[az] for az in f.az_ids},
            artifacts_bucket=bucket_names(config)["artifacts"],
            serving=_serving(config, f),
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
            notifications_topic_arn=self.events.topic.topic_arn,
            rebalance_minutes=f.rebalance_minutes,
            metrics_namespace=config.monitoring.namespace,
            log_retention_days=config.monitoring.log_retention_days,
            tags={"neuronkit:environment": config.name, "cost-center": config.cost_center},
        )


def _serving(config: Environment, f: FleetConfig) -> ServingSpec | None:
    model = model_spec(f)
    if model is None:
        return None
    pool = pool_releases(config).get(f.name)
    return ServingSpec(
        model=model,
        neuron_release=pool.release if pool else None,
        profiles={
            t: serving.ProfileOverride(
                tensor_parallel=o.tensor_parallel, max_model_len=o.max_model_len, max_num_seqs=o.max_num_seqs
            )
            for t, o in f.profiles.items()
        },
        registry=None if f.images.registry == "pull-through" else f.images.registry,
        neuron_image=f.images.neuron,
        gpu_image=f.images.gpu,
        precompile=f.precompile,
        lnc=f.lnc,
    )
