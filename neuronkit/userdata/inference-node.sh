#!/bin/bash
# Boot script of an inference node (Inferentia, or a GPU fallback node of the same group). Runs once, as
# root, from cloud-init.
# requires: ENVIRONMENT FLEET REGION ASG_NAME ARTIFACTS_BUCKET NEURON_MODEL_PREFIX GPU_MODEL_PREFIX
# requires: SERVE_NEURON SERVE_GPU PORT HEALTH_PATH HEALTH_PROTOCOL HEALTH_WAIT_SECONDS STACK_NAME SIGNAL_RESOURCE
# requires: LIFECYCLE_HOOK SERVE_MODE TENSOR_PARALLEL MODEL_ID SERVE_IMAGE SERVE_COMMAND_ARGS SERVE_ENV CACHE_PREFIX
# requires: NEURON_CAPABILITIES CACHE_LOCK_TIMEOUT CACHE_POLL_SECONDS NODE_ROLE LNC LNC_FILE
# One group mixes families (Neuron types first, GPU types when Neuron capacity is short); each type has
# its own launch template and serving profile. The node checks its devices, fetches the model from S3 to
# local disk and starts the server as a systemd unit: with SERVE_MODE=container the pinned vLLM container
# of its profile (kit/neuronkit-serve: pull through the fleet's ECR cache, compiled artifacts from the
# shared cache, or compiled here once and published), else the file's own command. It waits until the
# server answers the health check, completes the group's launch hook with CONTINUE (the node enters
# service only then) and signals CloudFormation (rolling updates wait on it). Any failure, an
# unexpected one included (ERR trap), completes the hook with ABANDON and signals FAILURE: the group
# replaces the node. docs/node-lifecycle.md.
# NODE_ROLE=compile: the one node of a fleet's compile group (docs/serving.md). It makes sure its type's
# compiled-artifact key is in the shared cache (found there, or compiled and published here), signals
# the group's CreationPolicy (the fleet's rolling update waits for it) and leaves its group; it has no
# launch hook and never serves.
set -Eeuo pipefail
exec > >(tee -a /var/log/neuronkit-boot.log) 2>&1

# shellcheck source=/dev/null
. /etc/neuronkit/node.env

imds() {
  local token
  token=$(curl -sS -X PUT "http://169.254.169.254/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
  curl -sS -H "X-aws-ec2-metadata-token: ${token}" "http://169.254.169.254/latest/meta-data/$1"
}
INSTANCE_ID=$(imds instance-id)
INSTANCE_TYPE=$(imds instance-type)
install -d -m 0755 /run/neuronkit
echo "${INSTANCE_ID}" > /run/neuronkit/instance-id
SERVE=/opt/neuronkit/kit/neuronkit-serve
COMPILE_HERE=0
log() { echo "neuronkit[${FLEET}] $(date -u +%FT%TZ) $*"; }

# Tell a waiting rolling update how this node did; outside an update there is nothing to signal.
signal() {
  aws cloudformation signal-resource --region "${REGION}" --stack-name "${STACK_NAME}" \
    --logical-resource-id "${SIGNAL_RESOURCE}" --unique-id "${INSTANCE_ID}" --status "$1" >/dev/null 2>&1 \
    || log "no stack update is waiting for a ${1} signal"
}

complete_hook() {
  [ -n "${LIFECYCLE_HOOK}" ] || return 0
  aws autoscaling complete-lifecycle-action --region "${REGION}" --auto-scaling-group-name "${ASG_NAME}" \
    --lifecycle-hook-name "${LIFECYCLE_HOOK}" --instance-id "${INSTANCE_ID}" --lifecycle-action-result "$1"
}

# A compile node's work is done (or failed): it terminates itself and lowers its group's desired
# capacity to 0, so the group keeps no node and launches none until CloudFormation next updates it.
leave_group() {
  aws autoscaling terminate-instance-in-auto-scaling-group --region "${REGION}" --instance-id "${INSTANCE_ID}" \
    --should-decrement-desired-capacity >/dev/null && return 0
  log "could not leave ${ASG_NAME}; powering off instead"
  shutdown -h now
}

fail_node() {
  trap - ERR
  if [ "${NODE_ROLE}" = compile ]; then
    log "compile failed: $*; signalling FAILURE (the stack update rolls back) and leaving the group"
    signal FAILURE
    leave_group
    exit 1
  fi
  log "node failed: $*; completing the launch hook with ABANDON so that the group replaces it"
  # Before the ABANDON: the pool's NodeBootFailures alarm counts it (docs/node-lifecycle.md); observability.sh's values.
  local dims="Environment=${ENVIRONMENT},Pool=${FLEET}" d
  for d in "${dims}" "${dims},Reason=${FAIL_REASON:-step}"; do
    [ -z "${METRICS_NAMESPACE:-}" ] || timeout 30 aws cloudwatch put-metric-data --region "${REGION}" \
      --namespace "${METRICS_NAMESPACE}" --metric-name NodeBootFailures --unit Count --value 1 --dimensions "${d}" || true
  done
  signal FAILURE
  complete_hook ABANDON || log "could not complete the hook; it times out with ABANDON"
  exit 1
}
trap 'fail_node "boot step failed at line ${LINENO}: ${BASH_COMMAND}"' ERR

# --- accelerator family: from the instance type, confirmed by the devices -------------------------
detect_accelerator() {
  case "${INSTANCE_TYPE%%.*}" in
    inf* | trn*)
      ACCELERATOR=neuron
      MODEL_PREFIX="${NEURON_MODEL_PREFIX}"
      SERVE_COMMAND="${SERVE_NEURON}"
      [ -e /dev/neuron0 ] || FAIL_REASON=devices fail_node "${INSTANCE_TYPE} shows no Neuron device (/dev/neuron0)"
      ;;
    *)
      ACCELERATOR=gpu
      MODEL_PREFIX="${GPU_MODEL_PREFIX}"
      SERVE_COMMAND="${SERVE_GPU}"
      nvidia-smi -L >/dev/null 2>&1 || FAIL_REASON=devices fail_node "${INSTANCE_TYPE} shows no GPU (nvidia-smi failed)"
      ;;
  esac
  [ "${SERVE_MODE}" = container ] || [ -n "${SERVE_COMMAND}" ] || fail_node "no server command for ${ACCELERATOR} nodes (serve.${ACCELERATOR})"
  log "${INSTANCE_TYPE}: ${ACCELERATOR} node"
}

