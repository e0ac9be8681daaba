"""EKS wiring that no snapshot may be the only net for (issue 37's mutation audit), each as behaviour: the boot check
runs before nodeadm and the kubelet and never starts them itself; the Lustre volume mounts the file system's own
mount name; node recovery may mark unhealthy only this cluster's groups; a tensor-parallel degree must divide the
cores, not only fit. (Taints, the EFA plugin and the chart's release: tests/unit/test_eks_scheduling.py; the Batch
nodes' HTTPS egress: tests/unit/test_batch.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from neuronkit.constructs.eks import LustreVolume, NeuronWorkloads, WorkloadsSpec
from neuronkit.constructs.eks.nodegroup import node_user_data
from tests.sandbox import Run, require, run_user_data
from tests.templates import bare_stack, resources, template
from tests.unit.test_eks import _cluster

# Starting the kubelet or nodeadm from the kit's script would register the node before (or despite) its check.
STARTS_JOIN = re.compile(
    r"^(systemctl (start|restart|enable|reload-or-restart)\b.*\b(nodeadm|kubelet)|nodeadm (init|run)\b|kubelet\b)"
)


def _starts(run: Run) -> list[str]:
    return [c for c in run.calls if STARTS_JOIN.search(c)]


def test_the_boot_check_never_starts_nodeadm_or_the_kubelet_itself(tmp_path: Path) -> None:
    require()  # never a skip
    from tests.unit.test_eks_boot_sandbox import _node_group_user_data, healthy, kept_out

    user_data = _node_group_user_data(["trn2.48xlarge"], efa=True, lnc=2)
    ok = run_user_data(user_data, healthy(), tmp_path / "ok")
    assert ok.returncode == 0 and _starts(ok) == [], ok.calls
    failed = run_user_data(user_data, healthy(neuron_devices=1), tmp_path / "failed")
    assert kept_out(failed) and _starts(failed) == [], failed.calls


def test_the_kit_script_is_a_cloud_init_part_that_nodeadm_runs_after() -> None:
    """nodeadm reads the NodeConfig part; the shell part runs in cloud-final, which nodeadm-run.service waits for
    (amazon-eks-ami nodeadm-run.service: After=cloud-final.service): the script is a part, never a nodeadm hook."""
    text = node_user_data("#!/bin/bash\necho check\n", 110)
    parts = text.split("--==NEURONKIT-EKS==")
    kinds = [re.search(r"Content-Type: ([^;\n]+)", p).group(1) for p in parts if "Content-Type" in p and "multipart" not in p]  # type: ignore[union-attr]
    assert kinds == ["application/node.eks.aws", "text/x-shellscript"]
    node_config = parts[1]
    assert "kubelet" in node_config and "echo check" not in node_config  # NodeConfig only configures the kubelet


def test_the_lustre_volume_mounts_the_file_systems_own_mount_name() -> None:
    stack = bare_stack()
    volume = LustreVolume(file_system_id="fs-0123456789abcdef0", dns_name="fs.example", mount_name="x7q2kbmv", size_gib=2400)
    NeuronWorkloads(
        stack, "W", cluster=_cluster(stack), spec=WorkloadsSpec(environment="team", neuron_releases=["2.31.1"], lustre=volume)
    )
    data = template(stack)
    docs = [
        d
        for r in resources(data, "Custom::AWSCDK-EKS-KubernetesResource").values()
        for d in json.loads(r["Properties"]["Manifest"])
    ]
    (pv,) = [d for d in docs if d["kind"] == "PersistentVolume"]
    assert pv["spec"]["csi"]["volumeAttributes"] == {"dnsname": "fs.example", "mountname": "x7q2kbmv"}
    assert pv["spec"]["csi"]["volumeHandle"] == "fs-0123456789abcdef0"


def test_the_example_volume_takes_the_mount_name_from_the_file_system(eks_example_stack: dict[str, Any]) -> None:
    """Through the stacks: the PV's mountname is the storage stack's LustreMountName attribute (not the id, not a
    literal): FSx gives each file system its own mount name."""
    eks = eks_example_stack
    joins = [
        r["Properties"]["Manifest"]["Fn::Join"][1]
        for r in resources(eks, "Custom::AWSCDK-EKS-KubernetesResource").values()
        if isinstance(r["Properties"]["Manifest"], dict)
        and any(
            isinstance(p, str) and '"kind":"PersistentVolume","metadata":{"name":"eks-lustre"' in p
            for p in r["Properties"]["Manifest"]["Fn::Join"][1]
        )
    ]
    assert len(joins) == 1  # the environment's volume (other manifests carry deploy-time values too)
    parts = joins[0]
    at = next(i for i, p in enumerate(parts) if isinstance(p, str) and p.endswith('"mountname":"'))
    assert "LustreMountName" in json.dumps(parts[at + 1])
    dns = next(i for i, p in enumerate(parts) if isinstance(p, str) and p.endswith('"dnsname":"'))
    assert "DNSName" in json.dumps(parts[dns + 1])


def _npd_statements() -> list[dict[str, Any]]:
    stack = bare_stack()
    NeuronWorkloads(stack, "W", cluster=_cluster(stack), spec=WorkloadsSpec(environment="team", neuron_releases=["2.31.1"]))
    data = template(stack)
    roles = {k for k, r in resources(data, "AWS::IAM::Role").items() if "NpdRole" in k}
    return [
        s
        for p in resources(data, "AWS::IAM::Policy").values()
        if any(r.get("Ref") in roles for r in p["Properties"]["Roles"])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_node_recovery_may_mark_only_this_clusters_groups_unhealthy() -> None:
    statements = _npd_statements()
    (mark,) = [s for s in statements if "autoscaling:SetInstanceHealth" in json.dumps(s["Action"])]
    assert mark["Condition"] == {"StringEquals": {"autoscaling:ResourceTag/eks:cluster-name": "team"}}
    assert "autoScalingGroup:*" in json.dumps(mark["Resource"])
    # No other statement grants SetInstanceHealth without the condition.
    assert [s for s in statements if "SetInstanceHealth" in json.dumps(s["Action"])] == [mark]


def test_a_tensor_parallel_degree_that_fits_but_does_not_divide_the_cores_is_refused(tmp_path: Path) -> None:
    from neuronkit.catalog import serving
    from tests.unit.test_serving import _problems, _prod

    fleet = _prod()["inference"][0]
    instance_type = (
        next(t for t in fleet["neuron_types"] if t in fleet["profiles"]) if fleet.get("profiles") else fleet["neuron_types"][0]
    )
    cores = serving.accelerators(instance_type)
    fits_not_divides = next(d for d in range(cores - 1, 1, -1) if cores % d)
    data = _prod()
    data["inference"][0].setdefault("profiles", {})[instance_type] = {"tensor_parallel": fits_not_divides}
    key = f"inference[0].profiles.{instance_type}.tensor_parallel:"
    (line,) = [p for p in _problems(data, tmp_path) if key in p]
    assert f"{fits_not_divides} does not divide the {cores}" in line and "use one of" in line
    divisor = next(d for d in range(cores - 1, 1, -1) if cores % d == 0)
    data["inference"][0]["profiles"][instance_type] = {"tensor_parallel": divisor}
    assert not [p for p in _problems(data, tmp_path) if key in p]
