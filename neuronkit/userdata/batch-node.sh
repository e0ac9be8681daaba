#!/bin/bash
# Boot script of an AWS Batch node (training.scheduler: batch) on an ECS-optimized Amazon Linux 2023 AMI.
# Runs once, as root, from cloud-init; AWS Batch merges its own user data part (which joins the node to
# the compute environment's ECS cluster) with this one, so the file reaches the node as one part of a
# MIME multi-part archive.
# uses: node-lib.sh
# requires: ENVIRONMENT POOL ACCELERATOR EXPECTED_ACCELERATORS EXPECTED_EFA LUSTRE_DNS LUSTRE_MOUNT
# Order: local NVMe at /local, node check (every accelerator and EFA device the catalog lists, or the node
# powers off and the compute environment replaces it before a job lands on it), Lustre at /fsx. Jobs see
# /fsx and /local through the job definition's host volumes.
set -euo pipefail
exec > >(tee -a /var/log/neuronkit-boot.log) 2>&1

# shellcheck source=/dev/null
. /etc/neuronkit/node.env

# shellcheck source-path=SCRIPTDIR source=node-lib.sh
. /opt/neuronkit/node-lib.sh

fail_node() {
  # The compute environment's Auto Scaling group replaces a stopped instance; the ECS agent never
  # registers it, so no job is placed on a node that lacks devices.
  log "node check failed: $*; powering off so that AWS Batch replaces the node"
  systemctl poweroff
  exit 1
}

log "booting a ${ACCELERATOR} node of ${ENVIRONMENT}-${POOL} (AWS Batch)"
setup_local_nvme
mkdir -p /local/neuron-compile-cache
check_node
# A plain mount (no automount): containers bind-mount /fsx, and an automount point would hide the
# file system from a container started before the first access.
mount_lustre
log "node ready; the ECS agent registers it with the compute environment"
