#!/usr/bin/env python3
"""Saves one RGB frame and one depth frame from the running simulator as PNGs:

    scripts/ros-env python3 sim/tools/snapshot.py [--out /tmp/aicc] [--camera-ns /camera]

Writes <out>_rgb.png and <out>_depth.png (near = bright, +inf = black) and
prints the depth at the image centre.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from png import depth_to_grey, write_png  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="/tmp/aicc")
    parser.add_argument("--camera-ns", default="/camera")
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()

    rclpy.init()
    node = rclpy.create_node("aicc_snapshot")
    frames: dict[str, Image] = {}
    qos = QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(Image, f"{args.camera_ns}/image_raw", lambda m: frames.__setitem__("rgb", m), qos)
    node.create_subscription(Image, f"{args.camera_ns}/depth/image_raw", lambda m: frames.__setitem__("depth", m), qos)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        if len(frames) == 2 and frames["rgb"].header.stamp == frames["depth"].header.stamp:
            break
    else:
        raise SystemExit("no matching RGB and depth frames: is the simulator running?")
    rgb_msg, depth_msg = frames["rgb"], frames["depth"]
    rgb = np.frombuffer(bytes(rgb_msg.data), np.uint8).reshape(rgb_msg.height, rgb_msg.width, 3)
    depth_m = np.frombuffer(bytes(depth_msg.data), "<f4").reshape(depth_msg.height, depth_msg.width)
    write_png(f"{args.out}_rgb.png", rgb)
    write_png(f"{args.out}_depth.png", depth_to_grey(depth_m))
    h, w = depth_m.shape
    print(f"saved {args.out}_rgb.png and {args.out}_depth.png; centre depth "
          f"{depth_m[h // 2, w // 2]:.3f} m; +inf pixels {np.isinf(depth_m).mean():.1%}")
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
