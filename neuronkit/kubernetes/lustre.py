"""A static PersistentVolume and claim for the environment's FSx for Lustre file system (the FSx CSI driver).

Static provisioning: the file system belongs to the storage stack; the volume names it (``volumeHandle`` is the
file system id, ``dnsname`` and ``mountname`` its endpoint) and the claim binds to exactly that volume
(``volumeName``, empty ``storageClassName``). The volume is retained: deleting the claim never touches the data.
Pods mount the claim ``ENV-lustre``; Lustre answers every Availability Zone of the VPC, so the volume has no node
affinity.
"""

from __future__ import annotations

from typing import Any

DRIVER = "fsx.csi.aws.com"


def volume_name(environment: str) -> str:
    return f"{environment}-lustre"


def persistent_volume(*, environment: str, file_system_id: str, dns_name: str, mount_name: str, size_gib: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name(environment), "labels": {"neuronkit.io/environment": environment}},
        "spec": {
            "capacity": {"storage": f"{size_gib}Gi"},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": ["flock"],
            "csi": {
                "driver": DRIVER,
                "volumeHandle": file_system_id,
                "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
            },
        },
    }


def persistent_volume_claim(*, environment: str, size_gib: int, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": volume_name(environment),
            "namespace": namespace,
            "labels": {"neuronkit.io/environment": environment},
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume_name(environment),
            "resources": {"requests": {"storage": f"{size_gib}Gi"}},
        },
    }


def smoke_pod(*, image: str, namespace: str = "default") -> dict[str, Any]:
    """The Neuron smoke pod of docs/eks.md: ``neuron-ls`` with one ``aws.amazon.com/neuron`` device (not applied by
    the stack; the docs and the schema tests use it)."""
    from neuronkit.kubernetes.neuron_chart import NEURON_DEVICE

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "neuron-smoke", "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "neuron-ls",
                    "image": image,
                    "command": ["neuron-ls"],
                    "resources": {"limits": {NEURON_DEVICE: 1}, "requests": {NEURON_DEVICE: 1}},
                }
            ],
        },
    }


__all__ = ["DRIVER", "persistent_volume", "persistent_volume_claim", "smoke_pod", "volume_name"]
