"""eks: the Amazon EKS cluster of a ``platform: eks`` environment, and which pool keys EKS honours.

On ``platform: eks`` every training cluster and inference fleet is a managed node group (or two: a fleet's
``fallback_types`` and a cluster's ``gpu_pool`` are GPU node groups). A pool key either works on EKS or
validation refuses it here with a one-line reason; docs/eks.md lists both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

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


ComponentMode = Literal["install", "existing", "off"]

# The components the kit installs, named as the catalog names their charts and add-ons (neuronkit/catalog/eks.yaml).
COMPONENTS: tuple[str, ...] = (
    "neuron", "efa_device_plugin", "nvidia_device_plugin", "load_balancer_controller", "cluster_autoscaler", "keda",
    "jobset", "kueue", "fsx_csi", "pod_identity_agent", "vpc_cni", "coredns", "kube_proxy",
)  # fmt: skip
# The cluster's own add-ons: on a cluster the kit did not create they are its owner's settings, never installed.
CLUSTER_ADDONS = {
    "vpc_cni": "vpc-cni",
    "coredns": "coredns",
    "kube_proxy": "kube-proxy",
    "pod_identity_agent": "eks-pod-identity-agent",
}


class EksComponents(Strict):
    """Per component: ``install`` (the kit installs its pinned version), ``existing`` (the cluster runs it already: the
    kit installs nothing and relies on it; ``neuronkit preflight`` checks what it can) or ``off`` (not installed and not
    relied on; refused where the file needs it). Unset: ``install`` on a cluster the kit creates; on ``eks.existing``
    the cluster's own add-ons (vpc_cni, coredns, kube_proxy, pod_identity_agent) default to ``existing``. YAML 1.1 reads
    an unquoted ``off`` as false: false is taken as ``off`` (review of issue 51)."""

    @model_validator(mode="before")
    @classmethod
    def _unquoted_off(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: ("off" if v is False else v) for k, v in data.items()}
        return data

    neuron: ComponentMode | None = Field(
        default=None, description="The Neuron Helm chart (device plugin or DRA driver, eks.neuron)."
    )
    efa_device_plugin: ComponentMode | None = Field(
        default=None, description="The EFA device plugin chart (vpc.amazonaws.com/efa)."
    )
    nvidia_device_plugin: ComponentMode | None = Field(
        default=None, description="The NVIDIA device plugin chart (nvidia.com/gpu)."
    )
    load_balancer_controller: ComponentMode | None = Field(
        default=None, description="The AWS Load Balancer Controller chart (the serving fleets' TargetGroupBinding v1beta1)."
    )
    cluster_autoscaler: ComponentMode | None = Field(
        default=None, description="Cluster Autoscaler on the fleets' node groups; off keeps sizes."
    )
    keda: ComponentMode | None = Field(default=None, description="The KEDA operator (the fleets' ScaledObjects).")
    jobset: ComponentMode | None = Field(default=None, description="The JobSet controller (JobSet v1alpha2).")
    kueue: ComponentMode | None = Field(default=None, description="Kueue (v1beta2 API) admitting the training jobs.")
    fsx_csi: ComponentMode | None = Field(default=None, description="The FSx for Lustre CSI driver add-on.")
    pod_identity_agent: ComponentMode | None = Field(default=None, description="The EKS Pod Identity Agent add-on.")
    vpc_cni: ComponentMode | None = Field(default=None, description="The VPC CNI add-on and its configuration.")
    coredns: ComponentMode | None = Field(default=None, description="The CoreDNS add-on and its configuration.")
    kube_proxy: ComponentMode | None = Field(default=None, description="The kube-proxy add-on.")


def _only_the_name_required(schema: dict[str, Any]) -> None:
    """In the published JSON Schema only ``cluster_name`` is required: ``neuronkit pin`` may pin the rest
    (neuronkit/config/cluster_pins.py fills them in before the model sees the file)."""
    schema["required"] = ["cluster_name"]


class EksExisting(Strict):
    """A cluster the kit did not create: what synthesis needs offline (``aws eks describe-cluster --name NAME``:
    cluster.endpoint, cluster.certificateAuthority.data, cluster.kubernetesNetworkConfig.serviceIpv4Cidr,
    cluster.resourcesVpcConfig.clusterSecurityGroupId, cluster.version, cluster.accessConfig.authenticationMode).
    Each attribute but ``cluster_name`` may be left out of the file once ``neuronkit pin`` has pinned it in
    cdk.context.json; a value in the file wins over the pinned one."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_only_the_name_required)

    cluster_name: Annotated[str, Field(pattern=r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")] = Field(description="The cluster's name.")
    endpoint: Annotated[str, Field(pattern=r"^https://[A-Za-z0-9.-]+(:\d+)?/?$")] = Field(
        description="The API server endpoint (cluster.endpoint)."
    )
    certificate_authority: Annotated[str, Field(pattern=r"^[A-Za-z0-9+/=\s]{20,}$")] = Field(
        description="The base64 certificate authority data (cluster.certificateAuthority.data)."
    )
    service_cidr: Annotated[str, Field(pattern=r"^(\d{1,3}(\.\d{1,3}){3}/\d{1,2}|[0-9A-Fa-f:]*:[0-9A-Fa-f:]*/\d{1,3})$")] = Field(
        description="The Kubernetes service CIDR (cluster.kubernetesNetworkConfig.serviceIpv4Cidr; serviceIpv6Cidr on "
        "an IPv6 cluster)."
    )
    cluster_security_group_id: Annotated[str, Field(pattern=r"^sg-[0-9a-f]{8,17}$")] = Field(
        description="The cluster security group EKS created (cluster.resourcesVpcConfig.clusterSecurityGroupId); the "
        "kit's node interfaces carry it."
    )
    kubernetes_version: str = Field(description="The control plane's minor version (cluster.version), e.g. 1.35.")
    authentication_mode: Literal["API", "API_AND_CONFIG_MAP", "CONFIG_MAP"] = Field(
        description="cluster.accessConfig.authenticationMode: API or API_AND_CONFIG_MAP (the kit adds access entries; "
        "it never edits aws-auth, so CONFIG_MAP is refused)."
    )


class Eks(Strict):
    """The cluster: Kubernetes version, who may reach it, and how its API endpoint is exposed."""

    existing: EksExisting | None = Field(
        default=None,
        description="A cluster you already run: the kit adds its node groups, charts, serving and training to it and "
        "creates no cluster (docs/eks.md, 'Your own cluster'); network.existing is required with it.",
    )
    components: EksComponents = Field(
        default_factory=EksComponents,
        description="Per component install | existing | off (docs/eks.md, 'Components you already have').",
    )

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
    node_autoscaler: bool | None = Field(
        default=None,
        description="Deprecated: eks.components.cluster_autoscaler (install | off). Cluster Autoscaler (pinned per Kubernetes minor in the catalog) adds and removes nodes of the "
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
        if self.existing is not None:
            return self.existing.kubernetes_version
        return self.kubernetes_version or str(catalog.eks_facts()["kubernetes"]["version"])

    @property
    def cluster_name(self) -> str | None:
        """The existing cluster's name, or None when the kit creates the cluster (named after the environment)."""
        return self.existing.cluster_name if self.existing is not None else None

    def component(self, name: str) -> ComponentMode:
        """install | existing | off for one component, with the defaults and the old ``node_autoscaler`` spelling."""
        if name not in COMPONENTS:
            raise KeyError(name)
        mode: ComponentMode | None = getattr(self.components, name)
        if mode is not None:
            return mode
        if name == "cluster_autoscaler" and self.node_autoscaler is not None:
            return "install" if self.node_autoscaler else "off"
        if self.existing is not None and name in CLUSTER_ADDONS:
            return "existing"
        return "install"

    def installs(self, name: str) -> bool:
        return self.component(name) == "install"

    @property
    def autoscales(self) -> bool:
        """Cluster Autoscaler drives the fleets' node groups (installed by the kit or already there)."""
        return self.component("cluster_autoscaler") != "off"


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
    if eks.existing is not None:
        return existing_cluster_problems(eks)
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


def existing_cluster_problems(eks: Eks) -> list[tuple[str, str]]:
    """eks.existing: a cluster reachable through access entries, at a version the catalog has node images for, and no
    key that would change the cluster's own settings (its access, endpoint, version, core add-ons)."""
    import ipaddress

    ex = eks.existing
    assert ex is not None
    out: list[tuple[str, str]] = []
    if ex.authentication_mode == "CONFIG_MAP":
        out.append(
            (
                "eks.existing.authentication_mode",
                "CONFIG_MAP: the kit reaches the cluster through access entries and never edits aws-auth; switch the "
                "cluster to API_AND_CONFIG_MAP (aws eks update-cluster-config --access-config authenticationMode=API_AND_CONFIG_MAP)",
            )
        )
    known = known_versions()
    if ex.kubernetes_version not in known:
        out.append(
            (
                "eks.existing.kubernetes_version",
                f"'{ex.kubernetes_version}': the catalog has node images, charts and a kubectl layer for {', '.join(known)} "
                "only; upgrade the cluster to one of them",
            )
        )
    try:
        ipaddress.ip_network(ex.service_cidr)
    except ValueError:
        out.append(
            (
                "eks.existing.service_cidr",
                f"'{ex.service_cidr}' is not a CIDR block; copy serviceIpv4Cidr (serviceIpv6Cidr on an IPv6 cluster), e.g. 172.20.0.0/16",
            )
        )
    refused = {
        "kubernetes_version": "the version is the cluster's: give it as eks.existing.kubernetes_version",
        "admins": "access to your cluster is yours to grant: the kit adds access entries only for its kubectl handler "
        "(and EKS for its node roles)",
        "viewers": "access to your cluster is yours to grant",
        "job_submitters": "grant job submitters access yourself and put them in the Kubernetes group "
        "'neuronkit:job-submitters' (docs/eks.md, 'Your own cluster')",
        "endpoint": "the endpoint is the cluster's setting",
        "public_access_cidrs": "the endpoint is the cluster's setting",
    }
    for key in sorted(eks.model_fields_set & refused.keys()):
        out.append((f"eks.{key}", f"not used with eks.existing: {refused[key]}; remove it"))
    for name in sorted(CLUSTER_ADDONS):
        if eks.components.model_fields_set and getattr(eks.components, name) == "install":
            out.append(
                (
                    f"eks.components.{name}",
                    f"install would change your cluster's own {CLUSTER_ADDONS[name]} add-on; use existing",
                )
            )
    return out


def component_problems(
    eks: Eks, *, neuron: bool, efa: bool, gpu: bool, served: bool, fleets: bool, training: bool, lustre: bool
) -> tuple[list[tuple[str, str]], list[str]]:
    """eks.components: ``off`` only where the file does not need the component; both spellings of the autoscaler are
    refused together; the old ``node_autoscaler`` spelling is a warning (it goes after one release)."""
    out: list[tuple[str, str]] = []
    warnings: list[str] = []
    if eks.node_autoscaler is not None:
        if eks.components.cluster_autoscaler is not None:
            out.append(
                ("eks.node_autoscaler", "replaced by eks.components.cluster_autoscaler, which the file sets too; remove it")
            )
        else:
            new = "install" if eks.node_autoscaler else "off"
            warnings.append(
                f"eks.node_autoscaler: deprecated; write eks.components.cluster_autoscaler: {new} (the old spelling "
                "is accepted for one more release)"
            )
    needs = {
        "neuron": (neuron, "the Neuron node groups' devices"),
        "efa_device_plugin": (efa, "the EFA node groups' interfaces"),
        "nvidia_device_plugin": (gpu, "the GPU node groups' devices"),
        "load_balancer_controller": (served, "the serving fleets' TargetGroupBindings"),
        "keda": (fleets and served, "the serving fleets' ScaledObjects"),
        "jobset": (training, "the training jobs (JobSet)"),
        "kueue": (training, "the training queues (Kueue)"),
        "fsx_csi": (lustre, "the Lustre volume"),
        "pod_identity_agent": (True, "the kit's pod roles (pod identity)"),
        "vpc_cni": (True, "pod networking"),
        "coredns": (True, "cluster DNS"),
        "kube_proxy": (True, "Services"),
    }
    for name, (needed, what) in needs.items():
        if needed and getattr(eks.components, name) == "off":
            out.append((f"eks.components.{name}", f"off, but {what} need it; use install or existing"))
    if eks.existing is not None:
        # On a cluster the kit did not create, a chart left at install may already run there: the kit's Helm release
        # (helm upgrade --install) would take the same-named release over and `helm uninstall` it with the stack
        # (review of issue 51). Say so once per component the file did not decide.
        undecided = [n for n in needs if n not in CLUSTER_ADDONS and getattr(eks.components, n) is None and needs[n][0]]
        if undecided:
            warnings.append(
                f"eks.components: {', '.join(undecided)} default to install on your existing cluster; if the cluster runs "
                "one already, set it to existing, or the kit's Helm release takes it over and removes it with the stack"
            )
    return out, warnings


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
    kubernetes_version: str, *, dra: bool, node_autoscaler: bool = True, fleets: bool = True, installs: bool = True
) -> list[tuple[str, str]]:
    """The node autoscaler (installed for inference fleets): a catalog pin of the cluster's minor, and no Neuron DRA it
    cannot drive. ``installs`` false (eks.components.cluster_autoscaler: existing): no pin needed."""
    if not node_autoscaler or not fleets:
        return []
    from neuronkit.kubernetes import autoscaler

    out = [
        ("eks.kubernetes_version", f"{why}; use a version the catalog pins, or set eks.components.cluster_autoscaler: off")
        for why in (autoscaler.version_problems(kubernetes_version) if installs else [])
    ]
    if dra and not autoscaler.drives_dra():
        out.append(
            (
                "eks.neuron.dra",
                "Cluster Autoscaler cannot add nodes for pods that claim Neuron devices through DRA (it models an empty "
                "node group from tags, without ResourceSlices); set eks.components.cluster_autoscaler: off or remove eks.neuron.dra",
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
        served = [v for v in matrix.versions() if table.for_release(eks.version, v) is not None]  # type: ignore[attr-defined]
        instead = f" ({', '.join(served)} have one)" if served else ""
        problems.append(
            (
                "neuron_sdk",
                f"no EKS node image of Kubernetes {eks.version} in the catalog suits Neuron {r.version} (a pool's "
                f"neuron_sdk, or the kit's default when the file sets none): {why}; set neuron_sdk (per file or per "
                f"pool) to a release with an image{instead}, or pin an image with eks.node_release_version and "
                "eks.node_release_source",
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
    "spill_after_minutes", "return_after_minutes", "requests_per_target", "p99_latency_seconds",
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
    """A model served on EKS runs whole-node pods of one profile per Deployment (docs/eks.md, "Serving"): one Neuron
    type; each GPU fallback type gets its own Deployment and node group, so each needs a serving profile of its own;
    and no tensor-parallel override below the type's cores or GPUs."""
    from neuronkit.catalog import serving
    from neuronkit.config.inference import model_spec

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
    # Each GPU type's Deployment is rendered from its own profile (the function synthesis calls): a type the catalog
    # cannot build one for is refused here in one line, not in a synth traceback. Whether the model fits each type is
    # the fleet's own check (config/inference.py).
    model = model_spec(f)
    for j, t in enumerate(f.fallback_types):
        if model is None or serving.accelerator_of(t) != "gpu":
            continue  # a type without GPUs is reported with the type (fallback types must be GPU types)
        o = f.profiles.get(t)
        override = (
            serving.ProfileOverride(tensor_parallel=o.tensor_parallel, max_model_len=o.max_model_len, max_num_seqs=o.max_num_seqs)
            if o is not None
            else None
        )
        try:
            serving.profile(model, t, None, override, image=f.images.gpu)
        except ValueError as e:
            out.append((f"{loc}.fallback_types[{j}]", f"'{t}' has no serving profile on EKS ({e}); remove it"))
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
