"""The Neuron release matrix: its data, validation of every family x workload x release, pinned AMIs."""

from __future__ import annotations

import copy
import json
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
        assert releases.source_url(r.source).startswith("https://"), r.version
        assert set(r.sources) == set(releases.workloads()), r.version
        for workload, text in r.sources.items():
            cited = releases.citations(text)
            assert cited, f"{r.version} {workload}: cites no [source]"
            assert all(releases.source_url(c).startswith("https://") for c in cited), (r.version, workload, cited)


def test_every_unverified_fact_cites_what_was_found_and_is_listed_in_the_docs() -> None:
    docs = (ROOT / "docs" / "neuron-releases.md").read_text()
    for r in releases.releases():
        for fact, found in r.unverified.items():
            assert all(releases.source_url(c) for c in releases.citations(found)), (r.version, fact)
            assert f"{r.version} {fact}" in docs, f"docs/neuron-releases.md does not list {r.version} {fact}"


def test_driver_runtime_and_compiler_versions_never_go_back_with_a_newer_release() -> None:
    rows = releases.releases()
    for older, newer in zip(rows, rows[1:], strict=False):
        for part in ("driver", "runtime", "compiler"):
            before, after = getattr(older, part), getattr(newer, part)
            assert releases.version_key(after) >= releases.version_key(before), (newer.version, part, before, after)
        assert newer.date > older.date, newer.version


def test_the_docs_table_carries_the_matrix_versions() -> None:
    # docs/neuron-releases.md is written by hand: a bump of the YAML without the docs fails here.
    docs = (ROOT / "docs" / "neuron-releases.md").read_text()
    for r in releases.releases():
        assert f"| {r.version} | {r.date} | {r.driver} | {r.runtime} | {r.compiler} |" in docs, r.version


def test_the_file_schema_offers_exactly_the_matrix_workloads() -> None:
    from typing import get_args

    from neuronkit.config.neuron import Workload

    assert set(get_args(Workload)) == set(releases.workloads())


def test_the_api_other_modules_use() -> None:
    r = releases.release("2.28.1")
    assert r.driver_version == releases.driver_version("2.28.1") == "2.26.10.0"
    assert r.container("training") == r.container("pytorch-training") is not None
    assert "sdk2.33.0" in (releases.release("2.33.0").container("vllm-serving") or "")
    dlami = r.dlami("base", "amazon-linux-2023")
    assert dlami is not None and dlami.ami_family == "neuron-base-al2023" and dlami.description == "*Neuron SDK 2.28.1*"
    assert dlami.owner == "amazon" and dlami.os == "amazon-linux-2023" and dlami.root_device_name == "/dev/xvda"
    # PyTorch 2.9 (PyTorch/XLA) DLAMIs end with 2.31; TorchNeuron ones start with 2.33.
    assert releases.release("2.30.0").dlami("pytorch-2.9") is not None
    assert releases.release("2.31.1").dlami("pytorch-2.9") is None  # "not published after 2.31.0"
    assert releases.release("2.33.0").dlami("pytorch-2.9") is None
    assert releases.release("2.32.0").dlami("pytorch-2.13") is None
    with pytest.raises(KeyError):
        releases.release("2.99.0")


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
            f"(critical fixes only: {rel.source_of(workload)}); docs/neuron-releases.md"
        ]
    else:
        assert pool.release is None and len(problems) == 1
        key, message = problems[0]
        assert key == "training[0].neuron_sdk"
        label = releases.workloads()[workload]
        mine = releases.version_key(version)
        running = [r for r in releases.releases() if releases.support(r, family, workload) != "unsupported"]
        older = [r for r in running if releases.version_key(r.version) < mine]
        newer = [r for r in running if releases.version_key(r.version) > mine]
        full = releases.default_release(family, workload)
        if not running:
            assert message.startswith(f"no Neuron release the kit knows runs {label} on {family}; use ")
        elif not newer:
            # Points at the newest release that still fully supports it, never at a maintenance one when it can.
            best = [r for r in older if releases.support(r, family, workload) == "supported"] or older
            assert message.startswith(
                f"{label} on {family} ends with Neuron {best[-1].version}; set neuron_sdk: {best[-1].version}"
            )
            assert releases.support(releases.release(best[-1].version), family, workload) != "unsupported"
        elif not older:
            target = full.version if full is not None else newer[-1].version
            assert message.startswith(f"{label} on {family} starts with Neuron {newer[0].version}; set neuron_sdk: {target}")
        else:
            assert message.startswith(f"{label} on {family} is not supported by Neuron {version}; set neuron_sdk: ")
        others = releases.families_supporting(rel, workload)
        assert (f"or use {', '.join(others)}" in message) == bool(others) or not running
        # Whatever release the line tells the user to set really runs the combination.
        if running:
            told = message.split("set neuron_sdk: ", 1)[1].split()[0]
            assert releases.support(releases.release(told), family, workload) != "unsupported", message


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
    assert env.warnings == warnings  # the loaded Environment carries them for validate, synth and summary


