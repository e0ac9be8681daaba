#!/bin/bash
# Appends the journal of SERVER_LOG_UNITS (space-separated units; empty: the whole journal) to
# /var/log/neuronkit/server.log, which the CloudWatch agent ships (it reads files, not the journal).
# The cursor file makes a restart continue where it stopped instead of repeating the boot's messages.
set -euo pipefail
# shellcheck source=/dev/null
. /etc/neuronkit/node.env
install -d -m 0755 /var/log/neuronkit /var/lib/neuronkit
args=(--follow --output=short-iso --cursor-file=/var/lib/neuronkit/journal.cursor)
read -r -a units <<< "${SERVER_LOG_UNITS}"
for unit in "${units[@]}"; do
  args+=("--unit=${unit}")
done
exec journalctl "${args[@]}" >> /var/log/neuronkit/server.log
