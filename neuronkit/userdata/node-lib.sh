#!/bin/bash
# Functions every accelerator node shares (training and AWS Batch nodes source it). Not run on its own:
# render() writes it to /opt/neuronkit/node-lib.sh for scripts that declare `# uses: node-lib.sh`.
# The sourcing script defines fail_node (how its kind of node gets replaced) before calling check_node
# or mount_lustre.
# requires: POOL ACCELERATOR EXPECTED_ACCELERATORS EXPECTED_EFA LUSTRE_DNS LUSTRE_MOUNT EXPECTED_NEURON_DRIVER
# requires: NEURON_DRIVER_SHIPPED BOOT_DEADLINE_SECONDS DEVICE_WAIT_SECONDS
# publish_failure and check_driver's warning metric also read REGION, METRICS_NAMESPACE and ENVIRONMENT where the
# node has them (training nodes declare them; EKS nodes get them with observability.sh's values).

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
  token=$(curl -sS -m 10 -X PUT "http://169.254.169.254/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
  curl -sS -m 10 -H "X-aws-ec2-metadata-token: ${token}" "http://169.254.169.254/latest/meta-data/$1"
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

# The driver rule and window of the pool's release (docs/neuron-releases.md, docs/node-lifecycle.md): outside the
# window fails; below the shipped driver joins with a WARNING line and a NeuronDriverBelowShipped datapoint.
version_at_least() {  # $1 >= $2, comparing dotted versions numerically
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]
}

# put_metric NAME DIMENSIONS: one datapoint of 1 in the node metric namespace, where the node has one (bounded: a
# metric never holds a boot up).
put_metric() {
  [ -n "${REGION:-}" ] && [ -n "${METRICS_NAMESPACE:-}" ] || { log "${1}: no metric namespace"; return 0; }
  timeout 30 aws cloudwatch put-metric-data --region "${REGION}" --namespace "${METRICS_NAMESPACE}" \
    --metric-name "$1" --unit Count --value 1 --dimensions "$2" || log "could not publish ${1}"
}

check_driver() {
  [ "${ACCELERATOR}" = "neuron" ] && [ -n "${EXPECTED_NEURON_DRIVER}" ] || return 0
  local found shipped="${NEURON_DRIVER_SHIPPED:-${EXPECTED_NEURON_DRIVER}}"
  found=$(neuron_driver_version)
  log "Neuron driver ${found:-none} (release minimum ${EXPECTED_NEURON_DRIVER}, shipped ${shipped})"
  [ -n "${found}" ] || FAIL_REASON=driver fail_node "no Neuron driver loaded (release minimum ${EXPECTED_NEURON_DRIVER})"
  [ -z "${DRIVER_LIMIT:-}" ] || ! version_at_least "${found}" "${DRIVER_LIMIT}" \
    || FAIL_REASON=driver fail_node "Neuron driver ${found} does not suit ${DRIVER_RULE}"
  version_at_least "${found}" "${EXPECTED_NEURON_DRIVER}" \
    || FAIL_REASON=driver fail_node "Neuron driver ${found} is older than ${EXPECTED_NEURON_DRIVER}, the release minimum"
  if version_at_least "${found}" "${shipped}"; then
    log "Neuron driver ${found} is at or above ${shipped}, the release's shipped driver"
    return 0
  fi
  log "WARNING: Neuron driver ${found} is below ${shipped}, the release's shipped driver; accepted"
  put_metric NeuronDriverBelowShipped "DriverVersion=${found},Environment=${ENVIRONMENT},Pool=${POOL}"
}

# --- failures that speak: before the node goes, it says so (docs/node-lifecycle.md) -----------------------
# publish_failure REASON: NodeBootFailures (Environment, Pool) for the pool's alarm, and the same datapoint with a
# Reason dimension (devices, efa, driver, lustre, deadline, step ...) for the dashboard and the runbook.
publish_failure() {
  log "publishing NodeBootFailures (reason $1)"
  put_metric NodeBootFailures "Environment=${ENVIRONMENT},Pool=${POOL}"
  put_metric NodeBootFailures "Environment=${ENVIRONMENT},Pool=${POOL},Reason=$1"
}

