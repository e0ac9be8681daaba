"""The charts whose namespaces the kit labels "restricted" (KEDA, JobSet, Kueue) ship pods that pass it: their pinned
values set every security-context control of the Restricted profile, and the kit's values change none of them.
Checked on the values files, not on rendered pods: no helm binary renders the charts' templates offline, so a
template that ignores a value shows only at deploy (docs/eks.md, "Pod Security")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit import catalog
from neuronkit.constructs.eks.training_jobs import jobset_values, kueue_values
from neuronkit.kubernetes import keda, pod_security

CHARTS = Path(__file__).parents[1] / "fixtures" / "charts"
EKS = catalog.eks_facts()


def _values(name: str, version: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CHARTS / f"{name}-{version}.values.yaml").read_text())["values"]
    return data


def _keda() -> tuple[str, dict[str, Any], dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]]]:
    v = _values("keda", str(EKS["keda"]["version"]))
    pods = {
        component: (v["podSecurityContext"][component], {component: v["securityContext"][component]})
        for component in ("operator", "metricServer", "webhooks")
    }
    for component in ("operator", "metricsServer", "webhooks"):  # the three Deployments' hostNetwork switches
        assert v[component]["useHostNetwork"] is False
    return str(EKS["keda"]["pod_security"]), keda.chart_values(), pods


def _jobset() -> tuple[str, dict[str, Any], dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]]]:
    pin = EKS["training_jobs"]["jobset"]
    c = _values("jobset", str(pin["version"]))["controller"]
    assert c["hostNetwork"] is False
    return (
        str(pin["pod_security"]),
        jobset_values(),
        {"controller": (c["podSecurityContext"], {"controller": c["securityContext"]})},
    )


def _kueue() -> tuple[str, dict[str, Any], dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]]]:
    pin = EKS["training_jobs"]["kueue"]
    v = _values("kueue", str(pin["version"]))
    m = v["controllerManager"]["manager"]
    assert v["controllerManager"]["hostNetwork"] is False and v["enableKueueViz"] is False
    return (
        str(pin["pod_security"]),
        kueue_values(),
        {"manager": (m["podSecurityContext"], {"manager": m["containerSecurityContext"]})},
    )


@pytest.mark.parametrize("chart", [_keda, _jobset, _kueue], ids=["keda", "jobset", "kueue"])
def test_the_pinned_charts_pods_pass_the_level_their_namespace_enforces(chart: Any) -> None:
    """kubernetes.io, Pod Security Standards, Restricted: "Privilege escalation ... must not be allowed", "Containers
    must be required to run as non-root users", "Seccomp profile must be explicitly set to one of the allowed values",
    "Containers must drop ALL capabilities". The charts' pod templates (read at the pinned tags: docs/eks.md) take
    these contexts from values; the kit sets no securityContext key, so the defaults hold."""
    level, kit_values, pods = chart()
    assert level == "restricted"
    assert "securityContext" not in json.dumps(kit_values) and "hostNetwork" not in json.dumps(kit_values)
    assert pods
    for name, (pod_ctx, containers) in pods.items():
        assert pod_security.restricted_context_violations(pod_ctx, containers) == [], name


def test_the_restricted_check_refuses_what_restricted_refuses() -> None:
    good = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod_security.restricted_context_violations({"runAsNonRoot": True}, {"c": good}) == []
    assert pod_security.restricted_context_violations({}, {"c": good}) == ["Running as Non-root: container c"]
    bad = {**good, "allowPrivilegeEscalation": True, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}
    found = pod_security.restricted_context_violations({"runAsNonRoot": True}, {"c": bad})
    assert found == [
        "Privilege Escalation: container c does not set allowPrivilegeEscalation false",
        "Capabilities: container c adds SYS_ADMIN",
    ]
    no_seccomp = {k: v for k, v in good.items() if k != "seccompProfile"}
    assert pod_security.restricted_context_violations({"runAsNonRoot": True}, {"c": no_seccomp}) == [
        "Seccomp: container c has no RuntimeDefault or Localhost profile"
    ]
    assert (
        pod_security.restricted_context_violations(
            {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}, {"c": no_seccomp}
        )
        == []
    )
