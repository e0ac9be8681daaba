"""The serving pilot: its section's rules, the rendered load job (pinned image, seed, lengths, rates), the SLO
operating point from recorded `vllm bench serve` results, the evaluation set, and `pilot report --sample/--from`."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit.adoption import pilot_eval, pilot_serving
from neuronkit.catalog import pricing, serving
from neuronkit.cli import main
from neuronkit.config import ConfigError, load_environment, parse_environment
from neuronkit.stacks import build_environment
from tests.conftest import ROOT, new_app
from tests.templates import resources

FILE = ROOT / "examples" / "environments" / "pilot.yaml"
SHOWN = "examples/environments/pilot.yaml"
DATA = yaml.safe_load(FILE.read_text())


def _bench(rate: float, ttft99: float, itl99: float, tps: float, failed: int = 0) -> dict[str, Any]:
    """A result in the shape `vllm bench serve --save-result` writes (vllm/benchmarks/serve.py)."""
    return {
        "date": "20261120-101500", "backend": "vllm", "model_id": "m", "tokenizer_id": "m", "num_prompts": 100,
        "request_rate": rate, "burstiness": 1.0, "max_concurrency": None, "duration": 100 / rate,
        "completed": 100 - failed, "failed": failed, "total_input_tokens": 1, "total_output_tokens": 1,
        "request_throughput": rate, "output_throughput": tps, "total_token_throughput": tps * 2,
        "mean_ttft_ms": ttft99 / 2, "median_ttft_ms": ttft99 / 3, "std_ttft_ms": 1.0, "p99_ttft_ms": ttft99,
        "mean_itl_ms": itl99 / 2, "median_itl_ms": itl99 / 3, "std_itl_ms": 1.0, "p99_itl_ms": itl99,
    }  # fmt: skip


# --------------------------------------------------------------------------------------------
# the SLO rule
# --------------------------------------------------------------------------------------------
def test_the_slo_picks_the_highest_rate_under_both_p99_limits() -> None:
    points = [
        pilot_serving.point(_bench(1, 300, 40, 250), "r1"),
        pilot_serving.point(_bench(2, 900, 60, 480), "r2"),
        pilot_serving.point(_bench(4, 1900, 95, 900), "r4"),  # the highest under both
        pilot_serving.point(_bench(8, 1500, 140, 1100), "r8"),  # TTFT fine, ITL over
        pilot_serving.point(_bench(16, 9000, 300, 1150), "r16"),
    ]
    op = pilot_serving.operating_point(points, slo_ttft_ms=2000, slo_itl_ms=100)
    assert op is not None and op.request_rate == 4 and op.output_throughput == 900
    # A tighter TTFT limit moves it down; a point with errors over 1% never qualifies.
    assert pilot_serving.operating_point(points, slo_ttft_ms=1000, slo_itl_ms=100).request_rate == 2  # type: ignore[union-attr]
    failing = [pilot_serving.point(_bench(4, 100, 10, 900, failed=5), "f")]
    assert pilot_serving.operating_point(failing, 2000, 100) is None
    assert pilot_serving.operating_point(points, slo_ttft_ms=100, slo_itl_ms=100) is None
    # Dollars per million output tokens: the hourly price over the output tokens an hour at that point.
    assert pilot_serving.cost_per_million(3.6, op) == pytest.approx(3.6 / (900 * 3600) * 1e6)


def test_a_run_folder_is_read_and_priced_at_the_operating_point(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(pilot_serving.SAMPLE, run)
    for side in ("neuron", "gpu"):
        shutil.rmtree(run / "bench" / side)
        (run / "bench" / side).mkdir()
    curves = {
        "neuron": [(1, 400, 30, 250), (2, 800, 50, 500), (4, 3000, 70, 800)],
        "gpu": [(1, 300, 30, 250), (2, 600, 40, 500), (4, 1200, 80, 950)],
    }
    for side, pts in curves.items():
        for rate, ttft, itl, tps in pts:
            doc = _bench(rate, ttft, itl, tps)
            del doc["failed"]  # vLLM before 0.13 writes no `failed`: num_prompts - completed
            (run / "bench" / side / f"random-{rate}.json").write_text(json.dumps(doc))
    c = pilot_serving.compare(pilot_serving.read_run(run), {"slo_ttft_ms": 2000, "slo_itl_ms": 100})
    table = pricing.load_prices()
    n, g = c.sides["neuron"], c.sides["gpu"]
    assert (n.operating.request_rate, g.operating.request_rate) == (2, 4)  # type: ignore[union-attr]
    n_cost = table.require(n.info.instance_type, "us-east-1") / (500 * 3600) * 1e6
    g_cost = table.require(g.info.instance_type, "us-east-1") / (950 * 3600) * 1e6
    assert n.cost_per_million_output_tokens == pytest.approx(n_cost)
    assert g.cost_per_million_output_tokens == pytest.approx(g_cost)
    expected = "go" if n_cost < g_cost else "hold"
    assert c.verdict.startswith(expected + ":")


def test_a_bad_result_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(pilot_serving.SAMPLE, run)
    bad = run / "bench" / "gpu" / "random-1.json"
    bad.write_text(json.dumps({"request_rate": 1, "completed": 3}))
    assert main(["pilot", "report", "--from", str(run), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: 'duration' missing or not a number" in err and "Traceback" not in err


# --------------------------------------------------------------------------------------------
# the sample and --from
# --------------------------------------------------------------------------------------------
def test_the_sample_writes_the_report_the_json_and_two_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    assert main(["pilot", "report", "--sample", "-o", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert text in capsys.readouterr().out
    assert "(SAMPLE RUN)" in text and "Sample data, not a measurement" in text
    doc = json.loads((out / "pilot.json").read_text())
    assert doc["sample"] is True and set(doc["sides"]) == {"neuron", "gpu"}
    for side, info in doc["sides"].items():
        # Both image tags and vLLM versions stand beside the numbers.
        assert f"`{info['image']}` | {info['vllm_version']} |" in text, side
        assert info["vllm_version"] == serving.vllm_version(info["image"])
        assert info["operating_point"] is not None and info["usd_per_million_output_tokens"] > 0
    assert "Verdict rules:" in text and "Compile (reported apart" in text and "load job ran as an ECS task on Fargate" in text
    plots = ("throughput_latency.png", "cost_per_mtok.png")
    for name in plots:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"]({name})" in text


def test_the_files_slo_overrides_the_runs(tmp_path: Path) -> None:
    data = copy.deepcopy(DATA)
    data["pilot"]["slo_ttft_ms"] = 250.0
    f = tmp_path / "pilot.yaml"
    f.write_text(yaml.safe_dump(data))
    assert main(["pilot", "report", "--file", str(f), "--sample", "-o", str(tmp_path / "out")]) == 0
    doc = json.loads((tmp_path / "out" / "pilot.json").read_text())
    assert doc["slo"]["p99_ttft_ms"] == 250.0
    assert all(p["p99_ttft_ms"] < 250 for s in doc["sides"].values() if (p := s["operating_point"]))


# --------------------------------------------------------------------------------------------
# the evaluation set
# --------------------------------------------------------------------------------------------
def test_the_evaluation_set_is_licensed_and_scored_the_same_way_on_both_sides() -> None:
    evalset = json.loads(pilot_serving.EVALSET.read_text())
    assert evalset["license"] == "CC0-1.0" and 20 <= len(evalset["items"]) <= 50
    assert all(pilot_eval.normalize(i["answer"]) for i in evalset["items"])  # no answer normalizes to nothing
    answers = {i["prompt"]: i["answer"] for i in evalset["items"]}

    def right(url: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = answers[body["messages"][-1]["content"]]
        assert body["temperature"] == 0
        return {"choices": [{"message": {"content": f" The {answer}.\nBecause..."}}]}

    def wrong_twice(url: str, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        bad = prompt in list(answers)[:2]
        return {"choices": [{"message": {"content": "no idea" if bad else answers[prompt]}}]}

    assert pilot_eval.score("http://n", "m", evalset, right)["correct"] == len(answers)
    scored = pilot_eval.score("http://g", "m", evalset, wrong_twice)
    assert (scored["correct"], scored["total"]) == (len(answers) - 2, len(answers))


# --------------------------------------------------------------------------------------------
# the section and the rendered load job
# --------------------------------------------------------------------------------------------
def problems(edit: dict[str, Any]) -> list[str]:
    data = copy.deepcopy(DATA)
    data["pilot"]["serving"].update(edit)
    with pytest.raises(ConfigError) as err:
        parse_environment(data, SHOWN)
    return err.value.problems


def test_the_serving_pilot_must_name_a_model_fleet_and_a_gpu_type() -> None:
    assert problems({"fleet": "nope"}) == [
        f"{SHOWN}: pilot.serving.fleet: 'nope' is not an inference fleet of this file (fleets: chat)"
    ]
    assert problems({"gpu_type": "inf2.xlarge"})[0].startswith(
        f"{SHOWN}: pilot.serving.gpu_type: 'inf2.xlarge' is not a GPU type"
    )
    assert problems({"request_rates": [4, 2]}) == [
        f"{SHOWN}: pilot.serving.request_rates: give distinct rates in increasing order, e.g. [1, 2, 4, 8]"
    ]
    assert problems({"input_tokens": 4000}) == [
        f"{SHOWN}: pilot.serving.input_tokens: 4000 + output_tokens 256 exceed the 4096-token context the sides serve; lower them"
    ]


@pytest.fixture(scope="module")
def inference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = new_app(tmp_path_factory.mktemp("pilot-serving") / "cdk.out")
    build_environment(app, load_environment(FILE))
    return next(s.template for s in app.synth().stacks if s.stack_name == "pilot-inference")


def test_the_rendered_load_job_carries_the_pinned_image_seed_lengths_and_rates(inference: dict[str, Any]) -> None:
    env = load_environment(FILE)
    s = env.pilot.serving  # type: ignore[union-attr]
    (task,) = resources(inference, "AWS::ECS::TaskDefinition").values()
    containers = {c["Name"]: c for c in task["Properties"]["ContainerDefinitions"]}
    assert set(containers) == {"fetch", "bench", "upload"}
    bench = containers["bench"]
    variables = {e["Name"]: e["Value"] for e in bench["Environment"]}
    # The GPU side runs the upstream vLLM the Neuron image is built on (catalog/pilot.yaml), so the remaining
    # difference is the plugin; through the twin fleet's pull-through cache.
    pairing = pilot_serving.gpu_pairing(variables["NEURON_IMAGE"])
    assert pairing is not None and pairing["source"] and pairing["upstream_vllm"] == variables["NEURON_VLLM"]
    gpu_image = pairing["gpu_image"]
    assert serving.vllm_version(gpu_image) == pairing["upstream_vllm"] != serving.vllm_version(serving.facts()["gpu_image"])
    assert json.dumps(bench["Image"]).endswith(f'/pilot-pilot-gpu/{gpu_image.split("/", 1)[1]}"]]}}')
    assert variables["NEURON_PLUGIN"] == pairing["plugin"]
    # The adaptive sweep: the resolution and ceiling travel to the job, which bisects and measures saturation.
    sweep = pilot_serving.facts()["sweep"]
    assert float(variables["RESOLUTION"]) == sweep["resolution_rps"] and float(variables["MAX_RATE"]) >= max(s.request_rates)
    assert variables["SEED"] == str(s.seed) and variables["OUTPUT_LEN"] == str(s.output_tokens)
    assert variables["INPUT_LEN"] == str(min(1024, env.inference[0].model.max_model_len - s.output_tokens))  # type: ignore[union-attr]
    assert variables["RATES"].split() == [f"{r:g}" for r in s.request_rates] and variables["PROMPTS"] == str(s.prompts_per_rate)
    assert variables["GPU_IMAGE"] == gpu_image and variables["GPU_VLLM"] == serving.vllm_version(gpu_image)
    assert variables["NEURON_VLLM"] == serving.vllm_version(variables["NEURON_IMAGE"])
    script = bench["Command"][0]
    for flag in ("--dataset-name random", '--random-input-len "${INPUT_LEN}"', '--random-output-len "${OUTPUT_LEN}"',
                 '--seed "${SEED}"', '--request-rate "${rate}"', "--save-result", "vllm bench serve"):  # fmt: skip
        assert flag in script, flag
    assert 'pilot_eval.py" next-rate' in script and 'bench "${side}" inf random' in script
    # Health and warm-up of both endpoints come before any measurement.
    assert script.index('pilot_eval.py" wait') < script.index("warmup") < script.index('bench "${side}" "${rate}" random')
    # The results go to S3 once the benchmark container has finished.
    assert containers["upload"]["DependsOn"] == [{"ContainerName": "bench", "Condition": "COMPLETE"}]
    assert task["Properties"]["RequiresCompatibilities"] == ["FARGATE"]


def test_the_gpu_twin_launches_only_its_gpu_type(inference: dict[str, Any]) -> None:
    groups = {
        g["Properties"]["AutoScalingGroupName"]: g for g in resources(inference, "AWS::AutoScaling::AutoScalingGroup").values()
    }
    twin = groups["pilot-pilot-gpu"]
    overrides = twin["Properties"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]
    assert [o["InstanceType"] for o in overrides] == ["g5.xlarge"]
    assert twin["Properties"]["MinSize"] == twin["Properties"]["MaxSize"] == "1"


def test_a_users_jsonl_evaluation_set_travels_to_the_load_job(tmp_path: Path) -> None:
    data = copy.deepcopy(DATA)
    data["pilot"]["serving"]["evalset_s3_key"] = "pilot/evalset.jsonl"
    env = parse_environment(data, SHOWN)
    app = new_app(tmp_path / "cdk.out")
    build_environment(app, env)
    template = next(s.template for s in app.synth().stacks if s.stack_name == "pilot-inference")
    (task,) = resources(template, "AWS::ECS::TaskDefinition").values()
    containers = {c["Name"]: c for c in task["Properties"]["ContainerDefinitions"]}
    fetch = containers["fetch"]["Command"][0]
    assert '/pilot/evalset.jsonl" /work/data/evalset.jsonl' in fetch
    variables = {e["Name"]: e["Value"] for e in containers["bench"]["Environment"]}
    assert variables["EVALSET"] == "/work/data/evalset.jsonl"
    script = containers["bench"]["Command"][0]
    assert '--evalset "${EVALSET}" --out "${results}/quality/user/${side}.json"' in script
    # The task may read that object, and nothing else of the datasets bucket besides what it read before.
    (policy,) = [
        r
        for r in resources(template, "AWS::IAM::Policy").values()
        if "ReadInputs" in json.dumps(r["Properties"]["PolicyDocument"])
    ]
    reads = next(st for st in policy["Properties"]["PolicyDocument"]["Statement"] if st.get("Sid") == "ReadInputs")
    assert any("pilot/evalset.jsonl" in json.dumps(r) for r in reads["Resource"])
    # A key that is not a .jsonl object under the bucket is one line naming the key.
    data["pilot"]["serving"]["evalset_s3_key"] = "s3://bucket/evalset.json"
    with pytest.raises(ConfigError) as err:
        parse_environment(data, SHOWN)
    assert f"{SHOWN}: pilot.serving.evalset_s3_key: 's3://bucket/evalset.json' must be a .jsonl object key" in str(err.value)
