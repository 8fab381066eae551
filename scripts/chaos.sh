#!/usr/bin/env bash
# The chaos agent's long run: seeded random sequences of every tool against
# the bridge beside the simulated robot, judged on the simulator's ground
# truth (crates/aicc-agent/src/chaos/, sim/truth.py):
#   scripts/chaos.sh [MINUTES]        # default 60: one seed a minute
# Starts the simulator (spare low obstacles, ground truth on a free port)
# and the bridge (config/sim.yaml, a geofence of 1.2 m, reverse refused where unobserved) in a ROS domain of
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
  cargo build --release --locked --bin aicc-ros2 --bin aicc-chaos
fi

logs="$(mktemp -d "${TMPDIR:-/tmp}/aicc-chaos.XXXXXX")"
log_tag=chaos
# shellcheck source=lib/sim-and-bridge.sh
source scripts/lib/sim-and-bridge.sh
claim_ros_domain
# The chaos agent holds the actuate scope (AICC_TOKEN), as an agent would.
export_random_tokens
# Stamped velocity commands: the judge reads the bridge's ramp on the
# bridge's clock, not as the simulator's busy executor delivered it.
start_sim_with_truth --low-obstacles --cmd-vel-stamped
# Reverse refused where nothing observes the way behind (config/sim.yaml
# allows it, blind below its LiDAR's plane: the judge would find the low
# boxes behind the robot).
start_bridge --config config/sim.yaml --ros-args -p safety.geofence_radius_m:=1.2 -p safety.unobserved_behind:=refuse \
  -p actuators.cmd_vel_stamped:=true
mkdir -p target/chaos
report="target/chaos/report-${minutes}min.json"
echo "[chaos] $seeds seed(s) of ${seed_s} s against 127.0.0.1:$port, ground truth on 127.0.0.1:$truth_port" >&2
status=0
target/release/aicc-chaos --port "$port" --token-env AICC_TOKEN --truth "127.0.0.1:$truth_port" --seeds "1..$((seeds + 1))" \
  --seconds-per-seed "$seed_s" --report "$report" {lock_fd}>&- || status=$?
echo "[chaos] report: $report; logs: $logs (bridge.log, sim.log)" >&2
exit "$status"