# --- local disk for the model: instance-store NVMe (RAID 0) when the type has it, else the root volume
model_directory() {
  local disks=() dev
  mapfile -t disks < <(lsblk -dpno NAME,MODEL | awk '/Instance Storage/ {print $1}')
  if [ "${#disks[@]}" -eq 0 ]; then
    MODEL_DIR=/opt/neuronkit/model
  else
    dev="${disks[0]}"
    if [ "${#disks[@]}" -gt 1 ]; then
      dev=/dev/md0
      [ -e "${dev}" ] || mdadm --create "${dev}" --level=0 --raid-devices="${#disks[@]}" "${disks[@]}" --run
    fi
    blkid "${dev}" >/dev/null 2>&1 || mkfs.xfs -f "${dev}"
    mkdir -p /local
    mountpoint -q /local || mount -o noatime "${dev}" /local
    MODEL_DIR=/local/model
  fi
  mkdir -p "${MODEL_DIR}"
}

# --- the model: compiled artifacts from the artifacts bucket (compiling at boot would take too long)
fetch_model() {
  local attempt source="s3://${ARTIFACTS_BUCKET}/${MODEL_PREFIX}"
  for attempt in 1 2 3 4 5; do
    if aws s3 sync --region "${REGION}" --only-show-errors "${source}" "${MODEL_DIR}"; then
      log "model ${source} -> ${MODEL_DIR} ($(du -sh "${MODEL_DIR}" | cut -f1))"
      [ -n "$(ls -A "${MODEL_DIR}")" ] || fail_node "${source} is empty; upload the model first"
      return
    fi
    log "model download attempt ${attempt} failed; retrying"
    sleep 20
  done
  fail_node "could not download ${source}"
}

# --- the container: image pulled, compiled artifacts fetched (or this node compiles them) ----------
prepare_container() {
  bash "${SERVE}" pull || fail_node "could not pull ${SERVE_IMAGE}"
  local status=0
  bash "${SERVE}" cache-fetch || status=$?
  case "${status}" in
    0) ;;
    10) COMPILE_HERE=1 ;;
    *) fail_node "could not fetch the compiled artifacts ${CACHE_PREFIX}" ;;
  esac
}

