#!/usr/bin/env bash
# The package as a ROS user builds and starts it:
#   1. `colcon build` of the repository (the package aicc_ros2 is its top: an
#      ament_cargo package; colcon-ros-cargo runs cargo-ament-build), into
#      target/colcon/{build,install}. colcon's
#      build directory for the package is the workspace's target/ (a symlink),
#      and it builds the workspace's targets as scripts/test.sh does (the same
#      feature set), so nothing already built is built again;
#   2. checks that the binary, package.xml, launch/, config/ and urdf/ are
#      installed where ament_index and FindPackageShare look (install/setup.sh
#      sourced, as a user would);
#   3. checks launch/bridge.launch.py against the install (launch_ros cannot run
#      here: scripts/check-launch.py reads the file instead);
#   4. runs the installed binary with the installed config/sim.yaml beside the
#      simulated robot and calls a tool through it with the aicc client.
# scripts/setup.sh installs colcon (.deps/colcon) and cargo-ament-build (.deps/cargo).
# Needs target/release/aicc (scripts/test.sh builds the workspace first).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[colcon] %s\n' "$*" >&2; }
die() { printf '[colcon] ERROR: %s\n' "$*" >&2; exit 1; }
colcon="$repo/.deps/colcon/bin/colcon"
[ -x "$colcon" ] || die "$colcon not found: run scripts/setup.sh"
[ -x "$repo/.deps/cargo/bin/cargo-ament-build" ] || die "cargo-ament-build not found in .deps/cargo/bin: run scripts/setup.sh"
[ -x "$repo/target/release/aicc" ] || die "target/release/aicc not built: cargo build --release --workspace"
export PATH="$repo/.deps/cargo/bin:$PATH"

ws="$repo/target/colcon"
install="$ws/install"
mkdir -p "$ws/build"
ln -sfn "$repo/target" "$ws/build/aicc_ros2"
log "colcon build (build base: the workspace's target/)"
start=$(date +%s)
# colcon-ros-cargo writes .cargo/config.toml into its working directory: run it
# in the colcon workspace, never in the repository.
(cd "$ws" && "$repo/scripts/ros-env" "$colcon" --log-base log build \
  --base-paths "$repo" --build-base build --install-base install \
  --event-handlers console_direct- --cargo-args --release --workspace --all-targets) || die "colcon build failed (logs: $ws/log)"
log "colcon build done in $(( $(date +%s) - start )) s"

log "checking the install against ament_index"
# install/setup.sh prepends the install to AMENT_PREFIX_PATH, as a user's shell has it.
"$repo/scripts/ros-env" bash -c '. "$1/setup.sh" && python3 "$2/scripts/check-launch.py" aicc_ros2 "$2/launch/bridge.launch.py"' \
  check "$install" "$repo" || die "the install or the launch file does not check out (above)"

log "the installed binary beside the simulated robot"
log_tag=colcon
logs="$ws/log/run"
mkdir -p "$logs"
cd "$repo"
source scripts/lib/sim-and-bridge.sh
claim_ros_domain
start_sim_with_truth
# colcon installs each package in its own prefix (isolated layout).
share="$install/aicc_ros2/share/aicc_ros2"
bridge_bin="$install/aicc_ros2/lib/aicc_ros2/aicc-ros2"
start_bridge --config "$share/config/sim.yaml"
output=""
for _ in $(seq 1 25); do
  if output="$("$repo/target/release/aicc" --port "$port" --retries 3 call proprioception 2>&1)"; then break; fi
  sleep 0.2
done
grep -q '"odom_age_ms"' <<<"$output" || die "proprioception through the installed bridge failed: $output"
grep -q '"frame_id": *"odom"' <<<"$output" || die "proprioception carries no odometry frame: $output"
log "the installed bridge answers: proprioception with odometry from the simulator"
