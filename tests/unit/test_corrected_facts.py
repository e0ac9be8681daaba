"""Facts a review found wrong (issue 23, ../shared/FIELD-NOTES.md "Corrections"), each pinned with its source id.

A test here fails when someone copies the old value back; each names the document the value comes from.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from neuronkit import catalog
from neuronkit.catalog import releases, serving

MATRIX = yaml.safe_load((catalog._HERE / "neuron_releases.yaml").read_text())


def test_2_28_1_ships_driver_2_26_10_and_runtime_2_30_51_rn_runtime() -> None:
    # [rn-runtime] Neuron runtime release notes: "Neuron Driver 2.26.10.0, 03/12/2026" (Linux 6.18 fixes).
    row = MATRIX["releases"]["2.28.1"]
    assert row["driver_shipped"] == "2.26.10.0" and row["driver_source"] == "rn-runtime"
    assert row["runtime"] == "2.30.51.0" and row["runtime_source"] == "rn-runtime"
    assert "rn-runtime" in MATRIX["sources"]
    assert releases.release("2.28.1").driver == "2.26.10.0"


def test_2_28_1_ships_nxd_training_1_7_and_jax_neuronx_0_7_rn_2_28_1() -> None:
    # [rn-2.28.1] the 2.28.1 release notes.
    workloads = MATRIX["releases"]["2.28.1"]["workloads"]
    assert (
        "NxD Training 1.7.0" in workloads["pytorch-training"]["source"]
        and "[rn-2.28.1]" in workloads["pytorch-training"]["source"]
    )
    assert "JAX NeuronX 0.7.0" in workloads["jax"]["source"]


def test_2_33_dlami_lookup_matches_the_torch_neuronx_2_14_image_setup_2_33() -> None:
    # [setup-2.33] the 2.33 setup guide names the image "Deep Learning AMI Neuron torch-neuronx 2.14.0".
    lookup = releases.release("2.33.0").dlami_lookup("neuron-torch-neuronx-2.14-ubuntu-24.04")
    assert lookup is not None
    import fnmatch

    assert fnmatch.fnmatch("Deep Learning AMI Neuron torch-neuronx 2.14.0 (Ubuntu 24.04) 20261019", lookup.name)
    assert not fnmatch.fnmatch("Deep Learning AMI Neuron PyTorch 2.13 (Ubuntu 24.04) 20261019", lookup.name)


def test_2_29_1_to_2_31_1_have_their_published_containers_containers_2026() -> None:
    # [containers-2026] AWS's DLC image list and ECR Public: vLLM 0.16.0 images for 2.29.1, 2.30.0 and 2.31.1.
    for version in ("2.29.1", "2.30.0", "2.31.1"):
        r = releases.release(version)
        image = r.container("vllm-serving")
        assert image is not None and image.endswith(f"-sdk{version}-ubuntu24.04"), version
        assert releases.container_release(image) == version
        assert serving.invocation(image) is not None, f"serving.yaml says how to start {image}"
        assert MATRIX["releases"][version]["containers_source"] == "containers-2026"
    for version in ("2.29.1", "2.30.0"):
        assert releases.release(version).container("pytorch-training") is not None


def test_2_31_1_containers_the_catalog_called_missing_dlc_readme_2026_08() -> None:
    # [dlc-readme-2026-08] aws-neuron/deep-learning-containers README: pytorch-inference-neuronx 2.9.0 and
    # pytorch-inference-vllm-neuronx 0.21.0.1.0.0 are published for sdk2.31.1.
    import json

    image = releases.release("2.31.1").container("pytorch-inference")
    assert image == "public.ecr.aws/neuron/pytorch-inference-neuronx:2.9.0-neuronx-py312-sdk2.31.1-ubuntu24.04"
    published = json.loads((Path(catalog.__file__).parent / "published_images.json").read_text())["repositories"]
    assert "0.21.0.1.0.0-neuronx-py313-sdk2.31.1-ubuntu24.04" in published["public.ecr.aws/neuron/pytorch-inference-vllm-neuronx"]


def test_gp3_volumes_go_to_64_tib_ebs_general_purpose() -> None:
    # EBS User Guide, "General Purpose SSD volumes": gp3 up to 65,536 GiB; 16,384 GiB is gp2's cap.
    assert catalog.max_root_volume_gib() == 65536
    assert "general-purpose" in catalog.capacity_facts()["max_root_volume_source"]


def test_trn2_3xlarge_has_one_chip_of_96_gib_trn2_arch() -> None:
    # [trn2-arch] one Trainium2 chip: 96 GiB of HBM.
    it = catalog.get("trn2.3xlarge")
    assert it.neuron_devices == 1 and it.neuron_memory_mib == 98304
    assert it.neuron_memory_mib == it.neuron_devices * catalog.trainium_facts()["families"]["trn2"]["hbm_gib_per_chip"] * 1024


def test_efa_installer_is_the_version_neurons_manifest_pins() -> None:
    # Neuron's release manifest pins EFA 1.47 for SDK 2.28.1-2.32.0; 1.51.0 is the newest installer.
    efa = catalog.software_facts()["efa_installer"]
    assert efa["version"] == "1.47.0" and "manifest" in efa["source"] and efa["latest_known"] == "1.51.0"


def test_capacity_blocks_last_up_to_182_days_and_bill_an_os_fee() -> None:
    # EC2 User Guide, "Capacity Blocks pricing and billing".
    blocks = catalog.capacity_facts()["capacity_blocks"]
    assert blocks["max_duration_days"] == 182 and blocks["os_fee_billed_separately"] is True
    assert "capacity-blocks-pricing-billing" in blocks["source"]


def test_trn2_48xlarge_serves_with_64_logical_cores_at_the_default_lnc_lnc() -> None:
    # [lnc] Trn2 defaults to LNC=2: 128 physical NeuronCores are 64 logical ones.
    assert catalog.get("trn2.48xlarge").neuron_cores == 128
    assert serving.lnc_of("trn2.48xlarge") == 2 and serving.accelerators("trn2.48xlarge") == 64
    assert serving.accelerators("trn2.48xlarge", 1) == 128
    assert (
        serving.lnc_of("inf2.48xlarge") is None
        and serving.accelerators("inf2.48xlarge") == catalog.get("inf2.48xlarge").neuron_cores
    )
