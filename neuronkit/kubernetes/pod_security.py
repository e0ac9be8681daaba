"""Pod Security Standards: the level each namespace the kit creates enforces, and a check that a pod is admitted.

Kubernetes' built-in Pod Security admission reads a namespace's labels ``pod-security.kubernetes.io/<mode>: <level>``
(modes enforce, audit, warn; levels privileged, baseline, restricted; kubernetes.io "Pod Security Admission"). The kit
labels every namespace it creates with the level its pods need: serving and training pods pass "baseline", the
Neuron node problem detector's DaemonSet (a chart's, watching the kernel log) needs "privileged", and the controllers'
charts that would create their own namespace (KEDA, JobSet, Kueue: catalog ``pod_security`` beside each pin) get it
from the kit instead, labelled "restricted" (:func:`chart_namespace`). ``kube-system`` is not the kit's: it is never
labelled (docs/eks.md, "Pod Security").

:func:`baseline_violations` is the "Baseline" profile of kubernetes.io/docs/concepts/security/pod-security-standards
(checked 2026-11-28), control by control: HostProcess, host namespaces (hostNetwork, hostPID, hostIPC), privileged
containers, capabilities (``add`` only from :data:`BASELINE_CAPABILITIES`), hostPath volumes, host ports, AppArmor,
SELinux, /proc mount type, seccomp (not ``Unconfined``) and sysctls (only :data:`SAFE_SYSCTLS`). Tests run it on
every pod template the synthesized templates apply (tests/contracts/test_eks_contracts.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

Level = Literal["privileged", "baseline", "restricted"]
LABEL_PREFIX = "pod-security.kubernetes.io/"
ENFORCE_LABEL = f"{LABEL_PREFIX}enforce"
ORDER: tuple[Level, ...] = ("privileged", "baseline", "restricted")

# Pod Security Standards, Baseline, "Capabilities": "Adding additional capabilities beyond those listed below must be
# disallowed." Allowed values: undefined/nil and these (the same list as "Mapping PodSecurityPolicies to Pod Security
# Standards", allowedCapabilities, Baseline). Not SYS_ADMIN, not IPC_LOCK.
BASELINE_CAPABILITIES = frozenset(
    {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
     "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
)  # fmt: skip
# Baseline, "Sysctls": the safe set (net.ipv4.ip_local_reserved_ports since 1.27; the tcp_keepalive/fin ones since 1.29).
SAFE_SYSCTLS = frozenset(
    {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
     "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
     "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
     "net.ipv4.tcp_keepalive_probes"}
)  # fmt: skip
_SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def labels(level: Level) -> dict[str, str]:
    """A namespace's Pod Security labels: ``level`` enforced, audited and warned (the latest version of the standard,
    the admission controller's default when no ``-version`` label is given)."""
    return {f"{LABEL_PREFIX}{mode}": level for mode in ("enforce", "audit", "warn")}


def chart_namespace(name: str, level: str) -> dict[str, Any]:
    """The Namespace a chart's release goes into, created by the kit before the chart (whose ``createNamespace`` is then
    off) so that it carries Pod Security labels from the start: Helm's ``--create-namespace`` makes a bare namespace.
    ``level`` comes from the catalog beside the chart's pin."""
    if level not in ORDER:
        raise ValueError(f"pod security level {level!r}: one of {', '.join(ORDER)}")
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "neuronkit", **labels(level)}},  # type: ignore[arg-type]
    }


