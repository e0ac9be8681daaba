"""Kubernetes and Helm rules the kit's EKS cluster relies on that moto does not enforce (moto models no Kubernetes
objects), checked on the synthesized EKS example (examples/environments/eks.yaml). Each test quotes the document
it enforces; docs/aws-contracts.md lists them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from neuronkit.kubernetes import placement, scheduling
from tests.conftest import ROOT, pinned_app

EXAMPLE = ROOT / "examples" / "environments" / "eks.yaml"


@pytest.fixture(scope="module")
def eks() -> dict[str, Any]:
    from neuronkit.config.loader import parse_environment
    from neuronkit.stacks import build_environment

    env = parse_environment(yaml.safe_load(EXAMPLE.read_text()), str(EXAMPLE))
    app, _ = pinned_app(lambda a: build_environment(a, env))
    return dict(next(s.template for s in app.synth().stacks if s.stack_name.endswith("-eks")))


def test_no_daemonset_that_need_not_run_on_accelerators_tolerates_their_taints(eks: dict[str, Any]) -> None:
    """Kubernetes API reference, Toleration (core/v1), ``key``: "Empty means match all taint keys. If the key is
    empty, operator must be Exists; this combination means to match all values and all keys." A wildcard toleration
    puts a DaemonSet on every tainted accelerator node; only the device plugins and the node problem detector may.
    And every Deployment selects the system node group (``nodeSelector``: "the node must have each of the indicated
    key-value pairs as labels")."""
    found = placement.workloads(eks)
    assert [w for w in found if w.kind == "DaemonSet"] and [w for w in found if w.kind == "Deployment"]
    assert placement.placement_problems(eks) == []
    assert placement.tolerates({"operator": "Exists"}, scheduling.NEURON_TAINT)  # the quoted rule, as the check reads it


def test_the_npd_namespace_can_be_adopted_by_the_neuron_release(eks: dict[str, Any]) -> None:
    """Helm (pkg/action/validate.go; helm/helm#7649, Helm 3.2): an existing resource that a chart renders "exists and
    cannot be imported into the current release: invalid ownership metadata" unless it is labelled
    ``app.kubernetes.io/managed-by: Helm`` and annotated ``meta.helm.sh/release-name`` and
    ``meta.helm.sh/release-namespace`` with the release's name and namespace. The kit creates the node problem
    detector's namespace before the chart; should a chart version render it too, Helm must adopt it, not fail."""
    charts = [r["Properties"] for r in eks["Resources"].values() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"]
    (neuron,) = [c for c in charts if c["Chart"] == "neuron-helm-chart"]
    namespaces = [
        doc
        for r in eks["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and isinstance(r["Properties"]["Manifest"], str)
        for doc in json.loads(r["Properties"]["Manifest"])
        if doc["kind"] == "Namespace"
    ]
    assert namespaces
    for doc in namespaces:
        meta = doc["metadata"]
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert meta["annotations"]["meta.helm.sh/release-name"] == neuron["Release"]
        assert meta["annotations"]["meta.helm.sh/release-namespace"] == neuron["Namespace"]
