# Sourced (not run) by the scripts that start the simulator and the bridge
# in a ROS domain of their own: conformance.sh, chaos.sh, bench.sh, soak.sh. The caller sets
# `log_tag` (its messages' prefix) and `logs` (a directory for the logs),
# and has `set -euo pipefail`. Everything started is stopped when the
# caller exits. Each function exits the caller, saying why, on failure.

pids=()
stop_started() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_started EXIT
trap 'exit 130' INT TERM

# A ROS domain of our own, held by a lock until the caller exits (the lock
# file descriptor, lock_fd, stays open in the caller's shell; what it starts
# is given `{lock_fd}>&-` so that no child holds it). 1..9: inside the range
# Fast DDS can use on Linux (0..101) and outside the tests' 10..99 and
# run-sim.sh's default 0. Sets domain and exports ROS_DOMAIN_ID.
claim_ros_domain() {
  local tmp="${TMPDIR:-/tmp}" candidate
  domain=""
  for candidate in $(seq 1 9); do
    exec {lock_fd}>"$tmp/aicc-conformance-domain-$candidate.lock"
    if flock -n "$lock_fd"; then domain="$candidate"; break; fi
    exec {lock_fd}>&-
  done
  [ -n "$domain" ] || { echo "[$log_tag] no free ROS_DOMAIN_ID in 1..9" >&2; exit 1; }
  export ROS_DOMAIN_ID="$domain"
  export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
}

# Fresh random tokens in the variables the bridge reads (never the command
# line, never logged): the operator's, the agent's and an observer's.
export_random_tokens() {
  random_token() { head -c 24 /dev/urandom | base64 | tr -d '/+=' ; }
  export AICC_OPERATOR_TOKEN="$(random_token)"
  export AICC_TOKEN="$(random_token)"
  export AICC_OBSERVE_TOKEN="$(random_token)"
}

# Starts the simulator with its ground truth on a free port and the given
# arguments; waits until it is ready (120 s). Sets truth_port.
start_sim_with_truth() {
  echo "[$log_tag] starting the simulated robot (ROS_DOMAIN_ID=$domain); log: $logs/sim.log" >&2
  scripts/ros-env python3 sim/aicc_sim.py "$@" --truth-listen 127.0.0.1:0 {lock_fd}>&- > "$logs/sim.log" 2>&1 &
  pids+=($!)
  local sim_pid=$! _
  for _ in $(seq 1200); do
    grep -q '^AICC_SIM_READY' "$logs/sim.log" && break
    kill -0 "$sim_pid" 2>/dev/null || { echo "[$log_tag] the simulator exited:" >&2; tail -20 "$logs/sim.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q '^AICC_SIM_READY' "$logs/sim.log" || { echo "[$log_tag] the simulator did not become ready in 120 s: $logs/sim.log" >&2; exit 1; }
  truth_port="$(sed -n 's/^AICC_SIM_TRUTH .*"port": *\([0-9]*\).*/\1/p' "$logs/sim.log" | head -1)"
  [ -n "$truth_port" ] || { echo "[$log_tag] the simulator printed no AICC_SIM_TRUTH line: $logs/sim.log" >&2; exit 1; }
}

# Starts the release bridge (or bridge_bin, when the caller sets it) on a
# free loopback port with the given arguments; waits for its AICC_READY
# line (30 s). Sets port.
start_bridge() {
  echo "[$log_tag] starting the bridge ($*); log: $logs/bridge.log" >&2
  "${bridge_bin:-target/release/aicc-ros2}" --listen 127.0.0.1:0 "$@" {lock_fd}>&- > "$logs/bridge.out" 2> "$logs/bridge.log" &
  pids+=($!)
  local bridge_pid=$! _
  port=""
  # The bridge's stdout file is opened by the background job: it may not exist yet.
  touch "$logs/bridge.out"
  for _ in $(seq 300); do
    port="$(sed -n 's/^AICC_READY .*"port":\([0-9]*\).*/\1/p' "$logs/bridge.out" | head -1)"
    [ -n "$port" ] && break
    kill -0 "$bridge_pid" 2>/dev/null || { echo "[$log_tag] the bridge exited:" >&2; tail -20 "$logs/bridge.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "[$log_tag] the bridge did not print AICC_READY in 30 s: $logs/bridge.log" >&2; exit 1; }
}
