#!/bin/bash
# Functions every accelerator node shares (training and AWS Batch nodes source it). Not run on its own:
# render() writes it to /opt/neuronkit/node-lib.sh for scripts that declare `# uses: node-lib.sh`.
# The sourcing script defines fail_node (how its kind of node gets replaced) before calling check_node
# or mount_lustre.
# requires: POOL ACCELERATOR EXPECTED_ACCELERATORS EXPECTED_EFA LUSTRE_DNS LUSTRE_MOUNT EXPECTED_NEURON_DRIVER
# check_driver with a floor set also reads REGION, METRICS_NAMESPACE and ENVIRONMENT (training nodes declare them).

log() { echo "neuronkit[${POOL}] $(date -u +%FT%TZ) $*"; }

# retry ATTEMPTS COMMAND...: an AWS call that may be throttled at scale-up, with a growing pause.
retry() {
  local attempts=$1 n=1
  shift
  until "$@"; do
    [ "${n}" -ge "${attempts}" ] && return 1
    log "attempt ${n} of ${1} ${2:-} failed; retrying"
    sleep $((n * 5))
    n=$((n + 1))
  done
}

# --- instance metadata (IMDSv2) ---------------------------------------------------------------------
imds() {
  local token
  token=$(curl -sS -X PUT "http://169.254.169.254/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
  curl -sS -H "X-aws-ec2-metadata-token: ${token}" "http://169.254.169.254/latest/meta-data/$1"
}

# --- versions: what this node really runs (driver, runtime, tools), for checks, tags and metrics ------
neuron_driver_version() {
  if [ -r /sys/module/neuron/version ]; then
    cat /sys/module/neuron/version
  else
    modinfo -F version neuron 2>/dev/null || true
  fi
}

package_version() {
  if command -v dpkg-query >/dev/null 2>&1; then
    dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true
  else
    rpm -q --qf '%{VERSION}' "$1" 2>/dev/null || true
  fi
}

# The driver of the pool's Neuron release is a floor (EXPECTED_NEURON_DRIVER, the oldest driver the release's
# runtime supports, from the release matrix): an older driver cannot run the runtime and fails the node; a newer
# one (a re-spun DLAMI with a patched driver) is accepted with a warning line and a NeuronDriverAboveFloor
# datapoint, and the pool's NeuronDriverVersions alarm shows the skew (docs/node-lifecycle.md).
version_at_least() {  # $1 >= $2, comparing dotted versions numerically
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]
}

check_driver() {
  [ "${ACCELERATOR}" = "neuron" ] && [ -n "${EXPECTED_NEURON_DRIVER}" ] || return 0
  local found
  found=$(neuron_driver_version)
  log "Neuron driver ${found:-none}, release floor ${EXPECTED_NEURON_DRIVER}"
  [ -n "${found}" ] || fail_node "no Neuron driver is loaded; the pool's Neuron release needs ${EXPECTED_NEURON_DRIVER} or newer"
  version_at_least "${found}" "${EXPECTED_NEURON_DRIVER}" \
    || fail_node "Neuron driver ${found} is older than ${EXPECTED_NEURON_DRIVER}, the oldest the pool's Neuron release supports"
  [ "${found}" = "${EXPECTED_NEURON_DRIVER}" ] && return 0
  log "WARNING: Neuron driver ${found} is newer than the release floor ${EXPECTED_NEURON_DRIVER}; accepted (newer drivers keep supporting older runtimes)"
  # Nodes that publish metrics (REGION and METRICS_NAMESPACE in node.env) count it; EKS nodes log it only.
  [ -n "${REGION:-}" ] && [ -n "${METRICS_NAMESPACE:-}" ] || return 0
  aws cloudwatch put-metric-data --region "${REGION}" --namespace "${METRICS_NAMESPACE}" \
    --metric-name NeuronDriverAboveFloor --unit Count --value 1 \
    --dimensions "DriverVersion=${found},Environment=${ENVIRONMENT},Pool=${POOL}" \
    || log "could not publish NeuronDriverAboveFloor; the warning above stands"
}

