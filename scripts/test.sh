#!/usr/bin/env bash
# Runs every test: installs what is missing (scripts/setup.sh), builds, runs
# the Rust unit and integration tests (the latter start the simulated robot
# and the bridge on real ROS 2 topics, in a ROS domain of their own), then
# the simulator's Python tests.
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