def test_a_dlami_family_without_an_image_for_the_pool_release_is_refused() -> None:
    # PyTorch 2.9 (PyTorch/XLA) DLAMIs were last published with 2.31: a trn2 pool on 2.33.0 cannot boot one.
    data = _env(instance_type="trn2.48xlarge", az_id="use2-az3", neuron_sdk="2.33.0")
    data.update(region="us-east-2", network={**data["network"], "az_ids": ["use2-az3"]})
    data["storage"] = {k: v for k, v in data.get("storage", {}).items() if k != "lustre"}
    data["training"][0]["ami"] = {"family": "neuron-pytorch-2.9-ubuntu-24.04"}
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "environments/dev.yaml")
    assert err.value.problems == [
        "environments/dev.yaml: training[0].ami.family: 'neuron-pytorch-2.9-ubuntu-24.04' has no image for Neuron 2.33.0 "
        "(its images carry Neuron 2.28.1 to 2.30.0); use neuron-multi-framework-ubuntu-24.04, neuron-base-ubuntu-24.04, "
        "neuron-base-al2023, neuron-torch-neuronx-2.14-ubuntu-24.04 or set neuron_sdk to a release it carries"
    ]


# ---------------------------------------------------------------------------------- pinned images
def test_no_template_resolves_a_latest_or_recommended_image_at_deploy(synth: Synth) -> None:
    for name, template in synth.templates.items():
        for param in (template.get("Parameters") or {}).values():
            default = str(param.get("Default", ""))
            assert "/latest/" not in default and "/recommended/" not in default, (name, default)
        for logical_id, r in template["Resources"].items():
            if r["Type"] == "AWS::EC2::LaunchTemplate":
                image = r["Properties"]["LaunchTemplateData"].get("ImageId")
                node_groups = [
                    g["Properties"] for g in template["Resources"].values()
                    if g["Type"] == "AWS::EKS::Nodegroup" and g["Properties"]["LaunchTemplate"]["Id"] == {"Ref": logical_id}
                ]  # fmt: skip
                if image is None and node_groups:  # EKS: the node group boots EKS's image at a pinned release
                    (group,) = node_groups
                    assert group["AmiType"].startswith("AL2023_") and isinstance(group["ReleaseVersion"], str), (name, logical_id)
                    assert group["ReleaseVersion"] in json.dumps(catalog.eks_facts(), default=str), (
                        name,
                        group["ReleaseVersion"],
                    )
                    continue
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
    env = {k: v for k, v in os.environ.items() if k != "CDK_CLI_VERSION"}
    env.update(PYTHONPATH=str(ROOT), CDK_OUTDIR=str(tmp_path / "out"))
    # Without the CDK CLI nothing can fill the lookup: synth fails with the one line (no dummy-AMI templates).
    done = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = [x for x in done.stderr.splitlines() if x.startswith("environments/team.yaml:")]
    # One line per pool, each once, naming the pool's own key and the command that pins it (neuronkit.config.lookups).
    assert [x.split(": ")[1] for x in lines] == [
        "training[0].ami",
        "training[1].ami",
        "inference[0].neuron_ami",
        "inference[0].gpu_ami",
    ]
    line = lines[0]
    assert "is not pinned in cdk.context.json for 333333333333/us-east-1" in line and "Neuron SDK 2.28.1" in line
    assert "run `neuronkit pin --env team` with read-only credentials" in line and "training[0].ami.ami_id" in line
    # Under the CLI (it sets CDK_CLI_VERSION) the app succeeds so that the CLI can look the images up and re-run it.
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=tmp_path,
        env={**env, "CDK_CLI_VERSION": "2.1148.0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert [x for x in done.stderr.splitlines() if x.startswith("environments/team.yaml:")] == []  # the CLI looks them up
    # A file given with -c file=PATH is named as given, with the synth command that reads it.
    (tmp_path / "other").mkdir()
    outside = tmp_path / "other" / "team.yaml"
    outside.write_text((tmp_path / "environments" / "team.yaml").read_text())
    done = subprocess.run(
        [sys.executable, "app.py"], cwd=tmp_path, env={**env, "CDK_CONTEXT_JSON": json.dumps({"file": str(outside)})},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    line = [x for x in done.stderr.splitlines() if x.startswith(f"{outside}:")][0]
    assert f"run `neuronkit pin --file {outside}` with read-only credentials" in line


def test_catalog_ami_families_say_where_their_image_comes_from() -> None:
    for name, fam in catalog.ami_families().items():
        if fam.kind == "neuron":
            assert any(r.dlami_lookup(name) for r in releases.releases()), name  # from the matrix, per release
        else:
            assert fam.lookup_name, name  # GPU and ECS families: their own lookup, pinned at the first synth
