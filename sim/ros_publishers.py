"""Message filling for the simulator's sensor topics. Messages are created
once and refilled, which keeps the Python cost per publish low."""

from __future__ import annotations

import array
import math

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Vector3
from nav_msgs.msg import Odometry
from sensor_msgs.msg import BatteryState, CameraInfo, Image, Imu, JointState, LaserScan

try:
    from irobot_create_msgs.msg import HazardDetection, HazardDetectionVector
    CREATE_IMPORT_ERROR = None
except ImportError as error:  # built by scripts/build-interfaces.sh
    HazardDetection = HazardDetectionVector = None
    CREATE_IMPORT_ERROR = error
HAZARD_BUMP = 1

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

    def __init__(self, frame_id: str, intrinsics, depth_encoding: str = "32FC1"):
        self.rgb = Image(encoding="rgb8", is_bigendian=0)
        self.depth = Image(encoding=depth_encoding, is_bigendian=0)
        self.depth_encoding = depth_encoding
        self.info = CameraInfo()
        for msg in (self.rgb, self.depth, self.info):
            msg.header.frame_id = frame_id
            msg.width, msg.height = intrinsics.width_px, intrinsics.height_px
        self.rgb.step = 3 * intrinsics.width_px
        self.depth.step = (4 if depth_encoding == "32FC1" else 2) * intrinsics.width_px
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
        if self.depth_encoding == "16UC1":
            # Millimetres; 0 = no reading (REP-118), as depth drivers publish it.
            mm = np.where(np.isfinite(depth_m), np.clip(depth_m * 1000.0, 0, 65535), 0).astype("<u2")
            self.depth.data = array.array("B", mm.tobytes())
        else:
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


def laser_scan_message(stamp: Time, spec, ranges) -> LaserScan:
    """A sensor_msgs/LaserScan of `ranges` (m) from the scanner `spec` (lidar.LidarSpec)."""
    msg = LaserScan()
    msg.header.stamp = stamp
    msg.header.frame_id = spec.link
    msg.angle_min = float(spec.angle_min_rad)
    msg.angle_increment = float(spec.angle_increment_rad)
    msg.angle_max = float(spec.angle_min_rad + spec.angle_increment_rad * (len(ranges) - 1))
    msg.scan_time = float(1.0 / spec.update_rate_hz)
    msg.time_increment = float(msg.scan_time / max(len(ranges), 1))
    msg.range_min = float(spec.range_min_m)
    msg.range_max = float(spec.range_max_m)
    msg.ranges = array.array("f", np.asarray(ranges, dtype=np.float32).tobytes())
    return msg


def battery_message(stamp: Time) -> BatteryState:
    """A steady, discharging-free battery (90 %), as a docked-but-driving robot reports."""
    msg = BatteryState()
    msg.header.stamp = stamp
    msg.voltage = 14.4
    msg.percentage = 0.9
    msg.power_supply_status = 2  # discharging
    msg.present = True
    return msg


def hazards_message(stamp: Time, hazards) -> "HazardDetectionVector":
    """irobot_create_msgs/HazardDetectionVector of (type, sensor frame) pairs."""
    msg = HazardDetectionVector()
    msg.header.stamp = stamp
    msg.header.frame_id = "base_link"
    for kind, frame_id in hazards:
        detection = HazardDetection()
        detection.header.stamp = stamp
        detection.header.frame_id = frame_id
        detection.type = kind
        msg.detections.append(detection)
    return msg
