"""The update plan (neuronkit.reports.plan): per resource, updates in place / replaced / cannot update, on hand-made
templates; the synthesized examples only for the list of fixed names (tests/compliance/test_day_two_table.py runs the
plan over the day-two changes)."""

from __future__ import annotations

import json
from typing import Any

from neuronkit.kubernetes import immutable
from neuronkit.reports import plan as planner
from neuronkit.reports.review import compare_templates, create_only


def t(resources: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": resources}


def nodegroup(**props: Any) -> dict[str, Any]:
    base = {
        "ClusterName": "c", "NodegroupName": "dev-chat", "InstanceTypes": ["inf2.8xlarge"], "NodeRole": "arn:role",
        "ReleaseVersion": "1.35.6-20260625", "ScalingConfig": {"MinSize": 1, "MaxSize": 4},
        "UpdateConfig": {"MaxUnavailable": 1, "UpdateStrategy": "MINIMAL"},
    }  # fmt: skip
    return {"Type": "AWS::EKS::Nodegroup", "Properties": {**base, **props}, "Metadata": {"neuronkit": {"pool": "chat"}}}


def _plan(old: dict[str, Any], new: dict[str, Any]) -> list[planner.Step]:
    a, b = {"dev-eks": old}, {"dev-eks": new}
    return planner.plan(a, b, compare_templates(a, b))


def test_an_instance_type_change_of_a_named_node_group_cannot_update_and_says_how_instead() -> None:
    """InstanceTypes is create-only (the provider schema) and the group's name is fixed: CloudFormation would create
    the replacement while the old group holds the name."""
    assert "/properties/InstanceTypes" in create_only("AWS::EKS::Nodegroup")
    (step,) = _plan(t({"Group": nodegroup()}), t({"Group": nodegroup(InstanceTypes=["inf2.xlarge"])}))
    assert step.verdict == planner.CANNOT
    assert "InstanceTypes" in step.why and "dev-chat" in step.why and "Name type" in step.why
    assert step.instead.startswith("two deploys")


def test_a_node_group_whose_name_changes_with_it_is_replaced_not_refused() -> None:
    (step,) = _plan(t({"Group": nodegroup()}), t({"Group": nodegroup(InstanceTypes=["x"], NodegroupName="dev-chat-b")}))
    assert step.verdict == planner.REPLACED and "nodes of dev-chat-b (pool chat) replaced" in step.effect


def test_a_release_bump_rolls_the_nodes_in_place_and_a_size_change_replaces_none() -> None:
    (roll,) = _plan(t({"Group": nodegroup()}), t({"Group": nodegroup(ReleaseVersion="1.35.6-20260714")}))
    assert roll.verdict == planner.IN_PLACE
    assert "nodes of dev-chat (pool chat) replaced (ReleaseVersion): 1 at a time, strategy MINIMAL" in roll.effect
    (size,) = _plan(t({"Group": nodegroup()}), t({"Group": nodegroup(ScalingConfig={"MinSize": 2, "MaxSize": 4})}))
    assert size.verdict == planner.IN_PLACE and "no node is replaced" in size.effect


def test_a_group_reading_a_changed_launch_templates_version_rolls_though_its_text_is_the_same() -> None:
    lt = {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {"UserData": "a"}}}
    group = nodegroup(LaunchTemplate={"Id": {"Ref": "Lt"}, "Version": {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]}})
    new_lt = json.loads(json.dumps(lt))
    new_lt["Properties"]["LaunchTemplateData"]["UserData"] = "b"
    steps = {s.logical_id: s for s in _plan(t({"Lt": lt, "Group": group}), t({"Lt": new_lt, "Group": group}))}
    assert steps["Group"].verdict == planner.IN_PLACE
    assert "launch template Lt has a new version" in steps["Group"].effect


def test_a_budget_whose_notifications_change_under_its_fixed_name_cannot_update() -> None:
    """NotificationsWithSubscribers is create-only for AWS::Budgets::Budget, and the kit names its budgets."""

    def budget(threshold: int) -> dict[str, Any]:
        return {"Type": "AWS::Budgets::Budget", "Properties": {
            "Budget": {"BudgetName": "neuronkit-dev", "BudgetLimit": {"Amount": 1}},
            "NotificationsWithSubscribers": [{"Notification": {"Threshold": threshold}}]}}  # fmt: skip

    (step,) = _plan(t({"B": budget(80)}), t({"B": budget(90)}))
    assert step.verdict == planner.CANNOT and "neuronkit-dev" in step.why


