#!/usr/bin/env bash
# Benchmarks that print figures (no pass/fail): starts the simulated robot
# and the bridge in a ROS domain of their own, then runs the load client.
#   scripts/bench.sh [aicc-bench options]
# AICC_BENCH_BIN_DIR=DIR runs the binaries in DIR instead (e.g. a copy of
# an earlier build, to compare two versions in one session on one machine).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh
bin="${AICC_BENCH_BIN_DIR:-target/release}"
# The same selection as scripts/test.sh, so that nothing builds twice.
[ -n "${AICC_BENCH_BIN_DIR:-}" ] || cargo build --release --locked --workspace --all-targets
# The benchmarks without ROS first, before the simulator starts: they
# measure the bridge's own code, and the simulator would take a core from
# them (the vision figures were up to 2x slower beside it).
echo "== protocol without ROS: the bridge in-process on the test robot beside the echo floor"
"$bin"/aicc-bench-roundtrip
echo "== governor: cost of one step"
"$bin"/aicc-bench-governor
echo "== vision: decode and encode a 640x480 frame"
"$bin"/aicc-bench-vision
echo "== recording: overhead on proprioception and vision round trips, bytes per minute"
"$bin"/aicc-bench-recording
work="$(mktemp -d)"
log_tag=bench
logs="$work"
source scripts/lib/sim-and-bridge.sh
trap 'stop_started; rm -rf "$work"' EXIT
claim_ros_domain
start_sim_with_truth --width 640 --height 480
bridge_bin="$bin/aicc-ros2"
start_bridge --config config/sim.yaml
bridge="${pids[-1]}"
sleep 1
echo "== protocol: round trip, throughput, memory (bridge pid $bridge, port $port)"
"$bin"/aicc-bench --port "$port" --pid "$bridge" "$@"
echo "== MCP: tools/call round trips through aicc mcp (stdio, HTTP) beside AICC TCP"
"$bin"/aicc-bench-mcp --port "$port"
echo "== actuation: call to first governed /cmd_vel"
"$bin"/aicc-bench-actuation --port "$port" --repeats 30
echo "== perception freshness: frames received, served-frame age (640x480 at 15 Hz)"
"$bin"/aicc-bench-freshness --port "$port" --pid "$bridge"
echo "== idle bridge beside a 30 Hz 640x480 camera and depth camera (an agent connected, not asking), beside its floor"
# The floor: a bare r2r node that only receives the same topics, measured
# over the same window. The bridge has the robot's URDF, so that it can
# measure obstacles in the depth frames (at rest: a few times a second).
# Both subscribe reliable, as the flood publishes: over best effort most
# 640x480 frames are lost on the way and the figures would be for a few.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# A second domain of our own (claimed as the first), so that the flood
# reaches the idle bridge and nothing else.
main_domain="$ROS_DOMAIN_ID"
claim_ros_domain
idle_domain="$ROS_DOMAIN_ID"
export ROS_DOMAIN_ID="$main_domain"
idle_out="$work/idle.out"
reliable_camera=()
for sensor in camera camera_info depth depth_info; do reliable_camera+=(-p "sensors.$sensor.reliability:=reliable"); done
ROS_DOMAIN_ID=$idle_domain "$bin"/aicc-ros2 --listen 127.0.0.1:0 --ros-args -p urdf_file:=urdf/aicc_bot.urdf "${reliable_camera[@]}" > "$idle_out" 2> "$work/idle.err" &
idle=$!
pids+=($idle)
for _ in $(seq 100); do grep -q AICC_READY "$idle_out" 2>/dev/null && break; sleep 0.1; done
idle_port="$(sed -n 's/^AICC_READY .*"port":\([0-9]*\).*/\1/p' "$idle_out")"
exec {idle_agent}<>/dev/tcp/127.0.0.1/"$idle_port"
ROS_DOMAIN_ID=$idle_domain "$bin"/aicc-bench-subscriber --reliable --seconds 16 /camera/image_raw:sensor_msgs/msg/Image /camera/depth/image_raw:sensor_msgs/msg/Image \
  /camera/camera_info:sensor_msgs/msg/CameraInfo /camera/depth/camera_info:sensor_msgs/msg/CameraInfo > "$work/floor.out" &
