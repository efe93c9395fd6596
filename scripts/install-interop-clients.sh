#!/usr/bin/env bash
# Installs the interop clients that do not come from npm or Maven Central: librdkafka, through its Python
# binding confluent-kafka (the wheel ships librdkafka), into a virtualenv at <repo>/.cache/venv. The
# librdkafka interop test (tests/interop/librdkafka.test.ts) runs that venv's python.
#
# Idempotent: once the venv imports the pinned version it does nothing. Concurrent callers are
# serialised by flock. Output goes to stderr; the exit code says whether the client is usable.
set -euo pipefail

CONFLUENT_KAFKA_VERSION="2.16.1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
venv="$root/.cache/venv"

installed() {
  [[ -x "$venv/bin/python" ]] &&
    "$venv/bin/python" -c "import sys, importlib.metadata as m, confluent_kafka; sys.exit(0 if m.version('confluent-kafka') == '$CONFLUENT_KAFKA_VERSION' else 1)" 2>/dev/null
}

if installed; then exit 0; fi

mkdir -p "$root/.cache"
exec 9>"$root/.cache/.venv.lock"
flock 9
if installed; then exit 0; fi   # someone else finished while we waited

if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >&2
fi
"$venv/bin/pip" install --disable-pip-version-check --quiet "confluent-kafka==$CONFLUENT_KAFKA_VERSION" >&2
installed || { echo "confluent-kafka $CONFLUENT_KAFKA_VERSION did not install into $venv" >&2; exit 1; }
