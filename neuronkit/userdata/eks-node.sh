#!/bin/bash
# Boot script of an EKS managed node group node (platform: eks) on the EKS-optimized Amazon Linux 2023 image
# (Neuron or NVIDIA variant). Runs once, as root, from cloud-init: the node group's launch template carries
# it as a text/x-shellscript part of a MIME multi-part archive, which EKS merges with its own nodeadm part.
# uses: node-lib.sh
# requires: ENVIRONMENT POOL ACCELERATOR EXPECTED_ACCELERATORS EXPECTED_EFA LUSTRE_DNS LUSTRE_MOUNT
# requires: EXPECTED_NEURON_DRIVER LNC ACCELERATORS_BY_TYPE
# The node proves itself before it joins (docs/eks.md): local NVMe, every accelerator and EFA device the
# catalog lists, the driver of the pool's Neuron release, Lustre. nodeadm-run.service, which starts the
# kubelet and so registers the node, is ordered after cloud-final.service (awslabs/amazon-eks-ami,
# templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service), so it waits for this script. Any
# failure, an unexpected one included (ERR trap), holds nodeadm-run and kubelet back with runtime drop-ins and
# powers the node off: it never registers, and the node group's Auto Scaling group replaces the stopped instance
# (EC2 health check). Drop-ins, not `systemctl mask --runtime`: the AMI installs both units in /etc/systemd/system,
# which comes before /run/systemd/system in the unit search path, so a runtime mask is ignored (systemd/systemd#10583);
# drop-ins (*.service.d/*.conf) of every directory are merged, whatever the precedence of the unit file.
set -Eeuo pipefail
exec > >(tee -a /var/log/neuronkit-boot.log) 2>&1

# shellcheck source=/dev/null
. /etc/neuronkit/node.env

# shellcheck source-path=SCRIPTDIR source=node-lib.sh
. /opt/neuronkit/node-lib.sh

BOOT_FAILED=/run/neuronkit/boot-failed

# nodeadm-run and kubelet start only while the failure marker is absent: a start job already queued (nodeadm-run
# waits for cloud-final) finds its condition false once the drop-ins are loaded.
hold_back_join() {
  local unit
  for unit in nodeadm-run kubelet; do
    mkdir -p "/run/systemd/system/${unit}.service.d"
    printf '[Unit]\nConditionPathExists=!%s\n' "${BOOT_FAILED}" > "/run/systemd/system/${unit}.service.d/99-neuronkit.conf"
  done
  mkdir -p "${BOOT_FAILED%/*}"
  touch "${BOOT_FAILED}"
  systemctl daemon-reload
}

fail_node() {
  trap - ERR
  stop_deadline
  log "node failed: $*; it never joins the cluster (nodeadm-run and kubelet held back) and powers off so that its node group replaces it"
  # Before it goes: a powered-off node is no launch failure, so the pool's NodeBootFailures alarm is what tells.
  publish_failure "${FAIL_REASON:-step}"
  hold_back_join || log "could not hold nodeadm-run and kubelet back; powering off"
  systemctl poweroff
  exit 1
}
trap 'fail_node "boot step failed at line ${LINENO}: ${BASH_COMMAND}"' ERR
start_deadline

# Trn2/Trn3: the logical NeuronCore setting the device plugin and runtime read on this node.
write_lnc() {
  [ -n "${LNC}" ] || return 0
  install -d -m 0755 /opt/aws/neuron
  echo "NEURON_LOGICAL_NC_CONFIG=${LNC}" > /opt/aws/neuron/logical_nc_config
}

# A group of several instance types (an inference fleet's): the devices this node's type must have.
expect_own_type() {
  local own pair
  own=$(imds instance-type)
  for pair in ${ACCELERATORS_BY_TYPE}; do
    [ "${pair%%=*}" != "${own}" ] || EXPECTED_ACCELERATORS="${pair#*=}"
  done
}

log "booting a ${ACCELERATOR} node of ${ENVIRONMENT}-${POOL} (EKS)"
expect_own_type
setup_local_nvme
check_node
check_driver
# A plain mount (no automount): pods reach /fsx through hostPath volumes.
mount_lustre
write_lnc
stop_deadline
log "node ready; nodeadm joins it to the cluster"
