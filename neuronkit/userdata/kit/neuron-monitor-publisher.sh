#!/bin/bash
# neuron-monitor's JSON reports -> neuronkit's publisher -> CloudWatch (namespace METRICS_NAMESPACE,
# dimensions Environment, Pool, and InstanceId on the per-instance copy). Run by systemd
# (neuronkit-neuron-monitor.service), restarted when either side of the pipe exits.
set -euo pipefail
# shellcheck source=/dev/null
. /etc/neuronkit/node.env
token=$(curl -sS -X PUT "http://169.254.169.254/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 60")
instance_id=$(curl -sS -H "X-aws-ec2-metadata-token: ${token}" http://169.254.169.254/latest/meta-data/instance-id)
/opt/aws/neuron/bin/neuron-monitor -c /opt/neuronkit/kit/neuron-monitor.json \
  | python3 -u /opt/neuronkit/neuron_monitor_publisher.py --namespace "${METRICS_NAMESPACE}" --region "${REGION}" \
    --environment "${ENVIRONMENT}" --pool "${POOL}" --instance-id "${instance_id}"
