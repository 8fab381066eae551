#!/usr/bin/env bash
# Runs the tests, in tiers:
#   scripts/test.sh [fast|sim|conformance|all]     (default: all; CI runs all)
# fast (about 2 minutes after a change; no ROS, no simulator):
#   1. the ROS-free crates (aicc-wire, aicc-control, aicc-bridge, aicc-agent,
#      aicc-testkit, aicc-bench): no r2r anywhere in their dependency graph, no import
#      cycle between any crate's modules, at any level (scripts/module-cycles.py); rustfmt
#      (`cargo fmt --check`) and clippy with warnings denied; their unit
#      tests and the in-process bridge tests (protocol over TCP, TLS, the
#      agent harness, `aicc mcp` driven by the official MCP Python SDK over
#      stdio and HTTP), with the ROS environment hidden: proof that they
#      build and test without ROS.
# sim (needs setup: scripts/setup.sh installs apt packages, ROS 2 Kilted
# wheels, MuJoCo; scripts/setup-browser.sh Chromium and playwright-core):
#   2. the whole workspace built once (release; the fast tier's artifacts
#      are reused);
#   3. the node's tests in tests/ (the real bridge binary beside the MuJoCo
#      robot on real ROS 2 topics, in a ROS domain of their own;
#      pick_bench.rs runs the reference agent in two seeded worlds: figures
#      in target/bench/pick.json; chaos_sim.rs runs the chaos agent for
#      three seeds of 30 s judged on the simulator's ground truth: figures in
#      target/chaos/ci-report.json; console_sim.rs drives the operator's
#      console in headless Chromium, screenshots in target/console/), the
#      colcon build of the package with its install and launch file checked
#      (scripts/colcon-check.sh, sharing step 2's artifacts), the
#      simulator's Python tests.
# conformance (needs setup too; shares step 2's build):
#   4. the agent harness against the project's own client (aicc), and every
#      scenario of conformance/scenarios against the bridge beside the
#      simulated robot, once per shipped robot profile (sim, turtlebot3,
#      turtlebot4: the simulator impersonates the robot, the bridge runs its
#      profile unchanged; scenarios needing a part the robot lacks are
#      skipped, naming it), judged on the simulator's ground truth where a
#      scenario asks (the adversarial area), and the adversarial area once
#      more with config/default.yaml (no rear source). Reports:
#      target/conformance/<profile>/ (the sim profile's also in
#      target/conformance/).
# all: every tier, with setup beside the fast tier (log: target/setup.log)
# and, beside everything from the start at low priority, a 30-second smoke
# run of each fuzz target (scripts/fuzz.sh 30, unoptimised; log:
# target/fuzz-smoke.log), waited for at the end.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
tier="${1:-all}"
case "$tier" in
  fast | sim | conformance | all) ;;
  *) echo "usage: scripts/test.sh [fast|sim|conformance|all] (default all); '$tier' is not a tier" >&2; exit 2 ;;
