#!/bin/bash
# Boot script of a training node (Trainium or GPU pool). Runs once, as root, from cloud-init.
# requires: ENVIRONMENT POOL REGION ASG_NAME LIFECYCLE_HOOK ACCELERATOR EXPECTED_ACCELERATORS EXPECTED_EFA
# uses: node-lib.sh
# requires: LUSTRE_DNS LUSTRE_MOUNT COMPILE_CACHE ARTIFACTS_BUCKET CHECKPOINTS_BUCKET DATASETS_BUCKET
# requires: EXPECTED_NEURON_DRIVER MASTER_PORT ROOT_COMM_PORT METRICS_NAMESPACE LNC ULTRASERVER_SIZE DRAIN_HOOK
# requires: DRAIN_SECONDS BUSY_MARKER
# The node proves itself before it joins (docs/node-lifecycle.md): local NVMe, every accelerator and EFA
# device, the driver floor of the pool's Neuron release, Lustre; only then does it tag itself ready and complete
# the group's launch lifecycle hook with CONTINUE (ready first, while the hook can still say ABANDON), which puts it in its peers' hostfile. Any failure,
# an unexpected one included (ERR trap), completes the hook with ABANDON: Auto Scaling terminates the
# node and launches another. Without an answer the hook times out, also with ABANDON.
set -Eeuo pipefail
exec > >(tee -a /var/log/neuronkit-boot.log) 2>&1

# shellcheck source=/dev/null
. /etc/neuronkit/node.env
# shellcheck source-path=SCRIPTDIR source=node-lib.sh
. /opt/neuronkit/node-lib.sh

complete_hook() {
  aws autoscaling complete-lifecycle-action --region "${REGION}" --auto-scaling-group-name "${ASG_NAME}" \
    --lifecycle-hook-name "${LIFECYCLE_HOOK}" --instance-id "${INSTANCE_ID}" --lifecycle-action-result "$1"
}

fail_node() {
  trap - ERR
  stop_deadline
  log "node failed: $*; completing the launch hook with ABANDON so that the group replaces it"
  # Before the hook's ABANDON: the pool's NodeBootFailures alarm counts it (docs/node-lifecycle.md).
  publish_failure "${FAIL_REASON:-step}"
  # A node that tagged itself ready and then failed (its CONTINUE refused, say) leaves its peers' hostfiles.
  if [ -n "${INSTANCE_ID:-}" ]; then
    retry 3 aws ec2 delete-tags --region "${REGION}" --resources "${INSTANCE_ID}" --tags Key=neuronkit:ready \
      || log "could not remove the ready tag; peers drop the node when it terminates"
    complete_hook ABANDON || log "could not complete the hook; it times out with ABANDON"
  fi
  exit 1
}
trap 'fail_node "boot step failed at line ${LINENO}: ${BASH_COMMAND}"' ERR
INSTANCE_ID=$(imds instance-id)
start_deadline

