#!/usr/bin/env python3
"""Publishes synthetic camera frames (rgb8), and with --depth-topic depth
frames (16UC1, millimetres) of the same size, at a fixed rate, for
measuring what an idle bridge costs beside a busy camera (scripts/bench.sh):

    scripts/ros-env python3 sim/tools/camera_flood.py --width 640 --height 480 --hz 30 --seconds 12 \
        --depth-topic /camera/depth/image_raw
"""
import argparse
import time

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", default="/camera/image_raw")
    parser.add_argument("--depth-topic", default="", help="also publish depth here (\"\": no depth)")
    parser.add_argument("--frame-id", default="camera_optical_frame", help="both images' frame")
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
    message.header.frame_id = args.frame_id
    # Each image's camera_info beside it, as camera drivers publish it
    # (the bridge measures obstacles in depth only with its intrinsics).
    focal = args.width / 2.0
    info = CameraInfo(width=args.width, height=args.height, distortion_model="plumb_bob", d=[0.0] * 5,
                      k=[focal, 0.0, args.width / 2.0, 0.0, focal, args.height / 2.0, 0.0, 0.0, 1.0])
    info.header.frame_id = args.frame_id
    info_publishers = [node.create_publisher(CameraInfo, args.topic.rsplit("/", 1)[0] + "/camera_info", 5)]
    depth_publisher = None
    if args.depth_topic:
        depth_publisher = node.create_publisher(Image, args.depth_topic, QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE))
        # A floor receding from 0.5 m at the bottom row to 4.5 m at the top.
        rows = np.linspace(4500, 500, args.height, dtype=np.uint16)
        depth_mm = np.repeat(rows[:, None], args.width, axis=1).astype("<u2").tobytes()
        depth_message = Image(width=args.width, height=args.height, encoding="16UC1", step=args.width * 2, data=depth_mm)
        depth_message.header.frame_id = args.frame_id
        info_publishers.append(node.create_publisher(CameraInfo, args.depth_topic.rsplit("/", 1)[0] + "/camera_info", 5))
    period_s = 1.0 / args.hz
    deadline = time.monotonic() + args.seconds
    next_at = time.monotonic()
    sent = 0
    while time.monotonic() < deadline:
        message.header.stamp = node.get_clock().now().to_msg()
        publisher.publish(message)
        info.header.stamp = message.header.stamp
        for info_publisher in info_publishers:
            info_publisher.publish(info)
        if depth_publisher is not None:
            depth_message.header.stamp = message.header.stamp
            depth_publisher.publish(depth_message)
        sent += 1
        next_at += period_s
        time.sleep(max(0.0, next_at - time.monotonic()))
    also = " (and as many depth frames)" if depth_publisher is not None else ""
    print(f"published {sent} frames of {args.width}x{args.height}{also} in {args.seconds:.0f} s ({sent / args.seconds:.1f} Hz)")
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
