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
  cargo build --release --locked --bin aicc-ros2 --bin aicc-conformance
fi

logs="$(mktemp -d "${TMPDIR:-/tmp}/aicc-conformance.XXXXXX")"
log_tag=conformance
# shellcheck source=lib/sim-and-bridge.sh
source scripts/lib/sim-and-bridge.sh
claim_ros_domain
# The runner authenticates with these tokens; the bridge reads the same variables.
export_random_tokens
echo "[conformance] profile $profile" >&2
start_sim_with_truth --profile "$sim_profile" --low-obstacles
start_bridge --config "$config"

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
