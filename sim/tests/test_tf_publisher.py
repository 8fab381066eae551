"""The simulator's transforms, without ROS traffic: composing the /tf and
/tf_static edges gives the URDF's link poses, at rest and with a joint moved."""

import math

import numpy as np

from tf_publisher import joint_transform
from urdf_model import parse_urdf, rpy_to_matrix

from conftest import URDF_PATH


def quat_matrix(wxyz) -> np.ndarray:
    w, x, y, z = wxyz
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def chain(robot, link: str, ancestor: str, positions: dict) -> np.ndarray:
    """link's pose in ancestor, composed from the published edges."""
    pose = np.eye(4)
    while link != ancestor:
        joint = next(j for j in robot.joints.values() if j.child == link)
        xyz, quat = joint_transform(joint, positions.get(joint.name, 0.0))
        edge = np.eye(4)
        edge[:3, :3] = quat_matrix(quat)
        edge[:3, 3] = xyz
        pose = edge @ pose
        link = joint.parent
    return pose


def test_edges_at_rest_compose_to_the_urdf_poses():
    robot = parse_urdf(URDF_PATH)
    for link in ("camera_optical_frame", "imu_link", "bumper_link", "end_effector_link"):
        expected = robot.link_pose_in(link, robot.root_link)
        assert np.allclose(chain(robot, link, robot.root_link, {}), expected, atol=1e-9), link


def test_a_revolute_joint_turns_about_its_axis():
    robot = parse_urdf(URDF_PATH)
    pan = robot.joints["head_pan_joint"]
    turned = chain(robot, "camera_optical_frame", robot.root_link, {"head_pan_joint": math.pi / 2})
    rest = chain(robot, "camera_optical_frame", robot.root_link, {})
    # The pan axis is the base's z: the optical axis (camera +z) turns by +90 degrees about z.
    assert np.allclose(np.asarray(pan.axis, dtype=float), [0.0, 0.0, 1.0])
    assert np.allclose(rpy_to_matrix(0.0, 0.0, math.pi / 2) @ rest[:3, 2], turned[:3, 2], atol=1e-9)
    assert not np.allclose(rest[:3, 3], turned[:3, 3]), "the camera sits off the pan axis"
