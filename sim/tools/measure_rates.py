#!/usr/bin/env python3
"""Measures the simulator's topic rates (and its CPU use, given --pid):

    scripts/ros-env python3 sim/tools/measure_rates.py --seconds 10 --pid <sim pid>

Counts messages per topic over a wall-clock window, reports wall and sim
rates, checks that RGB and depth frames share stamps, and prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import rclpy
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState
from std_msgs.msg import String

TOPICS = {
    "/clock": Clock,
    "/odom": Odometry,
    "/imu": Imu,
    "/joint_states": JointState,
    "/camera/image_raw": Image,
    "/camera/camera_info": CameraInfo,
    "/camera/depth/image_raw": Image,
    "/camera/depth/camera_info": CameraInfo,
    "/ground_truth/odom": Odometry,
    "/ground_truth/world": String,
}
try:
    from ros_gz_interfaces.msg import Contacts

    TOPICS["/bumper"] = Contacts
except ImportError:
    pass


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stamp_s(msg) -> float | None:
    header = getattr(msg, "header", None)
    if header is not None:
        return header.stamp.sec + header.stamp.nanosec * 1e-9
    if isinstance(msg, Clock):
        return msg.clock.sec + msg.clock.nanosec * 1e-9
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0, help="discovery time before counting")
    parser.add_argument("--pid", type=int, help="simulator process id, to measure its CPU use")
    args = parser.parse_args()

    rclpy.init()
    node = rclpy.create_node("aicc_sim_rate_probe")
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    counts = {topic: 0 for topic in TOPICS}
    stamps: dict[str, list[float]] = {topic: [] for topic in TOPICS}
    counting = [False]

    def make_callback(topic):
        def callback(msg):
            if counting[0]:
                counts[topic] += 1
                stamp = stamp_s(msg)
                if stamp is not None:
                    stamps[topic].append(stamp)
        return callback

    for topic, msg_type in TOPICS.items():
        node.create_subscription(msg_type, topic, make_callback(topic), qos)

    end = time.monotonic() + args.warmup
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    counting[0] = True
    cpu_start = cpu_seconds(args.pid) if args.pid else None
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        rclpy.spin_once(node, timeout_sec=0.05)
    wall_s = time.monotonic() - start
    report = {"wall_seconds": round(wall_s, 2), "topics": {}}
    if cpu_start is not None:
        report["sim_cpu_percent_of_one_core"] = round(100 * (cpu_seconds(args.pid) - cpu_start) / wall_s, 1)
    clock = stamps["/clock"]
    if len(clock) > 1:
        report["real_time_factor"] = round((clock[-1] - clock[0]) / wall_s, 3)
    for topic in TOPICS:
        entry = {"count": counts[topic], "wall_hz": round(counts[topic] / wall_s, 1)}
        topic_stamps = stamps[topic]
        if len(topic_stamps) > 1 and topic_stamps[-1] > topic_stamps[0]:
            entry["sim_hz"] = round((len(topic_stamps) - 1) / (topic_stamps[-1] - topic_stamps[0]), 1)
        report["topics"][topic] = entry
    rgb, depth = set(stamps["/camera/image_raw"]), set(stamps["/camera/depth/image_raw"])
    report["rgb_depth_stamps_shared"] = len(rgb & depth)
    report["rgb_frames"] = len(rgb)
    print(json.dumps(report, indent=2))
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
