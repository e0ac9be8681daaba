#!/bin/bash
# The serving pilot's load job (docs/adoption.md): runs in the pinned GPU vLLM image, as the `bench` container
# of an ECS task on Fargate in the VPC. The `fetch` container put the tokenizer, the kit's probe and evaluation
# set (and the user's prompts) under /work first; the `upload` container copies /work/results to S3 afterwards.
# 1. wait until both endpoints answer their health check, 2. warm both up, 3. score the evaluation set on
# both (and the user's JSONL set, when given), 4. at each request rate, run `vllm bench serve` against each side
# with vLLM's random dataset at a fixed seed and the pilot's input and output lengths, saving each result,
# 5. bisect each side's highest rate within the SLO to RESOLUTION req/s (pilot_eval.py next-rate, at most
# MAX_EXTRA_RUNS more runs) and measure it once at saturation (every request at once), 6. the user's dataset.
# requires (container environment): PILOT_NAME PILOT_RUN PILOT_REGION MODEL_ID NEURON_URL GPU_URL NEURON_TYPE
# requires: GPU_TYPE NEURON_NODES GPU_NODES NEURON_IMAGE GPU_IMAGE NEURON_VLLM GPU_VLLM SEED INPUT_LEN OUTPUT_LEN
# requires: RATES PROMPTS WARMUP_REQUESTS HEALTH_TIMEOUT_SECONDS DATASET TERMS NEURON_PLUGIN RESOLUTION MAX_RATE
# requires: MAX_EXTRA_RUNS EVALSET
set -euo pipefail

work=/work
results="${work}/results"
mkdir -p "${results}/bench/neuron" "${results}/bench/gpu" "${results}/quality/user"
started=$(date +%s)

url_of() { if [ "$1" = neuron ]; then echo "${NEURON_URL}"; else echo "${GPU_URL}"; fi; }
type_of() { if [ "$1" = neuron ]; then echo "${NEURON_TYPE}"; else echo "${GPU_TYPE}"; fi; }
image_of() { if [ "$1" = neuron ]; then echo "${NEURON_IMAGE}"; else echo "${GPU_IMAGE}"; fi; }
vllm_of() { if [ "$1" = neuron ]; then echo "${NEURON_VLLM}"; else echo "${GPU_VLLM}"; fi; }

write_run() {
  python3 - "$1" <<'PY'
import json, os, sys, time
e = os.environ
sides = {
    s: {"instance_type": e[f"{s.upper()}_TYPE"], "nodes": int(e[f"{s.upper()}_NODES"]), "image": e[f"{s.upper()}_IMAGE"],
        "vllm_version": e[f"{s.upper()}_VLLM"]}
    for s in ("neuron", "gpu")
}
sides["neuron"]["plugin"] = e["NEURON_PLUGIN"]
doc = {"pilot": e["PILOT_NAME"], "kind": "serving", "run_id": e["PILOT_RUN"], "region": e["PILOT_REGION"], "sides": sides,
       "terms": json.loads(e["TERMS"]), "load_job": {"seconds": int(time.time()) - int(sys.argv[1]),
       "client_image": e["GPU_IMAGE"], "seed": int(e["SEED"]), "input_len": int(e["INPUT_LEN"]),
       "output_len": int(e["OUTPUT_LEN"]), "rates": e["RATES"].split(), "prompts_per_rate": int(e["PROMPTS"]),
       "resolution": float(e["RESOLUTION"]), "max_rate": float(e["MAX_RATE"])}}
with open("/work/results/run.json", "w") as f:
    json.dump(doc, f, indent=2)
PY
}

# 1 and 2: both endpoints healthy, then warmed up, before anything is measured.
python3 "${work}/kit/pilot_eval.py" wait --url "${NEURON_URL}" --url "${GPU_URL}" --timeout "${HEALTH_TIMEOUT_SECONDS}"
python3 "${work}/kit/pilot_eval.py" warmup --url "${NEURON_URL}" --url "${GPU_URL}" --model "${MODEL_ID}" \
  --requests "${WARMUP_REQUESTS}"

# 3: the same evaluation set, scored the same way, on both sides.
for side in neuron gpu; do
  python3 "${work}/kit/pilot_eval.py" score --url "$(url_of "${side}")" --model "${MODEL_ID}" \
    --evalset "${work}/kit/pilot_evalset.json" --out "${results}/quality/${side}.json"
  if [ -n "${EVALSET}" ]; then
    # A bad line in the user's set (pilot_eval.py names the file and line) loses that set's scores, not the run.
    python3 "${work}/kit/pilot_eval.py" score --url "$(url_of "${side}")" --model "${MODEL_ID}" \
      --evalset "${EVALSET}" --out "${results}/quality/user/${side}.json" \
      || echo "the user's evaluation set was not scored on ${side}; the bundled set and the benchmark go on"
  fi
done

bench() {
  local side=$1 rate=$2 dataset=$3
  local args=(--backend vllm --base-url "$(url_of "${side}")" --endpoint /v1/completions --model "${MODEL_ID}"
    --tokenizer "${work}/tokenizer" --seed "${SEED}" --num-prompts "${PROMPTS}" --request-rate "${rate}"
    --ignore-eos --percentile-metrics "ttft,tpot,itl,e2el" --metric-percentiles "50,99"
    --save-result --result-dir "${results}/bench/${side}" --result-filename "${dataset}-${rate}.json"
    --metadata "side=${side}" "dataset=${dataset}" "instance_type=$(type_of "${side}")" "image=$(image_of "${side}")"
    "vllm_version=$(vllm_of "${side}")" "pilot=${PILOT_NAME}" "run_id=${PILOT_RUN}")
  if [ "${dataset}" = random ]; then
    args+=(--dataset-name random --random-input-len "${INPUT_LEN}" --random-output-len "${OUTPUT_LEN}")
  else
    args+=(--dataset-name custom --dataset-path "${DATASET}" --custom-output-len "${OUTPUT_LEN}")
  fi
  echo "bench ${side} ${dataset} at ${rate} req/s"
  vllm bench serve "${args[@]}" || echo "bench ${side} ${dataset} at ${rate} req/s failed; continuing"
}

# 4: rates in the file's order, both sides at each rate.
for rate in ${RATES}; do
  for side in neuron gpu; do bench "${side}" "${rate}" random; done
done
# 5: each side on its own: bisect to its limit, then saturation.
slo() { python3 -c 'import json, os, sys; print(json.loads(os.environ["TERMS"]).get(sys.argv[1], 0))' "$1"; }
slo_ttft=$(slo slo_ttft_ms)
slo_itl=$(slo slo_itl_ms)
for side in neuron gpu; do
  last=""
  for _ in $(seq 1 "${MAX_EXTRA_RUNS}"); do
    next=$(python3 "${work}/kit/pilot_eval.py" next-rate --results "${results}/bench/${side}" --slo-ttft-ms "${slo_ttft}" \
      --slo-itl-ms "${slo_itl}" --resolution "${RESOLUTION}" --max-rate "${MAX_RATE}")
    if [ -z "${next}" ] || [ "${next}" = "${last}" ]; then break; fi
    bench "${side}" "${next}" random
    last="${next}"
  done
  bench "${side}" inf random
done
# 6: the user's dataset at the file's rates.
if [ -n "${DATASET}" ]; then
  for rate in ${RATES}; do
    for side in neuron gpu; do bench "${side}" "${rate}" custom; done
  done
fi
write_run "${started}"
echo "pilot ${PILOT_NAME} run ${PILOT_RUN}: results in ${results}"