# start_deadline: every boot step before the node joins runs under one deadline (BOOT_DEADLINE_SECONDS of real time,
# counted from the start of the user data: /run/neuronkit/boot-started holds /proc/uptime then). A watchdog fails the
# node with reason `deadline` when it expires, whatever step hangs (a dnf or S3 call that never returns), and stops
# the steps; it waits with bash's read -t on a private FIFO, not with sleep. stop_deadline ends it once the node is
# ready. A deadline already spent (an earlier script of the user data took it all) fails the node at once.
uptime_seconds() {
  local up
  read -r up _ </proc/uptime
  echo "${up%.*}"
}

start_deadline() {
  local started left main=$$ fifo=/run/neuronkit/deadline.fifo
  install -d -m 0755 /run/neuronkit
  started=$(cat /run/neuronkit/boot-started 2>/dev/null || uptime_seconds)
  left=$((BOOT_DEADLINE_SECONDS - ($(uptime_seconds) - started)))
  [ "${left}" -gt 0 ] || FAIL_REASON=deadline fail_node "boot deadline of ${BOOT_DEADLINE_SECONDS} s passed"
  rm -f "${fifo}" && mkfifo -m 0600 "${fifo}"
  (
    trap - ERR
    set +e
    read -r -t "${left}" _ <>"${fifo}"
    # The node fails as any other failure does (in a subshell: fail_node exits), then the steps stop: the boot script
    # first, so that it reports no second failure, then what it waits on (not this watchdog).
    (FAIL_REASON=deadline fail_node "boot deadline of ${BOOT_DEADLINE_SECONDS} s passed")
    local steps pid
    steps=$(pgrep -P "${main}")
    kill -TERM "${main}" 2>/dev/null
    for pid in ${steps}; do
      [ "${pid}" = "${BASHPID}" ] || kill -TERM "${pid}" 2>/dev/null
    done
  ) &
  DEADLINE_PID=$!
  log "boot deadline in ${left} s"
}

stop_deadline() {
  [ -n "${DEADLINE_PID:-}" ] || return 0
  kill "${DEADLINE_PID}" 2>/dev/null || true
  rm -f /run/neuronkit/deadline.fifo
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
# count_present PATH...: how many of the paths exist (an unmatched glob stays literal and counts 0): no pipeline
# over a folder that may not exist (without EFA there is no /dev/infiniband; `find` there fails under pipefail).
count_present() {
  local n=0 path
  for path in "$@"; do
    [ -e "${path}" ] && n=$((n + 1))
  done
  echo "${n}"
}

count_accelerators() {
  if [ "${ACCELERATOR}" = "neuron" ]; then
    count_present /dev/neuron[0-9]*
  else
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  fi
}

check_node() {
  local accelerators efa waited=0
  modprobe efa 2>/dev/null || true
  # The driver's unit (neuron-kmod-load.service on the EKS image) is not ordered before cloud-final: wait, bounded
  # by DEVICE_WAIT_SECONDS, until the devices appear.
  accelerators=$(count_accelerators)
  while [ "${accelerators}" -lt "${EXPECTED_ACCELERATORS}" ] && [ "${waited}" -lt "${DEVICE_WAIT_SECONDS}" ]; do
    log "${accelerators}/${EXPECTED_ACCELERATORS} ${ACCELERATOR} devices; waiting for the driver"
    sleep 5
    waited=$((waited + 5))
    accelerators=$(count_accelerators)
  done
  # One uverbs device per EFA interface (the devices AWS Batch passes into containers).
  efa=$(count_present /dev/infiniband/uverbs[0-9]*)
  log "found ${accelerators}/${EXPECTED_ACCELERATORS} ${ACCELERATOR} devices, ${efa}/${EXPECTED_EFA} EFA devices"
  [ "${accelerators}" -eq "${EXPECTED_ACCELERATORS}" ] \
    || FAIL_REASON=devices fail_node "expected ${EXPECTED_ACCELERATORS} ${ACCELERATOR} devices, found ${accelerators}"
  [ "${efa}" -eq "${EXPECTED_EFA}" ] || FAIL_REASON=efa fail_node "expected ${EXPECTED_EFA} EFA devices, found ${efa}"
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
  mountpoint -q /fsx || FAIL_REASON=lustre fail_node "could not mount Lustre ${LUSTRE_DNS}"
}
