"""The serving pilot's verdicts on recorded benchmark output: each side at its own operating point (the adaptive
sweep), saturation, "no winner at this load", the paired quality test and a user's JSONL evaluation set."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from neuronkit.adoption import make_pilot_sample, pilot_eval, pilot_quality, pilot_serving
from neuronkit.catalog import pricing
from neuronkit.cli import main
from tests.conftest import ROOT

LOAD_LIMITED = ROOT / "tests" / "fixtures" / "pilot" / "load-limited"


# --------------------------------------------------------------------------------------------
# the adaptive sweep
# --------------------------------------------------------------------------------------------
def test_the_adaptive_sweep_bisects_between_met_and_missed_to_the_resolution() -> None:
    nxt = pilot_eval.next_rate
    # The file's rates: met at 1, missed at 2 -> halfway, then halfway again, until 0.25 req/s apart.
    assert nxt([(0.5, True), (1, True), (2, False), (4, False)], 0.25, 64) == 1.5
    assert nxt([(1, True), (1.5, True), (2, False)], 0.25, 64) == 1.75
    assert nxt([(1, True), (1.75, True), (2, False)], 0.25, 64) is None  # 0.25 apart: done
    # Every rate met: double up to the ceiling, then stop (the side stays load-limited).
    assert nxt([(1, True), (2, True)], 0.25, 64) == 4
    assert nxt([(32, True), (48, True)], 0.25, 64) == 64
    assert nxt([(64, True)], 0.25, 64) is None
    # No rate met: halve down to the resolution.
    assert nxt([(1, False)], 0.25, 64) == 0.5
    assert nxt([(0.4, False)], 0.25, 64) is None
    # Saturation runs (rate inf) take no part.
    assert nxt([(1, True), (math.inf, False)], 0.25, 64) == 2


def test_next_rate_reads_a_sides_result_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(LOAD_LIMITED / "bench" / "neuron", bench)
    args = ["next-rate", "--results", str(bench), "--slo-ttft-ms", "2000", "--slo-itl-ms", "100", "--resolution", "0.25"]
    assert pilot_eval.main(args) == 0
    assert capsys.readouterr().out.strip() == "1.5"  # met at 1, missed at 2 in the recorded run


# --------------------------------------------------------------------------------------------
# operating points, saturation and the verdicts
# --------------------------------------------------------------------------------------------
def test_on_the_sample_each_side_is_priced_at_its_own_operating_point() -> None:
    c = pilot_serving.compare(pilot_serving.read_run(pilot_serving.SAMPLE))
    n, g = c.sides["neuron"], c.sides["gpu"]
    assert n.operating is not None and g.operating is not None
    # Their capacities differ, so do their operating points; each limit is found to the resolution.
    assert n.operating.request_rate != g.operating.request_rate
    for r in (n, g):
        assert not r.load_limited and r.limit is not None and r.operating is not None
        assert 0 < r.limit - r.operating.request_rate <= c.resolution
        # Saturation: the most it served at any rate, as high as with every request at once.
        flat_out = next(p for p in r.curve if not math.isfinite(p.request_rate))
        assert r.saturation is not None and r.saturation.output_throughput == flat_out.output_throughput
        assert r.saturation.output_throughput > r.operating.output_throughput
    table = pricing.load_prices()
    for r in (n, g):
        hourly = table.require(r.info.instance_type, c.run.region)
        assert r.operating is not None and r.saturation is not None
        assert r.cost_per_million_output_tokens == pytest.approx(hourly / (r.operating.output_throughput * 3600) * 1e6)
        assert r.cost_at_saturation == pytest.approx(hourly / (r.saturation.output_throughput * 3600) * 1e6)
    assert c.verdict.startswith("go:") and "own operating point" in c.verdict
    # The GPU side runs the upstream vLLM the Neuron image is built on.
    assert n.info.vllm_version == g.info.vllm_version and n.info.plugin


def test_a_recorded_run_where_both_sides_are_load_limited_has_no_winner(tmp_path: Path) -> None:
    c = pilot_serving.compare(pilot_serving.read_run(LOAD_LIMITED))
    n, g = c.sides["neuron"], c.sides["gpu"]
    assert n.operating is not None and g.operating is not None
    assert n.operating.request_rate == g.operating.request_rate == 1 and n.load_limited and g.load_limited
    assert c.verdict.startswith("no winner at this load:")
    out = tmp_path / "out"
    assert main(["pilot", "report", "--from", str(LOAD_LIMITED), "-o", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "**Verdict: no winner at this load" in text and "no: load-limited" in text
    # That old run paired different vLLM versions: the report says so.
    assert "The sides run different vLLM versions" in text
    assert json.loads((out / "pilot.json").read_text())["sides"]["gpu"]["load_limited"] is True


def test_the_second_sample_is_a_case_the_gpu_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["pilot", "report", "--sample", "gpu-wins", "-o", str(out)]) == 0
    doc = json.loads((out / "pilot.json").read_text())
    assert doc["sample"] is True and doc["verdict"].startswith("hold:")
    n, g = doc["sides"]["neuron"], doc["sides"]["gpu"]
    assert g["usd_per_million_output_tokens"] < n["usd_per_million_output_tokens"]
    assert g["operating_point"]["request_rate"] > n["operating_point"]["request_rate"]
    assert "SAMPLE DATA" in (out / "report.md").read_text()


def test_the_title_comes_from_the_pilots_kind(tmp_path: Path) -> None:
    run = pilot_serving.read_run(pilot_serving.SAMPLE)
    assert pilot_serving.title(run).startswith("# Serving pilot llama-serve")
    assert "fine-tuning" not in pilot_serving.title(run).lower()
    run.kind = "training"
    assert pilot_serving.title(run).startswith("# Fine-tuning pilot")


def test_the_sample_runs_are_what_the_generator_writes(tmp_path: Path) -> None:
    for name in make_pilot_sample.CASES:
        fresh = make_pilot_sample.write(name, tmp_path)
        bundled = Path(make_pilot_sample.HERE) / name
        files = sorted(p.relative_to(fresh) for p in fresh.rglob("*.json"))
        assert files and files == sorted(p.relative_to(bundled) for p in bundled.rglob("*.json")), name
        for f in files:
            assert (fresh / f).read_text() == (bundled / f).read_text(), (
                f"{name}/{f}: run python -m neuronkit.adoption.make_pilot_sample"
            )


# --------------------------------------------------------------------------------------------
# quality: paired, with intervals
# --------------------------------------------------------------------------------------------
def test_wilson_and_the_exact_mcnemar_test() -> None:
    lo, hi = pilot_quality.wilson(38, 40)
    assert (round(lo, 3), round(hi, 3)) == (0.835, 0.986)  # the Wilson score interval of 38/40
    assert pilot_quality.mcnemar_exact(0, 1) == 1.0
    assert pilot_quality.mcnemar_exact(0, 9) == pytest.approx(2 / 2**9)
    assert pilot_quality.mcnemar_exact(3, 3) == 1.0
    assert pilot_quality.mcnemar_exact(2, 10) == pytest.approx(2 * sum(math.comb(12, i) for i in range(3)) / 2**12)


def test_the_samples_38_against_39_of_40_is_indistinguishable(tmp_path: Path) -> None:
    c = pilot_serving.compare(pilot_serving.read_run(pilot_serving.SAMPLE))
    (q,) = c.quality
    assert (q.sides["neuron"].correct, q.sides["gpu"].correct, q.sides["gpu"].total) == (38, 39, 40)
    assert q.better is None and "indistinguishable" in q.summary() and "83-99%" in q.summary()
    out = tmp_path / "out"
    assert main(["pilot", "report", "--sample", "-o", str(out)]) == 0
    assert "indistinguishable at the 0.05 level" in (out / "report.md").read_text()


def _answers(doc: dict[str, Any], wrong: set[str]) -> dict[str, Any]:
    answers = [{**a, "correct": a["id"] not in wrong} for a in doc["answers"]]
    right = sum(a["correct"] for a in answers)
    return {**doc, "answers": answers, "correct": right, "score_percent": 100 * right / len(answers)}


def test_a_large_paired_difference_names_the_better_side(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(pilot_serving.SAMPLE, run)
    gpu = json.loads((run / "quality" / "gpu.json").read_text())
    ids = [a["id"] for a in gpu["answers"]]
    (run / "quality" / "neuron.json").write_text(json.dumps(_answers(gpu, set(ids[:10]))))  # 30/40
    (run / "quality" / "gpu.json").write_text(json.dumps(_answers(gpu, {ids[0]})))  # 39/40
    c = pilot_serving.compare(pilot_serving.read_run(run))
    (q,) = c.quality
    assert (q.neuron_only, q.gpu_only) == (0, 9) and q.better == "gpu" and q.p_value is not None and q.p_value < 0.01
    assert "the GPU is better" in q.summary()
    assert c.verdict.startswith("not yet: the GPU answers better")
    # The other way round names Neuron, and does not stop the verdict.
    (run / "quality" / "neuron.json").write_text(json.dumps(_answers(gpu, {ids[0]})))
    (run / "quality" / "gpu.json").write_text(json.dumps(_answers(gpu, set(ids[:10]))))
    c = pilot_serving.compare(pilot_serving.read_run(run))
    assert c.quality[0].better == "neuron" and "Neuron is better" in c.quality[0].summary()
    assert not c.verdict.startswith("not yet")


# --------------------------------------------------------------------------------------------
# a user's JSONL evaluation set
# --------------------------------------------------------------------------------------------
def _fake_server(right: set[str]) -> pilot_eval.Post:
    """An OpenAI-compatible server that knows the answers of the prompts in ``right``."""
    answers = {"Capital of France?": "Paris", "2 + 2?": "4", "Largest planet?": "Jupiter"}

    def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
        assert url.endswith("/v1/chat/completions") and body["temperature"] == 0
        prompt = body["messages"][1]["content"]
        return {"choices": [{"message": {"content": answers[prompt] if prompt in right else "I don't know"}}]}

    return post


def test_a_users_jsonl_evaluation_set_runs_on_both_sides(tmp_path: Path) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text(
        "# my questions\n"
        '{"id": "fr", "prompt": "Capital of France?", "answer": "Paris"}\n'
        "\n"
        '{"prompt": "2 + 2?", "answer": "4", "also": ["four"]}\n'
        '{"id": "jup", "prompt": "Largest planet?", "answer": "Jupiter"}\n'
    )
    evalset = pilot_eval.load_evalset(str(f))
    assert [i["id"] for i in evalset["items"]] == ["fr", "line4", "jup"]
    neuron = pilot_eval.score("http://neuron:8080", "m", evalset, _fake_server({"Capital of France?", "2 + 2?"}))
    gpu = pilot_eval.score("http://gpu:8080", "m", evalset, _fake_server({"Capital of France?", "2 + 2?", "Largest planet?"}))
    assert (neuron["correct"], gpu["correct"], gpu["total"]) == (2, 3, 3)
    # Beside the kit's set in a run folder, both are compared and reported.
    run = tmp_path / "run"
    shutil.copytree(pilot_serving.SAMPLE, run)
    (run / "quality" / "user").mkdir()
    (run / "quality" / "user" / "neuron.json").write_text(json.dumps(neuron))
    (run / "quality" / "user" / "gpu.json").write_text(json.dumps(gpu))
    out = tmp_path / "out"
    assert main(["pilot", "report", "--from", str(run), "-o", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "- mine.jsonl vuser (yours): Neuron 2/3" in text and "neuronkit-pilot-eval v1" in text
    assert len(json.loads((out / "pilot.json").read_text())["quality"]) == 2


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"prompt": "x"}', "'answer' missing"),
        ("not json", "not a JSON object"),
        ('{"prompt": "x", "answer": "y", "also": "z"}', "'also' must be a list"),
        ('["x", "y"]', "must be a JSON object"),
        ('{"prompt": "x", "answer": "the"}', "normalizes to nothing"),
    ],
)
def test_a_bad_line_of_a_jsonl_set_names_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, says: str
) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text('{"prompt": "Capital of France?", "answer": "Paris"}\n' + line + "\n")
    with pytest.raises(pilot_eval.EvalSetError, match=f"^{f}:2: .*{says}"):
        pilot_eval.load_evalset(str(f))
    assert pilot_eval.main(["score", "--url", "http://x", "--evalset", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{f}:2: ") and "Traceback" not in err


def test_an_unknown_sample_name_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pilot", "report", "--sample", "nope", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--sample nope: no such sample; use one of default, gpu-wins" in err and "Traceback" not in err
