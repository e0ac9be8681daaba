"""`neuronkit review BASE`: template comparison with replacements (create-only properties, logical-ID
changes, references to replaced resources across stacks), and the command in a clone without credentials."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit.reports.review import Change, Review, compare_templates, create_only, render
from tests.conftest import ROOT


def t(resources: dict[str, Any], outputs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"Resources": resources, **({"Outputs": outputs} if outputs else {})}


SUBNET = {
    "Type": "AWS::EC2::Subnet",
    "Properties": {"VpcId": "vpc-1", "CidrBlock": "10.0.0.0/24", "AvailabilityZoneId": "use1-az6"},
}
FSX = {
    "Type": "AWS::FSx::FileSystem",
    "DeletionPolicy": "Retain",
    "Properties": {"FileSystemType": "LUSTRE", "StorageCapacity": 1200, "SubnetIds": [{"Fn::ImportValue": "net-private-0"}]},
}
BUCKET = {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "team-data"}}


def test_create_only_properties_come_from_the_provider_schema() -> None:
    assert "/properties/SubnetIds" in create_only("AWS::FSx::FileSystem")
    assert "/properties/BucketName" in create_only("AWS::S3::Bucket")
    assert create_only("AWS::No::SuchType") == ()


def test_an_update_in_place_is_modified_and_a_create_only_change_is_replaced() -> None:
    old = {"s": t({"Fs": FSX, "B": BUCKET})}
    bigger = copy.deepcopy(FSX)
    bigger["Properties"]["StorageCapacity"] = 2400
    renamed = copy.deepcopy(BUCKET)
    renamed["Properties"]["BucketName"] = "team-data-2"
    changes = {c.logical_id: c for c in compare_templates(old, {"s": t({"Fs": bigger, "B": renamed})})}
    assert (changes["Fs"].action, changes["Fs"].properties) == ("modified", ("StorageCapacity",))
    assert (changes["B"].action, changes["B"].why, changes["B"].retained) == (
        "replaced",
        "BucketName cannot change in place",
        False,
    )


def test_a_stateful_resource_under_a_new_logical_id_is_replaced() -> None:
    (change,) = compare_templates({"s": t({"Data": BUCKET})}, {"s": t({"DataV2": BUCKET})})
    assert (change.logical_id, change.action, change.why) == ("Data", "replaced", "its logical ID changed to DataV2")


def _compile_group(key: str) -> dict[str, Any]:
    return {
        "Type": "AWS::AutoScaling::AutoScalingGroup",
        "Metadata": {
            "neuronkit-precompile": {"pool": "chat", "instance_type": "inf2.48xlarge", "cache_key": key, "group": "prod-chat"}
        },
        "Properties": {"MinSize": "0", "MaxSize": "1", "DesiredCapacity": "1"},
    }


def test_a_new_compiled_artifact_key_reads_as_its_compile_group_swapped() -> None:
    old = {"s": t({"CompileA": _compile_group("compiled/m/a/"), "Data": BUCKET})}
    new = {"s": t({"CompileB": _compile_group("compiled/m/b/"), "Data": BUCKET})}
    changes = {c.logical_id: c for c in compare_templates(old, new)}
    assert changes["CompileA"].action == "removed" and "previous key compiled/m/a/" in changes["CompileA"].why
    assert changes["CompileB"].action == "added"
    assert changes["CompileB"].why == (
        "compiles inf2.48xlarge's new key compiled/m/b/ on one node; prod-chat's rolling update waits for it"
    )
    assert "prod-chat's rolling update waits for it" in render(Review(base="main", changes=list(changes.values())))


def test_a_replaced_subnet_replaces_the_file_system_in_another_stack() -> None:
    net_old = t({"Private0": SUBNET}, {"P0": {"Value": {"Ref": "Private0"}, "Export": {"Name": "net-private-0"}}})
    moved = copy.deepcopy(SUBNET)
    moved["Properties"]["AvailabilityZoneId"] = "use1-az4"
    net_new = t({"Private0": moved}, {"P0": {"Value": {"Ref": "Private0"}, "Export": {"Name": "net-private-0"}}})
    old, new = {"net": net_old, "storage": t({"Fs": FSX})}, {"net": net_new, "storage": t({"Fs": FSX})}
    changes = {(c.stack, c.logical_id): c for c in compare_templates(old, new)}
    assert changes[("net", "Private0")].action == "replaced"
    fs = changes[("storage", "Fs")]
    assert (fs.action, fs.why, fs.retained) == ("replaced", "SubnetIds refers to net/Private0, which is replaced", True)
    text = render(Review(base="main", changes=list(changes.values())))
    assert "**storage/Fs** (AWS::FSx::FileSystem) replaced" in text
    assert "the old file system is retained (orphaned); the new one starts empty" in text


def test_a_removed_bucket_without_retain_says_data_is_lost() -> None:
    text = render(Review(base="main", changes=[Change("s", "Data", "AWS::S3::Bucket", "removed")]))
    assert "**bucket: data lost unless retained**" in text


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of this repository's committed state, as a pull request's checkout would be."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the project's repository")
    path = tmp_path_factory.mktemp("review") / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "config", "user.email", "test@example.com"], check=True)
    subprocess.run(["git", "-C", str(path), "config", "user.name", "test"], check=True)
    return path


def test_review_in_a_clone_flags_the_file_system_a_moved_subnet_replaces(clone: Path) -> None:
    prod = clone / "environments" / "prod.yaml"
    data = yaml.safe_load(prod.read_text())
    # Move the file system's pinned AZ (and nothing else): its subnet changes, so CloudFormation replaces it.
    data["storage"]["lustre"]["az_id"] = "use2-az2"
    prod.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "neuronkit.cli", "review", "HEAD", "-o", str(clone / "review.md")],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]  # retained: a finding for the reader, not lost data
    text = (clone / "review.md").read_text()
    assert "**prod-storage/StorageLustre6434AAB0** (AWS::FSx::FileSystem) replaced: SubnetIds cannot change in place" in text
    # ... and what hangs off it is replaced with it.
    assert (
        "| StorageDatasetsLinkDB4A18C9 | AWS::FSx::DataRepositoryAssociation | replaced | – | FileSystemId refers to prod-storage/StorageLustre6434AAB0"
        in text
    )
    assert "the old file system is retained (orphaned); the new one starts empty" in text
    assert "### Against the budgets" in text and "prod: $" in text
    # The base worktree is gone again.
    listed = subprocess.run(["git", "-C", str(clone), "worktree", "list"], capture_output=True, text=True, check=True).stdout
    assert len(listed.strip().splitlines()) == 1


def _why_pull_request(clone: Path) -> None:
    """The pull request of issue 26's "Why", as a working tree on top of the clone's commit: prod's chat fleet grows
    (max 12 -> 16, desired 4 -> 6), serves Mistral 7B from a new S3 prefix with a longer context, and the training
    pool moves to Neuron SDK 2.29.1 (its DLAMI lookup pinned in cdk.context.json, as the real change would)."""
    prod = clone / "environments" / "prod.yaml"
    data = yaml.safe_load(prod.read_text())
    fleet = data["inference"][0]
    assert fleet["model"]["id"] == "meta-llama/Llama-3.1-8B-Instruct"  # the base this fixture starts from
    fleet.update(max_size=16, desired_size=6)
    fleet["model"].update(
        id="mistralai/Mistral-7B-Instruct-v0.3",
        s3_prefix="models/mistral-7b-instruct-v0.3/",
        max_model_len=16384,
        parameters_billion=7.25,
    )
    data["training"][0]["neuron_sdk"] = "2.29.1"
    prod.write_text(yaml.safe_dump(data, sort_keys=False))
    context_file = clone / "cdk.context.json"
    context = json.loads(context_file.read_text())
    pinned = [k for k in context if "Neuron SDK 2.28.1" in k and "region=us-east-2" in k]
    assert pinned, "the base pins prod's 2.28.1 DLAMI"
    context[pinned[0].replace("2.28.1", "2.29.1")] = "ami-0a29b1c2d3e4f5a6b"
    context_file.write_text(json.dumps(context, indent=2))


def _review(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull})
    return subprocess.run(
        [sys.executable, "-m", "neuronkit.cli", "review", *args],
        cwd=clone, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def test_review_of_the_issue_pull_request_says_what_changes_first(tmp_path_factory: pytest.TempPathFactory) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the project's repository")
    clone = tmp_path_factory.mktemp("why") / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    _why_pull_request(clone)
    out = clone / "review.md"
    done = _review(clone, "HEAD", "-o", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    first, _, rest = text.partition("### Resources")
    assert rest, "the resource table stays, below the first section"
    # Only the environment the change touches (dev's file and stacks are the same in both revisions).
    assert "#### prod" in first and "#### dev" not in first
    # The fleet's size (the base's sizes from the committed file).
    was = yaml.safe_load((ROOT / "environments" / "prod.yaml").read_text())["inference"][0]
    name, sizes = was["name"], f"{was['min_size']}/{was.get('desired_size', was['min_size'])}/{was['max_size']}"
    assert f"- {name} (inference): nodes min/desired/max {sizes} → {was['min_size']}/6/16" in first
    # The SDK change, with validate's warning for the head.
    assert "pretrain (training[0]): Neuron SDK 2.28.1 → 2.29.1" in first
    assert "warning (validate): training[0].neuron_sdk: PyTorch training on trn2 is in maintenance in Neuron 2.29.1" in first
    # The model change, and the context length in the serving profile and its compiled-artifact key.
    assert "chat: model meta-llama/Llama-3.1-8B-Instruct (8.03B, bfloat16) → mistralai/Mistral-7B-Instruct-v0.3 (7.25B" in first
    assert "chat on inf2.48xlarge: max_model_len 8192 → 16384; compiled-artifact key " in first
    # The widened read, in words.
    bucket = "prod-artifacts-222222222222-us-east-2"
    assert (
        f"prod-chat inference nodes (role FleetchatNodeRole4D7F59C6) may now read s3://{bucket}/models/mistral-7b-instruct-v0.3/"
        in first
    )
    assert f"may no longer read s3://{bucket}/models/llama-3.1-8b-instruct/" in first
    # The roll: the compile first, with its budget, then every node at the rolling pace.
    roll = next(line for line in first.splitlines() if line.startswith("- prod/chat (prod-chat) rolls:"))
    assert "first one inf2.48xlarge node compiles compiled/mistralai-mistral-7b-instruct-v0.3/" in roll
    assert "a compile may take up to 2 h" in roll and "**every node is replaced**: 6 node(s) at desired" in roll
    assert "- prod/pretrain (prod-pretrain): launch template" in first and "no rolling update" in first
    # The cost against the budget, at the three levels, for prod alone.
    assert "**Cost against the budget**" in first and "| desired | $" in first
    assert "Budget $450,000.00 a month; estimate min $" in first and "within the budget at desired" in first
    budgets = rest.partition("### Against the budgets")[2]
    assert "prod: $" in budgets and "dev:" not in budgets
    # An environment neither revision has is a usage error, before any synth.
    done = _review(clone, "HEAD", "--env", "staging")
    assert (
        done.returncode == 2
        and "--env staging: no such environment in either revision; known environments: dev, prod" in done.stderr
    )
