#!/bin/bash
# Boot script of a training node (Trainium or GPU fallback pool). Runs once, as root, from cloud-init.
# requires: ENVIRONMENT POOL REGION ASG_NAME ACCELERATOR EXPECTED_ACCELERATORS EXPECTED_EFA
# uses: node-lib.sh
# requires: LUSTRE_DNS LUSTRE_MOUNT COMPILE_CACHE ARTIFACTS_BUCKET CHECKPOINTS_BUCKET DATASETS_BUCKET
# Order: local NVMe, node check (accelerators and EFA all present, or the node is marked unhealthy and
# replaced), Lustre, EFA and Neuron environment, hostfile service, AZ rebalancing off.
set -euo pipefail
exec > >(tee -a /var/log/neuronkit-boot.log) 2>&1

# shellcheck source=/dev/null
. /etc/neuronkit/node.env

imds() {
  local token
  token=$(curl -sS -X PUT "http://169.254.169.254/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
  curl -sS -H "X-aws-ec2-metadata-token: ${token}" "http://169.254.169.254/latest/meta-data/$1"
}
INSTANCE_ID=$(imds instance-id)
# shellcheck source-path=SCRIPTDIR source=node-lib.sh
. /opt/neuronkit/node-lib.sh

fail_node() {
  log "node check failed: $*; marking the instance unhealthy so the group replaces it"
  aws autoscaling set-instance-health --region "${REGION}" --instance-id "${INSTANCE_ID}" --health-status Unhealthy || true
  exit 1
}

# --- environment for jobs: EFA, Neuron compile cache, storage paths --------------------------------
write_job_environment() {
  local cache="/local/neuron-compile-cache"
  if [ "${COMPILE_CACHE}" = "s3" ]; then
    cache="s3://${ARTIFACTS_BUCKET}/neuron-compile-cache/${POOL}/"
  else
    mkdir -p "${cache}"
  fi
  cat > /etc/profile.d/neuronkit.sh <<PROFILE
export FI_PROVIDER=efa
export FI_EFA_USE_DEVICE_RDMA=1
export FI_EFA_FORK_SAFE=1
export NEURON_COMPILE_CACHE_URL=${cache}
export NEURONKIT_ENVIRONMENT=${ENVIRONMENT}
export NEURONKIT_POOL=${POOL}
export NEURONKIT_DATASETS=s3://${DATASETS_BUCKET}/
export NEURONKIT_CHECKPOINTS=s3://${CHECKPOINTS_BUCKET}/${POOL}/
export NEURONKIT_HOSTFILE=/etc/neuronkit/hostfile
[ -f /etc/neuronkit/job.env ] && . /etc/neuronkit/job.env
PROFILE
}

# --- hostfile: peers of this Auto Scaling group, refreshed every minute ----------------------------
install_hostfile_service() {
  cat > /usr/local/bin/neuronkit-hostfile <<'SCRIPT'
#!/bin/bash
# Writes /etc/neuronkit/hostfile (one private IP per line, sorted) and /etc/neuronkit/job.env.
set -euo pipefail
. /etc/neuronkit/node.env
me=$(hostname -I | awk '{print $1}')
ips=$(aws ec2 describe-instances --region "${REGION}" \
  --filters "Name=tag:aws:autoscaling:groupName,Values=${ASG_NAME}" "Name=instance-state-name,Values=running" \
  --query 'Reservations[].Instances[].PrivateIpAddress' --output text | tr '\t' '\n' | sed '/^$/d' | sort -V)
printf '%s\n' "${ips}" > /etc/neuronkit/hostfile.tmp && mv /etc/neuronkit/hostfile.tmp /etc/neuronkit/hostfile
rank=$(printf '%s\n' "${ips}" | grep -nx "${me}" | cut -d: -f1)
master=$(printf '%s\n' "${ips}" | head -n1)
cat > /etc/neuronkit/job.env.tmp <<ENV
export NNODES=$(printf '%s\n' "${ips}" | wc -l)
export NODE_RANK=$(( ${rank:-1} - 1 ))
export MASTER_ADDR=${master}
export MASTER_PORT=41000
export NEURON_RT_ROOT_COMM_ID=${master}:41000
ENV
mv /etc/neuronkit/job.env.tmp /etc/neuronkit/job.env
SCRIPT
  chmod 0755 /usr/local/bin/neuronkit-hostfile
  cat > /usr/local/bin/neuronkit-release <<'SCRIPT'
#!/bin/bash
# Run at the end of a job: lets the group scale this node in (new nodes start protected).
set -euo pipefail
. /etc/neuronkit/node.env
token=$(curl -sS -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 60")
id=$(curl -sS -H "X-aws-ec2-metadata-token: ${token}" http://169.254.169.254/latest/meta-data/instance-id)
aws autoscaling set-instance-protection --region "${REGION}" --auto-scaling-group-name "${ASG_NAME}" \
  --instance-ids "${id}" --no-protected-from-scale-in
SCRIPT
  chmod 0755 /usr/local/bin/neuronkit-release
  cat > /etc/systemd/system/neuronkit-hostfile.service <<'UNIT'
[Unit]
Description=neuronkit: refresh the cluster hostfile
After=network-online.target
[Service]
Type=oneshot
ExecStart=/usr/local/bin/neuronkit-hostfile
UNIT
  cat > /etc/systemd/system/neuronkit-hostfile.timer <<'UNIT'
[Unit]
Description=neuronkit: refresh the cluster hostfile every minute
[Timer]
OnBootSec=30s
OnUnitActiveSec=60s
[Install]
WantedBy=timers.target
UNIT
  systemctl daemon-reload
  systemctl enable --now neuronkit-hostfile.timer
}

log "booting ${INSTANCE_ID} in ${ASG_NAME}"
setup_local_nvme
check_node
# Automount on first access, after the network is up (a plain shell, not a container, reads /fsx).
mount_lustre ",x-systemd.automount,x-systemd.requires=network.service"
write_job_environment
install_hostfile_service
# The group spans one subnet, so AZ rebalancing has nothing to move; suspending it makes that explicit
# and keeps it off if someone adds a subnet. Idempotent.
aws autoscaling suspend-processes --region "${REGION}" --auto-scaling-group-name "${ASG_NAME}" --scaling-processes AZRebalance || true
log "node ready"
