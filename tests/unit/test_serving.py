"""Serving profiles: models that fit, tensor parallelism per type, the compiled-model cache key, boot time.

The numbers come from the catalog (instances.json, serving.yaml, neuron_releases.yaml), never copied here.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit import catalog
from neuronkit.catalog import fit, releases, serving
from neuronkit.config import ConfigError, load_environment, parse_environment
from tests.conftest import ROOT

R2281 = releases.release("2.28.1")
LLAMA_70B = serving.ModelSpec(id="meta-llama/Llama-3.1-70B-Instruct", s3_prefix="m/", parameters_billion=70.6)
LLAMA_8B = serving.ModelSpec(id="meta-llama/Llama-3.1-8B-Instruct", s3_prefix="m/", parameters_billion=8.0)
TINY = serving.ModelSpec(id="TinyLlama/TinyLlama-1.1B-Chat-v1.0", s3_prefix="m/", parameters_billion=1.1)
HEADROOM = serving.facts()["kv_cache_headroom"]


def _memory_gib(t: str) -> float:
    it = catalog.get(t)
    return (it.neuron_memory_mib if it.is_neuron else it.gpu_memory_mib) / 1024


# The fit table: model sizes x types, each verdict computed from the catalog's memory and the headroom rule.
FIT_TYPES = ["inf2.xlarge", "inf2.24xlarge", "inf2.48xlarge", "g5.xlarge", "g5.12xlarge", "g6e.12xlarge", "p4d.24xlarge"]


@pytest.mark.parametrize("model", [TINY, LLAMA_8B, LLAMA_70B], ids=lambda m: m.id)
@pytest.mark.parametrize("instance_type", FIT_TYPES)
def test_fit_check_follows_memory_and_headroom(model: serving.ModelSpec, instance_type: str) -> None:
    # A model the catalog does not know (no heads, no layers): the whole-node headroom rule of catalog/fit.py.
    model = serving.ModelSpec(
        id=f"acme/private-{model.parameters_billion}b", s3_prefix="m/", parameters_billion=model.parameters_billion
    )
    weights = model.parameters_billion * 1e9 * 2 / 1024**3  # bf16
    fits = weights <= _memory_gib(instance_type) * (1 - HEADROOM)
    problem = fit.fit_problem(model, instance_type, FIT_TYPES)
    assert (problem is None) == fits, problem
    if problem:
        assert instance_type in problem and f"{_memory_gib(instance_type):.0f} GiB" in problem
        assert f"{weights:.0f} GiB" in problem and "KV cache" in problem


def test_known_verdicts_of_the_examples_models() -> None:
    # 70B in bf16 is ~131 GiB: the 4 x 24 GB g5.12xlarge cannot hold it, nor inf2.24xlarge at a TP dividing its 12
    # cores and the 64 heads (TP 4: 32.9 GiB a 16 GiB core); g6e.12xlarge can (TP 4 on 4 x 48 GB). Issue 50.
    assert 131 < LLAMA_70B.weights_gib < 132
    assert fit.fit_problem(LLAMA_70B, "g5.12xlarge") is not None
    assert fit.fit_problem(LLAMA_70B, "inf2.24xlarge") is not None and fit.fit_problem(LLAMA_70B, "g6e.12xlarge") is None
    problem = fit.fit_problem(LLAMA_70B, "g5.12xlarge", serving.candidates("gpu", "us-east-1", ["use1-az6", "use1-az4"]))
    assert problem is not None and "g6e.12xlarge" in problem  # names a type that would fit, offered in the AZs
    assert fit.fit_problem(TINY, "inf2.xlarge") is None and fit.fit_problem(TINY, "g5.xlarge") is None


def test_smaller_dtypes_halve_the_weights() -> None:
    fp8 = serving.ModelSpec(id="m", s3_prefix="m/", parameters_billion=70.6, dtype="fp8")
    assert math.isclose(fp8.weights_gib * 2, LLAMA_70B.weights_gib)
    assert fit.fit_problem(fp8, "g5.12xlarge") is None  # ~66 GiB of fp8 fits 89 GiB with headroom


@pytest.mark.parametrize(
    "instance_type", ["inf2.xlarge", "inf2.24xlarge", "inf2.48xlarge", "g5.xlarge", "g6e.12xlarge", "p4d.24xlarge"]
)
def test_tensor_parallel_degree_is_the_types_neuron_cores_or_gpus(instance_type: str) -> None:
    it = catalog.get(instance_type)
    p = serving.profile(TINY, instance_type, R2281)
    assert p.tensor_parallel == (it.neuron_cores if it.is_neuron else it.gpus) > 0
    args = p.arguments(TINY, 8080)
    assert args[args.index("--tensor-parallel-size") + 1] == str(p.tensor_parallel)
    assert args[args.index("--port") + 1] == "8080" and args[args.index("--served-model-name") + 1] == TINY.id


def test_overrides_change_one_types_profile_and_its_cache_key() -> None:
    base = serving.profile(LLAMA_70B, "inf2.24xlarge", R2281)
    short = serving.profile(LLAMA_70B, "inf2.24xlarge", R2281, serving.ProfileOverride(max_model_len=2048, tensor_parallel=8))
    assert (short.max_model_len, short.tensor_parallel) == (2048, 8)
    assert base.cache_key != short.cache_key and "tp8-len2048" in str(short.cache_key)


def test_cache_key_names_model_release_compiler_type_and_parallelism() -> None:
    p = serving.profile(LLAMA_70B, "inf2.48xlarge", R2281)
    assert p.cache_key == (
        f"compiled/meta-llama-llama-3.1-70b-instruct/sdk2.28.1-neuronxcc{R2281.compiler}/"
        f"{serving.engine_of(p.image)}-{serving.vllm_version(p.image)}/inf2.48xlarge/"
        f"tp{catalog.get('inf2.48xlarge').neuron_cores}-len4096-seqs8/"
    )
    # A new release (compiler) never loads stale artifacts: the key changes.
    newer = releases.release("2.33.0")
    assert serving.cache_key(LLAMA_70B, newer, "inf2.48xlarge", 24, 4096, 8) != p.cache_key
    # Different types, parallelism or limits: different keys.
    keys = {
        serving.cache_key(LLAMA_70B, R2281, t, tp, n, s)
        for t in ("inf2.24xlarge", "inf2.48xlarge")
        for tp in (12, 24)
        for n in (2048, 4096)
        for s in (4, 8)
    }
    assert len(keys) == 16
    # GPU types compile nothing.
    assert serving.profile(LLAMA_70B, "g6e.12xlarge", R2281).cache_key is None


def test_neuron_profile_runs_the_release_matrix_container_and_gpu_the_catalogs() -> None:
    neuron = serving.profile(TINY, "inf2.xlarge", R2281)
    assert neuron.image == R2281.container("vllm-serving") and ":latest" not in neuron.image
    assert neuron.env["NEURON_COMPILED_ARTIFACTS"] == "/compiled"
    assert neuron.env["VLLM_NEURON_FRAMEWORK"] == "neuronx-distributed-inference"  # the NxD Inference-based image
    gpu = serving.profile(TINY, "g5.xlarge", R2281)
    assert gpu.image == serving.facts()["gpu_image"] and gpu.command == ("--model",)
    # A release without a vLLM container cannot serve with the kit's containers.
    with pytest.raises(ValueError, match="no vLLM container"):
        serving.profile(TINY, "inf2.xlarge", replace(releases.release("2.29.1"), containers={}))


def test_every_release_container_for_vllm_has_an_invocation() -> None:
    for rel in releases.releases():
        image = serving.neuron_image(rel)
        if image is not None:
            assert serving.invocation(image) is not None, image


def test_root_volume_holds_ami_image_weights_and_compiled_artifacts() -> None:
    disk = serving.facts()["disk"]
    size = serving.root_volume_gib(LLAMA_70B, "inf2.48xlarge")  # no instance store: weights on the root volume
    need = disk["ami_gib"]["neuron"] + disk["image_gib"]["neuron"] + 2 * LLAMA_70B.weights_gib + disk["margin_gib"]
    assert need <= size < need + disk["round_to_gib"] and size % disk["round_to_gib"] == 0
    # A GPU type with NVMe keeps the weights there: the root volume holds AMI and image only (the catalog minimum).
    assert catalog.get("g6e.12xlarge").local_nvme_gb > 0
    assert serving.root_volume_gib(LLAMA_70B, "g6e.12xlarge") == catalog.capacity_facts()["min_root_volume_gib"]["gpu"]


def test_boot_time_grows_with_the_model() -> None:
    boot = serving.facts()["boot"]
    assert serving.boot_seconds(TINY, "inf2.xlarge") < serving.boot_seconds(LLAMA_70B, "inf2.48xlarge")
    assert serving.boot_seconds(TINY, "inf2.xlarge") >= boot["overhead_seconds"] * boot["safety_factor"]
    assert serving.boot_seconds(LLAMA_70B, "inf2.48xlarge") % 60 == 0


def test_pull_through_uri_keeps_the_upstream_path_and_tag() -> None:
    image = R2281.container("vllm-serving")
    assert image is not None
    uri = serving.pull_through_uri(image, "123456789012.dkr.ecr.us-east-1.amazonaws.com", "prod-chat")
    assert uri == "123456789012.dkr.ecr.us-east-1.amazonaws.com/prod-chat/" + image.removeprefix("public.ecr.aws/")
    with pytest.raises(ValueError, match="not on public.ecr.aws"):
        serving.pull_through_uri("docker.io/vllm/vllm-openai:v0.11.0", "r", "p")


# --------------------------------------------------------------------------------------------
# validation of the environment file
# --------------------------------------------------------------------------------------------
def _prod() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "environments" / "prod.yaml").read_text())
    return data


def _problems(data: dict[str, Any], tmp_path: Path) -> list[str]:
    f = tmp_path / "env.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as e:
        load_environment(f)
    return e.value.problems


def test_examples_serve_models_that_fit_every_type() -> None:
    for name in ("dev", "prod"):
        env = load_environment(ROOT / "environments" / f"{name}.yaml")
        for f in env.inference:
            assert f.model is not None and f.serve is None
            model = serving.ModelSpec(
                id=f.model.id,
                s3_prefix=f.model.s3_prefix,
                parameters_billion=f.model.parameters_billion,
                max_model_len=f.model.max_model_len,
                max_num_seqs=f.model.max_num_seqs,
            )
            for t in f.neuron_types + f.fallback_types:
                o = f.profiles.get(t)
                tp, length = (o.tensor_parallel, o.max_model_len) if o else (None, None)
                assert fit.fit_problem(model, t, tp=tp, max_model_len=length) is None, (name, t)


def test_a_type_too_small_for_the_model_is_refused_naming_what_fits(tmp_path: Path) -> None:
    data = _prod()
    data["inference"][0]["fallback_types"] = ["g6e.12xlarge", "g5.xlarge"]
    (line,) = [p for p in _problems(data, tmp_path) if "fallback_types[1]" in p]
    assert "g5.xlarge TP 1 does not fit" in line and "memory:" in line and "KV cache" in line and "it fits" in line


def test_a_root_volume_too_small_is_refused(tmp_path: Path) -> None:
    data = _prod()
    data["inference"][0]["root_volume_gib"] = 150
    (line,) = [p for p in _problems(data, tmp_path) if "root_volume_gib" in p]
    need = serving.root_volume_gib(serving.ModelSpec(id="x", s3_prefix="m/", parameters_billion=8.03), "inf2.48xlarge")
    assert "150 GiB cannot hold" in line and f"at least {need}" in line


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (lambda f: f.update(serve={"neuron": "x"}), "inference[0].serve", "not both"),
        (lambda f: (f.pop("model"), f.pop("profiles")), "inference[0].model", "required"),
        (
            lambda f: f["profiles"].update({"inf2.8xlarge": {}}),
            "inference[0].profiles.inf2.8xlarge",
            "not one of the fleet's types",
        ),
        (
            lambda f: f["profiles"].update({"inf2.24xlarge": {"tensor_parallel": 16}}),
            "tensor_parallel",
            "exceeds the 12 NeuronCores",
        ),
        (lambda f: f.update(images={"gpu": "public.ecr.aws/x/vllm"}), "inference[0].images.gpu", "no pinned tag"),
        (lambda f: f.update(images={"gpu": "docker.io/vllm/vllm-openai:v0.11.0"}), "inference[0].images.gpu", "pull-through"),
        (lambda f: f.update(tls={"certificate_arn": "arn:aws:acm:us-east-1:1:cert"}), "inference[0].tls.certificate_arn", ""),
    ],
)
def test_serving_mistakes_get_one_line_each(edit: Any, key: str, words: str, tmp_path: Path) -> None:
    data = copy.deepcopy(_prod())
    edit(data["inference"][0])
    problems = _problems(data, tmp_path)
    assert any(key in p and words in p for p in problems), problems


def test_plain_http_passes_with_a_warning_and_prod_has_tls() -> None:
    dev = load_environment(ROOT / "environments" / "dev.yaml")
    assert any("inference[0].tls: the listener is plain HTTP" in w for w in dev.warnings)
    prod = load_environment(ROOT / "environments" / "prod.yaml")
    assert prod.inference[0].tls is not None and not any(".tls" in w for w in prod.warnings)


def test_a_grace_period_shorter_than_the_boot_warns() -> None:
    data = _prod()
    data["inference"][0]["health_check_grace_seconds"] = 300
    env = parse_environment(data, "prod.yaml")
    assert any("health_check_grace_seconds: 300 s is shorter than" in w for w in env.warnings)


def test_a_served_fleet_on_the_default_latency_threshold_warns_that_it_only_guards_the_idle_timeout() -> None:
    """Review of issue 49: without its own p99_latency_seconds or the environment's p99_latency_ms, a served ALB fleet's
    latency alarm sits at half the idle timeout (300 s at the default): one line saying it is no latency monitoring."""
    data = _prod()
    data.get("monitoring", {}).get("alarms", {}).pop("p99_latency_ms", None)
    fleet = data["inference"][0]
    fleet.pop("p99_latency_seconds", None)
    fleet["load_balancer"] = "alb"
    env = parse_environment(copy.deepcopy(data), "prod.yaml")
    assert env.inference[0].model is not None, "prod's first fleet is served with model"
    threshold = serving.default_p99_latency_seconds(env.inference[0].idle_timeout_seconds)
    found = [w for w in env.warnings if w.startswith("inference[0].p99_latency_seconds: not set")]
    assert len(found) == 1 and f"passes {threshold:g} s (half the" in found[0] and "\n" not in found[0], env.warnings
    fleet["p99_latency_seconds"] = 45
    assert not any("p99_latency_seconds: not set" in w for w in parse_environment(copy.deepcopy(data), "prod.yaml").warnings)
    fleet.pop("p99_latency_seconds")
    data.setdefault("monitoring", {}).setdefault("alarms", {})["p99_latency_ms"] = 3000
    assert not any("p99_latency_seconds: not set" in w for w in parse_environment(copy.deepcopy(data), "prod.yaml").warnings)


def test_the_engine_follows_family_and_release_and_the_key_names_it() -> None:
    """inf2/trn1 run the NxD Inference-based vLLM (frozen at 2.31), trn2/trn3 the vLLM Neuron plugin from 2.31: a trn2
    fleet on 2.31.1 gets the plugin image the catalog lists for that release, an inf2 fleet the release's container."""
    r231 = releases.release("2.31.1")
    engines = serving.facts()["engines"]
    inf2 = serving.profile(TINY, "inf2.xlarge", r231)
    trn2 = serving.profile(LLAMA_8B, "trn2.48xlarge", r231)
    assert inf2.image == r231.container("vllm-serving") and serving.engine_of(inf2.image) == "nxdi-vllm"
    assert trn2.image == engines["vllm-neuron"]["plugin"]["2.31.1"] and serving.engine_of(trn2.image) == "vllm-neuron"
    assert "/vllm-neuron-" in str(trn2.cache_key) and "/nxdi-vllm-" in str(inf2.cache_key)
    # The same trn2 fleet before 2.31 ran the NxD Inference line: another engine, another key.
    old = serving.profile(LLAMA_8B, "trn2.48xlarge", R2281)
    assert serving.engine_of(old.image) == "nxdi-vllm" and old.cache_key != trn2.cache_key
    # inf2 past its engine's last release is refused with the pin to use.
    problem = serving.engine_problem("inf2.xlarge", releases.release("2.33.0"))
    assert problem is not None and engines["nxdi-vllm"]["last_release"] in problem
    assert serving.engine_problem("trn2.48xlarge", releases.release("2.33.0")) is None


def test_a_change_of_engine_alone_changes_the_key() -> None:
    """Same model, release, type and parallelism: only the image (engine and version) differs, and so does the key."""
    r231 = releases.release("2.31.1")
    plugin = serving.profile(LLAMA_8B, "trn2.48xlarge", r231)
    nxdi = serving.profile(LLAMA_8B, "trn2.48xlarge", r231, image=str(r231.container("vllm-serving")))
    assert (plugin.tensor_parallel, plugin.lnc, plugin.max_model_len) == (nxdi.tensor_parallel, nxdi.lnc, nxdi.max_model_len)
    assert serving.engine_of(plugin.image) != serving.engine_of(nxdi.image)
    assert plugin.cache_key != nxdi.cache_key
