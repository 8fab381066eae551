#!/usr/bin/env python3
"""Drives the simulated robot through /cmd_vel and compares wheel odometry
with ground truth:

    scripts/ros-env python3 sim/tools/drive_check.py [--speed 0.2 --duration 2.5 --turn 0]

Commands (speed, turn) for `duration` seconds of sim time, then zero, waits
for the robot to stop, and prints the distance travelled according to
/ground_truth/odom and /odom, and their difference, as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import rclpy
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy


def yaw_of(q) -> float:
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


def planar(msg: Odometry) -> tuple[float, float, float, float]:
    p = msg.pose.pose.position
    stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
    return p.x, p.y, yaw_of(msg.pose.pose.orientation), stamp


def wrap(angle: float) -> float:
    return math.atan2(math.sin(angle), math.cos(angle))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed", type=float, default=0.2, help="m/s")
    parser.add_argument("--turn", type=float, default=0.0, help="rad/s")
    parser.add_argument("--duration", type=float, default=2.5, help="sim seconds")
    parser.add_argument("--settle", type=float, default=1.0, help="sim seconds after the stop command")
    args = parser.parse_args()

    rclpy.init()
    node = rclpy.create_node("aicc_drive_check")
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    latest: dict[str, Odometry] = {}
    node.create_subscription(Odometry, "/odom", lambda m: latest.__setitem__("odom", m), qos)
    node.create_subscription(Odometry, "/ground_truth/odom", lambda m: latest.__setitem__("truth", m), qos)
    cmd = node.create_publisher(Twist, "/cmd_vel", qos)

    deadline = time.monotonic() + 20
    while (len(latest) < 2 or cmd.get_subscription_count() == 0) and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    if len(latest) < 2:
        raise SystemExit("no /odom or /ground_truth/odom: is the simulator running?")
    # Matching is two-sided: give the simulator's side time to match our
    # publisher too, or the first commands are lost.
    settle_until = time.monotonic() + 0.5
    while time.monotonic() < settle_until:
        rclpy.spin_once(node, timeout_sec=0.05)
    start_truth, start_odom = planar(latest["truth"]), planar(latest["odom"])

    def sim_now() -> float:
        return planar(latest["truth"])[3]

    def command(linear: float, angular: float, until_sim_s: float) -> None:
        twist = Twist()
        twist.linear.x, twist.angular.z = linear, angular
        next_send = 0.0
        while sim_now() < until_sim_s:
            if time.monotonic() >= next_send:
                cmd.publish(twist)
                next_send = time.monotonic() + 0.05
            rclpy.spin_once(node, timeout_sec=0.01)

    t0 = sim_now()
    command(args.speed, args.turn, t0 + args.duration)
    command(0.0, 0.0, t0 + args.duration + args.settle)
    end_truth, end_odom = planar(latest["truth"]), planar(latest["odom"])

    # Odometry starts at the spawn pose's origin; compare motions in the
    # robot's start frame.
    def motion(start, end):
        dx, dy = end[0] - start[0], end[1] - start[1]
        c, s = math.cos(start[2]), math.sin(start[2])
        return c * dx + s * dy, -s * dx + c * dy, wrap(end[2] - start[2])

    truth_motion, odom_motion = motion(start_truth, end_truth), motion(start_odom, end_odom)
    report = {
        "command": {"linear_m_s": args.speed, "angular_rad_s": args.turn, "duration_s": args.duration},
        "truth": {"forward_m": truth_motion[0], "left_m": truth_motion[1], "yaw_rad": truth_motion[2],
                  "distance_m": math.hypot(*truth_motion[:2])},
        "odom": {"forward_m": odom_motion[0], "left_m": odom_motion[1], "yaw_rad": odom_motion[2],
                 "distance_m": math.hypot(*odom_motion[:2])},
        "odom_error_m": math.hypot(truth_motion[0] - odom_motion[0], truth_motion[1] - odom_motion[1]),
        "odom_yaw_error_rad": wrap(truth_motion[2] - odom_motion[2]),
    }
    print(json.dumps(report, indent=2))
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
