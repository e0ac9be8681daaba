"""Issue 50, Done when: the Name-tagged 70B serving group gets the same answer from assess, validate and the pilot
(the one fit rule, catalog/fit.py), the answer written in tests/fixtures/cur/name-tagged-70b.expected.yaml before the
code; the embeddings group is "not assessed"; the report names where the forward family is offered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from neuronkit.adoption import assess, billing, offline
from neuronkit.catalog import fit
from neuronkit.cli.errors import CliError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cur" / "name-tagged-70b.csv"
EXPECTED = yaml.safe_load(FIXTURE.with_suffix(".expected.yaml").read_text())["groups"]
MODEL = "meta-llama/Llama-3.1-70B-Instruct"


@pytest.fixture(scope="module")
def result() -> offline.BillingAssessment:
    export = billing.read(FIXTURE, is_gpu=assess._is_gpu)
    return offline.assess_export(export)


def _group(result: offline.BillingAssessment, name: str) -> offline.Priced:
    (p,) = [p for p in result.priced if offline.group_label(p.group) == name]
    return p


def test_the_rule_gives_the_answer_written_before_the_code() -> None:
    expected = EXPECTED["llama70b-serving"]
    spec = fit.spec_for(MODEL)
    for itype, want in expected["per_type"].items():
        answer, tried = fit.best(spec, itype)
        assert (answer is not None) == want["fits"], (itype, fit.why_not(tried))
        if want["fits"]:
            assert answer is not None and answer.tp == want["tp"] and answer.lnc == want.get("lnc")
            assert answer.line is not None and answer.line.name == want["line"] and answer.line.status == want["line_status"]
    reasons = {16: "does not divide the 24", 8: "memory", 24: "attention heads"}
    for tp, reason in reasons.items():
        assert reason in "; ".join(fit.check(spec, "inf2.48xlarge", tp).problems)


def test_assess_proposes_the_rules_answer_and_names_where_it_is_offered(result: offline.BillingAssessment) -> None:
    want = EXPECTED["llama70b-serving"]["proposal"]
    p = _group(result, "llama70b-serving")
    assert p.model == MODEL and p.model_basis and "Name=llama70b-serving" in p.model_basis
    assert p.match is not None and p.match.neuron_type == want["neuron_type"]
    assert (p.match.tensor_parallel, p.match.lnc) == (want["tp"], want["lnc"])
    assert dict(p.match.elsewhere) == {r: tuple(z) for r, z in want["offered_in"].items()}
    assert p.saving_list is None  # Capacity Blocks only and no block price: no saving claimed
    text = offline.render(result)
    assert "not offered in us-west-2; offered in us-east-2 (use2-az1, use2-az2, use2-az3)" in text


def test_the_saving_is_computed_on_the_answer_with_a_block_price(tmp_path: Path) -> None:
    offers = tmp_path / "blocks.json"
    offers.write_text(json.dumps({"CapacityBlockOfferings": [{
        "CapacityBlockOfferingId": "cbo-test", "InstanceType": "trn2.48xlarge", "AvailabilityZone": "us-east-2a",
        "InstanceCount": 1, "CapacityBlockDurationHours": 24, "UpfrontFee": "480.00"}]}))  # fmt: skip
    export = billing.read(FIXTURE, is_gpu=assess._is_gpu)
    result = offline.assess_export(export, blocks=assess.read_block_offerings(offers))
    p = _group(result, "llama70b-serving")
    assert p.match is not None and p.match.neuron_type == "trn2.48xlarge" and p.match.hourly == pytest.approx(20.0)
    assert p.neuron_list_monthly == pytest.approx(p.like_hours * 20.0 / p.months)
    assert p.saving_list == pytest.approx(p.gpu_list_monthly - p.neuron_list_monthly)  # type: ignore[operator]


def test_the_embeddings_group_is_not_assessed(result: offline.BillingAssessment) -> None:
    p = _group(result, "bge-embeddings")
    assert p.not_assessed and "embedding" in p.not_assessed and p.match is None and p.saving_list is None
    assert p not in result.by_kind("inference")
    assert "## Not assessed" in offline.render(result)


def test_validate_and_the_pilot_agree_with_assess() -> None:
    """validate (both platforms) and the pilot's fit check go through serving.fit_problem, the same rule."""
    spec = fit.spec_for(MODEL)
    for itype, want in EXPECTED["llama70b-serving"]["per_type"].items():
        tp = want.get("tp")
        problem = fit.fit_problem(spec, itype, tp=tp)
        assert (problem is None) == want["fits"], (itype, problem)
    assert fit.fit_problem(spec, "inf2.48xlarge", tp=16) is not None


def test_a_bare_model_is_refused_with_several_serving_groups() -> None:
    from neuronkit.cli import assess_cmd

    with pytest.raises(CliError, match=r"--model ID was removed in .*use --model GROUP=MODEL"):
        assess_cmd.parse_models(["meta-llama/Llama-3.1-8B-Instruct"], serving_groups=2)
    assert assess_cmd.parse_models(["llama70b-serving=" + MODEL], serving_groups=2) == {"llama70b-serving": MODEL}
    assert assess_cmd.parse_models([MODEL], serving_groups=1) == {"*": MODEL}
