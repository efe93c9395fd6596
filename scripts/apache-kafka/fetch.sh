#!/usr/bin/env bash
# Fetch Apache Kafka (server, CLI tools, Java clients, a log4j2 binding) from Maven Central into
# <repo>/.cache/apache-kafka-<version>/libs/ and print that directory on stdout (its only output).
#
#   scripts/apache-kafka/fetch.sh            # the pinned version (KAFKA_VERSION overrides)
#
# Idempotent: once libs/.complete names this version and this pom it does nothing; a cache made from another
# pom (fewer artifacts) is resolved again, so adding a dependency to pom.xml reaches existing checkouts.
# Works with an empty ~/.m2 (Maven Central only). Concurrent callers are serialised by flock; the libs dir
# appears by a rename, so a half-copied directory is never seen.
set -euo pipefail

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest_parent="$root/.cache/apache-kafka-$KAFKA_VERSION"
libs="$dest_parent/libs"
# What .complete holds: the version and the pom's digest, so that the marker is only current for this pom.
stamp="$KAFKA_VERSION $(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
current() { [[ -f "$libs/.complete" && "$(cat "$libs/.complete")" == "$stamp" ]]; }

if current; then
  echo "$libs"
  exit 0
fi

mkdir -p "$dest_parent"
exec 9>"$dest_parent/.lock"
flock 9
if current; then   # someone else finished while we waited
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
for jar in kafka_2.13 kafka-tools kafka-streams connect-runtime connect-file; do
  [[ -f "$tmp/$jar-$KAFKA_VERSION.jar" ]] || { echo "fetch.sh: $jar-$KAFKA_VERSION.jar missing after resolution" >&2; exit 1; }
done
echo "$stamp" >"$tmp/.complete"
# An older cache is moved aside rather than deleted first, so that the libs dir is missing only between two
# renames (a JVM started from it meanwhile would miss its jars), then removed.
old=""
if [[ -e "$libs" ]]; then
  old="$(mktemp -d "$dest_parent/libs.old.XXXXXX")"
  mv -T "$libs" "$old/libs"
fi
mv -T "$tmp" "$libs"
trap - EXIT
[[ -z "$old" ]] || rm -rf "$old"
echo "$libs"
