#!/usr/bin/env bash
# The soak: the simulated robot and the bridge in a ROS domain of their own,
# and a scripted agent (aicc-soak) calling sensors and moving there and back
# for MINUTES, with a new session every 200 calls; the bridge's resident
# memory, threads and open file descriptors are sampled every minute.
# Prints the series and a summary (figures, no pass/fail).
#   scripts/soak.sh [MINUTES (default 30)] [aicc-soak options]
# The JSON summary goes to target/soak/summary.json.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
minutes="${1:-30}"
shift || true
bash scripts/setup.sh
# The same build as scripts/test.sh (all targets): no second build.
cargo build --release --locked --workspace --all-targets
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$((100 + $$ % 100))}" ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
work="$(mktemp -d)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
scripts/ros-env python3 sim/aicc_sim.py > "$work/sim.out" 2> "$work/sim.err" &
pids+=($!)
for _ in $(seq 600); do grep -q AICC_SIM_READY "$work/sim.out" 2>/dev/null && break; sleep 0.1; done
grep -q AICC_SIM_READY "$work/sim.out" || { echo "simulator did not start:"; cat "$work/sim.err"; exit 1; }
target/release/aicc-ros2 --listen 127.0.0.1:0 --config config/sim.yaml > "$work/bridge.out" 2> "$work/bridge.err" &
bridge=$!
pids+=($bridge)
for _ in $(seq 100); do grep -q AICC_READY "$work/bridge.out" 2>/dev/null && break; sleep 0.1; done
port="$(sed -n 's/^AICC_READY .*"port":\([0-9]*\).*/\1/p' "$work/bridge.out")"
[ -n "$port" ] || { echo "bridge did not start:"; cat "$work/bridge.err"; exit 1; }
sleep 3
mkdir -p target/soak
echo "== soak: $minutes min against the bridge (pid $bridge, port $port)"
target/release/aicc-soak --port "$port" --pid "$bridge" --minutes "$minutes" --json target/soak/summary.json "$@"
echo "== bridge log: $(grep -c . "$work/bridge.err") lines, $(grep -ci 'error\|panic' "$work/bridge.err" || true) with error/panic"
grep -i 'panic' "$work/bridge.err" | head -5 || true
