"""`neuronkit review` on EKS (the node image and its driver, the Neuron chart, Capacity Block node replacement) and
on both platforms a change that needs a new image pin: its whole review, with the pin at the top."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit.catalog import eks_images, releases
from neuronkit.config.loader import parse_environment
from neuronkit.reports import changes
from neuronkit.reports.review import Change, Review, render
from tests.conftest import ROOT, pinned_app

EXAMPLE = ROOT / "examples" / "environments" / "eks.yaml"


def _example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return data


def _synth(data: dict[str, Any]) -> tuple[Any, dict[str, dict[str, Any]]]:
    from neuronkit.stacks import build_environment

    env = parse_environment(data, "eks.yaml")
    app, _ = pinned_app(lambda a: build_environment(a, env))
    return env, {s.stack_name: s.template for s in app.synth().stacks}


@pytest.fixture(scope="module")
def bump() -> tuple[Any, dict[str, Any], Any, dict[str, Any]]:
    """The EKS example, and the same with its Trainium cluster moved from Neuron 2.28.1 to 2.29.1."""
    base_env, base = _synth(_example())
    data = _example()
    data["training"][0]["neuron_sdk"] = "2.29.1"
    head_env, head = _synth(data)
    return base_env, base, head_env, head


def _modified(base: dict[str, Any], head: dict[str, Any]) -> list[Change]:
    from neuronkit.reports.review import compare_templates

    return compare_templates(base, head, {})


def test_the_review_names_each_pools_node_image_and_driver_against_its_release(bump: Any) -> None:
    _, base, head_env, head = bump
    lines = changes.eks_software_lines(base, head, ["eks-eks"], head_env)
    pinned = eks_images.for_release(head_env.eks.version, "2.29.1")  # the newest image in 2.29.1's driver window
    assert pinned is not None
    (pretrain,) = [line for line in lines if line.startswith("pretrain:")]
    assert f"node image AL2023_x86_64_NEURON {pinned.release_version} (Neuron driver {pinned.neuron_driver}" in pretrain
    assert f"in Neuron 2.29.1's driver window ({releases.driver_window('2.29.1').describe()})" in pretrain
    (gpu,) = [line for line in lines if line.startswith("pretrain-gpu:")]
    assert "AL2023_x86_64_NVIDIA" in gpu and "NVIDIA driver" in gpu
    assert any(line.startswith("Neuron Helm chart ") for line in lines)
    assert not any("cdk.context.json" in line for line in lines)


def test_an_image_below_the_pools_driver_floor_is_flagged(bump: Any) -> None:
    _, base, head_env, head = bump
    older = [r for r in eks_images.images("neuron") if not eks_images.meets(r, "2.27.4.0")]
    assert older, "the catalog lists an image older than Neuron 2.29.1's driver"
    stale = copy.deepcopy(head)
    for r in stale["eks-eks"]["Resources"].values():
        if r["Type"] == "AWS::EKS::Nodegroup" and r["Properties"]["AmiType"].endswith("NEURON"):
            r["Properties"]["ReleaseVersion"] = older[-1].release_version
    (pretrain,) = [
        line for line in changes.eks_software_lines(base, stale, ["eks-eks"], head_env) if line.startswith("pretrain:")
    ]
    assert "→" in pretrain and "(its nodes are replaced)" in pretrain
    assert (
        f"**Neuron driver {older[-1].neuron_driver} does not suit Neuron 2.29.1" in pretrain and "fail the boot check" in pretrain
    )


def test_a_capacity_block_groups_node_replacement_is_warned_and_louder_during_the_block(bump: Any) -> None:
    _, base, _, head = bump
    found = _modified(base, head)
    before = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    (line,) = changes.capacity_block_lines(found, head, ["eks-eks"], now=before)
    assert line.startswith("**pretrain (Capacity Block node group eks-pretrain): EKS replaces its nodes**")
    assert "its launch template changes" in line and "desired size 0" in line and "the block starts 2027-01-04" in line
    during = dt.datetime(2027, 1, 10, tzinfo=dt.UTC)
    (loud,) = changes.capacity_block_lines(found, head, ["eks-eks"], now=during)
    assert "**THE BLOCK IS ACTIVE NOW (until 2027-01-18T11:30:00Z)" in loud
    # No change to the group: no warning.
    assert changes.capacity_block_lines([], head, ["eks-eks"], now=during) == []


def test_the_eks_software_part_claims_no_dlami(bump: Any) -> None:
    base_env, _, head_env, _ = bump
    lines = changes.software_lines(base_env, head_env, [])
    assert lines and not any("cdk.context.json" in line or "DLAMI" in line for line in lines)


def test_a_pin_needed_comes_first_in_the_rendered_review() -> None:
    pin = "environments/prod.yaml: training[0]: image lookup 'x' is not pinned in cdk.context.json for 1/us-east-2; run ..."
    text = render(Review(base="HEAD", pins_needed=[pin]))
    assert text.index("### Pin needed first") < text.index("No resource changes.") and pin in text


# --- end to end, in a clone without credentials ---


def _clone(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the project's repository")
    clone = tmp_path_factory.mktemp(name) / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for key, value in (("user.email", "test@example.com"), ("user.name", "test")):
        subprocess.run(["git", "-C", str(clone), "config", key, value], check=True)
    return clone


def _review(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull})
    return subprocess.run(
        [sys.executable, "-m", "neuronkit.cli", "review", *args],
        cwd=clone, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def test_review_of_a_release_bump_on_the_eks_example(tmp_path_factory: pytest.TempPathFactory) -> None:
    clone = _clone(tmp_path_factory, "eks-review")
    target = clone / "environments" / "eks.yaml"
    shutil.copy(EXAMPLE, target)
    subprocess.run(["git", "-C", str(clone), "add", "environments/eks.yaml"], check=True)
    subprocess.run(["git", "-C", str(clone), "commit", "-qm", "the EKS example as an environment"], check=True)
    data = yaml.safe_load(target.read_text())
    data["training"][0]["neuron_sdk"] = "2.29.1"
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    done = _review(clone, "HEAD", "--env", "eks")
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stdout.partition("### Resources")[0]
    pinned = eks_images.for_release(str(data.get("eks", {}).get("kubernetes_version") or "1.35"), "2.29.1")
    assert pinned is not None
    assert "pretrain (training[0]): Neuron SDK 2.28.1 → 2.29.1" in first
    assert f"- pretrain: node image AL2023_x86_64_NEURON {pinned.release_version} (Neuron driver {pinned.neuron_driver}" in first
    assert "**pretrain (Capacity Block node group eks-pretrain): EKS replaces its nodes**" in first
    assert "cdk.context.json" not in first


def test_review_of_an_asg_release_bump_without_its_pin(tmp_path_factory: pytest.TempPathFactory) -> None:
    clone = _clone(tmp_path_factory, "pin-review")
    prod = clone / "environments" / "prod.yaml"
    data = yaml.safe_load(prod.read_text())
    data["training"][0]["neuron_sdk"] = "2.29.1"  # its DLAMI lookup is not in cdk.context.json
    prod.write_text(yaml.safe_dump(data, sort_keys=False))
    context = json.loads((clone / "cdk.context.json").read_text())
    assert not [k for k in context if "Neuron SDK 2.29.1" in k and "region=us-east-2" in k]
    done = _review(clone, "HEAD", "--env", "prod")
    assert done.returncode == 1, done.stderr[-3000:]  # the pin is a finding
    text = done.stdout
    top, _, rest = text.partition("### What changes")
    assert "### Pin needed first" in top and "training[0]" in top and "is not pinned in cdk.context.json" in top
    assert "neuronkit pin --env prod" in top
    # The whole review still follows: the release and its warning, the model, IAM, the cost.
    assert "pretrain (training[0]): Neuron SDK 2.28.1 → 2.29.1" in rest
    assert "warning (validate): training[0].neuron_sdk:" in rest
    assert "**Cost against the budget**" in rest and "### Against the budgets" in rest
