"""The transforms a ROS bringup publishes for the robot: what
robot_state_publisher does from the URDF and the joint states (fixed joints
once on /tf_static, movable joints on /tf), plus the odometry transform
(odom -> base) that a diff-drive controller publishes, and the URDF itself
on robot_description."""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import TransformStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ros_publishers import set_quaternion, set_vector, yaw_quaternion_wxyz
from urdf_model import Joint, Robot

try:
    from tf2_msgs.msg import TFMessage
    TF2_IMPORT_ERROR = None
except ImportError as error:  # built from IDL by scripts/build-interfaces.sh
    TFMessage = None
    TF2_IMPORT_ERROR = error

# As robot_state_publisher: /tf best kept reliable, /tf_static and
# robot_description latched for late subscribers.
TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def axis_angle_quat_wxyz(axis, angle_rad: float) -> tuple[float, float, float, float]:
    x, y, z = (float(v) for v in axis)
    norm = math.sqrt(x * x + y * y + z * z) or 1.0
    s = math.sin(angle_rad / 2) / norm
    return (math.cos(angle_rad / 2), x * s, y * s, z * s)


def quat_multiply(a, b) -> tuple[float, float, float, float]:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw)


def joint_transform(joint: Joint, position: float) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """The child's pose in the parent frame at `position`: origin, then the joint's motion."""
    origin = joint.origin.matrix()
    quat = tuple(float(v) for v in joint.origin.quat_wxyz())
    xyz = origin[:3, 3].copy()
    if joint.type in ("revolute", "continuous"):
        quat = quat_multiply(quat, axis_angle_quat_wxyz(joint.axis, position))
    elif joint.type == "prismatic":
        xyz = xyz + origin[:3, :3] @ (np.asarray(joint.axis, dtype=float) * position)
    return xyz, quat


class TfPublisher:
    """Publishes /tf_static once, then /tf at each call of `publish`."""

    def __init__(self, node, robot: Robot, urdf_text: str, odom_frame: str, omit_frames: list[str],
                 tf_topic: str = "/tf", static_topic: str = "/tf_static", description_topic: str = "/robot_description"):
        self.robot = robot
        self.odom_frame = odom_frame
        omitted = set(omit_frames)
        self.fixed = [j for j in robot.joints.values() if not j.movable and j.child not in omitted]
        self.moving = [j for j in robot.joints.values() if j.movable and j.child not in omitted]
        self.enabled = TFMessage is not None
        self.pub_description = node.create_publisher(String, description_topic, LATCHED_QOS)
        self.pub_description.publish(String(data=urdf_text))
        if not self.enabled:
            node.get_logger().warning(f"tf2_msgs unavailable ({TF2_IMPORT_ERROR}): no {tf_topic}, {static_topic}")
            return
        self.pub_tf = node.create_publisher(TFMessage, tf_topic, TF_QOS)
        self.pub_static = node.create_publisher(TFMessage, static_topic, LATCHED_QOS)
        self.static_published = False

    @staticmethod
    def _transform(stamp, parent: str, child: str, xyz, quat_wxyz) -> TransformStamped:
        t = TransformStamped()
        t.header.stamp = stamp
        t.header.frame_id = parent
        t.child_frame_id = child
        set_vector(t.transform.translation, xyz)
        set_quaternion(t.transform.rotation, quat_wxyz)
        return t

    def publish(self, stamp, positions: dict[str, float], odometry) -> None:
        """One /tf message: odom -> root from `odometry`, each movable joint at `positions`."""
        if not self.enabled:
            return
        if not self.static_published:
            self.pub_static.publish(TFMessage(transforms=[
                self._transform(stamp, j.parent, j.child, *joint_transform(j, 0.0)) for j in self.fixed]))
            self.static_published = True
        transforms = [self._transform(stamp, self.odom_frame, self.robot.root_link, (odometry.x_m, odometry.y_m, 0.0),
                                      yaw_quaternion_wxyz(odometry.yaw_rad))]
        for joint in self.moving:
            transforms.append(self._transform(stamp, joint.parent, joint.child,
                                              *joint_transform(joint, positions.get(joint.name, 0.0))))
        self.pub_tf.publish(TFMessage(transforms=transforms))