# Install OS packages on Ubuntu (apt) or Amazon Linux (dnf).
install_packages() {
  if command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
  else
    dnf install -y -q "$@"
  fi
}

# --- local NVMe: RAID 0 over the instance-store disks, mounted at /local ---------------------------
setup_local_nvme() {
  local disks=()
  local listing
  # Not in a process substitution: a failing lsblk there would run the ERR trap in a subshell and the boot would
  # go on with its log line as a "disk".
  listing=$(lsblk -dpno NAME,MODEL)
  mapfile -t disks < <(printf '%s\n' "${listing}" | awk '/Instance Storage/ {print $1}')
  if [ "${#disks[@]}" -eq 0 ]; then
    log "no instance-store NVMe; /local stays on the root volume"
    mkdir -p /local
    return
  fi
  local dev="${disks[0]}"
  if [ "${#disks[@]}" -gt 1 ]; then
    command -v mdadm >/dev/null 2>&1 || install_packages mdadm
    dev=/dev/md0
    [ -e "${dev}" ] || mdadm --create "${dev}" --level=0 --raid-devices="${#disks[@]}" "${disks[@]}" --run
  fi
  blkid "${dev}" >/dev/null 2>&1 || mkfs.xfs -f "${dev}"
  mkdir -p /local
  mountpoint -q /local || mount -o noatime "${dev}" /local
  chmod 1777 /local
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
  # One uverbs device per EFA interface (the devices AWS Batch passes into containers).
  efa=$(find /dev/infiniband -maxdepth 1 -name 'uverbs[0-9]*' 2>/dev/null | wc -l)
  log "found ${accelerators}/${EXPECTED_ACCELERATORS} ${ACCELERATOR} devices, ${efa}/${EXPECTED_EFA} EFA devices"
  [ "${accelerators}" -eq "${EXPECTED_ACCELERATORS}" ] || fail_node "expected ${EXPECTED_ACCELERATORS} ${ACCELERATOR} devices, found ${accelerators}"
  [ "${efa}" -eq "${EXPECTED_EFA}" ] || fail_node "expected ${EXPECTED_EFA} EFA devices, found ${efa}"
}

# --- FSx for Lustre: the client (FSx's Ubuntu repository, or Amazon Linux's), mounted at /fsx --------
# $1: extra mount options, e.g. systemd automount options (none where containers bind-mount /fsx).
mount_lustre() {
  local extra="${1:-}"
  [ -n "${LUSTRE_DNS}" ] || { log "no Lustre file system in this environment"; return; }
  if ! modinfo lustre >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      # shellcheck source=/dev/null
      . /etc/os-release
      curl -fsSL https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc \
        | gpg --dearmor -o /usr/share/keyrings/fsx-ubuntu-public-key.gpg
      echo "deb [signed-by=/usr/share/keyrings/fsx-ubuntu-public-key.gpg] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu ${VERSION_CODENAME} main" \
        > /etc/apt/sources.list.d/fsxlustreclientrepo.list
      apt-get update -q
      install_packages "lustre-client-modules-$(uname -r)"
    else
      install_packages lustre-client
    fi
  fi
  mkdir -p /fsx
  grep -q " /fsx " /etc/fstab || echo "${LUSTRE_DNS}@tcp:/${LUSTRE_MOUNT} /fsx lustre defaults,relatime,flock,_netdev${extra} 0 0" >> /etc/fstab
  systemctl daemon-reload
  local attempt
  for attempt in 1 2 3 4 5; do
    mountpoint -q /fsx && break
    mount /fsx && break
    log "Lustre mount attempt ${attempt} failed; retrying"
    sleep 15
  done
  mountpoint -q /fsx || fail_node "could not mount Lustre ${LUSTRE_DNS}"
}
