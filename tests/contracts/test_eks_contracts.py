"""Kubernetes and Helm rules the kit's EKS cluster relies on that moto does not enforce (moto models no Kubernetes
objects), checked on the synthesized EKS example (examples/environments/eks.yaml). Each test quotes the document
it enforces; docs/aws-contracts.md lists them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from neuronkit.kubernetes import placement, scheduling
from tests.conftest import ROOT, Synth
from tests.templates import group_name

EXAMPLE = ROOT / "examples" / "environments" / "eks.yaml"


@pytest.fixture(scope="module")
def eks(eks_example_stack: dict[str, Any]) -> dict[str, Any]:
    """The eks stack of the synthesized EKS example (one synthesis per test run, tests/conftest.py)."""
    return eks_example_stack


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
    from neuronkit import catalog

    npd_namespace = catalog.eks_facts()["node_problem_detector"]["namespace"]
    namespaces = [
        doc
        for r in eks["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and isinstance(r["Properties"]["Manifest"], str)
        for doc in json.loads(r["Properties"]["Manifest"])
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] == npd_namespace
    ]
    assert namespaces  # the other namespaces (serving, training, controllers) belong to no chart
    for doc in namespaces:
        meta = doc["metadata"]
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert meta["annotations"]["meta.helm.sh/release-name"] == neuron["Release"]
        assert meta["annotations"]["meta.helm.sh/release-namespace"] == neuron["Namespace"]


def _nvidia_findings(name: str, template: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the template's NVIDIA node groups, one line per way it breaks the rule below)."""
    from neuronkit import catalog
    from neuronkit.kubernetes import nvidia_chart

    res = template.get("Resources", {})
    nvidia_ami = str(catalog.eks_facts()["node_images"]["gpu"]["ami_type"])
    groups = {
        group_name(r): r["Properties"]
        for r in res.values()
        if r["Type"] == "AWS::EKS::Nodegroup" and r["Properties"].get("AmiType") == nvidia_ami
    }
    if not groups:
        return [], []
    facts = nvidia_chart.chart_facts()
    charts = [
        r["Properties"]
        for r in res.values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"].get("Chart") == facts["chart"]
    ]
    if len(charts) != 1:
        return list(groups), [f"{name}: {len(charts)} {facts['chart']} charts for NVIDIA node groups {sorted(groups)}"]
    chart, problems = charts[0], []
    if (chart["Repository"], chart["Version"]) != (facts["repository"], str(facts["version"])):
        problems.append(f"{name}: {chart['Repository']} {chart['Version']} is not the catalog's pin")
    terms = json.loads(chart["Values"])["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    selected = {v for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"] for v in e["values"]}
    for group, props in groups.items():
        if props.get("Labels", {}).get(scheduling.POOL_LABEL) not in selected:
            problems.append(f"{name}: the plugin does not select node group {group}")
    return list(groups), problems


def test_every_nvidia_node_group_gets_the_pinned_nvidia_device_plugin(eks: dict[str, Any], synth: Synth) -> None:
    """Amazon EKS User Guide, "Install Kubernetes device plugin for GPUs" (ml-eks-k8s-device-plugin.html): "When using
    the EKS-optimized AL2023 AMIs with NVIDIA GPUs, you must install the NVIDIA Kubernetes device plugin." Without it
    no node advertises nvidia.com/gpu and the GPU serving Deployment never schedules. Every synthesized EKS template
    (the example and every environment of the project) with a node group of amiType AL2023_x86_64_NVIDIA installs the
    catalog's pinned nvidia-device-plugin chart, and its affinity selects each of those groups."""
    templates = {"eks-eks (example)": eks, **{k: v for k, v in synth.templates.items() if k.endswith("-eks")}}
    checked, problems = [], []
    for name, template in templates.items():
        groups, found = _nvidia_findings(name, template)
        checked += groups
        problems += found
    assert checked, "no NVIDIA node group in any synthesized template: the rule was not exercised"
    assert problems == []


def test_the_nvidia_rule_check_fails_without_the_chart(eks: dict[str, Any]) -> None:
    """The check above catches the defect it exists for: the example without its NVIDIA chart."""
    stripped = {
        "Resources": {k: r for k, r in eks["Resources"].items() if r.get("Properties", {}).get("Chart") != "nvidia-device-plugin"}
    }
    groups, problems = _nvidia_findings("stripped", stripped)
    assert groups and len(problems) == 1 and "0 nvidia-device-plugin charts" in problems[0]


