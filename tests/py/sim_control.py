#!/usr/bin/env python3
"""Sends one command to the simulator's /sim_control and returns once the
simulator's subscription has matched and the message is out:

    sim_control.py '{"pause": ["tf"]}'
"""
import sys
import time

import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String


def main(command: str) -> int:
    rclpy.init()
    node = rclpy.create_node("sim_control_client")
    publisher = node.create_publisher(String, "/sim_control", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    deadline = time.monotonic() + 10.0
    while publisher.get_subscription_count() == 0:
        if time.monotonic() > deadline:
            print("the simulator does not subscribe to /sim_control", file=sys.stderr)
            return 1
        time.sleep(0.05)
    publisher.publish(String(data=command))
    # Reliable delivery completes while the writer lives.
    time.sleep(0.5)
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
