"""Message filling for the simulator's sensor topics. Messages are created
once and refilled, which keeps the Python cost per publish low."""

from __future__ import annotations

import array
import math

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Vector3
from nav_msgs.msg import Odometry
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState

try:
    from ros_gz_interfaces.msg import Contact as GzContact
    from ros_gz_interfaces.msg import Contacts as GzContacts
    from ros_gz_interfaces.msg import Entity as GzEntity
    from ros_gz_interfaces.msg import JointWrench as GzJointWrench
    ROS_GZ_IMPORT_ERROR = None
except ImportError as error:  # built from IDL by scripts/build-interfaces.sh
    GzContact = GzContacts = GzEntity = GzJointWrench = None
    ROS_GZ_IMPORT_ERROR = error

# Unmeasured components of a planar robot's odometry get a huge variance.
UNKNOWN_VARIANCE = 1e6


def to_time(t_s: float) -> Time:
    sec = int(math.floor(t_s))
    return Time(sec=sec, nanosec=min(int(round((t_s - sec) * 1e9)), 999_999_999))


def diagonal_covariance(values: list[float]) -> list[float]:
    n = len(values)
    out = [0.0] * (n * n)
    for i, value in enumerate(values):
        out[i * n + i] = value
    return out


def set_quaternion(target, quat_wxyz) -> None:
    target.w, target.x, target.y, target.z = (float(v) for v in quat_wxyz)


def set_vector(target, xyz) -> None:
    target.x, target.y, target.z = (float(v) for v in xyz)


def yaw_quaternion_wxyz(yaw_rad: float) -> tuple[float, float, float, float]:
    return (math.cos(yaw_rad / 2), 0.0, 0.0, math.sin(yaw_rad / 2))


class OdometryMessage:
    def __init__(self, frame_id: str, child_frame_id: str, pose_variances: list[float], twist_variances: list[float]):
        self.msg = Odometry()
        self.msg.header.frame_id = frame_id
        self.msg.child_frame_id = child_frame_id
        self.msg.pose.covariance = diagonal_covariance(pose_variances)
        self.msg.twist.covariance = diagonal_covariance(twist_variances)

    def fill(self, stamp: Time, position_m, quat_wxyz, linear_m_s, angular_rad_s) -> Odometry:
        msg = self.msg
        msg.header.stamp = stamp
        set_vector(msg.pose.pose.position, position_m)
        set_quaternion(msg.pose.pose.orientation, quat_wxyz)
        set_vector(msg.twist.twist.linear, linear_m_s)
        set_vector(msg.twist.twist.angular, angular_rad_s)
        return msg


class ImuMessage:
    def __init__(self, frame_id: str, gyro_stddev: float, accel_stddev: float):
        self.msg = Imu()
        self.msg.header.frame_id = frame_id
        # Orientation comes from the simulator, exact up to integration error.
        self.msg.orientation_covariance = diagonal_covariance([1e-6] * 3)
        self.msg.angular_velocity_covariance = diagonal_covariance([max(gyro_stddev ** 2, 1e-8)] * 3)
        self.msg.linear_acceleration_covariance = diagonal_covariance([max(accel_stddev ** 2, 1e-6)] * 3)

    def fill(self, stamp: Time, quat_wxyz, gyro_rad_s, accel_m_s2) -> Imu:
        msg = self.msg
        msg.header.stamp = stamp
        set_quaternion(msg.orientation, quat_wxyz)
        set_vector(msg.angular_velocity, gyro_rad_s)
        set_vector(msg.linear_acceleration, accel_m_s2)
        return msg


class JointStateMessage:
    def __init__(self, names: list[str]):
        self.msg = JointState()
        self.msg.name = list(names)

    def fill(self, stamp: Time, positions, velocities, efforts) -> JointState:
        msg = self.msg
        msg.header.stamp = stamp
        msg.position = array.array("d", positions)
        msg.velocity = array.array("d", velocities)
        msg.effort = array.array("d", efforts)
        return msg


class CameraMessages:
    """rgb8 image, 32FC1 depth image (metres) and their CameraInfo, with one
    stamp per frame."""

    def __init__(self, frame_id: str, intrinsics):
        self.rgb = Image(encoding="rgb8", is_bigendian=0)
        self.depth = Image(encoding="32FC1", is_bigendian=0)
        self.info = CameraInfo()
        for msg in (self.rgb, self.depth, self.info):
            msg.header.frame_id = frame_id
            msg.width, msg.height = intrinsics.width_px, intrinsics.height_px
        self.rgb.step = 3 * intrinsics.width_px
        self.depth.step = 4 * intrinsics.width_px
        self.info.distortion_model = "plumb_bob"
        self.info.d = [0.0] * 5
        self.info.k = intrinsics.k()
        self.info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        self.info.p = intrinsics.p()

    def fill(self, stamp: Time, rgb: np.ndarray, depth_m: np.ndarray):
        for msg in (self.rgb, self.depth, self.info):
            msg.header.stamp = stamp
        # array.array from bytes is a memcpy; the message setter accepts it as is.
        self.rgb.data = array.array("B", rgb.tobytes())
        self.depth.data = array.array("B", depth_m.astype("<f4", copy=False).tobytes())
        return self.rgb, self.depth, self.info


def contacts_message(stamp: Time, frame_id: str, contacts, robot_model: str):
    """ros_gz_interfaces/Contacts: one Contact per touching geom pair, with
    every contact point of that pair (world frame)."""
    msg = GzContacts()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    by_pair: dict[tuple[str, str], list] = {}
    for contact in contacts:
        by_pair.setdefault((contact.geom, contact.other), []).append(contact)
    for points in by_pair.values():
        first = points[0]
        entry = GzContact()
        # Gazebo names collisions model::link::collision.
        entry.collision1 = GzEntity(name=f"{robot_model}::{first.geom_body}::{first.geom}", type=GzEntity.COLLISION)
        entry.collision2 = GzEntity(name=f"{first.other_body}::{first.other}", id=first.other_id,
                                    type=GzEntity.COLLISION)
        for point in points:
            position, normal = point.position_m, point.normal
            entry.positions.append(_vector3(position))
            entry.normals.append(_vector3(normal))
            entry.depths.append(point.depth_m)
            wrench = GzJointWrench()
            wrench.header = msg.header
            wrench.body_1_name.data = first.geom_body
            wrench.body_2_name.data = first.other_body
            set_vector(wrench.body_1_wrench.force, point.force_n)
            set_vector(wrench.body_2_wrench.force, -point.force_n)
            entry.wrenches.append(wrench)
        msg.contacts.append(entry)
    return msg


def _vector3(xyz) -> Vector3:
    return Vector3(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))