# Pod Security (issue 49): every namespace the kit creates enforces a level, the serving and training namespaces at
# least "baseline", and every pod the templates apply is admitted under its namespace's level.
POD_SECURITY_FLOORS = {scheduling.SERVING_NAMESPACE: "baseline", scheduling.TRAINING_NAMESPACE: "baseline"}


def test_every_kit_namespace_enforces_pod_security_and_admits_every_kit_pod(eks: dict[str, Any], synth: Synth) -> None:
    """kubernetes.io, "Pod Security Standards", Baseline: "Adding additional capabilities beyond those listed below
    must be disallowed" (AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP,
    SETGID, SETPCAP, SETUID, SYS_CHROOT); host namespaces, privileged containers, hostPath volumes, host ports and
    unsafe sysctls are refused too. "Pod Security Admission": a namespace's ``pod-security.kubernetes.io/enforce``
    label makes the API server reject a pod that violates the level. On the example and every environment of the
    project (the user EKS files included): every Namespace the kit applies carries the label, serving and training
    enforce baseline at least, and every pod spec the templates apply (Deployments, Jobs, the GPU Deployment's
    template patch) is admitted. And every namespace a chart or object of the template goes into (``kube-system``
    aside, the cluster's own) is one the template creates with the labels, never one Helm's ``createNamespace`` makes
    bare (KEDA, JobSet and Kueue get theirs from the kit)."""
    from neuronkit.kubernetes import pod_security

    templates = {"eks-eks (example)": eks, **{k: v for k, v in synth.templates.items() if k.endswith("-eks")}}
    problems, serving_pods, namespaces = [], 0, 0
    for name, template in templates.items():
        ns, pods = pod_security.applied(template)
        namespaces += len(ns)
        serving_pods += sum(1 for _, n, _ in pods if n == scheduling.SERVING_NAMESPACE)
        problems += [f"{name}: {p}" for p in pod_security.template_problems(template, POD_SECURITY_FLOORS)]
    assert namespaces and serving_pods, "no namespace or serving pod found: the rule was not exercised"
    assert problems == []


def _with_added_capability(template: dict[str, Any], cap: str) -> dict[str, Any]:
    """The template with ``cap`` added to every serving container named ``server`` of its kubectl manifests (a manifest
    is a JSON string, or a Fn::Join of JSON pieces around deploy-time values)."""
    import copy

    out = copy.deepcopy(template)
    added = f'"name": "server", "securityContext": {{"capabilities": {{"add": ["{cap}"]}}}}'

    def edit(text: str) -> str:
        return text.replace('"name":"server"', added).replace('"name": "server"', added)

    for r in out["Resources"].values():
        props = r.get("Properties") or {}
        manifest = props.get("Manifest")
        if isinstance(manifest, str):
            props["Manifest"] = edit(manifest)
        elif isinstance(manifest, dict) and "Fn::Join" in manifest:
            sep, parts = manifest["Fn::Join"]
            props["Manifest"] = {"Fn::Join": [sep, [edit(x) if isinstance(x, str) else x for x in parts]]}
    return out


def test_the_pod_security_check_refuses_an_added_capability_and_an_unlabelled_namespace(eks: dict[str, Any]) -> None:
    """The check above catches what it exists for: SYS_ADMIN or IPC_LOCK added back to a serving container, a
    serving namespace without its label."""
    from neuronkit.kubernetes import pod_security

    for cap in ("SYS_ADMIN", "IPC_LOCK"):
        problems = pod_security.template_problems(_with_added_capability(eks, cap), POD_SECURITY_FLOORS)
        assert problems and all(f"adds {cap}" in p for p in problems), problems
    unlabelled = json.loads(json.dumps(eks).replace("pod-security.kubernetes.io/enforce", "x-unlabelled"))
    problems = pod_security.template_problems(unlabelled, POD_SECURITY_FLOORS)
    assert f"namespace {scheduling.SERVING_NAMESPACE}: no pod-security.kubernetes.io/enforce label" in problems
    # A chart whose Helm creates its namespace, and a chart's namespace the template does not create: both refused.
    import copy

    helm_made = copy.deepcopy(eks)
    charts = [r for r in helm_made["Resources"].values() if r["Type"] == pod_security.CHART]
    (keda,) = [r for r in charts if r["Properties"]["Release"] == "keda"]
    keda["Properties"]["CreateNamespace"] = True
    for key, r in list(helm_made["Resources"].items()):
        if r["Type"] == pod_security.MANIFEST and '"name":"keda"' in str(r["Properties"]["Manifest"]).replace(" ", ""):
            del helm_made["Resources"][key]
    problems = pod_security.template_problems(helm_made, POD_SECURITY_FLOORS)
    assert any(p.startswith("chart keda: Helm creates namespace keda") for p in problems), problems
    assert any(p.startswith("namespace keda: chart keda") for p in problems), problems


