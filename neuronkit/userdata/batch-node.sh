#!/bin/bash
# Boot script of an AWS Batch node (training.scheduler: batch) on an ECS-optimized Amazon Linux 2023 AMI.
# Runs once, as root, from cloud-init; AWS Batch merges its own user data part (which joins the node to
# the compute environment's ECS cluster) with this one, so the file reaches the node as one part of a
# MIME multi-part archive.
# uses: node-lib.sh
# requires: ENVIRONMENT POOL ACCELERATOR EXPECTED_ACCELERATORS EXPECTED_EFA LUSTRE_DNS LUSTRE_MOUNT
# requires: EFA_INSTALLER_URL
# Order: EFA software on EFA types (the ECS-optimized Neuron AMI has none), local NVMe at /local, node check
# (every accelerator and EFA device the catalog lists), Lustre at /fsx. Any failure, an unexpected one
# included (ERR trap), powers the node off before the ECS agent starts (it is ordered after cloud-init's
# scripts), so AWS Batch replaces it and no job lands on it. Jobs see /fsx and /local through the job
# definition's host volumes.
set -Eeuo pipefail
exec > >(tee -a /var/log/neuronkit-boot.log) 2>&1

# shellcheck source=/dev/null
. /etc/neuronkit/node.env

# shellcheck source-path=SCRIPTDIR source=node-lib.sh
. /opt/neuronkit/node-lib.sh

fail_node() {
  # The compute environment's Auto Scaling group replaces a stopped instance; the ECS agent never
  # registers it, so no job is placed on a node that lacks devices.
  trap - ERR
  stop_deadline
  log "node failed: $*; powering off so that AWS Batch replaces the node"
  publish_failure "${FAIL_REASON:-step}"
  systemctl stop ecs.service || true
  systemctl poweroff
  exit 1
}
trap 'fail_node "boot step failed at line ${LINENO}: ${BASH_COMMAND}"' ERR
start_deadline

# --- EFA software: minimal install (kernel module, rdma-core) of the pinned installer ----------------
install_efa() {
  [ "${EXPECTED_EFA}" -gt 0 ] || return 0
  if modinfo efa >/dev/null 2>&1; then
    log "EFA driver already present"
    return 0
  fi
  local dir
  dir=$(mktemp -d)
  log "installing EFA from ${EFA_INSTALLER_URL}"
  curl -fsSL --retry 5 -o "${dir}/efa.tar.gz" "${EFA_INSTALLER_URL}"
  tar -xzf "${dir}/efa.tar.gz" -C "${dir}"
  (cd "${dir}/aws-efa-installer" && ./efa_installer.sh -y --minimal)
  rm -rf "${dir}"
}

log "booting a ${ACCELERATOR} node of ${ENVIRONMENT}-${POOL} (AWS Batch)"
install_efa
setup_local_nvme
mkdir -p /local/neuron-compile-cache
check_node
# A plain mount (no automount): containers bind-mount /fsx, and an automount point would hide the
# file system from a container started before the first access.
mount_lustre
stop_deadline
log "node ready; the ECS agent registers it with the compute environment"
