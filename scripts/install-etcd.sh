#!/usr/bin/env bash
# Installs Debian's etcd-server for the cluster-mode tests (tests/etcd/), which start a real etcd of their
# own on free ports (tests/support/etcd.ts). Cluster mode keeps membership, ownership and fencing epochs in
# etcd; single-broker mode needs none.
#
# Idempotent: does nothing when `etcd` runs (on PATH or in /usr/bin). `apt-get update` runs only when the
# package lists do not know etcd-server yet. Concurrent callers are serialised by flock. Output goes to
# stderr; the exit code says whether etcd is usable.
set -euo pipefail

usable() {
  local etcd
  etcd="$(command -v etcd || echo /usr/bin/etcd)"
  [[ -x "$etcd" ]] && "$etcd" --version >/dev/null 2>&1
}

if usable; then exit 0; fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "install-etcd: etcd is missing and installing it needs root (apt-get install etcd-server)" >&2
  exit 1
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/../.cache"
exec 9>"$here/../.cache/.etcd.lock"
flock 9
if usable; then exit 0; fi   # someone else finished while we waited

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show etcd-server >/dev/null 2>&1; then
  echo "install-etcd: apt-get update" >&2
  apt-get update >&2
fi
echo "install-etcd: apt-get install etcd-server" >&2
apt-get install -y --no-install-recommends etcd-server >&2
# The package starts a system etcd on port 2379 where systemd runs. The tests start their own, so the one
# this install started is stopped and disabled again.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
  echo "install-etcd: stopping and disabling the etcd service the package started" >&2
  systemctl disable --now etcd >&2 || true
fi
usable || { echo "install-etcd: etcd still does not run" >&2; exit 1; }
