#!/usr/bin/env bash
# Runs every test: installs what is missing (scripts/setup.sh), builds, runs
# the Rust unit and integration tests (the latter start the simulated robot
# and the bridge on real ROS 2 topics, in a ROS domain of their own), the
# simulator's Python tests, then the conformance suites: the agent harness
# against the project's own client (aicc), and every scenario of
# conformance/scenarios against the bridge beside the simulated robot.
# Reports: target/conformance/.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
echo "[test] building (release)" >&2
cargo build --release --all-targets
echo "[test] Rust unit and integration tests" >&2
cargo test --release
echo "[test] simulator tests" >&2
scripts/ros-env python3 -m pytest -q sim/tests
echo "[test] agent conformance: the aicc client against the scripted bridge" >&2
mkdir -p target/conformance
target/release/aicc-agent-conformance --client "target/release/aicc --port {port}" --report-dir target/conformance
echo "[test] bridge conformance: every scenario against the simulated robot" >&2
AICC_CONFORMANCE_NO_BUILD=1 bash scripts/conformance.sh
