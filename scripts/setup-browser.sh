#!/usr/bin/env bash
# Installs what the operator console's browser test drives: Debian's
# Chromium (apt) and playwright-core (npm, the version locked in
# tests/console/package-lock.json) in .deps/browser.
# Playwright's own browser downloads are not used (this machine's network
# reaches only package registries): the test starts /usr/bin/chromium.
# Run by scripts/test.sh after scripts/setup.sh. Idempotent: skipped when
# the lock file is unchanged and Chromium is there.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$repo/.deps/browser"
source_dir="$repo/tests/console"
log() { printf '[setup-browser] %s\n' "$*" >&2; }
die() { printf '[setup-browser] ERROR: %s\n' "$*" >&2; exit 1; }

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "not root and no sudo: install chromium, nodejs and npm by hand, then rerun"
  sudo_cmd=(sudo)
fi
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "apt-get not found: install ${missing[*]} by hand, then rerun"
  log "installing apt packages: ${missing[*]} (Chromium is about 100 MB)"
  "${sudo_cmd[@]}" apt-get update -qq || die "apt-get update failed: check the network or the apt sources"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
fi

want="$(cat "$source_dir/package.json" "$source_dir/package-lock.json" | sha256sum | cut -c1-16)"
if [ -f "$dest/.aicc-stamp" ] && [ "$(cat "$dest/.aicc-stamp")" = "$want" ] && [ -f "$dest/node_modules/playwright-core/package.json" ]; then
  exit 0
fi
log "installing playwright-core into $dest"
rm -rf "$dest"
mkdir -p "$dest"
cp "$source_dir/package.json" "$source_dir/package-lock.json" "$dest/"
# Playwright must not download browsers: Debian's Chromium is used.
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent --prefix "$dest" >/dev/null \
  || die "npm ci in $dest failed (is the npm registry reachable?)"
echo "$want" > "$dest/.aicc-stamp"
log "done: $(/usr/bin/chromium --version 2>/dev/null || echo 'chromium'), playwright-core $(node -p "require('$dest/node_modules/playwright-core/package.json').version")"
