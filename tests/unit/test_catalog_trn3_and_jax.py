"""Catalog facts corrected for issue 50, each re-read in its source:

- the JAX images of Neuron 2.28 to 2.31: aws-neuron/deep-learning-containers README at 2be9ed1 (the jax-training-neuronx
  table: 0.7-...-sdk2.28.0/2.29.1, 0.9.0-neuronx-py313-sdk2.30.0/2.31.0/2.31.1), so a JAX Batch pool on those releases
  gets its image from the matrix;
- the Trn3 type names: the Neuron Helm chart 1.9.0 values (neuronInstances, at b77a6f9): trn3.48xlarge, trn3e.24xlarge,
  names only; on platform: eks a Trn3 pool is refused with one line (the EKS AMI repository at the commit the node
  images are read at names no Trn3 type)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit import catalog
from neuronkit.catalog import releases
from neuronkit.config import ConfigError, parse_environment
from tests.project import on_platform, sources

ROOT = Path(__file__).resolve().parents[2]
JAX = "public.ecr.aws/neuron/jax-training-neuronx"
README_TAGS = {  # the README's ECR Public URLs, as written there
    "2.28.1": "0.7-neuronx-py312-sdk2.28.0-ubuntu24.04",  # no 2.28.1 row: 2.28.0's, as the PyTorch tags of 2.28.1
    "2.29.1": "0.7-neuronx-py312-sdk2.29.1-ubuntu24.04",
    "2.30.0": "0.9.0-neuronx-py313-sdk2.30.0-ubuntu24.04",
    "2.31.1": "0.9.0-neuronx-py313-sdk2.31.1-ubuntu24.04",
}


@pytest.mark.parametrize("version", sorted(README_TAGS))
def test_the_jax_image_of_each_release_is_the_readmes(version: str) -> None:
    assert releases.release(version).container("jax") == f"{JAX}:{README_TAGS[version]}"
    published = json.loads((Path(catalog.__file__).parent / "published_images.json").read_text())["repositories"]
    assert README_TAGS[version] in published[JAX] and "0.9.0-neuronx-py313-sdk2.31.0-ubuntu24.04" in published[JAX]
    data = _releases_yaml()
    entry = data["releases"][version]
    assert entry["jax_container_source"] == "dlc-readme-2.32.0" and "2be9ed1" in data["sources"]["dlc-readme-2.32.0"]


def _releases_yaml() -> dict[str, Any]:
    return yaml.safe_load((Path(catalog.__file__).parent / "neuron_releases.yaml").read_text())


def test_a_jax_batch_pool_on_2_31_1_gets_the_matrixs_image() -> None:
    """Before: 'the release matrix has no JAX container for Neuron 2.31.1; name one'. Now the README's tag."""
    from tests.unit.test_batch import BASE, FILE

    data = copy.deepcopy(BASE)
    c = data["training"][0]
    c.pop("container_image")
    c.update(neuron_sdk="2.31.1", workload="jax")
    from neuronkit.config import pool_releases

    env = parse_environment(data, FILE)  # no longer refused for want of an image
    pool = pool_releases(env)[env.training[0].name]
    assert pool.release is not None and pool.release.container(pool.workload) == f"{JAX}:{README_TAGS['2.31.1']}"


def test_the_trn3_names_come_from_the_chart_and_carry_no_facts() -> None:
    named = catalog.named_types()
    assert set(named) == {"trn3.48xlarge", "trn3e.24xlarge"}
    src = catalog.trainium_facts()["sources"][named["trn3.48xlarge"]["source"]]
    assert "neuron-helm-charts/blob/b77a6f90bb00dc0ee57d21e35e275b05e26b79c1/charts/neuron-helm-chart/values.yaml" in src
    assert all(t not in catalog.instance_types() for t in named)  # names only: no invented chips or EFA
    assert catalog.trainium_facts()["families"]["trn3"]["instance_types"] == sorted(named)


def _problems(data: dict[str, Any], path: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_environment(data, path)
    return err.value.problems


def test_a_trn3_pool_on_the_auto_scaling_path_is_one_line_naming_the_refresh() -> None:
    data = yaml.safe_load((ROOT / "environments" / "dev.yaml").read_text())
    data["training"][0]["instance_type"] = "trn3.48xlarge"
    (line,) = [p for p in _problems(data, "environments/dev.yaml") if "training[0].instance_type" in p]
    assert "trn3.48xlarge is a trn3 type" in line and "neuronkit catalog refresh" in line and "trn2.48xlarge" in line


EKS_FILES = {name: env for name, env in on_platform("eks").items() if env.training or env.inference}


@pytest.mark.parametrize("name", sorted(EKS_FILES))
def test_a_trn3_pool_on_eks_is_refused_with_one_line(name: str) -> None:
    (text,) = [t for f, t in sources().items() if f == f"{name}.yaml"]
    for section, key, where in (("training", "instance_type", "training[0].instance_type"),
                                ("inference", "neuron_types", "inference[0].neuron_types[0]")):  # fmt: skip
        data = yaml.safe_load(text)
        if not data.get(section):
            continue
        pool = data[section][0]
        pool[key] = ["trn3.48xlarge"] if key == "neuron_types" else "trn3.48xlarge"
        problems = _problems(data, f"environments/{name}.yaml")
        mine = [p for p in problems if p.split(": ", 1)[1].startswith(where)]
        assert len(mine) == 1, problems
        assert "carry no Trn3 support" in mine[0] and "[eks-ami-81fec2e]" in mine[0] and "platform: asg" in mine[0]


def test_the_eks_example_is_among_them() -> None:
    assert EKS_FILES, "the project has platform: eks environments (tests/fixtures/user_environments)"
    data = yaml.safe_load((ROOT / "examples" / "environments" / "eks.yaml").read_text())
    data["training"][0]["instance_type"] = "trn3.48xlarge"
    problems = _problems(data, "examples/environments/eks.yaml")
    assert [p for p in problems if "training[0]" in p] == [
        "examples/environments/eks.yaml: training[0].instance_type: trn3.48xlarge: "
        + catalog.eks_unsupported("trn3.48xlarge")  # type: ignore[operator]
        + "; platform: eks cannot run it, so use platform: asg or a Trn2 type (trn2.48xlarge)"
    ]
