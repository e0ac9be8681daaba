"""eks: the Amazon EKS cluster of a ``platform: eks`` environment, and which pool keys EKS honours.

On ``platform: eks`` every training cluster and inference fleet is a managed node group (or two: a fleet's
``fallback_types`` and a cluster's ``gpu_pool`` are GPU node groups). A pool key either works on EKS or
validation refuses it here with a one-line reason; docs/eks.md lists both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from neuronkit import catalog
from neuronkit.config.base import Strict

if TYPE_CHECKING:
    from neuronkit.config.inference import InferenceFleet
    from neuronkit.config.training import TrainingCluster

PRINCIPAL_RE = r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$"
Principal = Annotated[str, Field(pattern=PRINCIPAL_RE)]


class EksNeuron(Strict):
    """What runs the Neuron devices of the node groups: the Neuron Helm chart's device plugin (default) or DRA driver."""

    dra: bool = Field(
        default=False,
        description="The Neuron DRA driver instead of the device plugin (pods claim devices of DeviceClass "
        "neuron.aws.com): Kubernetes 1.34+, node images 1.34.2+, Neuron 2.28+; validate refuses it elsewhere.",
    )
    device_plugin: bool | None = Field(
        default=None,
        description="The Neuron device plugin (aws.amazon.com/neuron and aws.amazon.com/neuroncore); on unless dra. "
        "Setting it true beside dra is refused (the chart runs one of the two).",
    )
    node_recovery: bool = Field(
        default=True,
        description="Neuron node problem detector replaces a node with an uncorrectable Neuron error (the chart's "
        "default is monitor-only); false keeps it monitoring.",
    )

    @property
    def uses_device_plugin(self) -> bool:
        return self.device_plugin if self.device_plugin is not None else not self.dra


class EksSystemNodes(Strict):
    """The system node group (add-ons and controllers): its type and sizes, defaults from the catalog."""

    instance_type: str | None = Field(
        default=None,
        pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$",
        description="A general-purpose type for add-ons and controllers; defaults to the catalog's (system_nodes in "
        "neuronkit/catalog/eks.yaml: m7i.large). Neuron and GPU types are refused.",
    )
    min_size: int | None = Field(default=None, ge=2, le=20, description="At least 2: one node per AZ; defaults to 2.")
    desired_size: int | None = Field(default=None, ge=2, le=20, description="Defaults to min_size.")
    max_size: int | None = Field(default=None, ge=2, le=20, description="Defaults to the catalog's 4.")

    def resolved(self) -> dict[str, int | str]:
        """The sizes and type with the catalog's defaults filled in."""
        facts = catalog.eks_facts()["system_nodes"]
        min_size = self.min_size or int(facts["min_size"])
        return {
            "instance_type": self.instance_type or str(facts["instance_type"]),
            "min_size": min_size,
            "desired_size": self.desired_size or max(min_size, int(facts["desired_size"])),
            "max_size": self.max_size or max(min_size, int(facts["max_size"])),
        }


