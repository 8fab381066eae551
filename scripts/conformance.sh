#!/usr/bin/env bash
# Runs the AICC conformance suite (conformance/scenarios) against the bridge
# beside the simulated robot: installs what is missing, builds the bridge and
# the runner, starts the simulator and the bridge (with random tokens) in a
# ROS domain of their own, runs aicc-conformance, stops both.
#   scripts/conformance.sh [--profile P] [aicc-conformance options, e.g. --area protocol]
# The profile (--profile, else AICC_PROFILE, else sim) is one of the shipped
# robot profiles: sim, turtlebot3, turtlebot4, or default (config/default.yaml,
# the robot every key's default describes: a depth camera and a bumper, no
# LiDAR, so nothing watches behind it; the simulator's bundled robot stands
# in for it). The simulator impersonates that robot (sim/aicc_sim.py
# --profile P) and the bridge runs its config/P.yaml unchanged; only the
# listen address (--listen) and the tokens (environment) are the test's own.
# Scenarios needing a tool the profile lacks (no head, no arm) are reported
# as skipped, with the reason. The simulator serves its ground truth
# (--truth-listen, a test stand-in) and has the spare low obstacles
# (--low-obstacles): the runner gets --truth, so the scenarios judged on
# ground truth (the adversarial area) run.
# Reports go to target/conformance/P/ (the sim profile's also to
# target/conformance/, where they have always been). Exit status: the runner's.
# AICC_CONFORMANCE_NO_BUILD=1 skips setup and build (scripts/test.sh has
# already built every target: building two binaries alone would resolve
# dependency features without the dev-dependencies and rebuild the crate).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
profile="${AICC_PROFILE:-sim}"
case "${1:-}" in
  --profile) [ $# -ge 2 ] || { echo "[conformance] --profile needs a name" >&2; exit 2; }; profile="$2"; shift 2 ;;
  --profile=*) profile="${1#--profile=}"; shift ;;
esac
case "$profile" in
  sim|turtlebot3|turtlebot4) sim_profile="$profile" ;;
  default) sim_profile=sim ;;
  *) echo "[conformance] unknown profile '$profile' (sim, turtlebot3, turtlebot4, default)" >&2; exit 2 ;;
esac
config="config/$profile.yaml"
reports="target/conformance/$profile"
if [ "${AICC_CONFORMANCE_NO_BUILD:-}" != 1 ]; then
  bash scripts/setup.sh
  echo "[conformance] building the bridge and the runner (release)" >&2
  cargo build --release --bin aicc-ros2 --bin aicc-conformance
fi

tmp="${TMPDIR:-/tmp}"
logs="$(mktemp -d "$tmp/aicc-conformance.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A ROS domain of our own, held by a lock until this script exits (the lock
# file descriptor stays open in this shell; children do not inherit it).
# 1..9: inside the range Fast DDS can use on Linux (0..101) and outside the
# tests' 10..99 and run-sim.sh's default 0.
domain=""
for candidate in $(seq 1 9); do
  exec {lock_fd}>"$tmp/aicc-conformance-domain-$candidate.lock"
  if flock -n "$lock_fd"; then domain="$candidate"; break; fi
  exec {lock_fd}>&-
done
[ -n "$domain" ] || { echo "[conformance] no free ROS_DOMAIN_ID in 1..9" >&2; exit 1; }
export ROS_DOMAIN_ID="$domain"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST

# Fresh random tokens: the runner authenticates with them, the bridge reads
# the same variables (never the command line, never logged).
random_token() { head -c 24 /dev/urandom | base64 | tr -d '/+=' ; }
export AICC_OPERATOR_TOKEN="$(random_token)"
export AICC_TOKEN="$(random_token)"
export AICC_OBSERVE_TOKEN="$(random_token)"

echo "[conformance] profile $profile: starting the simulated robot (ROS_DOMAIN_ID=$domain); log: $logs/sim.log" >&2
scripts/ros-env python3 sim/aicc_sim.py --profile "$sim_profile" --low-obstacles --truth-listen 127.0.0.1:0 {lock_fd}>&- > "$logs/sim.log" 2>&1 &
pids+=($!)
for _ in $(seq 1200); do
  grep -q '^AICC_SIM_READY' "$logs/sim.log" && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "[conformance] the simulator exited:" >&2; tail -20 "$logs/sim.log" >&2; exit 1; }
  sleep 0.1
done
grep -q '^AICC_SIM_READY' "$logs/sim.log" || { echo "[conformance] the simulator did not become ready in 120 s: $logs/sim.log" >&2; exit 1; }
truth_port="$(sed -n 's/^AICC_SIM_TRUTH .*"port": *\([0-9]*\).*/\1/p' "$logs/sim.log" | head -1)"
[ -n "$truth_port" ] || { echo "[conformance] the simulator printed no AICC_SIM_TRUTH line: $logs/sim.log" >&2; exit 1; }

echo "[conformance] starting the bridge with $config; log: $logs/bridge.log" >&2
target/release/aicc-ros2 --listen 127.0.0.1:0 --config "$config" {lock_fd}>&- > "$logs/bridge.out" 2> "$logs/bridge.log" &
pids+=($!)
port=""
# The bridge's stdout file is opened by the background job: it may not exist yet.
touch "$logs/bridge.out"
for _ in $(seq 300); do
  port="$(sed -n 's/^AICC_READY .*"port":\([0-9]*\).*/\1/p' "$logs/bridge.out" | head -1)"
  [ -n "$port" ] && break
  kill -0 "${pids[1]}" 2>/dev/null || { echo "[conformance] the bridge exited:" >&2; tail -20 "$logs/bridge.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "[conformance] the bridge did not print AICC_READY in 30 s: $logs/bridge.log" >&2; exit 1; }

echo "[conformance] running the scenarios against 127.0.0.1:$port (profile $profile; ground truth on 127.0.0.1:$truth_port)" >&2
status=0
started=$SECONDS
# A bridge started a moment ago offers the robot's tools once their topics
# flow: the runner waits for them before the first scenario (a later
# --wait-ready-s among "$@" overrides this one).
target/release/aicc-conformance --host 127.0.0.1 --port "$port" --profile "$profile" --report-dir "$reports" --wait-ready-s 60 \
  --truth "127.0.0.1:$truth_port" "$@" {lock_fd}>&- || status=$?
if [ "$profile" = sim ] && [ -f "$reports/conformance-report.json" ]; then
  cp "$reports/conformance-report.json" "$reports/conformance-junit.xml" target/conformance/
fi
echo "[conformance] profile $profile: the scenarios took $((SECONDS - started)) s; reports: $reports/conformance-report.json, $reports/conformance-junit.xml" >&2
if [ "$status" -ne 0 ]; then
  echo "[conformance] logs: $logs (bridge.log, sim.log); last bridge lines:" >&2
  tail -20 "$logs/bridge.log" >&2 || true
fi
exit "$status"