def _every_template(eks_example: tuple[Any, dict[str, dict[str, Any]]], synth: Synth) -> list[tuple[str, dict[str, Any]]]:
    """Every template of the EKS example and of every environment file of the project (a user's EKS file included)."""
    return [*eks_example[1].items(), *synth.templates.items()]


def test_every_node_group_name_fits_eks_and_is_the_digest_of_its_create_only_properties(
    eks_example: tuple[Any, dict[str, dict[str, Any]]], synth: Synth
) -> None:
    """Amazon EKS User Guide, "Create a managed node group": "The node group name can't be longer than 63 characters.
    It must start with letter or digit, but can also include hyphens and underscores for the remaining characters."
    And CloudFormation User Guide, "Name type": "You can't perform an update that causes a custom-named resource to
    be replaced. If you must replace the resource, specify a new name." Every synthesized node group's name is
    ``ENV-POOL-<digest>`` over exactly its create-only properties as the template holds them, so a change that
    replaces the group renames it (docs/eks.md, "Day two")."""
    import re

    from neuronkit.constructs.eks import nodegroup_name as naming

    facts = naming.facts()
    groups = [(stack, r) for stack, t in _every_template(eks_example, synth)
              for r in t["Resources"].values() if r["Type"] == "AWS::EKS::Nodegroup"]  # fmt: skip
    assert len(groups) >= 6  # the example's five pools and its system group
    for stack, r in groups:
        name = str(r["Properties"]["NodegroupName"])
        assert len(name) <= int(facts["max_length"]) and re.match(str(facts["pattern"]), name), f"{stack}: {name}"
        assert naming.name_of_template_resource(naming.prefix_of(name), r) == name, f"{stack}: {name} is not its digest"


def test_the_catalog_lists_the_node_group_create_only_properties_of_the_resource_schema() -> None:
    """The digest covers the properties whose change replaces an ``AWS::EKS::Nodegroup``: the resource schema's
    ``createOnlyProperties`` as cfn-lint ships it, less the name itself (catalog/eks.yaml ``nodegroup_names``)."""
    from neuronkit.constructs.eks import nodegroup_name as naming
    from neuronkit.reports import review

    schema = {p.split("/")[2] for p in review.create_only("AWS::EKS::Nodegroup")}
    assert "InstanceTypes" in schema
    assert set(naming.facts()["create_only_properties"]) == schema - {"NodegroupName"}


def test_every_addon_created_over_a_self_managed_one_overwrites_conflicts(
    eks_example: tuple[Any, dict[str, dict[str, Any]]], synth: Synth
) -> None:
    """Amazon EKS API reference, CreateAddon, resolveConflicts: "None - If the self-managed version of the add-on is
    installed on your cluster, Amazon EKS doesn't change the value. Creation of the add-on might fail." and "Overwrite -
    If the self-managed version of the add-on is installed on your cluster and the Amazon EKS default value is
    different than the existing value, Amazon EKS changes the value to the Amazon EKS default value." EKS bootstraps
    vpc-cni, coredns and kube-proxy self-managed (CreateCluster, bootstrapSelfManagedAddons); the kit's add-ons of those
    names, created over them, say OVERWRITE (``AWS::EKS::Addon`` ``ResolveConflicts`` serves create and update)."""
    from neuronkit import catalog

    bootstrapped = set(catalog.eks_facts()["bootstrapped_addons"]["names"])
    addons = [(stack, r["Properties"]) for stack, t in _every_template(eks_example, synth)
              for r in t["Resources"].values() if r["Type"] == "AWS::EKS::Addon"]  # fmt: skip
    over = [(stack, a) for stack, a in addons if a["AddonName"] in bootstrapped]
    assert len(over) >= len(bootstrapped)
    assert [f"{stack}: {a['AddonName']}" for stack, a in over if a.get("ResolveConflicts") != "OVERWRITE"] == []


# Objects the kit adopts (review of issue 49): a manifest whose Create may find its object there adopts it with
# `kubectl apply` (Overwrite) and is retained, so that neither a rollback's cleanup nor a stack delete runs
# `kubectl delete` on it (neuronkit/constructs/eks/adopt.py; docs/eks.md, "Objects the kit adopts").
def _manifest_documents(raw: Any) -> list[dict[str, Any]]:
    """A kubectl manifest's objects: a JSON string, or a Fn::Join of JSON pieces around deploy-time values."""
    if isinstance(raw, dict) and "Fn::Join" in raw:
        raw = "".join(p if isinstance(p, str) else "TOKEN" for p in raw["Fn::Join"][1])
    return [d for d in json.loads(raw) if isinstance(d, dict)]