floor=$!
pids+=($floor)
sleep 1
ROS_DOMAIN_ID=$idle_domain scripts/ros-env python3 sim/tools/camera_flood.py --width 640 --height 480 --hz 30 --seconds 14 --depth-topic /camera/depth/image_raw &
flood=$!
sleep 3
before=$(cpu_ticks "$idle"); floor_before=$(cpu_ticks "$floor"); started=$(date +%s.%N)
sleep 10
after=$(cpu_ticks "$idle"); floor_after=$(cpu_ticks "$floor"); ended=$(date +%s.%N)
wait "$flood" || true
wait "$floor" || true
cat "$work/floor.out"
python3 -c "import os; t=os.sysconf('SC_CLK_TCK'); s=$ended-$started; b=100*($after-$before)/t/s; f=100*($floor_after-$floor_before)/t/s; print(f'idle bridge CPU: {b:.2f} % of one core over {s:.1f} s; floor (bare subscriber, same topics): {f:.2f} %; ratio {b/max(f, 0.01):.1f}x')"
echo "idle bridge RSS: $(( $(awk '/^VmRSS/ {print $2}' "/proc/$idle/status") / 1024 )) MB"
exec {idle_agent}>&-
echo "== operator's console: the bridge's CPU and memory with 0, 1 and 10 pages open (docs/console.md)"
bash scripts/setup-browser.sh
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
console_out="$work/console.out"
AICC_OPERATOR_TOKEN=bench-console-token "$bin"/aicc-ros2 --listen 127.0.0.1:0 --console-listen 127.0.0.1:0 --config config/sim.yaml > "$console_out" 2> "$work/console.err" &
console_bridge=$!
pids+=($console_bridge)
for _ in $(seq 100); do grep -q CONSOLE_READY "$console_out" 2>/dev/null && break; sleep 0.1; done
console_port="$(sed -n 's/^CONSOLE_READY .*"port":\([0-9]*\).*/\1/p' "$console_out")"
[ -n "$console_port" ] || { echo "bridge with console did not start:"; cat "$work/console.err"; exit 1; }
sleep 2
for pages in 0 1 10; do
  window=10
  if [ "$pages" -eq 0 ]; then
    before=$(cpu_ticks "$console_bridge"); started=$(date +%s.%N); sleep "$window"
    after=$(cpu_ticks "$console_bridge"); ended=$(date +%s.%N); seen='{"pages": 0}'
  else
    fifo="$work/pages-$pages.out"
    AICC_OPERATOR_TOKEN=bench-console-token PLAYWRIGHT_CORE="$repo/.deps/browser/node_modules/playwright-core/index.mjs" \
      node tests/console/pages.mjs "http://127.0.0.1:$console_port" "$pages" "$window" > "$fifo" &
    node_pid=$!
    for _ in $(seq 600); do grep -q PAGES_READY "$fifo" 2>/dev/null && break; sleep 0.1; done
    before=$(cpu_ticks "$console_bridge"); started=$(date +%s.%N)
    wait "$node_pid" || true
    after=$(cpu_ticks "$console_bridge"); ended=$(date +%s.%N); seen="$(tail -n 1 "$fifo")"
  fi
  python3 -c "import os, sys; t=os.sysconf('SC_CLK_TCK'); print(f'console, $pages page(s) open: bridge CPU {100*($after-$before)/t/($ended-$started):.2f} % of one core over {$ended-$started:.1f} s, RSS $(( $(rss_kb "$console_bridge") / 1024 )) MB; pages saw: {sys.argv[1]}')" "$seen"
done
