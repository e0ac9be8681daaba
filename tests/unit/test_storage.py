"""TrainingStorage: retained, encrypted, TLS-only buckets and FSx for Lustre 2.15 linked to S3."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.conftest import Synth

# Logical IDs of stateful resources are a public contract: changing one replaces the resource.
PINNED = {
    "dev-storage": {
        "StorageDatasets615E7AC1": "AWS::S3::Bucket",
        "StorageCheckpoints2CDBDF43": "AWS::S3::Bucket",
        "StorageArtifacts08431D1F": "AWS::S3::Bucket",
        "StorageAccessLogs96FB524C": "AWS::S3::Bucket",
        "StorageLustre6434AAB0": "AWS::FSx::FileSystem",
    },
    "prod-storage": {
        "StorageDatasets615E7AC1": "AWS::S3::Bucket",
        "StorageCheckpoints2CDBDF43": "AWS::S3::Bucket",
        "StorageArtifacts08431D1F": "AWS::S3::Bucket",
        "StorageAccessLogs96FB524C": "AWS::S3::Bucket",
        "StorageLustre6434AAB0": "AWS::FSx::FileSystem",
        "StorageLustreKey93589703": "AWS::KMS::Key",
    },
}


@pytest.mark.parametrize("stack", sorted(PINNED))
def test_stateful_logical_ids_are_pinned_and_retained(synth: Synth, stack: str) -> None:
    resources = synth.template(stack)["Resources"]
    for logical_id, type_ in PINNED[stack].items():
        assert logical_id in resources, f"{stack}: {logical_id} was renamed; that would replace a stateful resource"
        assert resources[logical_id]["Type"] == type_
        assert resources[logical_id]["DeletionPolicy"] == "Retain"
        assert resources[logical_id]["UpdateReplacePolicy"] == "Retain"


@pytest.mark.parametrize("stack", sorted(PINNED))
def test_buckets_encrypted_private_tls_only(synth: Synth, stack: str) -> None:
    t = synth.template(stack)
    buckets = {k: v for k, v in t["Resources"].items() if v["Type"] == "AWS::S3::Bucket"}
    policies = [v for v in t["Resources"].values() if v["Type"] == "AWS::S3::BucketPolicy"]
    for logical_id, bucket in buckets.items():
        props = bucket["Properties"]
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        policy = next(p for p in policies if p["Properties"]["Bucket"] == {"Ref": logical_id})
        denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies), logical_id


def test_checkpoints_are_versioned_and_old_versions_expire(synth: Synth) -> None:
    props = synth.template("prod-storage")["Resources"]["StorageCheckpoints2CDBDF43"]["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["BucketName"] == "prod-checkpoints-222222222222-us-east-2"
    rule = props["LifecycleConfiguration"]["Rules"][0]
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == 60


def _fs(synth: Synth, stack: str) -> dict[str, Any]:
    props: dict[str, Any] = synth.template(stack)["Resources"]["StorageLustre6434AAB0"]["Properties"]
    return props


def test_prod_lustre_is_persistent_2_15_with_throughput_and_kms(synth: Synth) -> None:
    fs = _fs(synth, "prod-storage")
    assert fs["FileSystemTypeVersion"] == "2.15"
    assert fs["StorageCapacity"] == 4800
    assert fs["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    assert fs["LustreConfiguration"]["PerUnitStorageThroughput"] == 250
    assert fs["KmsKeyId"] == {"Ref": "StorageLustreKey93589703"}
    # FSx does not back up file systems linked to S3; the versioned checkpoints bucket is the copy.
    assert fs["LustreConfiguration"]["AutomaticBackupRetentionDays"] == 0
    assert len(fs["SubnetIds"]) == 1


def test_dev_lustre_is_scratch_2_without_throughput_or_key(synth: Synth) -> None:
    fs = _fs(synth, "dev-storage")
    assert fs["FileSystemTypeVersion"] == "2.15"
    assert fs["LustreConfiguration"]["DeploymentType"] == "SCRATCH_2"
    assert "PerUnitStorageThroughput" not in fs["LustreConfiguration"]
    assert "KmsKeyId" not in fs


def test_data_repository_associations(synth: Synth) -> None:
    prod = synth.resources("prod-storage", "AWS::FSx::DataRepositoryAssociation")
    paths = {p["Properties"]["FileSystemPath"]: p["Properties"] for p in prod.values()}
    assert set(paths) == {"/datasets", "/checkpoints"}
    assert "AutoExportPolicy" in paths["/checkpoints"]["S3"]
    assert "AutoExportPolicy" not in paths["/datasets"]["S3"]
    assert "ImportPath" not in str(_fs(synth, "prod-storage"))  # cannot be combined with associations
    # SCRATCH_2 on Lustre 2.15 takes associations with automatic export too.
    dev = synth.resources("dev-storage", "AWS::FSx::DataRepositoryAssociation")
    assert sorted(p["Properties"]["FileSystemPath"] for p in dev.values()) == ["/checkpoints", "/datasets"]


@pytest.mark.parametrize("stack", sorted(PINNED))
def test_lustre_security_group_allows_lustre_ports_from_clients_and_itself(synth: Synth, stack: str) -> None:
    groups = synth.resources(stack, "AWS::EC2::SecurityGroup")
    fs_sg = next(k for k in groups if k.startswith("StorageLustreSecurityGroup"))
    client_sg = next(k for k in groups if k.startswith("StorageLustreClientSecurityGroup"))
    allowed = {
        (r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0], r["Properties"]["FromPort"], r["Properties"]["ToPort"])
        for r in synth.resources(stack, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [fs_sg, "GroupId"]}
    }
    assert allowed == {(src, a, b) for src in (fs_sg, client_sg) for a, b in ((988, 988), (1018, 1023))}
    Template.from_json(synth.template(stack)).resource_count_is("AWS::FSx::FileSystem", 1)


@pytest.mark.parametrize("versioned", [True, False])
def test_datasets_bucket_versioning_is_a_choice_defaulting_to_on(versioned: bool) -> None:
    from neuronkit.constructs import TrainingStorage
    from tests.templates import bare_stack, imported_vpc, resources, template

    stack = bare_stack()
    TrainingStorage(stack, "Storage", vpc=imported_vpc(stack), **({} if versioned else {"datasets_versioned": False}))
    (datasets,) = [r for k, r in resources(template(stack), "AWS::S3::Bucket").items() if k.startswith("StorageDatasets")]
    assert ("VersioningConfiguration" in datasets["Properties"]) is versioned
    assert datasets["DeletionPolicy"] == "Retain"


def test_each_pool_writes_checkpoints_under_its_own_prefix_only() -> None:
    from neuronkit.constructs.storage import StorageAccess
    from tests.templates import bare_stack, resources, template

    stack = bare_stack()
    from aws_cdk import aws_iam as iam

    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    StorageAccess("d", "ckpt", "art").grant_node_access(role, pool="pretrain")
    (policy,) = resources(template(stack), "AWS::IAM::Policy").values()
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert "ckpt/pretrain/*" in str(statements["WriteOwnCheckpoints"]["Resource"])
    assert statements["Checkpoints"]["Action"] == "s3:GetObject"
