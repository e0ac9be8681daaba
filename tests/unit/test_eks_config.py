"""platform: eks in the environment file: the eks section, the pool keys EKS refuses (one line each, with the
reason), pod-sized subnets, and what `neuronkit review` says about a Kubernetes version bump."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit import catalog
from neuronkit.config import ConfigError, addressing, load_environment
from neuronkit.reports.review import compare_templates
from tests.project import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "environments" / "eks.yaml").read_text())
WHERE = "environments/eks.yaml"


def problems(edit: dict[str, Any] | None = None, drop: tuple[str, ...] = (), tmp: Path | None = None) -> list[str]:
    data = copy.deepcopy(EXAMPLE)
    for path, value in (edit or {}).items():
        *parents, last = path.split(".")
        node: Any = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    for key in drop:
        data.pop(key)
    assert tmp is not None
    (tmp / "environments").mkdir(exist_ok=True)
    path = tmp / "environments" / "eks.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        load_environment(Path("environments") / "eks.yaml")
    except ConfigError as err:
        return err.problems
    return []


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_example_is_valid_and_the_default_platform_stays_asg() -> None:
    env = load_environment(ROOT / "examples" / "environments" / "eks.yaml")
    assert env.platform == "eks" and env.eks is not None and env.eks.version == catalog.eks_facts()["kubernetes"]["version"]
    assert env.eks.endpoint == "private" and env.eks.admins
    # The repository's examples stay on the default platform (a user's own file under environments/ may be on EKS).
    assert all(
        e.platform == "asg" and e.eks is None for e in (load_environment(ROOT / "environments" / f"{n}.yaml") for n in EXAMPLES)
    )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"training.0.scheduler": "batch"}, "training[0].scheduler: AWS Batch is not a Kubernetes scheduler"),
        ({"training.0.ami": {"family": "neuron-base-al2023"}}, "training[0].ami: EKS node groups boot the catalog's amiType"),
        (
            {"training.0.scale_in_protection": False},
            "training[0].scale_in_protection: EKS owns the node group's Auto Scaling group",
        ),
        ({"training.0.compile_cache": "s3"}, "training[0].compile_cache: an S3 compile cache needs a pod role"),
        ({"training.0.capacity.fallback": "gpu-pool"}, "training[0].capacity.fallback: a Capacity Block's fallback on EKS"),
        ({"inference.0.load_balancer": "nlb"}, "inference[0].load_balancer: an Auto Scaling path setting EKS serving"),
        ({"inference.0.gpu_ami": {"family": "gpu-base-oss-ubuntu-24.04"}}, "inference[0].gpu_ami: EKS node groups boot"),
        ({"eks.kubernetes_version": "1.20"}, "eks.kubernetes_version: '1.20' is not a version the catalog pins"),
        ({"eks.admins": []}, "eks.admins: name at least one IAM role ARN"),
        ({"eks.endpoint": "public-and-private"}, "eks.public_access_cidrs: name the networks the public endpoint answers"),
        ({"eks.admins": ["arn:aws:iam::333333333333:group/admins"]}, "eks.admins[0]:"),
    ],
)
def test_a_key_eks_does_not_honour_is_one_line_with_its_reason(here: Path, edit: dict[str, Any], expected: str) -> None:
    found = problems(edit, tmp=here)
    assert any(line.startswith(f"{WHERE}: {expected}") for line in found), found
    assert all(line.startswith(f"{WHERE}: ") and "\n" not in line for line in found)


def test_the_eks_section_needs_platform_eks(here: Path) -> None:
    found = problems({"platform": "asg"}, tmp=here)
    assert f"{WHERE}: eks: only used with platform: eks; remove it or set platform: eks" in found


def test_subnets_hold_every_pods_address(here: Path) -> None:
    # use2-az1: 16 trn2 + 2 p5 + 8 inf2 + 2 trn2 (chat-trn2) nodes, each 1 + 110 pods + 5 warm addresses, plus services
    # and the control plane.
    pods = catalog.eks_facts()["pods"]
    per_node = 1 + pods["max_pods_per_node"] + pods["warm_ip_target"]
    need = addressing.SERVICE_ADDRESSES + pods["control_plane_addresses_per_subnet"] + (16 + 2 + 8 + 2) * per_node
    found = problems({"network.cidr": "10.30.0.0/19"}, tmp=here)
    assert any(f"use2-az1 needs {need:,} addresses" in line and "110 pods per node" in line for line in found), found
    assert problems({"network.cidr": "10.30.0.0/19", "eks.max_pods_per_node": 20}, tmp=here) == []


def test_review_says_how_a_kubernetes_bump_goes_and_refuses_a_skip() -> None:
    def cluster(version: str) -> dict[str, Any]:
        return {"eks-eks": {"Resources": {"C": {"Type": "AWS::EKS::Cluster", "Properties": {"Name": "eks", "Version": version}}}}}

    (one,) = compare_templates(cluster("1.34"), cluster("1.35"), {"eks-eks": "us-east-2"})
    assert one.action == "modified" and "control plane upgrades in place first" in one.why and "release_version" in one.why
    (skip,) = compare_templates(cluster("1.34"), cluster("1.36"), {"eks-eks": "us-east-2"})
    assert "skips 1 minor version(s)" in skip.why and "deploy 1.35 first" in skip.why


def test_budget_and_capacity_block_notices_work_on_eks(here: Path) -> None:
    # The example sets both; a file without them is valid too, and another budget and notice hours are accepted.
    assert EXAMPLE["budget"]["monthly_usd"] > 0 and EXAMPLE["training"][0]["capacity"]["warn_hours_before_end"]
    assert (
        problems(
            {"budget": {"monthly_usd": 400000, "enforce": "max"}, "training.0.capacity.warn_hours_before_end": [48]}, tmp=here
        )
        == []
    )
    assert problems(drop=("budget",), tmp=here) == []


def test_the_budget_gate_holds_on_eks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from neuronkit.cli import main

    data = copy.deepcopy(EXAMPLE)
    data["budget"] = {"monthly_usd": 1000}
    # chat-trn2 (Trn2: no On-Demand list price in the catalog) makes the file unpriceable, so the example enforces no
    # budget; the gate is checked on the priceable pools, and an unpriceable file is refused while enforce is on.
    data["inference"] = [f for f in data["inference"] if f["name"] != "chat-trn2"]
    path = tmp_path / "eks.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert code == 1 and ": ok:" not in out
    assert f"{path}: budget.monthly_usd: the estimate at desired capacity" in err and "exceeds the budget of $1,000.00" in err
    # The example itself validates with the gate off (its Trn2 pool cannot be priced); with the gate on it is refused.
    assert main(["validate", str(ROOT / "examples" / "environments" / "eks.yaml")]) == 0
    capsys.readouterr()
    data = copy.deepcopy(EXAMPLE)
    data["budget"] = {"monthly_usd": EXAMPLE["budget"]["monthly_usd"]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", str(path)]) == 1
    assert "budget.enforce: the environment cannot be priced" in capsys.readouterr().err


def test_an_eks_environment_has_no_image_lookup_to_pin() -> None:
    from neuronkit.config.lookups import image_lookups, unpinned_warnings

    env = load_environment(ROOT / "examples" / "environments" / "eks.yaml")
    assert image_lookups(env) == [] and unpinned_warnings(env, {}, "--file eks.yaml") == []
    asg = load_environment(ROOT / "environments" / "prod.yaml").model_copy(update={"training": env.training[:0]})
    assert image_lookups(asg) != []  # the Auto Scaling path still looks its fleets' images up


def test_spill_settings_are_eks_keys_with_the_rebalancers_default(here: Path) -> None:
    assert problems({"inference.0.spill_after_minutes": 0, "inference.0.return_after_minutes": 45}, tmp=here) == []
    env = load_environment(ROOT / "examples" / "environments" / "eks.yaml")
    fleet = env.inference[0]
    # return_after defaults to the rebalancer's period, as the Auto Scaling path returns every rebalance_minutes.
    assert fleet.spill_after_minutes == 5 and fleet.return_after == fleet.rebalance_minutes == 30
    found = problems({"inference.0.spill_after_minutes": 61}, tmp=here)
    assert any(line.startswith(f"{WHERE}: inference[0].spill_after_minutes") for line in found), found


def test_spill_settings_are_refused_on_the_auto_scaling_path(here: Path) -> None:
    data = yaml.safe_load((ROOT / "environments" / "prod.yaml").read_text())
    data["inference"][0]["spill_after_minutes"] = 2
    (here / "environments").mkdir()
    (here / "environments" / "prod.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError) as err:
        load_environment(Path("environments") / "prod.yaml")
    lines = [p for p in err.value.problems if "spill_after_minutes" in p]
    assert lines == [
        "environments/prod.yaml: inference[0].spill_after_minutes: only used with platform: eks (the Auto Scaling group "
        "falls back at once and the rebalancer returns every rebalance_minutes); remove it"
    ]


def test_a_cluster_without_the_node_autoscaler_needs_no_pin(here: Path) -> None:
    assert problems({"eks.node_autoscaler": False, "eks.neuron": {"dra": True}}, tmp=here) == []
    found = problems({"eks.neuron": {"dra": True}}, tmp=here)
    assert [line for line in found if "eks.neuron.dra" in line and "Cluster Autoscaler" in line], found
    # Without inference fleets the kit installs no autoscaler (training node groups keep their sizes): DRA is fine.
    assert problems({"eks.neuron": {"dra": True}}, drop=("inference",), tmp=here) == []


def _warnings(here: Path, edit: dict[str, Any], drop_model: int | None = None) -> list[str]:
    from neuronkit.config import neuron_warnings

    data = copy.deepcopy(EXAMPLE)
    assert problems(edit, tmp=here) == []
    if drop_model is not None:
        data = yaml.safe_load((here / "environments" / "eks.yaml").read_text())
        data["inference"][drop_model].pop("model")
        (here / "environments" / "eks.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return neuron_warnings(load_environment(Path("environments") / "eks.yaml"))


def test_validate_warns_on_one_replica_plain_http_and_a_fleet_without_model_on_eks(here: Path) -> None:
    """Issue 49: a served fleet of min_size 1 is an outage at every node image update or repair; a plain-HTTP listener
    carries prompts unencrypted (as the Auto Scaling path warns); a fleet without model serves nothing on EKS."""
    found = _warnings(here, {"inference.0.min_size": 1})
    assert any(w.startswith("inference[0].min_size: 1 serving pod") for w in found), found
    assert any(w.startswith("inference[0].tls: the listener is plain HTTP") for w in found), found
    assert not any(w.startswith("inference[0].min_size") for w in _warnings(here, {"inference.0.min_size": 2}))
    tls = {
        "inference.0.tls": {
            "certificate_arn": "arn:aws:acm:us-east-2:111111111111:certificate/12345678-1234-1234-1234-123456789012"
        }
    }
    assert not any(w.startswith("inference[0].tls") for w in _warnings(here, tls))
    found = _warnings(here, {}, drop_model=1)
    assert any(w.startswith("inference[1].model: not set, so on EKS this fleet is a node group") for w in found), found
    assert all("\n" not in w for w in found)


def test_requests_per_target_is_an_eks_key(here: Path) -> None:
    """KEDA's trigger uses it (docs/eks.md, "Scaling on demand"): accepted on EKS, no longer refused."""
    assert problems({"inference.0.requests_per_target": 30}, tmp=here) == []
