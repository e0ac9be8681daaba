"""Shared assertion: the namespaces of the charts a template installs are the kit's, labelled, before the chart."""

from __future__ import annotations

import json
from typing import Any

from neuronkit.kubernetes import pod_security


def assert_chart_namespaces_are_labelled(template: dict[str, Any], expected: dict[str, str]) -> None:
    """Every chart release of ``template`` whose namespace is in ``expected`` (namespace -> level): Helm does not create
    it; a kubectl manifest does, with the level enforced, audited and warned, by ``kubectl apply`` on Create
    (``Overwrite``: adopts a namespace an earlier deploy's Helm created) and retains it, and the chart waits for that
    manifest."""
    res = template["Resources"]
    charts = [r for r in res.values() if r["Type"] == pod_security.CHART]
    found = 0
    for chart in charts:
        ns = chart["Properties"]["Namespace"]
        if ns not in expected:
            continue
        found += 1
        # aws-cdk-lib 2.275.0 HelmChart writes `CreateNamespace: createNamespace || undefined`; the handler passes
        # --create-namespace only when the property is there.
        assert "CreateNamespace" not in chart["Properties"], f"{ns}: Helm would create it bare"
        makers = [
            k
            for k, r in res.items()
            if r["Type"] == pod_security.MANIFEST
            and isinstance(r["Properties"]["Manifest"], str)  # a namespace has no deploy-time value
            and any(d["kind"] == "Namespace" and d["metadata"]["name"] == ns for d in json.loads(r["Properties"]["Manifest"]))
        ]
        assert len(makers) == 1, f"{ns}: created by {makers}"
        (doc,) = json.loads(res[makers[0]]["Properties"]["Manifest"])
        assert {k: v for k, v in doc["metadata"]["labels"].items() if k.startswith(pod_security.LABEL_PREFIX)} == (
            pod_security.labels(expected[ns])  # type: ignore[arg-type]
        )
        assert str(res[makers[0]]["Properties"].get("Overwrite")).lower() == "true"
        # Retained: neither a rollback's cleanup nor a stack delete runs `kubectl delete` on an adopted namespace
        # (neuronkit/constructs/eks/adopt.py).
        assert res[makers[0]].get("DeletionPolicy") == "Retain", f"{ns}: deleted on rollback or stack delete"
        assert makers[0] in (chart.get("DependsOn") or []), f"{ns}: the chart does not wait for its namespace"
    assert found == len(expected), f"charts found for {found} of {sorted(expected)}"
    problems = pod_security.template_problems(template, {})
    assert [p for p in problems if any(f"namespace {ns}" in p for ns in expected)] == []
