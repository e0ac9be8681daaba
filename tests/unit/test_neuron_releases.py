"""The Neuron release matrix: its data, validation of every family x workload x release, pinned AMIs."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit import catalog
from neuronkit.catalog import releases
from neuronkit.config import ConfigError, neuron_warnings, parse_environment
from neuronkit.config.neuron import resolve
from tests.conftest import ROOT, Synth

COMBINATIONS = [
    (r.version, fam, workload) for r in releases.releases() for fam in releases.families() for workload in releases.workloads()
]


# ------------------------------------------------------------------------------------------ the data
def test_every_release_row_and_workload_names_its_source() -> None:
    assert {"2.28.1", "2.31.1", "2.33.0"} <= set(releases.versions())
    for r in releases.releases():
        assert r.source and r.date and r.driver and r.runtime and r.compiler, r.version
        assert set(r.sources) == set(releases.workloads()), r.version
        assert all(s.strip() for s in r.sources.values()), r.version


def test_driver_and_runtime_versions_never_go_back_with_a_newer_release() -> None:
    rows = releases.releases()
    for older, newer in zip(rows, rows[1:], strict=False):
        assert releases.version_key(newer.driver) >= releases.version_key(older.driver), newer.version
        assert releases.version_key(newer.runtime) >= releases.version_key(older.runtime), newer.version


def test_pinned_containers_are_built_for_their_release_or_an_older_one() -> None:
    for r in releases.releases():
        for workload, image in r.containers.items():
            assert workload in releases.workloads()
            assert image.startswith("public.ecr.aws/neuron/") and not image.endswith(":latest")
            built = releases.container_release(image)
            assert built is not None and releases.version_key(built) <= releases.version_key(r.version), image


def test_defaults_follow_the_field() -> None:
    # Today's facts (docs/neuron-releases.md): PyTorch on trn1/inf2 ends with 2.28.1; trn2/trn3 run 2.33.0.
    assert releases.default_release("trn1", "pytorch-training").version == "2.28.1"  # type: ignore[union-attr]
    assert releases.default_release("inf2", "vllm-serving").version == "2.28.1"  # type: ignore[union-attr]
    assert releases.default_release("trn2", "pytorch-training").version == "2.33.0"  # type: ignore[union-attr]
    assert releases.default_release("trn3", "vllm-serving").version == "2.33.0"  # type: ignore[union-attr]
    assert releases.default_release("inf2", "pytorch-training") is None


# ------------------------------------------------------ every family x workload x release of the matrix
@pytest.mark.parametrize(("version", "family", "workload"), COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS])
def test_validation_follows_the_matrix(version: str, family: str, workload: str) -> None:
    rel = releases.release(version)
    status = releases.support(rel, family, workload)
    pool, problems, warnings = resolve("training[0]", None, version, (family,), workload)
    if status == "supported":
        assert (problems, warnings) == ([], []) and pool.release == rel
    elif status == "maintenance":
        assert problems == [] and pool.release == rel
        assert warnings == [
            f"training[0].neuron_sdk: {releases.workloads()[workload]} on {family} is in maintenance in Neuron {version} "
            f"(critical fixes only; {rel.sources[workload]})"
        ]
    else:
        assert pool.release is None and len(problems) == 1
        key, message = problems[0]
        assert key == "training[0].neuron_sdk"
        last = releases.last_supporting(family, workload)
        label = releases.workloads()[workload]
        if last is None:
            assert message.startswith(f"no Neuron release the kit knows runs {label} on {family}; use ")
        elif releases.version_key(last.version) < releases.version_key(version):
            assert message.startswith(f"{label} on {family} ends with Neuron {last.version}; set neuron_sdk: {last.version}")
        else:
            assert f"{label} on {family} is not supported by Neuron {version}" in message
        others = releases.families_supporting(rel, workload)
        assert (f"or use {', '.join(others)}" in message) == bool(others) or last is None


# ------------------------------------------------------------------- through a real environment file
def _env(**training: Any) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "environments" / "dev.yaml").read_text())
    data = copy.deepcopy(data)
    data["training"] = [{"name": "one", "instance_type": "trn1.32xlarge", "az_id": "use1-az6", "max_size": 2, **training}]
    data.pop("inference")
    data.pop("neuron_sdk")
    return data


def test_the_issue_message_for_pytorch_training_on_trn1_with_a_new_release() -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment(_env(neuron_sdk="2.33.0"), "environments/dev.yaml")
    assert err.value.problems == [
        "environments/dev.yaml: training[0].neuron_sdk: PyTorch training on trn1 ends with Neuron 2.28.1; "
        "set neuron_sdk: 2.28.1 or use trn2, trn2u, trn3"
    ]


def test_a_top_level_release_applies_to_every_pool_and_is_named_as_such() -> None:
    data = _env()
    data["neuron_sdk"] = "2.33.0"
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "environments/dev.yaml")
    assert err.value.problems == [
        "environments/dev.yaml: training[0].neuron_sdk: PyTorch training on trn1 ends with Neuron 2.28.1 (the top-level "
        "neuron_sdk); set neuron_sdk: 2.28.1 or use trn2, trn2u, trn3"
    ]


def test_an_unknown_release_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment(_env(neuron_sdk="2.99.0"), "environments/dev.yaml")
    assert err.value.problems == [
        f"environments/dev.yaml: training[0].neuron_sdk: '2.99.0' is not a Neuron release the kit knows; use one of "
        f"{', '.join(releases.versions())}"
    ]


def test_without_a_release_a_pool_gets_the_newest_that_fully_supports_it() -> None:
    from neuronkit.config import pool_releases

    env = parse_environment(_env(), "environments/dev.yaml")
    pool = pool_releases(env)["one"]
    assert pool.release is not None and pool.release.version == "2.28.1" and pool.workload == "pytorch-training"


def test_maintenance_and_floating_amis_pass_with_visible_warnings() -> None:
    data = _env()
    data["inference"] = [
        {
            "name": "old",
            "neuron_types": ["inf2.xlarge"],
            "az_ids": ["use1-az6", "use1-az4"],
            "max_size": 2,
            "model_s3_prefix": "models/m/",
            "serve": {"neuron": "serve --port 8080"},
            "neuron_sdk": "2.31.1",
            "neuron_ami": {"track": "latest"},
        }
    ]
    env = parse_environment(data, "environments/dev.yaml")
    warnings = neuron_warnings(env)
    assert any(w.startswith("inference[0].neuron_sdk: vLLM serving on inf2 is in maintenance in Neuron 2.31.1") for w in warnings)
    assert "inference[0].neuron_ami.track: latest re-resolves the AMI at every deploy" in warnings


# ---------------------------------------------------------------------------------- pinned images
def test_no_template_resolves_a_latest_or_recommended_image_at_deploy(synth: Synth) -> None:
    for name, template in synth.templates.items():
        for param in (template.get("Parameters") or {}).values():
            default = str(param.get("Default", ""))
            assert "/latest/" not in default and "/recommended/" not in default, (name, default)
        for logical_id, r in template["Resources"].items():
            if r["Type"] == "AWS::EC2::LaunchTemplate":
                image = r["Properties"]["LaunchTemplateData"].get("ImageId")
                if image is None:  # a Batch node template: its compute environment names the image
                    assert "ImageIdOverride" in str(template["Resources"]), (name, logical_id)
                    continue
            elif r["Type"] == "AWS::Batch::ComputeEnvironment":
                image = r["Properties"]["ComputeResources"]["Ec2Configuration"][0]["ImageIdOverride"]
            else:
                continue
            assert isinstance(image, str) and image.startswith("ami-") and image != "ami-1234", (name, logical_id, image)


def test_a_missing_lookup_names_the_command_that_fills_it(tmp_path: Path) -> None:
    for f in ("app.py", "cdk.json"):
        shutil.copy(ROOT / f, tmp_path / f)
    (tmp_path / "environments").mkdir()
    data = yaml.safe_load((ROOT / "environments" / "dev.yaml").read_text())
    data.update(name="team", account="333333333333")
    (tmp_path / "environments" / "team.yaml").write_text(yaml.safe_dump(data))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDK_OUTDIR": str(tmp_path / "out")}
    done = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("environments/team.yaml:")]
    assert "not pinned in cdk.context.json yet" in line and "Neuron SDK 2.28.1" in line
    assert "run `make synth ENV=team` with read-only credentials for account 333333333333" in line


def test_catalog_ami_families_say_where_their_image_comes_from() -> None:
    for name, fam in catalog.ami_families().items():
        if fam.kind == "neuron":
            assert releases.releases()[-1].dlami_lookup(name) is not None, name  # from the matrix, per release
        else:
            assert fam.lookup_name, name  # GPU and ECS families: their own lookup, pinned at the first synth