esac
runs() { [ "$tier" = all ] || [ "$tier" = "$1" ]; }
# Each step with the minutes and seconds since the start: where CI's time goes.
step() { printf '[test] %dm%02ds %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }
ros_free=(-p aicc-wire -p aicc-control -p aicc-bridge -p aicc-agent -p aicc-testkit -p aicc-bench)
mkdir -p target
fuzz_pid=""
setup_pid=""
trap 'kill -- $fuzz_pid $setup_pid 2> /dev/null || true' EXIT
# Setup is mostly downloads (ROS 2 wheels, MuJoCo, Chromium: minutes on a
# fresh machine); Chromium and playwright-core are for the console's
# browser test (console_sim.rs).
setup_all() { bash scripts/setup.sh && bash scripts/setup-browser.sh; }
wait_for_setup() {
  if [ -n "$setup_pid" ]; then
    step "setup: waiting for it"
    if ! wait "$setup_pid"; then
      tail -n 60 target/setup.log >&2
      echo "[test] ERROR: setup failed (above; the whole log: target/setup.log)" >&2
      exit 1
    fi
    setup_pid=""
  fi
}

if [ "$tier" = all ]; then
  step "fuzz smoke (30 s per target) in the background: target/fuzz-smoke.log"
  AICC_FUZZ_DEV=1 nice -n 10 bash scripts/fuzz.sh 30 > target/fuzz-smoke.log 2>&1 &
  fuzz_pid=$!
fi
if [ "$tier" != fast ]; then
  # Beside the fast tier's build where it can; where sudo would ask for a
  # password, in the foreground.
  if [ "$tier" = all ] && { [ "$(id -u)" -eq 0 ] || sudo -n true 2> /dev/null; }; then
    step "setup (apt, ROS 2 Kilted wheels, MuJoCo, colcon, Chromium) in the background: target/setup.log"
    setup_all > target/setup.log 2>&1 &
    setup_pid=$!
  else
    step "setup (apt, ROS 2 Kilted wheels, MuJoCo, colcon, Chromium)"
    setup_all
  fi
fi

if runs fast; then
  step "ROS-free crates: no ROS in their dependency graph"
  if cargo tree --locked "${ros_free[@]}" -e normal,build,dev --prefix none | grep -E '^(r2r|r2r_[a-z_]+) '; then
    echo "[test] ERROR: a ROS-free crate depends on r2r (above)" >&2
    exit 1
  fi
  step "no import cycle between the modules of any crate, at any level"
  for crate in . crates/*/; do python3 scripts/module-cycles.py "$crate"; done
  step "rustfmt: cargo fmt --check (rustfmt.toml)"
  cargo fmt --all --check > target/fmt-check.log || {
    head -n 40 target/fmt-check.log >&2
    echo "[test] ERROR: not formatted as rustfmt.toml says (above; all of it: target/fmt-check.log): run cargo fmt --all" >&2
    exit 1
  }
  step "MCP host for the aicc mcp tests (the official MCP Python SDK, no ROS)"
  bash scripts/setup-mcp.sh
  # A prefix that does not exist: if anything here needed ROS, its build would
  # fail (even with setup installing ROS 2 into .deps/ beside it).
  hide_ros=(env -u ROS_DISTRO -u LD_LIBRARY_PATH AMENT_PREFIX_PATH=/nonexistent/ros-hidden CMAKE_PREFIX_PATH=/nonexistent/ros-hidden)
  step "ROS-free crates: clippy, warnings denied"
  "${hide_ros[@]}" cargo clippy --release --locked "${ros_free[@]}" --all-targets -- -D warnings
  step "ROS-free crates: unit and in-process tests, with the ROS environment hidden"
  "${hide_ros[@]}" cargo test --release --locked "${ros_free[@]}"
fi

if runs sim || runs conformance; then
  wait_for_setup
  export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
  step "building the workspace (release)"
  cargo build --release --locked --workspace --all-targets
fi

if runs sim; then
  step "tests against the simulated robot (tests/)"
  cargo test --release --locked -p aicc_ros2
  step "the package as a ROS user builds it: colcon build, install checks, the installed binary"
  bash scripts/colcon-check.sh
  step "simulator tests"
  scripts/ros-env python3 -m pytest -q sim/tests
fi

if runs conformance; then
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
fi

if [ -n "$fuzz_pid" ]; then
  step "fuzz smoke: waiting for it"
  if wait "$fuzz_pid"; then
    fuzz_pid=""
    grep '^\[fuzz\]' target/fuzz-smoke.log >&2
  else
    fuzz_pid=""
    tail -n 60 target/fuzz-smoke.log >&2
    echo "[test] ERROR: the fuzz smoke failed (above; the input is in fuzz/artifacts/)" >&2
    exit 1
  fi
fi
step "the $tier tier passed"
