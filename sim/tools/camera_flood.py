#!/usr/bin/env python3
"""Publishes synthetic camera frames (rgb8) at a fixed rate, for measuring
what an idle bridge costs beside a busy camera (scripts/bench.sh):

    scripts/ros-env python3 sim/tools/camera_flood.py --width 640 --height 480 --hz 30 --seconds 12
"""
import argparse
import time

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", default="/camera/image_raw")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--hz", type=float, default=30.0)
    parser.add_argument("--seconds", type=float, default=12.0)
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node("camera_flood")
    publisher = node.create_publisher(Image, args.topic, QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE))
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 255, size=(args.height, args.width, 3), dtype=np.uint8).tobytes()
    message = Image(width=args.width, height=args.height, encoding="rgb8", step=args.width * 3, data=frame)
    message.header.frame_id = "camera_optical_frame"
    period_s = 1.0 / args.hz
    deadline = time.monotonic() + args.seconds
    next_at = time.monotonic()
    sent = 0
    while time.monotonic() < deadline:
        message.header.stamp = node.get_clock().now().to_msg()
        publisher.publish(message)
        sent += 1
        next_at += period_s
        time.sleep(max(0.0, next_at - time.monotonic()))
    print(f"published {sent} frames of {args.width}x{args.height} in {args.seconds:.0f} s ({sent / args.seconds:.1f} Hz)")
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
