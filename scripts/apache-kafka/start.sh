#!/usr/bin/env bash
# Start the reference Apache Kafka broker (single-node KRaft). See start.ts for options and output.
#   eval "$(scripts/apache-kafka/start.sh)"; echo "$BOOTSTRAP"; ...; kill "$PID"; rm -rf "$DATA_DIR"
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bun "$here/start.ts" "$@"