def at_least(level: str, floor: Level) -> bool:
    return level in ORDER and ORDER.index(level) >= ORDER.index(floor)  # type: ignore[arg-type]


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def baseline_violations(spec: Mapping[str, Any]) -> list[str]:
    """What in a pod spec the Baseline profile forbids, one line each (empty: admitted under baseline)."""
    out: list[str] = []
    pod_ctx = spec.get("securityContext") or {}
    if (pod_ctx.get("windowsOptions") or {}).get("hostProcess"):
        out.append("HostProcess: spec.securityContext.windowsOptions.hostProcess")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(f"Host Namespaces: spec.{key}")
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            out.append(f"HostPath Volumes: volume {v.get('name')}")
    for s in pod_ctx.get("sysctls") or []:
        if s.get("name") not in SAFE_SYSCTLS:
            out.append(f"Sysctls: {s.get('name')}")
    out += _context_violations("pod", pod_ctx)
    for c in _containers(spec):
        name = c.get("name")
        ctx = c.get("securityContext") or {}
        if (ctx.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"HostProcess: container {name}")
        if ctx.get("privileged"):
            out.append(f"Privileged Containers: container {name}")
        extra = sorted(set((ctx.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES)
        if extra:
            out.append(f"Capabilities: container {name} adds {', '.join(extra)}")
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                out.append(f"Host Ports: container {name} hostPort {p['hostPort']}")
        if ctx.get("procMount") not in (None, "Default"):
            out.append(f"/proc Mount Type: container {name}")
        out += _context_violations(f"container {name}", ctx)
    return out


def _context_violations(where: str, ctx: Mapping[str, Any]) -> list[str]:
    out = []
    if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append(f"Seccomp: {where} Unconfined")
    if (ctx.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
        out.append(f"AppArmor: {where}")
    selinux = ctx.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in _SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        out.append(f"SELinux: {where}")
    return out


# Restricted, "Capabilities": "Containers must drop ALL capabilities, and are only permitted to add back the
# NET_BIND_SERVICE capability."
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})


def restricted_context_violations(
    pod_context: Mapping[str, Any], container_contexts: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """What the "Restricted" profile's security-context controls refuse in a pod's and its containers' contexts, one line
    each (kubernetes.io Pod Security Standards, Restricted: Privilege Escalation, Running as Non-root, Running as
    Non-root user, Seccomp, Capabilities). The volume-type control is the template's, not a context's: not read here.
    Used on the values the pinned charts ship (a chart's pods are not rendered offline)."""
    out: list[str] = []
    pod_seccomp = (pod_context.get("seccompProfile") or {}).get("type")
    if pod_context.get("runAsUser") == 0:
        out.append("Running as Non-root user: pod runAsUser 0")
    for name, ctx in container_contexts.items():
        if ctx.get("allowPrivilegeEscalation") is not False:
            out.append(f"Privilege Escalation: container {name} does not set allowPrivilegeEscalation false")
        if not (
            ctx.get("runAsNonRoot") is True or (pod_context.get("runAsNonRoot") is True and ctx.get("runAsNonRoot") is not False)
        ):
            out.append(f"Running as Non-root: container {name}")
        if ctx.get("runAsUser") == 0:
            out.append(f"Running as Non-root user: container {name} runAsUser 0")
        seccomp = (ctx.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"Seccomp: container {name} has no RuntimeDefault or Localhost profile")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"Capabilities: container {name} does not drop ALL")
        extra = sorted(set(caps.get("add") or []) - RESTRICTED_CAPABILITIES)
        if extra:
            out.append(f"Capabilities: container {name} adds {', '.join(extra)}")
    return out


def pod_specs(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod specs an object creates: a Pod's own, a workload's template (Deployment, DaemonSet, StatefulSet,
    ReplicaSet, Job), a CronJob's job template, a JobSet's replicated jobs."""
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    if kind == "Pod":
        return [spec]
    if kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"):
        return [((spec.get("template") or {}).get("spec")) or {}]
    if kind == "CronJob":
        return [(((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}]
    if kind == "JobSet":
        return [
            ((((r.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
            for r in spec.get("replicatedJobs") or []
        ]
    return []


MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
PATCH = "Custom::AWSCDK-EKS-KubernetesPatch"
CHART = "Custom::AWSCDK-EKS-HelmChart"
# Namespaces the kit uses but never creates or labels: the cluster's own (EKS puts its add-ons there; the kit's
# kube-system charts are node agents and controllers AWS and the projects install there). Labelling it would change a
# namespace the kit does not own, and deleting the stack could not give it back.
NOT_THE_KITS = frozenset({"kube-system"})


def _json(raw: Any) -> Any:
    import json

    if isinstance(raw, dict) and "Fn::Join" in raw:
        raw = "".join(p if isinstance(p, str) else "TOKEN" for p in raw["Fn::Join"][1])
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None


def applied(template: Mapping[str, Any]) -> tuple[dict[str, str], list[tuple[str, str, Mapping[str, Any]]]]:
    """From a synthesized template: each Namespace it creates with its enforced level ("" when unlabelled), and each
    pod spec it applies as (object name, namespace, spec): the kubectl manifests' objects and the template patches of
    seeded Deployments (``/spec/template`` of a JSON patch)."""
    namespaces: dict[str, str] = {}
    pods: list[tuple[str, str, Mapping[str, Any]]] = []
    for r in (template.get("Resources") or {}).values():
        props = r.get("Properties") or {}
        if r.get("Type") == MANIFEST:
            for d in _json(props.get("Manifest")) or []:
                if not isinstance(d, dict):
                    continue
                meta = d.get("metadata") or {}
                if d.get("kind") == "Namespace":
                    namespaces[str(meta.get("name"))] = str((meta.get("labels") or {}).get(ENFORCE_LABEL, ""))
                for spec in pod_specs(d):
                    pods.append((f"{d.get('kind')}/{meta.get('name')}", str(meta.get("namespace", "default")), spec))
        elif r.get("Type") == PATCH:
            for op in _json(props.get("ApplyPatchJson")) or []:
                if isinstance(op, dict) and op.get("path") == "/spec/template":
                    name, ns = props.get("ResourceName"), str(props.get("ResourceNamespace", "default"))
                    pods.append((f"{name} (template patch)", ns, (op.get("value") or {}).get("spec") or {}))
    return namespaces, pods


def chart_namespaces(template: Mapping[str, Any]) -> dict[str, tuple[str, bool]]:
    """Each Helm release of a synthesized template: release name -> (its namespace, whether Helm creates it)."""
    out: dict[str, tuple[str, bool]] = {}
    for r in (template.get("Resources") or {}).values():
        if r.get("Type") == CHART:
            props = r.get("Properties") or {}
            create = str(props.get("CreateNamespace", "false")).lower() == "true"
            out[str(props.get("Release"))] = (str(props.get("Namespace") or "default"), create)
    return out


def targeted(template: Mapping[str, Any]) -> dict[str, set[str]]:
    """Every namespace a synthesized template runs pods in -> what: Helm releases (their pods), the pod-creating
    objects of the kubectl manifests (a Deployment, Job ... without ``metadata.namespace`` goes to ``default``) and
    the template patches of Deployments. Objects that run nothing (a PersistentVolumeClaim the kit leaves in
    ``default`` for the user's pods, a ScaledObject) are not counted: Pod Security admits pods only."""
    out: dict[str, set[str]] = {}
    for release, (ns, _) in chart_namespaces(template).items():
        out.setdefault(ns, set()).add(f"chart {release}")
    for name, ns, _ in applied(template)[1]:
        out.setdefault(ns, set()).add(name)
    return out


def template_problems(template: Mapping[str, Any], floors: Mapping[str, Level]) -> list[str]:
    """One line per namespace the template creates without an enforced level (or below its floor in ``floors``), per
    namespace it puts a chart or object into without creating it labelled (``kube-system`` aside), per chart whose Helm
    creates its namespace (unlabelled), and per pod it applies into a namespace whose level would refuse it."""
    namespaces, pods = applied(template)
    out = [f"namespace {n}: no {ENFORCE_LABEL} label" for n, level in sorted(namespaces.items()) if not level]
    out += [
        f"namespace {n}: {', '.join(sorted(what))} go into it, but the template does not create it with Pod Security labels"
        for n, what in sorted(targeted(template).items())
        if n not in NOT_THE_KITS and n not in namespaces
    ]
    out += [
        f"chart {release}: Helm creates namespace {ns} (createNamespace), without Pod Security labels"
        for release, (ns, create) in sorted(chart_namespaces(template).items())
        if create and ns not in NOT_THE_KITS  # aws-cdk-lib's default; a no-op on a namespace that always exists
    ]
    out += [
        f"namespace {n}: enforces {namespaces[n] or 'nothing'}, needs at least {floor}"
        for n, floor in sorted(floors.items())
        if n in namespaces and not at_least(namespaces[n], floor)
    ]
    for name, ns, spec in pods:
        if at_least(namespaces.get(ns, ""), "baseline"):
            out += [f"{ns}/{name}: {v}" for v in baseline_violations(spec)]
    return out


__all__ = [
    "applied", "chart_namespace", "chart_namespaces", "targeted", "template_problems", "NOT_THE_KITS",
    "RESTRICTED_CAPABILITIES", "restricted_context_violations",
    "BASELINE_CAPABILITIES", "ENFORCE_LABEL", "LABEL_PREFIX", "SAFE_SYSCTLS", "at_least", "baseline_violations",
    "labels", "pod_specs",
]  # fmt: skip
