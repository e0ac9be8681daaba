"""The first section of `neuronkit review` in words: IAM statement by statement (identity and resource policies),
the rollout (compile first, the rolling pace), and the software/model lines from two environment files."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from neuronkit import config
from neuronkit.catalog import releases
from neuronkit.reports import changes as words
from neuronkit.reports.review import Change

ROOT = Path(__file__).resolve().parents[2]
BUCKET_ARN = "arn:aws:s3:::prod-artifacts-222222222222-us-east-2"


def role_stack(read: str, *, condition: dict[str, Any] | None = None) -> dict[str, Any]:
    """A node role and its policy that reads one prefix of the artifacts bucket."""
    statement: dict[str, Any] = {"Sid": "ReadModel", "Effect": "Allow", "Action": "s3:GetObject", "Resource": read}
    if condition:
        statement["Condition"] = condition
    return {
        "Resources": {
            "NodeRole": {"Type": "AWS::IAM::Role", "Properties": {"Description": "prod-chat inference nodes"}},
            "NodeRolePolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {"Roles": [{"Ref": "NodeRole"}], "PolicyDocument": {"Statement": [statement]}},
            },
        }
    }


def test_a_new_model_prefix_reads_as_the_nodes_reading_it() -> None:
    old = {"prod-inference": role_stack(f"{BUCKET_ARN}/models/llama-3.1-70b-instruct/*")}
    new = {"prod-inference": role_stack(f"{BUCKET_ARN}/models/llama-3.3-70b-instruct/*")}
    lines = words.access_lines(old, new, ["prod-inference"])
    assert lines == [
        "prod-chat inference nodes (role NodeRole) may now read s3://prod-artifacts-222222222222-us-east-2/models/llama-3.3-70b-instruct/",
        "prod-chat inference nodes (role NodeRole) may no longer read s3://prod-artifacts-222222222222-us-east-2/models/llama-3.1-70b-instruct/",
    ]


def test_a_broader_prefix_and_a_wildcard_read_as_widened() -> None:
    old = {"s": role_stack(f"{BUCKET_ARN}/models/llama-3.1-70b-instruct/*")}
    (line,) = words.access_lines(old, {"s": role_stack(f"{BUCKET_ARN}/models/*")}, ["s"])
    assert line.startswith("**resource widened**: prod-chat inference nodes (role NodeRole) may now read")
    assert (
        "s3://prod-artifacts-222222222222-us-east-2/models/, wider than s3://prod-artifacts-222222222222-us-east-2/models/llama-3.1-70b-instruct/"
        in line
    )
    (line,) = words.access_lines(old, {"s": role_stack("*")}, ["s"])
    assert "**resource widened**" in line and "**\\*** (every resource)".replace("\\", "") in line


def test_an_added_action_and_a_dropped_condition_are_named() -> None:
    cond = {"StringEquals": {"aws:ResourceTag/team": "ml"}}
    old = {"s": role_stack(f"{BUCKET_ARN}/x/*", condition=cond)}
    new = copy.deepcopy(role_stack(f"{BUCKET_ARN}/x/*"))
    new["Resources"]["NodeRolePolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Action"] = [
        "s3:GetObject",
        "s3:PutObject",
    ]
    lines = words.access_lines(old, {"s": new}, ["s"])
    assert (
        "action added: prod-chat inference nodes (role NodeRole) may now write s3://prod-artifacts-222222222222-us-east-2/x/"
        in lines
    )
    assert any(
        line.startswith("**condition dropped**") and "without aws:ResourceTag/team StringEquals ml" in line for line in lines
    ), lines


def bucket_policy(resource: str, principal: Any) -> dict[str, Any]:
    return {
        "Resources": {
            "ArtifactsPolicy": {
                "Type": "AWS::S3::BucketPolicy",
                "Properties": {
                    "Bucket": "prod-artifacts-222222222222-us-east-2",
                    "PolicyDocument": {
                        "Statement": [
                            {
                                "Sid": "Partner",
                                "Effect": "Allow",
                                "Principal": principal,
                                "Action": "s3:GetObject",
                                "Resource": resource,
                            }
                        ]
                    },
                },
            }
        }
    }


def test_a_bucket_policy_widened_to_the_whole_bucket_and_a_new_principal_are_reported() -> None:
    partner = {"AWS": "arn:aws:iam::333333333333:root"}
    old = {"prod-storage": bucket_policy(f"{BUCKET_ARN}/shared/*", partner)}
    new = {
        "prod-storage": bucket_policy(
            f"{BUCKET_ARN}/*", {"AWS": ["arn:aws:iam::333333333333:root", "arn:aws:iam::444444444444:root"]}
        )
    }
    lines = words.access_lines(old, new, ["prod-storage"])
    assert (
        "principal added (bucket policy of prod-artifacts-222222222222-us-east-2): arn:aws:iam::444444444444:root may now "
        "read s3://prod-artifacts-222222222222-us-east-2/" in lines
    )
    assert (
        "**resource widened**: arn:aws:iam::333333333333:root, arn:aws:iam::444444444444:root may now read "
        "s3://prod-artifacts-222222222222-us-east-2/, wider than s3://prod-artifacts-222222222222-us-east-2/shared/ "
        "(bucket policy of prod-artifacts-222222222222-us-east-2)" in lines
    )


def key(statements: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Resources": {
            "EventsKey": {
                "Type": "AWS::KMS::Key",
                "Properties": {"Description": "prod fleet events", "KeyPolicy": {"Statement": statements}},
            }
        }
    }


def test_a_key_policy_that_lets_any_principal_decrypt_is_reported_in_bold() -> None:
    admin = {
        "Sid": "Admin",
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::222222222222:root"},
        "Action": "kms:*",
        "Resource": "*",
    }
    scoped = {
        "Sid": "Alarms",
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": "kms:Decrypt",
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:SourceAccount": "222222222222"}},
    }
    opened = {k: v for k, v in scoped.items() if k != "Condition"}
    everyone = {"Sid": "Everyone", "Effect": "Allow", "Principal": "*", "Action": "kms:Decrypt", "Resource": "*"}
    lines = words.access_lines({"m": key([admin, scoped])}, {"m": key([admin, opened, everyone])}, ["m"])
    assert any(
        line.startswith("**condition dropped**")
        and "aws:SourceAccount StringEquals 222222222222" in line
        and "(key policy of prod fleet events)" in line
        for line in lines
    ), lines
    assert (
        "**statement added** (key policy of prod fleet events): * may now decrypt with **\\*** (every resource)".replace("\\", "")
        in lines
    )
    # Nothing changes: nothing to say.
    assert words.access_lines({"m": key([admin])}, {"m": key([admin])}, ["m"]) == []


def fleet_stack(lt_version: str, *, compile_key: str | None) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "Lt": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {"ImageId": lt_version}}},
        "Group": {
            "Type": "AWS::AutoScaling::AutoScalingGroup",
            "Metadata": {"neuronkit": {"environment": "prod", "pool": "chat", "desired_size": 6, "min_size": 2}},
            "UpdatePolicy": {"AutoScalingRollingUpdate": {"MaxBatchSize": 3, "PauseTime": "PT40M"}},
            "Properties": {
                "AutoScalingGroupName": "prod-chat",
                "LaunchTemplate": {"LaunchTemplateId": {"Ref": "Lt"}, "Version": {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]}},
            },
        },
    }
    if compile_key:
        resources[f"Compile{compile_key}"] = {
            "Type": "AWS::AutoScaling::AutoScalingGroup",
            "Metadata": {
                "neuronkit-precompile": {
                    "pool": "chat",
                    "instance_type": "inf2.48xlarge",
                    "cache_key": compile_key,
                    "group": "prod-chat",
                }
            },
            "CreationPolicy": {"ResourceSignal": {"Count": 1, "Timeout": "PT2H40M"}},
            "Properties": {},
        }
    return {"Resources": resources}


def test_the_roll_compiles_first_then_replaces_every_node_at_the_rolling_pace() -> None:
    new = {"prod-inference": fleet_stack("ami-2", compile_key="b")}
    changes = [
        Change("prod-inference", "Lt", "AWS::EC2::LaunchTemplate", "modified", ("LaunchTemplateData",)),
        Change("prod-inference", "Compileb", "AWS::AutoScaling::AutoScalingGroup", "added"),
    ]
    (line,) = words.rollout_lines(changes, new, ["prod-inference"], lock_seconds=7200)
    assert line == (
        "prod/chat (prod-chat) rolls: launch template Lt changes; first one inf2.48xlarge node compiles b (a compile may "
        "take up to 2 h; CloudFormation waits up to 2 h 40 min for it); then **every node is replaced**: 6 node(s) at "
        "desired, 3 at a time, each batch waiting up to 40 min for its nodes to serve: up to 1 h 20 min"
    )
    # No template change: no roll.
    assert words.rollout_lines([], new, ["prod-inference"], 7200) == []


def test_a_replaced_bucket_is_bold_with_its_fate() -> None:
    lines = words.replaced_lines(
        [Change("prod-storage", "Data", "AWS::S3::Bucket", "replaced", why="BucketName cannot change in place")],
        ["prod-storage"],
        {"AWS::S3::Bucket": "bucket"},
    )
    assert lines == [
        "**prod-storage/Data** (AWS::S3::Bucket, bucket) is replaced: BucketName cannot change in place; **its data is lost**"
    ]


def test_software_lines_name_the_release_driver_and_the_warning(tmp_path: Path) -> None:
    """The issue's pull request: prod's training pool from its release to 2.29.1 (maintenance for PyTorch on trn2)."""
    base = config.load_environment(ROOT / "environments" / "prod.yaml")
    data = yaml.safe_load((ROOT / "environments" / "prod.yaml").read_text())
    name = data["training"][0]["name"]
    before = config.pool_releases(base)[name].release
    assert before is not None and before.version != "2.29.1"
    data["training"][0]["neuron_sdk"] = "2.29.1"
    (tmp_path / "prod.yaml").write_text(yaml.safe_dump(data))
    head = config.load_environment(tmp_path / "prod.yaml")
    after = releases.release("2.29.1")
    got = words.software_lines(base, head, words._warnings(head))
    assert got[0].startswith(f"{name} (training[0]): Neuron SDK {before.version} → 2.29.1")
    if before.driver != after.driver:
        assert f"driver floor {before.driver} → {after.driver}" in got[0]
    warned = [w for w in words._warnings(head) if w.startswith("training[0].neuron_sdk")]
    assert warned, "validate warns about 2.29.1 for PyTorch training on the pool's family"
    assert all(f"warning (validate): {w}" in got for w in warned)
    # The fleet did not change: no line about it.
    assert not any(line.startswith(f"{data['inference'][0]['name']} ") for line in got)


def test_the_touched_environments_are_those_whose_file_or_stacks_change() -> None:
    from neuronkit.reports.review import env_of, touched

    assert env_of("prod-eu-inference", ["prod", "prod-eu"]) == "prod-eu"
    assert env_of("other-stack", ["prod"]) is None
    same = {"dev": {"name": "dev"}, "prod": {"name": "prod", "x": 1}}
    assert touched(same, same, []) == []
    assert touched(same, {**same, "prod": {"name": "prod", "x": 2}}, []) == ["prod"]
    assert touched(same, {"dev": same["dev"]}, []) == ["prod"]  # removed
    code_change = [Change("dev-network", "Vpc", "AWS::EC2::VPC", "modified", ("Tags",))]
    assert touched(same, same, code_change) == ["dev"]
