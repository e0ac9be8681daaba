#!/bin/bash
# Node observability, run before the node's own boot script: the CloudWatch agent (memory, disk, nvidia_gpu
# on GPU nodes; boot log and the journal of SERVER_LOG_UNITS to the pool's log groups) and, on Neuron nodes,
# neuron-monitor feeding neuronkit's publisher (a systemd service). The files it installs come from the
# node kit, an S3 asset (NODE_KIT_S3_URI: neuron_monitor_publisher.py and userdata/kit/): EC2 caps user
# data at 16 KB. NodeObservability (neuronkit/constructs/observability.py) gives every value below.
# requires: ENVIRONMENT POOL REGION ACCELERATOR METRICS_NAMESPACE
# requires: BOOT_LOG_GROUP SERVER_LOG_GROUP SERVER_LOG_UNITS NODE_KIT_S3_URI
# Steps are best effort: a failed one is logged, the others run, and the script exits 1 at the end.
set -uo pipefail
exec > >(tee -a /var/log/neuronkit-boot.log) 2>&1
set -a
# shellcheck source=/dev/null
. /etc/neuronkit/node.env
set +a
KIT=/opt/neuronkit
AGENT=/opt/aws/amazon-cloudwatch-agent
log() { echo "neuronkit[${POOL}] $(date -u +%FT%TZ) observability: $*"; }

fetch_kit() {
  aws s3 cp --only-show-errors --region "${REGION}" "${NODE_KIT_S3_URI}" /tmp/neuronkit-kit.zip
  install -d -m 0755 "${KIT}"
  python3 -m zipfile -e /tmp/neuronkit-kit.zip "${KIT}"
  rm -f /tmp/neuronkit-kit.zip
}

install_agent() {
  [ -x "${AGENT}/bin/amazon-cloudwatch-agent-ctl" ] && return 0
  if command -v dnf >/dev/null 2>&1; then
    dnf install -y -q amazon-cloudwatch-agent
    return
  fi
  local deb=/tmp/amazon-cloudwatch-agent.deb
  # The region's package bucket, reached through the VPC's S3 gateway endpoint.
  curl -fsSL --retry 5 -o "${deb}" \
    "https://amazoncloudwatch-agent-${REGION}.s3.${REGION}.amazonaws.com/ubuntu/$(dpkg --print-architecture)/latest/amazon-cloudwatch-agent.deb"
  dpkg -i -E "${deb}"
  rm -f "${deb}"
}

start_agent() {
  install -d -m 0755 /var/log/neuronkit "${AGENT}/etc"
  install -m 0644 "${KIT}/kit/logrotate.conf" /etc/logrotate.d/neuronkit
  install -m 0644 "${KIT}/kit/neuronkit-journal-export.service" /etc/systemd/system/
  systemctl daemon-reload
  systemctl enable --now neuronkit-journal-export.service
  python3 "${KIT}/kit/cloudwatch_agent_config.py" > "${AGENT}/etc/neuronkit.json"
  "${AGENT}/bin/amazon-cloudwatch-agent-ctl" -a fetch-config -m ec2 -s -c "file:${AGENT}/etc/neuronkit.json"
}

start_neuron_publisher() {
  [ "${ACCELERATOR}" = "neuron" ] || return 0
  [ -x /opt/aws/neuron/bin/neuron-monitor ] || { log "no /opt/aws/neuron/bin/neuron-monitor (aws-neuronx-tools)"; return 1; }
  install -m 0644 "${KIT}/kit/neuronkit-neuron-monitor.service" /etc/systemd/system/
  systemctl daemon-reload
  systemctl enable --now neuronkit-neuron-monitor.service
}

# Each step runs in a subshell with errexit: its first failing command ends that step only.
failed=0
check() {
  [ "$1" -eq 0 ] && return 0
  log "$2 failed (exit $1); the node boots on without it"
  failed=1
}
(set -e; fetch_kit); check $? fetch_kit
(set -e; install_agent); check $? install_agent
(set -e; start_agent); check $? start_agent
(set -e; start_neuron_publisher); check $? start_neuron_publisher
log "done"
exit "${failed}"
