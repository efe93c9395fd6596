#!/usr/bin/env bash
# Installs Debian's Chromium for the dashboard's browser test (tests/e2e/dashboard.test.ts), which drives it
# with playwright-core (an npm dev dependency that ships no browser). Playwright's own browser download is
# not used: this machine reaches Debian's packages, not browser builds.
#
# Idempotent: does nothing when /usr/bin/chromium runs. `apt-get update` runs only when the package lists
# do not know chromium yet. Concurrent callers are serialised by flock. Output goes to stderr; the exit
# code says whether Chromium is usable.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

usable() {
  [[ -x "$CHROMIUM" ]] && "$CHROMIUM" --headless --no-sandbox --disable-gpu --version >/dev/null 2>&1
}

if usable; then exit 0; fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "install-browser: $CHROMIUM is missing and installing it needs root (apt-get install chromium)" >&2
  exit 1
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/../.cache"
exec 9>"$here/../.cache/.browser.lock"
flock 9
if usable; then exit 0; fi   # someone else finished while we waited

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show chromium >/dev/null 2>&1; then
  echo "install-browser: apt-get update" >&2
  apt-get update >&2
fi
echo "install-browser: apt-get install chromium" >&2
apt-get install -y chromium >&2
usable || { echo "install-browser: $CHROMIUM still does not run" >&2; exit 1; }