class Eks(Strict):
    """The cluster: Kubernetes version, who may reach it, and how its API endpoint is exposed."""

    kubernetes_version: str | None = Field(
        default=None,
        description="Defaults to the catalog's pinned version (neuronkit/catalog/eks.yaml); give the previous one "
        "to stay there while the catalog moves on (upgrades go one minor at a time, docs/eks.md).",
    )
    admins: list[Principal] = Field(
        default_factory=list,
        description="IAM role or user ARNs given cluster admin (AmazonEKSClusterAdminPolicy) through access entries; "
        "the creator of the stack gets no access of its own.",
    )
    viewers: list[Principal] = Field(
        default_factory=list, description="IAM role or user ARNs given read-only access (AmazonEKSViewPolicy)."
    )
    job_submitters: list[Principal] = Field(
        default_factory=list,
        description="IAM role or user ARNs that submit training jobs: AmazonEKSEditPolicy scoped to the "
        "neuronkit-training namespace, plus the kit's Role there for JobSets and Kueue workloads; viewers stay "
        "read-only.",
    )
    endpoint: Literal["private", "public-and-private"] = Field(
        default="private",
        description="private: the API answers inside the VPC only (reach it through SSM port forwarding, "
        "docs/eks.md); public-and-private: also from public_access_cidrs.",
    )
    public_access_cidrs: list[Annotated[str, Field(pattern=r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$")]] = Field(
        default_factory=list, description="With endpoint: public-and-private, the only networks the public endpoint answers."
    )
    max_pods_per_node: int = Field(
        default_factory=lambda: int(catalog.eks_facts()["pods"]["max_pods_per_node"]),
        ge=8,
        le=250,
        description="kubelet maxPods on every node; with the VPC CNI each pod takes an address of the node's subnet, "
        "so validation checks that the subnets hold max_pods_per_node x max_size (docs/eks.md).",
    )

    node_release_version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+-\d{8}$")] | None = Field(
        default=None,
        description="The EKS AMI release the node groups boot (e.g. 1.35.6-20260714), instead of the one the kit picks "
        "from the catalog (catalog/eks.yaml node_image_releases). A release the catalog lists is checked against the "
        "pools' Neuron driver minimum; a newer one is accepted with a warning that its driver is unchecked and needs "
        "node_release_source.",
    )
    node_release_source: str | None = Field(
        default=None,
        description="Where you read node_release_version's Neuron driver (the amazon-eks-ami changelog section, with "
        "its date); required with a release the catalog does not list.",
    )

    neuron: EksNeuron = Field(
        default_factory=EksNeuron,
        description="The Neuron Helm chart's device plugin or DRA driver, and node recovery (docs/eks.md).",
    )
    node_autoscaler: bool = Field(
        default=True,
        description="Cluster Autoscaler (pinned per Kubernetes minor in the catalog) adds and removes nodes of the "
        "inference fleets' node groups between min_size and max_size as serving pods need them (training node groups "
        "keep their sizes); false keeps every group at its desired size. It cannot drive eks.neuron.dra (validate "
        "refuses both together when there are fleets).",
    )
    system_nodes: EksSystemNodes = Field(
        default_factory=EksSystemNodes,
        description="The on-demand system node group where add-ons and controllers run (never on an accelerator; "
        "docs/eks.md, 'Where pods run'): its instance type and sizes.",
    )

    @property
    def version(self) -> str:
        return self.kubernetes_version or str(catalog.eks_facts()["kubernetes"]["version"])


def known_versions() -> list[str]:
    k8s = catalog.eks_facts()["kubernetes"]
    return [*map(str, k8s.get("previous", [])), str(k8s["version"])]


def minor(version: str) -> int:
    return int(version.split(".")[1])


def eks_section_problems(platform: str, eks: Eks | None) -> list[tuple[str, str]]:
    """The eks section on its own: present only with platform: eks, a known version, someone to administer it."""
    if platform != "eks":
        return [("eks", "only used with platform: eks; remove it or set platform: eks")] if eks is not None else []
    if eks is None:
        return [("eks", "required with platform: eks: at least eks.admins (an IAM role ARN that administers the cluster)")]
    out: list[tuple[str, str]] = []
    known = known_versions()
    if eks.kubernetes_version is not None and eks.kubernetes_version not in known:
        out.append(
            (
                "eks.kubernetes_version",
                f"'{eks.kubernetes_version}' is not a version the catalog pins; use one of {', '.join(known)} "
                "(a cluster moves one minor version at a time)",
            )
        )
    if not eks.admins:
        out.append(
            (
                "eks.admins",
                "name at least one IAM role ARN: the stack's creator gets no cluster access of its own "
                "(bootstrap_cluster_creator_admin_permissions is off)",
            )
        )
    out += system_nodes_problems(eks.system_nodes)
    if eks.endpoint == "private" and eks.public_access_cidrs:
        out.append(("eks.public_access_cidrs", "only used with endpoint: public-and-private; remove it"))
    if eks.endpoint == "public-and-private" and (not eks.public_access_cidrs or "0.0.0.0/0" in eks.public_access_cidrs):
        out.append(
            (
                "eks.public_access_cidrs",
                "name the networks the public endpoint answers (not 0.0.0.0/0), or keep endpoint: private",
            )
        )
    return out


def system_nodes_problems(nodes: EksSystemNodes) -> list[tuple[str, str]]:
    """eks.system_nodes: a general-purpose type, min_size <= desired_size <= max_size."""
    from neuronkit.kubernetes.scheduling import accelerated_type

    out: list[tuple[str, str]] = []
    if nodes.instance_type is not None and accelerated_type(nodes.instance_type):
        out.append(
            (
                "eks.system_nodes.instance_type",
                f"'{nodes.instance_type}' is a Neuron or GPU type; the system nodes run add-ons and controllers: give a "
                "general-purpose type such as m7i.large",
            )
        )
    r = nodes.resolved()
    if not int(r["min_size"]) <= int(r["desired_size"]) <= int(r["max_size"]):
        out.append(
            (
                "eks.system_nodes",
                f"need min_size ({r['min_size']}) <= desired_size ({r['desired_size']}) <= max_size ({r['max_size']})",
            )
        )
    return out


def eks_neuron_problems(eks: Eks | None, neuron_releases: list[str]) -> list[tuple[str, str]]:
    """eks.neuron.dra where the DRA driver cannot work (one line per reason), from the catalog's pins."""
    if eks is None or not eks.neuron.dra:
        return []
    from neuronkit.kubernetes.neuron_chart import dra_problems

    node_release = str(catalog.eks_facts()["node_images"]["neuron"]["release_version"])
    reasons = dra_problems(
        kubernetes_version=eks.version,
        node_release_version=node_release,
        neuron_releases=neuron_releases,
        device_plugin=eks.neuron.device_plugin is True,
    )
    return [("eks.neuron.dra", f"the Neuron DRA driver {why}; or remove eks.neuron.dra") for why in reasons]


def eks_autoscaling_problems(
    kubernetes_version: str, *, dra: bool, node_autoscaler: bool = True, fleets: bool = True
) -> list[tuple[str, str]]:
    """The node autoscaler (installed for inference fleets): a catalog pin of the cluster's minor, and no Neuron DRA it
    cannot drive."""
    if not node_autoscaler or not fleets:
        return []
    from neuronkit.kubernetes import autoscaler

    out = [
        ("eks.kubernetes_version", f"{why}; use a version the catalog pins, or set eks.node_autoscaler: false")
        for why in autoscaler.version_problems(kubernetes_version)
    ]
    if dra and not autoscaler.drives_dra():
        out.append(
            (
                "eks.neuron.dra",
                "Cluster Autoscaler cannot add nodes for pods that claim Neuron devices through DRA (it models an empty "
                "node group from tags, without ResourceSlices); set eks.node_autoscaler: false or remove eks.neuron.dra",
            )
        )
    return out


def eks_node_image_problems(
    eks: Eks | None, neuron_releases: list[str], images: object = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """The EKS node images against each pool's driver window (``catalog.releases.driver_fit``, issue 46): every Neuron
    node group boots the newest catalog image of the cluster's Kubernetes version whose Neuron driver lies in its
    release's window, so each release of the file needs one; an ``eks.node_release_version`` must lie in the window of
    every release. Each problem is one line naming the image, its driver, the release and the rule. A
    ``node_release_version`` the catalog does not list is accepted with a warning (its driver is unchecked).
    ``images``: the image table module (``neuronkit.catalog.eks_images``; tests give a fake one)."""
    if eks is None:
        return [], []
    from neuronkit.catalog import eks_images as default_images
    from neuronkit.catalog import releases as matrix

    table = images if images is not None else default_images
    rels = [matrix.release(v) for v in neuron_releases if v in matrix.versions()]
    wanted = eks.node_release_version
    if wanted is not None:
        key = "eks.node_release_version"
        if not wanted.startswith(f"{eks.version}."):
            return [(key, f"'{wanted}' is not an image of Kubernetes {eks.version}; name a {eks.version}.x release")], []
        row = table.node_image("neuron", wanted)  # type: ignore[attr-defined]
        if row is None:
            if not eks.node_release_source:
                why = "the catalog does not list this release: say where you read its Neuron driver in eks.node_release_source"
                return [("eks.node_release_source", why)], []
            windows = "; ".join(matrix.driver_window(r.version).describe() for r in rels) or "none"
            note = (
                f"{key}: {wanted} is not in the catalog (catalog/eks.yaml node_image_releases): its Neuron driver is "
                f"unchecked against the pools' driver windows ({windows}); source: {eks.node_release_source}"
            )
            return [], [note]
        out = []
        for r in rels:
            fit = matrix.driver_fit(row.neuron_driver or "", r.version) if row.neuron_driver else None
            if fit is None or not fit.ok:
                why = fit.reason if fit is not None else "it carries no Neuron driver"
                out.append((key, f"EKS node image {wanted}: {why}; remove {key} (each pool then gets an image of its window)"))
        return out, []
    problems = []
    for r in rels:
        if table.for_release(eks.version, r.version) is not None:  # type: ignore[attr-defined]
            continue
        rows = table.images("neuron", eks.version)  # type: ignore[attr-defined]
        if not rows:
            why = f"the catalog has no EKS node image of Kubernetes {eks.version}"
        else:
            newest = rows[-1]
            why = f"the newest, {newest.release_version}: {table.fit(newest, r.version).reason}"  # type: ignore[attr-defined]
        problems.append(
            (
                "neuron_sdk",
                f"no EKS node image of Kubernetes {eks.version} in the catalog suits Neuron {r.version}: {why}; pin "
                "another neuron_sdk, or an image with eks.node_release_version and eks.node_release_source",
            )
        )
    return problems, []


_LATER = "comes with the Kubernetes workloads (docs/eks.md, 'Not yet on EKS')"
# Training keys EKS does not honour, with the reason; checked only when the file sets them.
_TRAINING_REFUSED: dict[str, str] = {
    "ami": "EKS node groups boot the catalog's amiType + release_version (neuronkit/catalog/eks.yaml); remove ami",
    "scheduler": "AWS Batch is not a Kubernetes scheduler; remove scheduler (jobs run as pods) or use the default platform",
    "scale_in_protection": "EKS owns the node group's Auto Scaling group and drains nodes itself; remove it",
    "idle_scale_down": f"scaling an idle node group down {_LATER}; remove it",
    "ultraserver": f"UltraServer node groups (a reservation group per UltraServer) {_LATER}; remove it",
}
_INFERENCE_ALLOWED = {
    "name", "neuron_types", "fallback_types", "az_ids", "min_size", "max_size", "desired_size", "root_volume_gib",
    "neuron_sdk", "workload", "model", "profiles", "images", "tls", "port", "health_check", "idle_timeout_seconds", "lnc",
    "spill_after_minutes", "return_after_minutes", "requests_per_target",
}  # fmt: skip
_BLOCK_REFUSED = {
    "fallback": f"a Capacity Block's fallback on EKS {_LATER}; remove it",
}


def eks_unsupported_type_problems(
    training: list[tuple[int, TrainingCluster]], inference: list[tuple[int, InferenceFleet]]
) -> list[tuple[str, str]]:
    """A pool type of a family the EKS node images do not support (Trn3: catalog/trainium.yaml
    ``eks_unsupported_families``): one line per key, whatever else the catalog knows or lacks of the type."""
    out: list[tuple[str, str]] = []
    keyed = [(f"training[{i}].instance_type", c.instance_type) for i, c in training]
    keyed += [(f"inference[{i}].neuron_types[{j}]", t) for i, f in inference for j, t in enumerate(f.neuron_types)]
    for key, t in keyed:
        why = catalog.eks_unsupported(t)
        if why:
            out.append((key, f"{t}: {why}; platform: eks cannot run it, so use platform: asg or a Trn2 type (trn2.48xlarge)"))
    return out


def eks_pool_problems(
    training: list[tuple[int, TrainingCluster]], inference: list[tuple[int, InferenceFleet]]
) -> list[tuple[str, str]]:
    """One line per pool key a platform: eks file sets that EKS does not honour, with the reason."""
    out: list[tuple[str, str]] = []
    reserved = "'system' is the name of the system node group (add-ons and controllers, docs/eks.md); rename the pool"
    out += [(f"training[{i}].name", reserved) for i, c in training if c.name == "system"]
    out += [(f"inference[{i}].name", reserved) for i, f in inference if f.name == "system"]
    for i, c in training:
        for key in sorted(c.model_fields_set & _TRAINING_REFUSED.keys()):
            if key == "scheduler" and c.scheduler == "none":
                continue
            out.append((f"training[{i}].{key}", _TRAINING_REFUSED[key]))
        if c.compile_cache == "s3":
            out.append(
                (
                    f"training[{i}].compile_cache",
                    f"an S3 compile cache needs a pod role (pod identity), which {_LATER}; use local",
                )
            )
        cap = c.capacity
        if cap.type == "odcr" and cap.create:
            why = f"a reservation the stack creates for a node group {_LATER}; set create: false with its reservation_id"
            out.append((f"training[{i}].capacity.create", why))
        if cap.type == "capacity-block":
            for key in sorted(cap.model_fields_set & _BLOCK_REFUSED.keys()):
                out.append((f"training[{i}].capacity.{key}", _BLOCK_REFUSED[key]))
        if c.gpu_pool is not None and "ami" in c.gpu_pool.model_fields_set:
            out.append((f"training[{i}].gpu_pool.ami", _TRAINING_REFUSED["ami"]))
    for i, f in inference:
        out.extend(eks_serving_problems(i, f))
        for key in sorted(f.model_fields_set - _INFERENCE_ALLOWED):
            why = (
                _TRAINING_REFUSED["ami"]
                if key in ("neuron_ami", "gpu_ami")
                else "an Auto Scaling path setting EKS serving does not use (docs/eks.md, 'Serving'); remove it"
            )
            out.append((f"inference[{i}].{key}", why))
    return out


def eks_top_level_problems(fields_set: set[str]) -> list[tuple[str, str]]:
    """Top-level sections a platform: eks environment does not build yet."""
    reasons = {
        "pilot": "the GPU-vs-Trainium pilot runs on the default platform; remove it or drop platform: eks",
    }
    return [(key, reasons[key]) for key in sorted(fields_set & reasons.keys())]


def eks_monitoring_problems(day_night_set: bool) -> list[tuple[str, str]]:
    """monitoring works on EKS (dashboard, alarms, namespace, e-mails, log retention) except the day/night schedule."""
    if not day_night_set:
        return []
    return [("monitoring.day_night", f"the day/night schedule of EKS node groups {_LATER}; remove it")]


def eks_serving_problems(i: int, f: InferenceFleet) -> list[tuple[str, str]]:
    """A model served on EKS runs whole-node pods of one profile per accelerator (docs/eks.md, "Serving"): one Neuron
    type and at most one GPU fallback type, and no tensor-parallel override below the type's cores or GPUs."""
    from neuronkit.catalog import serving

    if f.model is None:
        return []
    out: list[tuple[str, str]] = []
    loc = f"inference[{i}]"
    if len(f.neuron_types) > 1:
        out.append(
            (
                f"{loc}.neuron_types",
                f"on EKS a fleet's Neuron Deployment runs whole-node pods of one profile; list one type (e.g. "
                f"{f.neuron_types[0]}) or make one fleet per type",
            )
        )
    if len(f.fallback_types) > 1:
        out.append(
            (
                f"{loc}.fallback_types",
                f"on EKS a fleet's GPU Deployment runs whole-node pods of one profile; list one type (e.g. "
                f"{f.fallback_types[0]}) or make one fleet per type",
            )
        )
    for t, o in f.profiles.items():
        if o.tensor_parallel is None or serving.accelerator_of(t) is None:
            continue
        lnc = serving.lnc_of(t, f.lnc) if serving.accelerator_of(t) == "neuron" else None
        whole = serving.accelerators(t, lnc)
        if o.tensor_parallel < whole:
            out.append(
                (
                    f"{loc}.profiles.{t}.tensor_parallel",
                    f"{o.tensor_parallel} asks for part of a {t} node; EKS serving pods take the whole node "
                    f"({whole}): remove tensor_parallel or set it to {whole}",
                )
            )
    return out
