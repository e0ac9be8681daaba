"""Scale: an environment with 8 training clusters and 4 inference fleets stays under CloudFormation's limits.

The environment (tests/scale.py, also measured by ``make bench``) holds every kind of pool: plain clusters
on On-Demand, an ODCR and a Capacity Block, GPU pools, AWS Batch clusters (one with a Batch GPU pool) in
three AZ IDs, and 4 inference fleets with GPU fallback. It is synthesized once, in-process, with the cdk-nag
plugin. Limits (CloudFormation user guide, "Understand CloudFormation quotas"): 500 resources, 200
parameters and 200 outputs per stack, and 1 MB for a template uploaded through S3 (the CDK CLI uploads
every template over 50 KB).

The inference fleets are in the file either way; they are synthesized (and so counted) only when
``neuronkit/stacks/inference.py`` exists, which the inference work adds: the fleet test says which case ran.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from neuronkit.constructs import compliance
from neuronkit.stacks import build_environment
from tests.conftest import new_app
from tests.scale import scale_environment

LIMITS = {"resources": 500, "bytes": 1024 * 1024, "parameters": 200, "outputs": 200}
HAS_INFERENCE_STACK = importlib.util.find_spec("neuronkit.stacks.inference") is not None


@dataclass
class Scale:
    templates: dict[str, dict[str, Any]]
    sizes: dict[str, int]  # bytes of each template file as `cdk synth` writes it

    def resources(self, type_: str) -> list[dict[str, Any]]:
        return [r for t in self.templates.values() for r in t["Resources"].values() if r["Type"] == type_]


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> Scale:
    outdir = tmp_path_factory.mktemp("scale-cdk.out")
    app = new_app(outdir)
    build_environment(app, scale_environment())
    compliance.apply(app)
    assembly = app.synth()
    templates = {s.stack_name: s.template for s in assembly.stacks}
    sizes = {s.stack_name: Path(s.template_full_path).stat().st_size for s in assembly.stacks}
    return Scale(templates, sizes)


def test_the_environment_has_eight_training_clusters_and_four_inference_fleets() -> None:
    env = scale_environment()
    assert len(env.training) == 8 and len(env.inference) == 4
    assert len({c.instance_type for c in env.training}) >= 3 and len({c.az_id for c in env.training}) == 3
    assert {c.scheduler for c in env.training} == {"none", "batch"}


def test_every_stack_stays_under_cloudformations_limits(scale: Scale) -> None:
    over = []
    for name, template in scale.templates.items():
        measured = {
            "resources": len(template["Resources"]),
            "bytes": scale.sizes[name],
            "parameters": len(template.get("Parameters", {})),
            "outputs": len(template.get("Outputs", {})),
        }
        over += [f"{name}: {measured[k]} {k} (limit {LIMITS[k]})" for k in LIMITS if measured[k] > LIMITS[k]]
    assert not over, over
    # The largest stack keeps room to grow (this environment is the size the kit promises, not the ceiling).
    largest = max(scale.sizes.values())
    assert largest < LIMITS["bytes"] * 0.6, f"largest template is {largest} bytes"


def test_every_training_cluster_is_synthesized(scale: Scale) -> None:
    env = scale_environment()
    groups = {r["Properties"]["AutoScalingGroupName"] for r in scale.resources("AWS::AutoScaling::AutoScalingGroup")}
    queues = {r["Properties"]["JobQueueName"] for r in scale.resources("AWS::Batch::JobQueue")}
    for c in env.training:
        if c.scheduler == "batch":
            assert f"scale-{c.name}" in queues, c.name
            if c.gpu_pool is not None:
                assert f"scale-{c.name}-gpu" in queues, c.name  # its own queue, not a fallback
        else:
            assert f"scale-{c.name}" in groups, c.name
    placement = scale.resources("AWS::EC2::PlacementGroup")
    assert len(placement) >= len(env.training)  # one cluster placement group per cluster at least


def test_inference_fleets_are_synthesized_when_the_inference_stack_exists(scale: Scale) -> None:
    if not HAS_INFERENCE_STACK:
        pytest.skip("neuronkit/stacks/inference.py is not in this checkout: the 4 fleets are validated but not synthesized")
    # Fleets are found through the pool contract of neuronkit.reports.pools (Metadata.neuronkit of each group).
    pools = {
        r["Metadata"]["neuronkit"]["pool"]
        for r in scale.resources("AWS::AutoScaling::AutoScalingGroup")
        if (r.get("Metadata") or {}).get("neuronkit", {}).get("role") == "inference"
    }
    assert pools == {f.name for f in scale_environment().inference}