# --- the server: a systemd unit running the container (or the file's command), restarted when it exits
start_server() {
  cat > /etc/neuronkit/serve.env <<ENV
ACCELERATOR=${ACCELERATOR}
MODEL_DIR=${MODEL_DIR}
PORT=${PORT}
TENSOR_PARALLEL=${TENSOR_PARALLEL}
ENV
  # Trn2/Trn3: the logical NeuronCore setting for the runtime on the host and for the server (the container gets
  # it in SERVE_ENV); TENSOR_PARALLEL already counts logical cores.
  if [ -n "${LNC}" ]; then
    mkdir -p "$(dirname "${LNC_FILE}")"
    echo "NEURON_LOGICAL_NC_CONFIG=${LNC}" > "${LNC_FILE}"
    echo "NEURON_LOGICAL_NC_CONFIG=${LNC}" >> /etc/neuronkit/serve.env
  fi
  if [ "${SERVE_MODE}" = container ]; then
    SERVE_COMMAND="bash ${SERVE} run"
  fi
  printf '%s\n' "${SERVE_COMMAND}" > /etc/neuronkit/serve.command
  cat > /usr/local/bin/neuronkit-serve <<'SCRIPT'
#!/bin/bash
# Starts this node's model server command; $MODEL_DIR, $PORT and $ACCELERATOR are set for it.
set -euo pipefail
set -a
. /etc/neuronkit/serve.env
set +a
exec bash -c "$(cat /etc/neuronkit/serve.command)"
SCRIPT
  chmod 0755 /usr/local/bin/neuronkit-serve
  cat > /etc/systemd/system/neuronkit-model-server.service <<'UNIT'
[Unit]
Description=neuronkit: model server
After=network-online.target
Wants=network-online.target
[Service]
ExecStart=/usr/local/bin/neuronkit-serve
Restart=on-failure
RestartSec=10
LimitNOFILE=65536
[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable --now neuronkit-model-server.service
}

healthy() {
  if [ "${HEALTH_PROTOCOL}" = "HTTP" ]; then
    curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:${PORT}${HEALTH_PATH}"
  else
    timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/${PORT}"
  fi
}

# --- ready: the load balancer's health check passes locally, then a waiting update may go on ------
wait_until_healthy() {
  local wait=${HEALTH_WAIT_SECONDS} beat=0
  # A node compiling a new key may take up to the lock timeout; it keeps its launch hook alive meanwhile.
  [ "${COMPILE_HERE}" = 1 ] && wait=${CACHE_LOCK_TIMEOUT}
  local deadline=$((SECONDS + wait))
  until healthy; do
    [ "${SECONDS}" -lt "${deadline}" ] || fail_node "the server did not pass its health check within ${wait} s"
    if [ -n "${LIFECYCLE_HOOK}" ] && [ $((SECONDS - beat)) -ge 300 ]; then
      aws autoscaling record-lifecycle-action-heartbeat --region "${REGION}" --auto-scaling-group-name "${ASG_NAME}" \
        --lifecycle-hook-name "${LIFECYCLE_HOOK}" --instance-id "${INSTANCE_ID}" >/dev/null || log "heartbeat not recorded"
      beat=${SECONDS}
    fi
    sleep 10
  done
  log "server healthy on port ${PORT}"
  if [ "${COMPILE_HERE}" = 1 ]; then
    bash "${SERVE}" cache-publish || fail_node "could not publish the compiled artifacts ${CACHE_PREFIX}"
  fi
  [ "${NODE_ROLE}" = compile ] && return 0
  complete_hook CONTINUE
  signal SUCCESS
}

# --- a compile node: the key in the cache, then the signal; the server runs only to compile --------
compile_key() {
  if bash "${SERVE}" cache-complete; then
    log "${CACHE_PREFIX} is already in the cache; nothing to compile"
  else
    model_directory
    fetch_model
    prepare_container
    if [ "${COMPILE_HERE}" = 1 ]; then
      start_server
      wait_until_healthy
      systemctl disable --now neuronkit-model-server.service || log "could not stop the server"
    fi
    log "${CACHE_PREFIX} is in the cache"
  fi
  signal SUCCESS
  leave_group
}

log "booting ${INSTANCE_ID} (${INSTANCE_TYPE}) in ${ASG_NAME} as a ${NODE_ROLE} node"
detect_accelerator
if [ "${NODE_ROLE}" = compile ]; then
  compile_key
  exit 0
fi
model_directory
fetch_model
[ "${SERVE_MODE}" = container ] && prepare_container
start_server
wait_until_healthy
log "node ready"
