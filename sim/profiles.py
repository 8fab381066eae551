"""The robots the simulator can impersonate, topic for topic, for the
bridge's shipped profiles (config/sim.yaml, config/turtlebot3.yaml,
config/turtlebot4.yaml):

    scripts/ros-env python3 sim/aicc_sim.py --profile turtlebot3

A profile sets the simulator's topic names (the defaults of its command
line options, which still win when given) and reshapes the bundled robot
description (urdf/aicc_bot.urdf) so that the governor's distances mean
the same as on the real robot: the chassis outline the bridge's footprint
keys describe, the LiDAR where the robot carries it (its frame name, pose
and range), the parts the robot lacks left without a controller.

What stays of the bundled robot, and why: the pan-tilt head and the arm
remain in the model (their joints still appear in joint_states) but a
profile without them serves no action for them, so the bridge, whose
profile names no such controller, offers no tool for them. The room
(sim/world.py) is the same for every profile.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Profile:
    name: str
    # Command-line defaults (option dest -> value).
    defaults: dict = field(default_factory=dict)
    # Chassis box (size x, y, z; centre x) replacing the bundled one; None keeps it.
    chassis_box: tuple | None = None
    # A round chassis (radius, height) instead of a box.
    chassis_cylinder: tuple | None = None
    # LiDAR link name, pose in base_link (x, y, z, yaw) and range (min, max, samples, rate).
    lidar: tuple | None = None
    # Controllers not served ("head", "arm", "gripper").
    without: tuple = ()
    # Publish sensor_msgs/BatteryState on this topic ("" = none).
    battery_topic: str = ""
    # Where irobot_create_msgs/HazardDetectionVector goes when relayed
    # (--relay-hazards: the TurtleBot 4's republisher does not by default).
    hazards_topic: str = ""
    # Whether the robot has a depth image as it ships (--depth adds one).
    depth: bool = True
    # Depth image encoding: "32FC1" (m) or "16UC1" (mm, as the OAK-D's stereo).
    depth_encoding: str = "32FC1"
    # The velocity subscription's QoS: reliability and depth (TurtleBot 3 on
    # Jazzy: reliable, 10; the TurtleBot 4's republisher: best effort, 1).
    cmd_vel_qos: tuple = ("best_effort", 10)


# The TurtleBots spawn 0.25 m to the right of the bundled robot's spawn: the
# pedestal beside that spawn (within reach of the bundled arm) would
# otherwise stand inside their wider corridors, and the red box 1.5 m ahead
# stays inside them. (--y still overrides.)
SPAWN_Y_M = -0.25

PROFILES = {
    "sim": Profile("sim"),
    # TurtleBot3 Waffle Pi with OpenMANIPULATOR-X (turtlebot3_manipulation):
    # base_link 0.010 m above base_footprint; chassis 0.281 x 0.306 m centred
    # 0.064 m behind the axle (nav2's footprint: 0.077 ahead, 0.205 behind,
    # 0.155 each side); LDS on base_scan at (-0.064, 0, 0.122) of base_link,
    # 0.12..3.5 m, 360 beams, 5 Hz; no bumper; no head.
    "turtlebot3": Profile(
        "turtlebot3",
        # Jazzy: TwistStamped on cmd_vel (turtlebot3_bringup's
        # enable_stamped_cmd_vel), subscribed reliable, depth 10.
        defaults={"bumper_topic": "", "y": SPAWN_Y_M, "cmd_vel_stamped": True},
        chassis_box=((0.282, 0.31, 0.10), -0.064),
        lidar=("base_scan", (-0.064, 0.0, 0.099, 0.0), (0.12, 3.5, 360, 5.0)),
        without=("head",),
        battery_topic="/battery_state",
        cmd_vel_qos=("reliable", 10),
        # The Pi camera only: no depth camera in the current TurtleBot 3 software.
        depth=False,
    ),
    # TurtleBot4 (standard) on Jazzy: Create 3 base, round, 0.342 m across;
    # RPLIDAR A1 on rplidar_link, mounted turned 90 degrees, 0.15..12 m, 720
    # beams (0.5 degree), ~7.6 Hz; the OAK-D's 250x250 RGB preview and no
    # depth (with --depth: stereo depth in mm); hazard_detection only when
    # relayed (--relay-hazards); no head, arm or gripper.
    "turtlebot4": Profile(
        "turtlebot4",
        defaults={
            "bumper_topic": "",
            "y": SPAWN_Y_M,
            "rgb_topic": "/oakd/rgb/preview/image_raw",
            "rgb_info_topic": "/oakd/rgb/preview/camera_info",
            "depth_topic": "/oakd/stereo/image_raw",
            "depth_info_topic": "/oakd/stereo/camera_info",
            # The OAK-D's RGB preview as turtlebot4_bringup configures it.
            "width": 250,
            "height": 250,
            # Jazzy: the Create 3 republisher subscribes TwistStamped on
            # cmd_vel (Twist is cmd_vel_unstamped), best effort, depth 1.
            "cmd_vel_stamped": True,
        },
        chassis_cylinder=(0.171, 0.09),
        lidar=("rplidar_link", (-0.04, 0.0, 0.157, math.pi / 2), (0.15, 12.0, 720, 7.6)),
        without=("head", "arm", "gripper"),
        battery_topic="/battery_state",
        hazards_topic="/hazard_detection",
        depth_encoding="16UC1",
        cmd_vel_qos=("best_effort", 1),
        # RGB-only pipeline by default (oakd_pro.yaml): --depth is a robot
        # whose user enabled the RGBD one.
        depth=False,
    ),
}


def reshape_urdf(text: str, profile: Profile) -> str:
    """The bundled URDF reshaped for `profile` (unchanged for "sim")."""
    if profile.chassis_box is None and profile.chassis_cylinder is None and profile.lidar is None:
        return text
    root = ET.fromstring(text)
    base = next(link for link in root.findall("link") if link.get("name") == "base_link")
    for part in list(base):
        if part.tag in ("visual", "collision") and (part.get("name") or "").startswith("chassis"):
            origin, geometry = part.find("origin"), part.find("geometry")
            for child in list(geometry):
                geometry.remove(child)
            if profile.chassis_box is not None:
                (sx, sy, sz), cx = profile.chassis_box
                ET.SubElement(geometry, "box", size=f"{sx} {sy} {sz}")
                origin.set("xyz", f"{cx} 0 {sz / 2 - 0.005}")
            else:
                radius, height = profile.chassis_cylinder
                ET.SubElement(geometry, "cylinder", radius=str(radius), length=str(height))
                origin.set("xyz", f"0 0 {height / 2 - 0.005}")
    # The bumper and the front caster move inside the new outline.
    front = profile.chassis_box[0][0] / 2 + profile.chassis_box[1] if profile.chassis_box else profile.chassis_cylinder[0]
    bumper_width = 0.22 if profile.chassis_box else 0.12
    for joint in root.findall("joint"):
        origin = joint.find("origin")
        if joint.get("name") == "bumper_joint":
            origin.set("xyz", f"{front - 0.01:.4f} 0 0.01")
        if joint.get("name") == "caster_front_joint":
            origin.set("xyz", f"{min(0.10, front - 0.03):.4f} 0 -0.015")
    for link in root.findall("link"):
        if link.get("name") == "bumper_link":
            for box in link.iter("box"):
                box.set("size", f"0.02 {bumper_width} 0.05")
    if profile.lidar is not None:
        link_name, (x, y, z, yaw), (range_min, range_max, samples, rate) = profile.lidar
        for joint in root.findall("joint"):
            if joint.get("name") == "scan_joint":
                joint.find("child").set("link", link_name)
                joint.find("origin").set("xyz", f"{x} {y} {z}")
                joint.find("origin").set("rpy", f"0 0 {yaw}")
        for link in root.findall("link"):
            if link.get("name") == "base_scan":
                link.set("name", link_name)
        for gazebo in root.findall("gazebo"):
            if gazebo.get("reference") == "base_scan":
                gazebo.set("reference", link_name)
                sensor = gazebo.find("sensor")
                sensor.find("update_rate").text = str(rate)
                sensor.find("ray/scan/horizontal/samples").text = str(samples)
                sensor.find("ray/range/min").text = str(range_min)
                sensor.find("ray/range/max").text = str(range_max)
    return ET.tostring(root, encoding="unicode")
