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
log_tag=soak
logs="$(mktemp -d)"
source scripts/lib/sim-and-bridge.sh
claim_ros_domain
start_sim_with_truth
start_bridge --config config/sim.yaml
bridge="${pids[-1]}"
sleep 3
mkdir -p target/soak
echo "== soak: $minutes min against the bridge (pid $bridge, port $port)"
target/release/aicc-soak --port "$port" --pid "$bridge" --minutes "$minutes" --json target/soak/summary.json "$@"
echo "== bridge log ($logs/bridge.log): $(grep -c . "$logs/bridge.log") lines, $(grep -ci 'error\|panic' "$logs/bridge.log" || true) with error/panic"
grep -i 'panic' "$logs/bridge.log" | head -5 || true