def test_a_kubernetes_object_that_cannot_update_is_a_cannot_update_step_of_its_manifest() -> None:
    def manifest(handle: str) -> dict[str, Any]:
        pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "lustre"},
              "spec": {"capacity": {"storage": "1200Gi"}, "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": handle}}}  # fmt: skip
        return {"Type": planner.MANIFEST, "Properties": {"Manifest": json.dumps([pv])}}

    (step,) = _plan(t({"Pv": manifest("fs-1")}), t({"Pv": manifest("fs-2")}))
    assert (step.logical_id, step.verdict) == ("Pv", planner.CANNOT)
    assert "ValidatePersistentVolumeUpdate" in step.why and step.instead
    growing = manifest("fs-1")
    growing["Properties"]["Manifest"] = growing["Properties"]["Manifest"].replace("1200Gi", "2400Gi")
    (grown,) = _plan(t({"Pv": manifest("fs-1")}), t({"Pv": growing}))
    assert grown.verdict == planner.IN_PLACE  # capacity is not the volume source


def _objects(doc: dict[str, Any]) -> dict[str, Any]:
    return t({"M": {"Type": planner.MANIFEST, "Properties": {"Manifest": json.dumps([doc])}}})


def test_the_immutable_rows_the_review_of_the_fixes_found() -> None:
    """TargetGroupBinding ipAddressType and vpcId; PVC spec other than its storage request; StorageClass parameters
    and provisioner: each a conflict naming its source."""
    tgb = {"apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding", "metadata": {"name": "b", "namespace": "n"},
           "spec": {"targetGroupARN": "arn", "targetType": "ip", "vpcId": "vpc-1", "ipAddressType": "ipv4"}}  # fmt: skip
    for field, value in (("vpcId", "vpc-2"), ("ipAddressType", "ipv6")):
        moved = json.loads(json.dumps(tgb))
        moved["spec"][field] = value
        (c,) = immutable.conflicts("s", _objects(tgb), _objects(moved))
        assert c.field == f"spec.{field}" and "checkImmutableFields" in c.source
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "n"},
           "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "v",
                    "resources": {"requests": {"storage": "1200Gi"}}}}  # fmt: skip
    bigger = json.loads(json.dumps(pvc))
    bigger["spec"]["resources"]["requests"]["storage"] = "2400Gi"
    assert immutable.conflicts("s", _objects(pvc), _objects(bigger)) == []
    other = json.loads(json.dumps(pvc))
    other["spec"]["accessModes"] = ["ReadWriteOnce"]
    (c,) = immutable.conflicts("s", _objects(pvc), _objects(other))
    assert c.field.startswith("spec (other than resources.requests") and "ValidatePersistentVolumeClaimUpdate" in c.source
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fsx"},
          "provisioner": "fsx.csi.aws.com", "parameters": {"deploymentType": "SCRATCH_2"}}  # fmt: skip
    changed = {**sc, "provisioner": "ebs.csi.aws.com", "parameters": {"deploymentType": "PERSISTENT_2"}}
    fields = sorted(c.field for c in immutable.conflicts("s", _objects(sc), _objects(changed)))
    assert fields == ["parameters", "provisioner"]


def test_review_prints_the_plan_before_what_changes_and_fails_on_cannot_update(monkeypatch: Any, capsys: Any) -> None:
    """`neuronkit review`: "Cannot update" and the plan come first; a fixed-name replacement fails the command."""
    import argparse

    from neuronkit.cli import review_cmd
    from neuronkit.reports import review

    steps = _plan(t({"Group": nodegroup()}), t({"Group": nodegroup(InstanceTypes=["inf2.xlarge"])}))
    result = review.Review(
        base="HEAD", plan=steps, cannot_update=[s.line() for s in planner.cannot_update(steps)],
        environment_of={"dev-eks": "dev"}, environments=[review.EnvChanges("dev")],
    )  # fmt: skip
    text = review.render(result)
    heads = [line for line in text.splitlines() if line.startswith("###")]
    assert heads[:4] == ["### Cannot update", "### Update plan", "#### dev", "### What changes"]
    assert "| dev-eks/Group | AWS::EKS::Nodegroup | **cannot update** |" in text and "**instead**: two deploys" in text
    monkeypatch.setattr(review, "review", lambda base, repo, envs=None: result)
    assert review_cmd.run(argparse.Namespace(base="HEAD", env=None, output=None)) == 1
    assert "### Update plan" in capsys.readouterr().out


def _kueue(cluster_queue: str | None, max_nodes: int = 4) -> dict[str, Any]:
    from neuronkit.kubernetes.training_job import kueue_manifests

    docs = kueue_manifests(
        environment="dev", pool="pretrain", instance_type="trn1.32xlarge", max_nodes=max_nodes, cluster_queue=cluster_queue
    )
    return t({"Queues": {"Type": planner.MANIFEST, "Properties": {"Manifest": json.dumps(docs)}}})


