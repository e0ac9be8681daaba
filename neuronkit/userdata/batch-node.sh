#!/bin/bash
# Boot script of an AWS Batch node (training.scheduler: batch) on an ECS-optimized Amazon Linux 2023 AMI.
# Runs once, as root, from cloud-init; AWS Batch merges its own user data part (which joins the node to
# the compute environment's ECS cluster) with this one, so the file reaches the node as one part of a
# MIME multi-part archive.
# requires: ENVIRONMENT POOL ACCELERATOR EXPECTED_ACCELERATORS EXPECTED_EFA LUSTRE_DNS LUSTRE_MOUNT
# Order: local NVMe at /local, node check (every accelerator and EFA device the catalog lists, or the node
# powers off and the compute environment replaces it before a job lands on it), Lustre at /fsx. Jobs see
# /fsx and /local through the job definition's host volumes.
set -euo pipefail
exec > >(tee -a /var/log/neuronkit-boot.log) 2>&1

# shellcheck source=/dev/null
. /etc/neuronkit/node.env

log() { echo "neuronkit[${POOL}] $(date -u +%FT%TZ) $*"; }

fail_node() {
  # The compute environment's Auto Scaling group replaces a stopped instance; the ECS agent never
  # registers it, so no job is placed on a node that lacks devices.
  log "node check failed: $*; powering off so that AWS Batch replaces the node"
  systemctl poweroff
  exit 1
}

# --- local NVMe: RAID 0 over the instance-store disks, mounted at /local ---------------------------
setup_local_nvme() {
  local disks=()
  mapfile -t disks < <(lsblk -dpno NAME,MODEL | awk '/Instance Storage/ {print $1}')
  if [ "${#disks[@]}" -eq 0 ]; then
    log "no instance-store NVMe; /local stays on the root volume"
    mkdir -p /local
    return
  fi
  local dev="${disks[0]}"
  if [ "${#disks[@]}" -gt 1 ]; then
    command -v mdadm >/dev/null 2>&1 || dnf install -y -q mdadm
    dev=/dev/md0
    [ -e "${dev}" ] || mdadm --create "${dev}" --level=0 --raid-devices="${#disks[@]}" "${disks[@]}" --run
  fi
  blkid "${dev}" >/dev/null 2>&1 || mkfs.xfs -f "${dev}"
  mkdir -p /local
  mountpoint -q /local || mount -o noatime "${dev}" /local
  chmod 1777 /local
  mkdir -p /local/neuron-compile-cache
}

# --- node check: every accelerator and EFA device the catalog lists must be present ----------------
check_node() {
  local accelerators efa
  modprobe efa 2>/dev/null || true
  if [ "${ACCELERATOR}" = "neuron" ]; then
    accelerators=$(find /dev -maxdepth 1 -name 'neuron[0-9]*' | wc -l)
  else
    accelerators=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  fi
  efa=$(find /dev/infiniband -maxdepth 1 -name 'uverbs[0-9]*' 2>/dev/null | wc -l)
  log "found ${accelerators}/${EXPECTED_ACCELERATORS} ${ACCELERATOR} devices, ${efa}/${EXPECTED_EFA} EFA devices"
  [ "${accelerators}" -eq "${EXPECTED_ACCELERATORS}" ] || fail_node "expected ${EXPECTED_ACCELERATORS} ${ACCELERATOR} devices, found ${accelerators}"
  [ "${efa}" -eq "${EXPECTED_EFA}" ] || fail_node "expected ${EXPECTED_EFA} EFA devices, found ${efa}"
}

# --- FSx for Lustre: client from the Amazon Linux 2023 repository, mounted at /fsx ------------------
mount_lustre() {
  [ -n "${LUSTRE_DNS}" ] || { log "no Lustre file system in this environment"; return; }
  modinfo lustre >/dev/null 2>&1 || dnf install -y -q lustre-client
  mkdir -p /fsx
  # A plain mount (no automount): containers bind-mount /fsx, and an automount point would hide the
  # file system from a container started before the first access.
  grep -q " /fsx " /etc/fstab || echo "${LUSTRE_DNS}@tcp:/${LUSTRE_MOUNT} /fsx lustre defaults,relatime,flock,_netdev 0 0" >> /etc/fstab
  local attempt
  for attempt in 1 2 3 4 5; do
    mountpoint -q /fsx && break
    mount /fsx && break
    log "Lustre mount attempt ${attempt} failed; retrying"
    sleep 15
  done
  mountpoint -q /fsx || fail_node "could not mount Lustre ${LUSTRE_DNS}"
}

log "booting a ${ACCELERATOR} node of ${ENVIRONMENT}-${POOL} (AWS Batch)"
setup_local_nvme
check_node
mount_lustre
log "node ready; the ECS agent registers it with the compute environment"
