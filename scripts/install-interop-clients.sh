#!/usr/bin/env bash
# Installs the interop clients that do not come from npm or Maven Central:
# - librdkafka, through its Python binding confluent-kafka (the wheel ships librdkafka), into a virtualenv at
#   <repo>/.cache/venv; the librdkafka interop tests run that venv's python;
# - franz-go: the Go helpers of tests/interop/go (eoscopier, txnzombie, saslcheck), built with the Go toolchain into
#   <repo>/.cache/go-bin/ (modules from the Go module proxy, pinned by tests/interop/go/go.sum);
# - franz-go's own pkg/kgo test suite at the version tests/interop/go/go.mod pins (the module zip carries its
#   _test.go files), compiled from the read-only module cache into <repo>/.cache/go-bin/franz-kgo.test for
#   tests/interop/franz-go-suite.test.ts; none of franz-go's code is copied into the repository;
# - kcat (librdkafka's command-line client), the Debian package `kcat`, with apt-get when it is missing.
#
# Idempotent: once the venv imports the pinned version it is left alone, and `go build` only rebuilds what
# changed. Concurrent callers are serialised by flock. Output goes to stderr; the exit code says whether the
# clients are usable.
set -euo pipefail

CONFLUENT_KAFKA_VERSION="2.16.1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
venv="$root/.cache/venv"

installed() {
  [[ -x "$venv/bin/python" ]] &&
    "$venv/bin/python" -c "import sys, importlib.metadata as m, confluent_kafka; sys.exit(0 if m.version('confluent-kafka') == '$CONFLUENT_KAFKA_VERSION' else 1)" 2>/dev/null
}

mkdir -p "$root/.cache"
exec 9>"$root/.cache/.venv.lock"
flock 9

if ! installed; then
  if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv" >&2
  fi
  "$venv/bin/pip" install --disable-pip-version-check --quiet "confluent-kafka==$CONFLUENT_KAFKA_VERSION" >&2
  installed || { echo "confluent-kafka $CONFLUENT_KAFKA_VERSION did not install into $venv" >&2; exit 1; }
fi

command -v go >/dev/null 2>&1 || { echo "go is not installed: the franz-go helpers cannot be built" >&2; exit 1; }
for helper in eoscopier:eos-copier txnzombie:txn-zombie saslcheck:sasl-check; do
  (cd "$root/tests/interop/go" && go build -o "$root/.cache/go-bin/${helper#*:}" "./${helper%%:*}") >&2 ||
    { echo "building the franz-go helper tests/interop/go/${helper%%:*} failed" >&2; exit 1; }
done
# The helpers' build above has downloaded the pinned franz-go module; `go test -c` from its directory in the
# module cache builds only into -o, so the cache stays untouched, and Go's build cache makes a rebuild a link.
franz_dir="$(cd "$root/tests/interop/go" && go list -m -f '{{.Dir}}' github.com/twmb/franz-go)" && [[ -d "$franz_dir" ]] &&
  (cd "$franz_dir" && go test -c -o "$root/.cache/go-bin/franz-kgo.test" ./pkg/kgo) >&2 ||
  { echo "building franz-go's pkg/kgo test suite failed" >&2; exit 1; }

if ! command -v kcat >/dev/null 2>&1; then
  { apt-get install -y --no-install-recommends kcat >&2 || { apt-get update >&2 && apt-get install -y --no-install-recommends kcat >&2; }; } ||
    { echo "kcat is not installed and apt-get could not install it: run 'apt-get install kcat' as root" >&2; exit 1; }
fi
