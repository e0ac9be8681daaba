"""`neuronkit assess --pilot-output` writes the pilot of the workload with the largest saving (issue 50): on the issue's
export (the kit's sample: a 4 x g6e.12xlarge serving group that migrates, a p4d training group on hold) the serving
group's, and the serving pilot carries the fit rule's answer (catalog/fit.py), so assess, validate and the pilot agree
on the Name-tagged 70B fixture group."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from neuronkit.adoption import assess, billing, offline
from neuronkit.catalog import fit
from neuronkit.cli import main
from neuronkit.config import inference as inference_config
from neuronkit.config import load_environment

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cur" / "name-tagged-70b.csv"
MODEL = "meta-llama/Llama-3.1-70B-Instruct"


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trn2.48xlarge block at $5 an instance-hour in us-east-2 (the keys of describe-capacity-block-offerings)."""
    path = tmp_path_factory.mktemp("blocks") / "offerings.json"
    path.write_text(json.dumps({"CapacityBlockOfferings": [{
        "CapacityBlockOfferingId": "cbo-test", "InstanceType": "trn2.48xlarge", "AvailabilityZone": "us-east-2a",
        "InstanceCount": 1, "CapacityBlockDurationHours": 24, "UpfrontFee": "120.00"}]}))  # fmt: skip
    return path


def test_the_serving_group_with_the_larger_saving_gets_the_pilot(blocks: Path, tmp_path: Path) -> None:
    """The sample's training group is on hold and its serving group migrates: the pilot is the serving group's."""
    out, starter = tmp_path / "assess.md", tmp_path / "trial.yaml"
    args = ["assess", "--sample", "--model", MODEL, "--capacity-blocks", str(blocks), "-o", str(out)]
    assert main([*args, "--pilot-output", str(starter)]) == 0
    report = out.read_text()
    assert "Training verdict (list against list): hold" in report and "Inference verdict (list against list): migrate" in report
    env = load_environment(starter)  # validates: name from the file name, budget not enforced on a block-only type
    assert env.name == "trial" and env.pilot is not None and env.pilot.serving is not None and env.pilot.cluster is None
    (fleet,) = env.inference
    assert env.pilot.serving.fleet == fleet.name and fleet.fallback_types == ["g6e.12xlarge"]
    assert fleet.model is not None and fleet.model.id == MODEL and env.training == []


def test_without_a_saving_anywhere_no_pilot_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    starter = tmp_path / "pilot.yaml"
    # the fixture's 70B group is unpriced (Trainium2, no block price) and the embeddings group is not assessed
    assert main(["assess", "--from", str(FIXTURE), "--pilot-output", str(starter)]) == 2
    assert "--capacity-blocks" in capsys.readouterr().err and not starter.exists()


def test_assess_validate_and_the_pilot_agree_on_the_70b_group(blocks: Path, tmp_path: Path) -> None:
    export = billing.read(FIXTURE, is_gpu=assess._is_gpu)
    result = offline.assess_export(export, blocks=assess.read_block_offerings(blocks))
    (p,) = [p for p in result.priced if offline.group_label(p.group) == "llama70b-serving"]
    assert p.match is not None and (p.saving_list or 0) > 0
    doc = yaml.safe_load(assess.pilot_environment(offline.to_assessment(result), "pilot"))
    (f,) = doc["inference"]
    # the pilot: the type, TP and LNC assess proposed, in the region assess priced it (us-west-2 has no trn2.48xlarge)
    assert f["neuron_types"] == [p.match.neuron_type] and doc["region"] == p.match.price_region == "us-east-2"
    assert f["profiles"][p.match.neuron_type]["tensor_parallel"] == p.match.tensor_parallel and f.get("lnc") == p.match.lnc
    assert f["model"]["id"] == MODEL and f["fallback_types"] == ["g6e.12xlarge"]
    # validate: the file has no problems, and the fleet's own fit check (what validate runs) accepts it
    path = tmp_path / "pilot.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["validate", str(path)]) == 0
    env = load_environment(path)
    (fleet,) = env.inference
    spec = inference_config.model_spec(fleet)
    assert spec is not None
    assert (
        fit.fit_problem(spec, fleet.neuron_types[0], tp=fleet.profiles[fleet.neuron_types[0]].tensor_parallel, lnc=fleet.lnc)
        is None
    )
    # ... and the rule refuses what assess refused (inf2.48xlarge at TP 16), so nothing else could have been written
    assert fit.fit_problem(spec, "inf2.48xlarge", tp=16) is not None
    assert fit.check(spec, "trn2.48xlarge", p.match.tensor_parallel, p.match.lnc).fits