# --- environment for jobs: one KEY=value file that systemd units (EnvironmentFile=), login and
# non-login shells and SSM sessions all read --------------------------------------------------------
write_job_environment() {
  local cache="/local/neuron-compile-cache"
  if [ "${COMPILE_CACHE}" = "s3" ]; then
    cache="s3://${ARTIFACTS_BUCKET}/neuron-compile-cache/${POOL}/"
  else
    mkdir -p "${cache}"
  fi
  cat > /etc/neuronkit/job.env <<ENV
FI_PROVIDER=efa
FI_EFA_USE_DEVICE_RDMA=1
NEURON_COMPILE_CACHE_URL=${cache}
NEURONKIT_ENVIRONMENT=${ENVIRONMENT}
NEURONKIT_POOL=${POOL}
NEURONKIT_DATASETS=s3://${DATASETS_BUCKET}/
NEURONKIT_CHECKPOINTS=s3://${CHECKPOINTS_BUCKET}/${POOL}/
NEURONKIT_HOSTFILE=/etc/neuronkit/hostfile
NEURONKIT_CHECKPOINT_REQUEST=/run/neuronkit/checkpoint-requested
NEURONKIT_BUSY_MARKER=${BUSY_MARKER}
MASTER_PORT=${MASTER_PORT}
ENV
  # Trn2/Trn3: the logical NeuronCore setting the runtime uses (LNC=2 pairs physical cores).
  [ -z "${LNC}" ] || echo "NEURON_LOGICAL_NC_CONFIG=${LNC}" >> /etc/neuronkit/job.env
  cat > /etc/profile.d/neuronkit.sh <<'PROFILE'
set -a
. /etc/neuronkit/job.env
[ -f /etc/neuronkit/ranks.env ] && . /etc/neuronkit/ranks.env
set +a
PROFILE
  local rc
  for rc in /etc/bash.bashrc /etc/bashrc; do
    [ -f "${rc}" ] || continue
    grep -q neuronkit "${rc}" || echo '[ -f /etc/profile.d/neuronkit.sh ] && . /etc/profile.d/neuronkit.sh  # neuronkit' >> "${rc}"
  done
  # The runtime's root communicator gets a port of its own, kept out of the ephemeral range.
  echo "net.ipv4.ip_local_reserved_ports = ${MASTER_PORT},${ROOT_COMM_PORT}" > /etc/sysctl.d/90-neuronkit.conf
  sysctl -q -p /etc/sysctl.d/90-neuronkit.conf
}

# --- hostfile: the ready nodes of this group, in launch order, refreshed every minute ----------------
# The programs and units come with the node kit (neuronkit/userdata/kit/, fetched by observability.sh):
# EC2 caps user data at 16 KB.
install_hostfile_service() {
  local kit=/opt/neuronkit/kit
  install -m 0755 "${kit}/neuronkit-hostfile" "${kit}/neuronkit-release" "${kit}/neuronkit-drain" \
    "${kit}/neuronkit-ssh-trust" /usr/local/bin/
  # the pool's SSH key for the collective's MPI launch across the ready nodes (kit/neuronkit-ssh-trust)
  retry 3 /usr/local/bin/neuronkit-ssh-trust
  install -m 0644 "${kit}/neuronkit-hostfile.service" "${kit}/neuronkit-hostfile.timer" /etc/systemd/system/
  mkdir -p /run/neuronkit
  systemctl daemon-reload
  systemctl enable --now neuronkit-hostfile.timer
  # A group with a termination hook (Capacity Blocks): ask the job to checkpoint before the node goes.
  if [ -n "${DRAIN_HOOK}" ]; then
    install -m 0644 "${kit}/neuronkit-drain.service" /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --now neuronkit-drain.service
  fi
}

# --- versions as instance tags: the PR summary's release, what the node really runs -----------------
tag_node() {
  local driver runtime tools
  driver=$(neuron_driver_version)
  runtime=$(package_version aws-neuronx-runtime-lib)
  tools=$(package_version aws-neuronx-tools)
  aws ec2 create-tags --region "${REGION}" --resources "${INSTANCE_ID}" --tags \
    "Key=neuronkit:neuron-driver,Value=${driver:-none}" "Key=neuronkit:neuron-runtime,Value=${runtime:-none}" \
    "Key=neuronkit:neuron-tools,Value=${tools:-none}" "$@"
}

log "booting ${INSTANCE_ID} in ${ASG_NAME}"
setup_local_nvme
check_node
check_driver
# Automount on first access, once the network is online (Ubuntu 24.04 has no network.service).
mount_lustre ",x-systemd.automount,x-systemd.requires=network-online.target,x-systemd.after=network-online.target"
write_job_environment
install_hostfile_service
# Ready before CONTINUE, while the hook is still open: a tag call that keeps failing (throttling at scale-up)
# ends in ABANDON instead of an InService node that no hostfile lists.
retry 5 tag_node "Key=neuronkit:ready,Value=true" || FAIL_REASON=tag fail_node "could not tag the node ready"
retry 5 complete_hook CONTINUE || FAIL_REASON=hook fail_node "could not complete the launch hook with CONTINUE"
stop_deadline
log "node ready"
