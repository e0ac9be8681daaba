"""``neuronkit preflight`` on a ``platform: eks`` environment: does the region offer every EKS add-on version the
catalog pins, for the cluster's Kubernetes version? (``eks:DescribeAddonVersions``, read-only.)

The pins most likely to drift are the add-ons' ``-eksbuild`` suffixes (the FSx CSI driver's is marked unverified in
``neuronkit/catalog/eks.yaml``); this turns that into a FAIL line with the versions the region offers. Helm charts
are pulled from public registries at deploy time and are not checked here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from neuronkit import catalog
from neuronkit.account.check import Check

if TYPE_CHECKING:
    from neuronkit.config import Environment


def pinned_addons(env: Environment) -> dict[str, str]:
    """Add-on name -> pinned version, for what the kit installs on this environment's cluster (eks.components:
    an ``existing`` or ``off`` add-on is not the kit's to install)."""
    from neuronkit.config.eks import CLUSTER_ADDONS

    facts = catalog.eks_facts()
    skipped = {addon for name, addon in CLUSTER_ADDONS.items() if env.eks is not None and not env.eks.installs(name)}
    pins = {name: str(v["version"]) for name, v in facts["addons"].items() if name != "source" and name not in skipped}
    if env.storage.lustre is not None and (env.eks is None or env.eks.installs("fsx_csi")):
        pins["aws-fsx-csi-driver"] = str(facts["storage_addons"]["aws-fsx-csi-driver"]["version"])
    return pins


# eks.components that are EKS add-ons (read with eks:ListAddons); the rest are Helm charts the kit cannot see without
# the Kubernetes API.
_ADDON_COMPONENTS = {
    "vpc_cni": "vpc-cni", "coredns": "coredns", "kube_proxy": "kube-proxy", "pod_identity_agent": "eks-pod-identity-agent",
    "fsx_csi": "aws-fsx-csi-driver",
}  # fmt: skip


def check_existing_cluster(env: Environment, eks: Any) -> list[Check]:
    """eks.existing, read-only (eks:DescribeCluster, eks:ListAddons): the cluster is there, at the file's version, in an
    authentication mode that takes access entries, with the endpoint, certificate authority and cluster security group
    the file gives; each ``existing`` component that is an EKS add-on is installed. What needs the Kubernetes API (the
    controllers and CRD versions of ``existing`` charts, a Kueue configuration) is a WARN line saying it was not checked."""
    if env.eks is None or env.eks.existing is None:
        return []
    ex = env.eks.existing
    name = f"EKS cluster {ex.cluster_name}"
    try:
        cluster = eks.describe_cluster(name=ex.cluster_name)["cluster"]
    except Exception as err:  # noqa: BLE001 - a missing cluster is a finding, not a crash
        if "ResourceNotFound" not in type(err).__name__ and "ResourceNotFound" not in str(err):
            raise
        return [Check("FAIL", name, f"not found in {env.region}", "fix eks.existing.cluster_name or the file's region")]
    out: list[Check] = []
    version = str(cluster.get("version"))
    if version == ex.kubernetes_version:
        out.append(Check("PASS", f"{name} version", f"Kubernetes {version}"))
    else:
        out.append(Check("FAIL", f"{name} version", f"the cluster runs {version}, the file says {ex.kubernetes_version}",
                         f"set eks.existing.kubernetes_version: \"{version}\""))  # fmt: skip
    mode = (cluster.get("accessConfig") or {}).get("authenticationMode")
    if mode in ("API", "API_AND_CONFIG_MAP"):
        out.append(Check("PASS", f"{name} authentication mode", f"{mode}: takes access entries"))
    elif mode is None:
        out.append(Check("WARN", f"{name} authentication mode", "DescribeCluster carried no accessConfig: not checked"))
    else:
        out.append(Check("FAIL", f"{name} authentication mode", f"{mode}: access entries are refused",
                         "aws eks update-cluster-config --access-config authenticationMode=API_AND_CONFIG_MAP"))  # fmt: skip
    given = {
        "endpoint": (cluster.get("endpoint"), ex.endpoint),
        "certificate_authority": ((cluster.get("certificateAuthority") or {}).get("data"), ex.certificate_authority),
        "cluster_security_group_id": ((cluster.get("resourcesVpcConfig") or {}).get("clusterSecurityGroupId"),
                                      ex.cluster_security_group_id),
    }  # fmt: skip
    for key, (actual, wanted) in given.items():
        if actual is None:
            out.append(Check("WARN", f"{name} {key}", "DescribeCluster did not return it: not checked"))
        elif str(actual).strip() == str(wanted).strip().rstrip("/") or str(actual).strip() == str(wanted).strip():
            out.append(Check("PASS", f"{name} {key}", "matches eks.existing"))
        else:
            out.append(Check("FAIL", f"{name} {key}", "differs from the cluster's",
                             f"copy it from aws eks describe-cluster --name {ex.cluster_name} into eks.existing.{key}"))  # fmt: skip
    existing = [c for c in _ADDON_COMPONENTS if env.eks.component(c) == "existing"]
    if existing:
        try:
            installed = set(eks.list_addons(clusterName=ex.cluster_name).get("addons") or [])
        except Exception as err:  # noqa: BLE001 - one WARN line: the add-ons stay unchecked, the rest still runs
            code = getattr(err, "response", {}).get("Error", {}).get("Code") or type(err).__name__
            names = ", ".join(_ADDON_COMPONENTS[c] for c in existing)
            out.append(Check("WARN", f"{name} add-ons", f"eks:ListAddons failed ({code}): {names} not checked"))
            existing = []
            installed = set()
        for component in existing:
            addon = _ADDON_COMPONENTS[component]
            if addon in installed:
                out.append(Check("PASS", f"{name} add-on {addon}", "installed (eks.components." + component + ": existing)"))
            else:
                out.append(Check("WARN", f"{name} add-on {addon}", "not an EKS add-on of the cluster; it may run "
                                 "self-managed, which the kit could not check", f"or set eks.components.{component}: install"))  # fmt: skip
    # The controllers (Deployments, and the device plugins' DaemonSets), CRDs and Kueue configuration of the other
    # existing charts are read through the Kubernetes API (neuronkit/kubernetes/cluster_api.py).
    return out


def check_eks_addons(env: Environment, eks: Any) -> list[Check]:
    if env.platform != "eks" or env.eks is None:
        return []
    version = env.eks.version
    out: list[Check] = []
    for name, pinned in sorted(pinned_addons(env).items()):
        found = eks.describe_addon_versions(addonName=name, kubernetesVersion=version).get("addons") or []
        offered = [str(v.get("addonVersion")) for a in found for v in a.get("addonVersions") or []]
        check = f"EKS add-on {name}"
        if pinned in offered:
            out.append(Check("PASS", check, f"{pinned} is offered for Kubernetes {version} in {env.region}"))
        else:
            newest = ", ".join(offered[:3]) or "none"
            out.append(
                Check(
                    "FAIL",
                    check,
                    f"{pinned} is not offered for Kubernetes {version} in {env.region} (offered: {newest})",
                    f"pin an offered version in neuronkit/catalog/eks.yaml ({'storage_addons' if name == 'aws-fsx-csi-driver' else 'addons'}.{name}.version)",
                )
            )
    return out


__all__ = ["check_eks_addons", "check_existing_cluster", "pinned_addons"]
