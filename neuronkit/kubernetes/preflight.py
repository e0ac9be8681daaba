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
    """Add-on name -> pinned version, for what the kit installs on this environment's cluster."""
    facts = catalog.eks_facts()
    pins = {name: str(v["version"]) for name, v in facts["addons"].items() if name != "source"}
    if env.storage.lustre is not None:
        pins["aws-fsx-csi-driver"] = str(facts["storage_addons"]["aws-fsx-csi-driver"]["version"])
    return pins


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


__all__ = ["check_eks_addons", "pinned_addons"]
