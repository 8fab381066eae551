#!/usr/bin/env bash
# Runs every test, on a fresh machine as on a developer's:
#   1. the ROS-free crates (aicc-wire, aicc-bridge, aicc-agent, aicc-testkit)
#      with no ROS environment at all: their unit tests and the in-process
#      bridge tests (protocol over TCP, TLS, the agent harness, `aicc mcp`
#      driven by the official MCP Python SDK over stdio and HTTP). This proves
#      that they build and test without ROS (the ROS environment is hidden);
#   2. setup (scripts/setup.sh: apt packages, ROS 2 Kilted wheels, MuJoCo;
#      scripts/setup-browser.sh: Chromium and playwright-core), beside step 1
#      (log: target/setup.log), waited for after it;
#   3. the whole workspace built once (release; step 1's artifacts are reused);
#   4. the tests that need the simulated robot (crate aicc-sim-tests: the real
#      bridge binary beside the MuJoCo robot on real ROS 2 topics, in a ROS
#      domain of their own; pick_bench.rs runs the reference agent in two
#      seeded worlds: figures in target/bench/pick.json; chaos_sim.rs runs
#      the chaos agent for three seeds of 30 s judged on the simulator's ground
#      truth: figures in target/chaos/ci-report.json; console_sim.rs
#      drives the operator's console in headless Chromium, screenshots in
#      target/console/), the colcon build of the package with its
#      install and launch file checked (scripts/colcon-check.sh, sharing
#      step 3's artifacts), the simulator's Python tests;
#   5. the conformance suites: the agent harness against the project's own
#      client (aicc), and every scenario of conformance/scenarios against the
#      bridge beside the simulated robot, once per shipped robot profile
#      (sim, turtlebot3, turtlebot4: the simulator impersonates the robot,
#      the bridge runs its profile unchanged; scenarios needing a part the
#      robot lacks are skipped, naming it), judged on the simulator's ground
#      truth where a scenario asks (the adversarial area), and the
#      adversarial area once more with config/default.yaml (no rear source).
#      Reports: target/conformance/<profile>/ (the sim profile's also in
#      target/conformance/);
#   6. beside all of the above, from the start, at low priority: a 30-second
#      smoke run of each fuzz target (scripts/fuzz.sh 30, unoptimised; log:
#      target/fuzz-smoke.log), waited for at the end.
# The fast set alone, while developing: `cargo test-fast` (see .cargo/config.toml).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# Each step with the minutes and seconds since the start: where CI's time goes.
step() { printf '[test] %dm%02ds %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }
ros_free=(-p aicc-wire -p aicc-bridge -p aicc-agent -p aicc-testkit)

step "ROS-free crates: no ROS in their dependency graph"
if cargo tree --locked "${ros_free[@]}" -e normal,build,dev --prefix none | grep -E '^(r2r|r2r_[a-z_]+) '; then
  echo "[test] ERROR: a ROS-free crate depends on r2r (above)" >&2
  exit 1
fi
step "fuzz smoke (30 s per target) in the background: target/fuzz-smoke.log"
mkdir -p target
AICC_FUZZ_DEV=1 nice -n 10 bash scripts/fuzz.sh 30 > target/fuzz-smoke.log 2>&1 &
fuzz_pid=$!
setup_pid=""
trap 'kill -- "$fuzz_pid" $setup_pid 2> /dev/null || true' EXIT
step "MCP host for the aicc mcp tests (the official MCP Python SDK, no ROS)"
bash scripts/setup-mcp.sh
# Setup is mostly downloads (ROS 2 wheels, MuJoCo, Chromium: minutes on a
# fresh machine), so it runs beside the ROS-free build; Chromium and
# playwright-core are for the console's browser test (console_sim.rs).
# Where sudo would ask for a password, it runs here, in the foreground.
setup_all() { bash scripts/setup.sh && bash scripts/setup-browser.sh; }
if [ "$(id -u)" -eq 0 ] || sudo -n true 2> /dev/null; then
  step "setup (apt, ROS 2 Kilted wheels, MuJoCo, colcon, Chromium) in the background: target/setup.log"
  setup_all > target/setup.log 2>&1 &
  setup_pid=$!
else
  step "setup (apt, ROS 2 Kilted wheels, MuJoCo, colcon, Chromium)"
  setup_all
fi
step "ROS-free crates: unit and in-process tests, with the ROS environment hidden"
# A prefix that does not exist: if anything here needed ROS, its build would
# fail (even with setup installing ROS 2 into .deps/ beside it).
env -u ROS_DISTRO -u LD_LIBRARY_PATH AMENT_PREFIX_PATH=/nonexistent/ros-hidden CMAKE_PREFIX_PATH=/nonexistent/ros-hidden \
  cargo test --release --locked "${ros_free[@]}"
if [ -n "$setup_pid" ]; then
  step "setup: waiting for it"
  if ! wait "$setup_pid"; then
    tail -n 60 target/setup.log >&2
    echo "[test] ERROR: setup failed (above; the whole log: target/setup.log)" >&2
    exit 1
  fi
  setup_pid=""
fi
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
step "building the workspace (release)"
cargo build --release --locked --workspace --all-targets
step "tests against the simulated robot"
cargo test --release --locked -p aicc-sim-tests -p aicc_ros2
step "the package as a ROS user builds it: colcon build, install checks, the installed binary"
bash scripts/colcon-check.sh
step "simulator tests"
scripts/ros-env python3 -m pytest -q sim/tests
step "agent conformance: the aicc client against the scripted bridge"
mkdir -p target/conformance
target/release/aicc-agent-conformance --client "target/release/aicc --port {port}" --report-dir target/conformance
# Every profile runs even when one fails, so that one run shows them all.
conformance_failed=()
for profile in sim turtlebot3 turtlebot4; do
  step "bridge conformance, profile $profile: every scenario against the simulated robot"
  profile_started=$SECONDS
  AICC_CONFORMANCE_NO_BUILD=1 bash scripts/conformance.sh --profile "$profile" || conformance_failed+=("$profile")
  step "bridge conformance, profile $profile: $((SECONDS - profile_started)) s in all"
done
# config/default.yaml has no rear source (no LiDAR): the adversarial
# scenarios, the reverse one above all, run against it too.
step "bridge conformance, profile default: the adversarial scenarios"
profile_started=$SECONDS
AICC_CONFORMANCE_NO_BUILD=1 bash scripts/conformance.sh --profile default --area adversarial || conformance_failed+=("default")
step "bridge conformance, profile default: $((SECONDS - profile_started)) s in all"
if [ ${#conformance_failed[@]} -gt 0 ]; then
  echo "[test] ERROR: bridge conformance failed for profile(s): ${conformance_failed[*]} (above; reports in target/conformance/<profile>/)" >&2
  exit 1
fi
step "fuzz smoke: waiting for it"
if wait "$fuzz_pid"; then
  grep '^\[fuzz\]' target/fuzz-smoke.log >&2
else
  tail -n 60 target/fuzz-smoke.log >&2
  echo "[test] ERROR: the fuzz smoke failed (above; the input is in fuzz/artifacts/)" >&2
  exit 1
fi
step "all tests passed"
