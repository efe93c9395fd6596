#!/usr/bin/env bash
# Fetch Apache Kafka (server, CLI tools, Java clients, a log4j2 binding) from Maven Central into
# <repo>/.cache/apache-kafka-<version>/libs/ and print that directory on stdout (its only output).
#
#   scripts/apache-kafka/fetch.sh            # the pinned version (KAFKA_VERSION overrides)
#
# Idempotent: once libs/.complete exists it does nothing. Works with an empty ~/.m2 (Maven Central only).
# Concurrent callers are serialised by flock; the libs dir appears by an atomic rename, so a half-copied
# directory is never seen.
set -euo pipefail

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest_parent="$root/.cache/apache-kafka-$KAFKA_VERSION"
libs="$dest_parent/libs"

if [[ -f "$libs/.complete" ]]; then
  echo "$libs"
  exit 0
fi

mkdir -p "$dest_parent"
exec 9>"$dest_parent/.lock"
flock 9
if [[ -f "$libs/.complete" ]]; then   # someone else finished while we waited
  echo "$libs"
  exit 0
fi

command -v mvn >/dev/null || { echo "fetch.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
command -v java >/dev/null || { echo "fetch.sh: java not found (Kafka $KAFKA_VERSION needs Java 17+)" >&2; exit 1; }

tmp="$(mktemp -d "$dest_parent/libs.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
log="$tmp/.mvn.log"
if ! mvn -B -q -f "$here/pom.xml" -Dstyle.color=never \
      -Dkafka.version="$KAFKA_VERSION" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" >"$log" 2>&1; then
  echo "fetch.sh: maven failed resolving Apache Kafka $KAFKA_VERSION:" >&2
  cat "$log" >&2
  exit 1
fi
rm -f "$log"
[[ -f "$tmp/kafka_2.13-$KAFKA_VERSION.jar" && -f "$tmp/kafka-tools-$KAFKA_VERSION.jar" ]] || {
  echo "fetch.sh: kafka jars missing after resolution" >&2; exit 1; }
echo "$KAFKA_VERSION" >"$tmp/.complete"
rm -rf "$libs"
mv -T "$tmp" "$libs"
trap - EXIT
echo "$libs"