def _adoption_findings(name: str, template: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(adopting manifests, problems) of one template. An object can exist before its manifest's Create when it is a
    Namespace (Helm's `--create-namespace` made the charts' ones in an environment deployed before; on eks.existing
    the user may have it), a Service (each fleet's moved out of the fleet's manifest, issue 49), or it lives in a
    namespace that no create-only manifest of the template makes (so the namespace, and what is in it, may predate
    the stack). A create-only manifest (no Overwrite) fails on such an object instead of adopting it: not checked."""
    from neuronkit.kubernetes import pod_security

    res = template["Resources"]
    manifests = {k: r for k, r in res.items() if r["Type"] == pod_security.MANIFEST}
    overwrites = {k for k, r in manifests.items() if str(r["Properties"].get("Overwrite")).lower() == "true"}
    made = {
        d["metadata"]["name"]
        for k, r in manifests.items()
        if k not in overwrites
        for d in _manifest_documents(r["Properties"]["Manifest"])
        if d["kind"] == "Namespace"
    }
    adopting, problems = [], []
    for k, r in manifests.items():
        docs = _manifest_documents(r["Properties"]["Manifest"])
        may_exist = [
            f"{d['kind']}/{d['metadata']['name']}"
            for d in docs
            if d["kind"] in ("Namespace", "Service") or d["metadata"].get("namespace", "default") not in made
        ]
        if not may_exist or k not in overwrites:
            continue  # a create-only manifest fails on an existing object (the Lustre volume's), it never adopts one
        adopting.append(k)
        policies = (r.get("DeletionPolicy"), r.get("UpdateReplacePolicy"))
        if policies != ("Retain", "Retain"):
            problems.append(f"{name}: {k} adopts {may_exist} but its Deletion/UpdateReplacePolicy is {policies}")
    return adopting, problems


def test_every_manifest_that_can_adopt_an_existing_object_is_retained(eks: dict[str, Any], synth: Synth) -> None:
    """CloudFormation UpdateStack/CreateStack, ``RetainExceptOnCreate``: "When set to true, newly created resources are
    deleted when the operation rolls back. This includes newly created resources marked with a deletion policy of
    Retain. Default: false" (the CDK CLI's ``cdk deploy`` leaves it unset), so a ``Retain`` resource created by a
    failed deploy survives the rollback's cleanup; and the DeletionPolicy attribute "also applies to stack update
    operations that lead to resources being deleted from stacks". aws-cdk-lib 2.275.0's kubectl handler runs
    ``kubectl delete`` on a manifest's Delete. On the example and every EKS environment of the project: every
    manifest that may find its objects already there (the charts' and the node problem detector's namespaces, each
    fleet's Service) adopts them (``Overwrite``) and is retained, and every chart namespace and Service the template
    applies is among them."""
    templates = {"eks-eks (example)": eks, **{k: v for k, v in synth.templates.items() if k.endswith("-eks")}}
    problems: list[str] = []
    services = namespaces = 0
    for name, template in templates.items():
        adopting, found = _adoption_findings(name, template)
        problems += found
        kinds = [d["kind"] for k in adopting for d in _manifest_documents(template["Resources"][k]["Properties"]["Manifest"])]
        services += kinds.count("Service")
        namespaces += kinds.count("Namespace")
    assert services and namespaces, "no adopted Service or namespace found: the rule was not exercised"
    assert problems == []


def test_the_adoption_rule_fails_on_a_manifest_that_deletes_what_it_adopted(eks: dict[str, Any]) -> None:
    """The check above catches the defect it exists for: the example with the KEDA namespace's and each Service's
    manifest back at DeletionPolicy Delete (as before the review)."""
    import copy

    reverted = copy.deepcopy(eks)
    adopting, problems = _adoption_findings("example", eks)
    assert problems == [] and adopting
    changed = 0
    for k in adopting:
        r = reverted["Resources"][k]
        kinds = {d["kind"] for d in _manifest_documents(r["Properties"]["Manifest"])}
        if "Service" in kinds or "KedaNamespace" in k:
            r["DeletionPolicy"] = r["UpdateReplacePolicy"] = "Delete"
            changed += 1
    assert changed >= 2
    _, problems = _adoption_findings("example", reverted)
    assert len(problems) == changed and all("adopts" in p for p in problems)
