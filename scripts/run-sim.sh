#!/usr/bin/env bash
# Runs the bridge beside the simulated robot (MuJoCo, headless), after
# installing what is missing. Ctrl-C stops both.
#   scripts/run-sim.sh [--port N] [--ai-control-port N] [simulator options, e.g. --width 640 --height 480]
# AICC listens on 127.0.0.1:43010 and the AI-control dialect (docs/ai-control.md)
# on 127.0.0.1:43011 by default, the ports the two protocols name.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
port=43010
ai_control_port=43011
while true; do
  case "${1:-}" in
    --port) port="$2"; shift 2 ;;
    --ai-control-port) ai_control_port="$2"; shift 2 ;;
    *) break ;;
  esac
done
bash scripts/setup.sh
echo "[run] building the bridge and its client (release; the first build takes a few minutes)" >&2
cargo build --release --locked --bin aicc-ros2 --bin aicc
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"

logs="$(mktemp -d "${TMPDIR:-/tmp}/aicc-run.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "[run] starting the simulated robot (ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-0}); log: $logs/sim.log" >&2
scripts/ros-env python3 sim/aicc_sim.py "$@" > "$logs/sim.log" 2>&1 &
pids+=($!)
for _ in $(seq 1200); do
  grep -q '^AICC_SIM_READY' "$logs/sim.log" && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "[run] the simulator exited:" >&2; tail -20 "$logs/sim.log" >&2; exit 1; }
  sleep 0.1
done
grep -q '^AICC_SIM_READY' "$logs/sim.log" || { echo "[run] the simulator did not become ready in 120 s: $logs/sim.log" >&2; exit 1; }

target/release/aicc-ros2 --listen "127.0.0.1:$port" --ai-control-listen "127.0.0.1:$ai_control_port" --config config/sim.yaml &
pids+=($!)
sleep 1
cat >&2 <<MSG

  The bridge speaks AICC (newline-delimited JSON) on 127.0.0.1:$port.
  Try it:
    nc 127.0.0.1 $port
  and send, one per line:
    {"protocol":"aicc/0.1","type":"tool_call","call_id":"c1","tool":"proprioception","input":{}}
    {"protocol":"aicc/0.1","type":"tool_call","call_id":"c2","tool":"move","input":{"forward":0.5}}
  or use the command-line client (docs/cli.md):
    target/release/aicc --port $port shell

  The AI-control dialect (JSON-RPC 2.0, docs/ai-control.md) is on 127.0.0.1:$ai_control_port:
    {"jsonrpc":"2.0","id":1,"method":"act","params":{"type":"move","x":500}}

  Simulator log: $logs/sim.log. Ctrl-C stops the bridge and the simulator.
MSG
wait -n "${pids[@]}"
