#!/usr/bin/env bash
# The chaos agent's long run: seeded random sequences of every tool against
# the bridge beside the simulated robot, judged on the simulator's ground
# truth (crates/aicc-agent/src/chaos/, sim/truth.py):
#   scripts/chaos.sh [MINUTES]        # default 60: one seed a minute
# Starts the simulator (spare low obstacles, ground truth on a free port)
# and the bridge (config/sim.yaml, a geofence of 1.2 m) in a ROS domain of
# their own, runs aicc-chaos with seeds 1..MINUTES, prints the figures and
# writes target/chaos/report-<MINUTES>min.json. Exit status: aicc-chaos's
# (1 when any violation was found). AICC_CHAOS_NO_BUILD=1 skips setup and
# build; AICC_CHAOS_SEED_S sets the seconds per seed (default 60).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
minutes="${1:-60}"
case "$minutes" in ''|*[!0-9]*) echo "[chaos] MINUTES must be a whole number, got '$minutes'" >&2; exit 2 ;; esac
[ "$minutes" -ge 1 ] || { echo "[chaos] MINUTES must be at least 1" >&2; exit 2; }
seed_s="${AICC_CHAOS_SEED_S:-60}"
seeds=$(( (minutes * 60 + seed_s - 1) / seed_s ))
if [ "${AICC_CHAOS_NO_BUILD:-}" != 1 ]; then
  bash scripts/setup.sh
  echo "[chaos] building the bridge and the chaos agent (release)" >&2
  cargo build --release --bin aicc-ros2 --bin aicc-chaos
fi

tmp="${TMPDIR:-/tmp}"
logs="$(mktemp -d "$tmp/aicc-chaos.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A ROS domain of our own (the conformance script's lock scheme, domains 1..9).
domain=""
for candidate in $(seq 1 9); do
  exec {lock_fd}>"$tmp/aicc-conformance-domain-$candidate.lock"
  if flock -n "$lock_fd"; then domain="$candidate"; break; fi
  exec {lock_fd}>&-
done
[ -n "$domain" ] || { echo "[chaos] no free ROS_DOMAIN_ID in 1..9" >&2; exit 1; }
export ROS_DOMAIN_ID="$domain"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# Fresh random tokens (the bridge reads the same variables); the chaos
# agent holds the actuate scope, as an agent would, not the admin one.
random_token() { head -c 24 /dev/urandom | base64 | tr -d '/+=' ; }
export AICC_OPERATOR_TOKEN="$(random_token)"
export AICC_TOKEN="$(random_token)"
export AICC_OBSERVE_TOKEN="$(random_token)"

echo "[chaos] starting the simulated robot (ROS_DOMAIN_ID=$domain); log: $logs/sim.log" >&2
scripts/ros-env python3 sim/aicc_sim.py --low-obstacles --truth-listen 127.0.0.1:0 {lock_fd}>&- > "$logs/sim.log" 2>&1 &
pids+=($!)
for _ in $(seq 1200); do
  grep -q '^AICC_SIM_READY' "$logs/sim.log" && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "[chaos] the simulator exited:" >&2; tail -20 "$logs/sim.log" >&2; exit 1; }
  sleep 0.1
done
truth_port="$(sed -n 's/^AICC_SIM_TRUTH .*"port": *\([0-9]*\).*/\1/p' "$logs/sim.log" | head -1)"
[ -n "$truth_port" ] || { echo "[chaos] the simulator printed no AICC_SIM_TRUTH line: $logs/sim.log" >&2; exit 1; }

echo "[chaos] starting the bridge (config/sim.yaml, geofence 1.2 m); log: $logs/bridge.log" >&2
target/release/aicc-ros2 --listen 127.0.0.1:0 --config config/sim.yaml --ros-args -p safety.geofence_radius_m:=1.2 {lock_fd}>&- > "$logs/bridge.out" 2> "$logs/bridge.log" &
pids+=($!)
port=""
# The bridge's stdout file is opened by the background job: it may not exist yet.
touch "$logs/bridge.out"
for _ in $(seq 300); do
  port="$(sed -n 's/^AICC_READY .*"port":\([0-9]*\).*/\1/p' "$logs/bridge.out" | head -1)"
  [ -n "$port" ] && break
  kill -0 "${pids[1]}" 2>/dev/null || { echo "[chaos] the bridge exited:" >&2; tail -20 "$logs/bridge.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "[chaos] the bridge did not print AICC_READY in 30 s: $logs/bridge.log" >&2; exit 1; }
mkdir -p target/chaos
report="target/chaos/report-${minutes}min.json"
echo "[chaos] $seeds seed(s) of ${seed_s} s against 127.0.0.1:$port, ground truth on 127.0.0.1:$truth_port" >&2
status=0
target/release/aicc-chaos --port "$port" --token-env AICC_TOKEN --truth "127.0.0.1:$truth_port" --seeds "1..$((seeds + 1))" \
  --seconds-per-seed "$seed_s" --report "$report" {lock_fd}>&- || status=$?
echo "[chaos] report: $report; logs: $logs (bridge.log, sim.log)" >&2
exit "$status"