def test_a_pools_cluster_queue_change_cannot_update_its_local_queue_and_says_how_instead() -> None:
    """training[].cluster_queue moves the pool's LocalQueue (same name) to another ClusterQueue: Kueue v0.19.2's CRD
    refuses it (LocalQueueSpec.ClusterQueue, rule "self == oldSelf", "field is immutable"). Both ways: from the kit's
    own ClusterQueue to a user's, and from one user's queue to another."""
    for before, after in ((None, "team-a"), ("team-a", "team-b")):
        (c,) = immutable.conflicts("dev-eks", _kueue(before), _kueue(after))
        assert (c.kind, c.namespace, c.field) == ("kueue.x-k8s.io/LocalQueue", "neuronkit-training", "spec.clusterQueue")
        assert "localqueue_types.go" in c.source and "field is immutable" in c.source
        assert f"kubectl -n neuronkit-training delete localqueue {c.name}" in c.line()
        (step,) = _plan(_kueue(before), _kueue(after))
        assert step.verdict == planner.CANNOT and "spec.clusterQueue" in step.why and "delete localqueue" in step.instead


def test_a_pools_size_changes_its_cluster_queues_quota_in_place() -> None:
    """A ClusterQueue's resourceGroups (the quota) are validated on update as on create, not frozen
    (clusterqueue_webhook.go ValidateClusterQueueUpdate); the flavor's nodeLabels are frozen only with a topologyName."""
    assert immutable.conflicts("dev-eks", _kueue(None, 4), _kueue(None, 8)) == []
    (step,) = _plan(_kueue(None, 4), _kueue(None, 8))
    assert step.verdict == planner.IN_PLACE


def test_kueues_conditional_and_webhook_rows() -> None:
    flavor: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"},
              "spec": {"nodeLabels": {"neuronkit.io/pool": "a"}}}  # fmt: skip
    relabelled = json.loads(json.dumps(flavor))
    relabelled["spec"]["nodeLabels"] = {"neuronkit.io/pool": "b"}
    assert immutable.conflicts("s", _objects(flavor), _objects(relabelled)) == []  # no topologyName: mutable
    flavor["spec"]["topologyName"] = relabelled["spec"]["topologyName"] = "racks"
    (c,) = immutable.conflicts("s", _objects(flavor), _objects(relabelled))
    assert c.field == "spec.nodeLabels" and "topologyName is set" in c.source
    cq: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
          "spec": {"queueingStrategy": "StrictFIFO"}}  # fmt: skip
    concurrent = {**cq, "spec": {**cq["spec"], "concurrentAdmissionPolicy": {"migration": {"mode": "RetainFirstAdmission"}}}}
    (c,) = immutable.conflicts("s", _objects(cq), _objects(concurrent))
    assert c.field == "spec.concurrentAdmissionPolicy" and "ValidateClusterQueueUpdate" in c.source
    assert immutable.conflicts("s", _objects(cq), _objects({**cq, "spec": {"queueingStrategy": "BestEffortFIFO"}})) == []


def _transition_rules(schema: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(path, message) of every CEL rule that reads ``oldSelf`` (a rule an update can break) in a CRD schema."""
    out = [
        (path, str(v.get("message", "")))
        for v in schema.get("x-kubernetes-validations") or []
        if "oldSelf" in str(v.get("rule", ""))
    ]
    for name, sub in (schema.get("properties") or {}).items():
        out += _transition_rules(sub, (*path, name))
    if isinstance(schema.get("items"), dict):
        out += _transition_rules(schema["items"], path)
    return out


def test_every_update_rule_of_the_pinned_kueue_crds_is_a_row_of_the_table() -> None:
    """The checked-in Kueue CRD schemas (the pinned version, neuronkit/kubernetes/crds/) carry each "self == oldSelf"
    rule the table encodes: a pin bump that adds one fails here until the table has its row."""
    from pathlib import Path

    crds = sorted(Path(immutable.__file__).parent.glob("crds/kueue.x-k8s.io_*.json"))
    found = 0
    for path in crds:
        crd = json.loads(path.read_text())
        kind = f"{crd['group']}/{crd['kind']}"
        for where, message in _transition_rules(crd["openAPIV3Schema"]):
            found += 1
            # A rule on a field freezes that field; a rule on an object names the field first in its message.
            field = where if where and "immutable when" not in message else (*where, message.split()[0])
            assert any(r.kind == kind and r.path == field for r in immutable.IMMUTABLE), (kind, field, message)
    assert crds and found >= 4  # LocalQueue's clusterQueue and ResourceFlavor's three