def test_a_serving_winner_without_a_known_model_is_one_line() -> None:
    w = assess.Workload("ec2", "g6e.12xlarge us-west-2", "us-west-2", "g6e.12xlarge", 4, "inference")
    a = assess.Assessment("123456789012", ["us-west-2"], ["2026-10"])
    a.proposals.append(assess.Proposal(w, "inf2.24xlarge", "", "2.28.1", 30000.0, 20000.0, "list-price", "supported"))
    with pytest.raises(ValueError, match=r"g6e\.12xlarge us-west-2: the model it serves is unknown.*--model GROUP=MODEL"):
        assess.pilot_environment(a)


def test_the_pilots_gpu_side_is_checked_at_its_profile_as_validate_checks_the_fleet() -> None:
    """The GPU twin (the fleet's first fallback type) with a profile TP the 70B model does not fit at: the pilot and
    the fleet check refuse it with the fit rule's own words; at the rule's TP both accept it."""
    from neuronkit.config import ConfigError, parse_environment

    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples" / "environments" / "pilot.yaml").read_text())
    fleet = data["inference"][0]
    fleet["model"].update(id=MODEL, parameters_billion=70.6, s3_prefix="models/llama-3.1-70b/")
    fleet["neuron_types"], fleet["fallback_types"] = ["inf2.48xlarge"], ["g6e.12xlarge"]
    fleet["profiles"] = {"inf2.48xlarge": {"tensor_parallel": 8}, "g6e.12xlarge": {"tensor_parallel": 2}}
    with pytest.raises(ConfigError) as err:
        parse_environment(copy.deepcopy(data), "examples/environments/pilot.yaml")
    spec = fit.spec_for(MODEL)
    gpu, neuron = fit.check(spec, "g6e.12xlarge", 2), fit.check(spec, "inf2.48xlarge", 8)
    assert not gpu.fits and not neuron.fits  # 65.8 GiB of weights a GPU of 45 GiB; 16.4 GiB a core of 16 GiB
    lines = err.value.problems
    (fleet_line,) = [p for p in lines if "inference[0].fallback_types[0]" in p]
    (pilot_line,) = [p for p in lines if "pilot.serving.gpu_type" in p]
    (neuron_line,) = [p for p in lines if "inference[0].neuron_types[0]" in p]
    assert gpu.summary() in fleet_line and gpu.summary() in pilot_line and neuron.summary() in neuron_line
    # the rule's answers (assess's too): TP 4 on g6e.12xlarge, trn1.32xlarge at TP 32
    fleet["neuron_types"] = ["trn1.32xlarge"]
    fleet["profiles"] = {"trn1.32xlarge": {"tensor_parallel": 32}, "g6e.12xlarge": {"tensor_parallel": 4}}
    assert fit.best(spec, "g6e.12xlarge")[0].tp == 4  # type: ignore[union-attr]
    problems = []
    try:
        parse_environment(copy.deepcopy(data), "examples/environments/pilot.yaml")
    except ConfigError as e:
        problems = e.problems
    assert not [p for p in problems if "pilot.serving" in p or "fallback_types" in p or "neuron_types" in p], problems
