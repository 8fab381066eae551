#!/usr/bin/env bash
# Installs the MCP hosts the `aicc mcp` tests use: the official MCP Python SDK
# in a venv of its own, .deps/mcp-venv, and, where npm is, the MCP Inspector's
# CLI in .deps/mcp-inspector (both project-local, git-ignored); and the MCAP
# readers the recording tests use (scripts/requirements-mcap.txt) in
# .deps/mcap-venv. No ROS:
# scripts/test.sh runs it before the ROS-free tests; scripts/setup.sh too.
# Idempotent: skipped when the venv matches scripts/requirements-mcp.txt.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.deps/mcp-venv"
requirements="$repo/scripts/requirements-mcp.txt"
log() { printf '[setup-mcp] %s\n' "$*" >&2; }
die() { printf '[setup-mcp] ERROR: %s\n' "$*" >&2; exit 1; }

# The Inspector (npm); pinned. Skipped on a machine without npm (its test
# says so); a failed install is an error.
inspector_version="2.12.0"
inspector="$repo/.deps/mcp-inspector"
if command -v npm >/dev/null; then
  if [ ! -f "$inspector/.aicc-stamp" ] || [ "$(cat "$inspector/.aicc-stamp")" != "$inspector_version" ]; then
    log "installing the MCP Inspector $inspector_version into $inspector"
    rm -rf "$inspector"
    mkdir -p "$inspector"
    npm install --no-audit --no-fund --silent --prefix "$inspector" "@modelcontextprotocol/inspector@$inspector_version" >/dev/null \
      || die "npm install @modelcontextprotocol/inspector@$inspector_version failed (is the npm registry reachable?)"
    echo "$inspector_version" > "$inspector/.aicc-stamp"
  fi
fi

# One venv per requirements file, each recreated only when its file changed.
python_venv() {
  local venv="$1" requirements="$2"
  local want
  want="$(sha256sum "$requirements" | cut -c1-16)"
  if [ -f "$venv/.aicc-stamp" ] && [ "$(cat "$venv/.aicc-stamp")" = "$want" ]; then
    return 0
  fi
  python_bin="$(command -v python3 || true)"
  [ -n "$python_bin" ] || die "python3 not found: install Python 3.10 or newer (apt-get install python3 python3-venv)"
  "$python_bin" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "the MCP SDK needs Python 3.10 or newer; $python_bin is older"
  if ! "$python_bin" -c 'import ensurepip, venv' 2>/dev/null; then
    command -v apt-get >/dev/null || die "python3 has no venv module: install python3-venv"
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    log "installing python3-venv"
    "${sudo_cmd[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq python3-venv >/dev/null \
      || die "apt-get install python3-venv failed"
  fi
  log "creating $venv with $(grep -v '^#' "$requirements" | tr '\n' ' ')"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python_bin" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements" || die "pip install -r $requirements failed (is PyPI reachable?)"
  echo "$want" > "$venv/.aicc-stamp"
}
python_venv "$venv" "$requirements"
python_venv "$repo/.deps/mcap-venv" "$repo/scripts/requirements-mcap.txt"
