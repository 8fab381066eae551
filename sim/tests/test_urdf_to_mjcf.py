"""The URDF -> MJCF converter carries names, limits and frames over."""

import math
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

import urdf_to_mjcf
import world
from urdf_model import parse_urdf

EXPECTED_MOVABLE = {
    "wheel_left_joint", "wheel_right_joint", "head_pan_joint", "head_tilt_joint",
    "joint1", "joint2", "joint3", "joint4", "gripper_left_joint", "gripper_right_joint",
}


@pytest.fixture(scope="module")
def model(robot):
    return world.build_model(robot)


def test_urdf_has_the_agreed_links_and_joints(robot):
    assert robot.name == "aicc_bot"
    assert robot.root_link == "base_footprint"
    assert {j.name for j in robot.movable_joints()} == EXPECTED_MOVABLE
    for link in ("base_link", "imu_link", "bumper_link", "camera_link", "camera_optical_frame", "end_effector_link"):
        assert link in robot.links
    assert robot.joints["gripper_right_joint"].mimic.joint == "gripper_left_joint"
    for joint in robot.movable_joints():
        assert joint.effort > 0 and joint.velocity > 0, joint.name
        if joint.type != "continuous":
            assert joint.lower < joint.upper, joint.name


def test_every_physical_link_has_visual_collision_inertial(robot):
    frames = {"base_footprint", "camera_link", "camera_optical_frame", "end_effector_link", "base_scan"}
    for name, link in robot.links.items():
        if name in frames:
            continue
        assert link.visuals and link.collisions and link.inertial, name
        assert link.inertial.mass_kg > 0


def test_robot_mass_and_wheel_geometry_are_turtlebot_class(robot, model):
    from urdf_model import diff_drive_geometry

    radius_m, separation_m = diff_drive_geometry(robot, "wheel_left_joint", "wheel_right_joint")
    assert 0.033 <= radius_m <= 0.04
    assert 0.16 <= separation_m <= 0.29
    total_mass_kg = model.body_subtreemass[model.body("base_footprint").id]
    assert 1.5 < total_mass_kg < 5.0


def test_joint_names_and_limits_carry_over(robot, model):
    for joint in robot.movable_joints():
        mj_joint = model.joint(joint.name)
        expected_type = mujoco.mjtJoint.mjJNT_SLIDE if joint.type == "prismatic" else mujoco.mjtJoint.mjJNT_HINGE
        assert mj_joint.type[0] == expected_type
        np.testing.assert_allclose(mj_joint.axis, joint.axis)
        if joint.type == "continuous":
            assert mj_joint.limited[0] == 0
        else:
            assert mj_joint.limited[0] == 1
            np.testing.assert_allclose(mj_joint.range, [joint.lower, joint.upper])
        assert mj_joint.damping[0] == pytest.approx(joint.damping)


def test_actuators_are_force_limited_to_urdf_effort(robot, model):
    for joint in robot.movable_joints():
        if joint.mimic is not None:
            assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, joint.name) == -1
            continue
        actuator = model.actuator(joint.name)
        assert actuator.forcelimited[0] == 1
        np.testing.assert_allclose(actuator.forcerange, [-joint.effort, joint.effort])
        np.testing.assert_allclose(model.jnt_actfrcrange[model.joint(joint.name).id], [-joint.effort, joint.effort])
    wheel = model.actuator("wheel_left_joint")
    # velocity actuator: gain kv, bias -kv * qvel
    assert wheel.gainprm[0] > 0 and wheel.biasprm[2] == pytest.approx(-wheel.gainprm[0])
    np.testing.assert_allclose(wheel.ctrlrange, [-8.0, 8.0])
    arm = model.actuator("joint2")
    assert arm.biasprm[1] == pytest.approx(-arm.gainprm[0])  # position actuator
    np.testing.assert_allclose(arm.ctrlrange, [robot.joints["joint2"].lower, robot.joints["joint2"].upper])


def test_mimic_becomes_an_equality(model):
    eq = model.eq("gripper_right_joint_mimic")
    assert eq.type[0] == mujoco.mjtEq.mjEQ_JOINT
    assert model.joint(eq.obj1id[0]).name == "gripper_right_joint"
    assert model.joint(eq.obj2id[0]).name == "gripper_left_joint"
    np.testing.assert_allclose(eq.data[:2], [0.0, 1.0])


def test_caster_is_frictionless_and_wheels_grip(model):
    caster = model.geom("caster_back_collision")
    assert caster.condim[0] == 1 and caster.priority[0] >= 1
    wheel = model.geom("wheel_left_collision")
    assert wheel.friction[0] == pytest.approx(1.0) and wheel.priority[0] >= 1


def test_frames_match_the_urdf_at_zero_pose(robot, model):
    data = mujoco.MjData(model)
    for name in ("joint1", "joint2", "joint3", "joint4", "head_pan_joint", "head_tilt_joint"):
        data.qpos[model.joint(name).qposadr[0]] = 0.0
    mujoco.mj_kinematics(model, data)
    base = data.xpos[model.body("base_footprint").id]
    for link in ("camera_optical_frame", "end_effector_link", "imu_link", "wheel_left_link"):
        expected = robot.link_pose_in(link, "base_footprint")
        np.testing.assert_allclose(data.xpos[model.body(link).id] - base, expected[:3, 3], atol=1e-9)
        np.testing.assert_allclose(data.xmat[model.body(link).id].reshape(3, 3), expected[:3, :3], atol=1e-6)


def test_optical_frame_is_rep103(robot):
    rotation = robot.link_pose_in("camera_optical_frame", "camera_link")[:3, :3]
    # optical z = camera_link x (forward), optical x = -y (right), optical y = -z (down)
    np.testing.assert_allclose(rotation[:, 2], [1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(rotation[:, 0], [0, -1, 0], atol=1e-6)
    np.testing.assert_allclose(rotation[:, 1], [0, 0, -1], atol=1e-6)


def test_camera_looks_along_camera_link_x_and_is_upright(robot, model):
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    link_rotation = data.xmat[model.body("camera_link").id].reshape(3, 3)
    cam_rotation = data.cam_xmat[model.camera("camera").id].reshape(3, 3)
    # A MuJoCo camera looks along its -Z, image up is its +Y.
    np.testing.assert_allclose(-cam_rotation[:, 2], link_rotation[:, 0], atol=1e-9)
    np.testing.assert_allclose(cam_rotation[:, 1], link_rotation[:, 2], atol=1e-9)
    hfov = robot.camera.horizontal_fov_rad
    expected_fovy = math.degrees(2 * math.atan(math.tan(hfov / 2) * 240 / 320))
    assert model.cam_fovy[model.camera("camera").id] == pytest.approx(expected_fovy)


def test_vertical_fov_conversion():
    assert urdf_to_mjcf.vertical_fov_deg(math.pi / 2, 100, 100) == pytest.approx(90.0)
    assert urdf_to_mjcf.vertical_fov_deg(1.085595, 320, 240) == pytest.approx(48.69, abs=0.01)


def test_imu_sensors_exist(model):
    for name in (urdf_to_mjcf.IMU_ACCEL_SENSOR, urdf_to_mjcf.IMU_GYRO_SENSOR, urdf_to_mjcf.IMU_QUAT_SENSOR):
        assert model.sensor(name).dim[0] in (3, 4)
    assert model.site(urdf_to_mjcf.IMU_SITE).bodyid[0] == model.body("imu_link").id


def _may_collide(model, geom1: int, geom2: int) -> bool:
    return bool(model.geom_contype[geom1] & model.geom_conaffinity[geom2]
                or model.geom_contype[geom2] & model.geom_conaffinity[geom1])


def test_robot_collides_with_the_world_but_not_itself(model):
    robot_geoms = [model.geom(name).id for name in ("chassis_collision", "bumper_collision", "link4_collision",
                                                     "gripper_left_collision", "wheel_left_collision")]
    visual = model.geom("chassis_visual").id
    for geom in robot_geoms:
        assert _may_collide(model, geom, model.geom(world.FLOOR_GEOM).id)
        assert _may_collide(model, geom, model.geom("cube").id)
        assert not _may_collide(model, geom, visual)
        for other in robot_geoms:
            assert not _may_collide(model, geom, other)


def test_converter_rejects_bad_urdf():
    bad = """<robot name="r"><link name="a"/><link name="b"/>
        <joint name="j" type="revolute"><parent link="a"/><child link="b"/><limit effort="1" velocity="1"/></joint></robot>"""
    with pytest.raises(ValueError, match="lower and upper"):
        parse_urdf(bad)


def test_generated_mjcf_is_standalone_xml(robot):
    xml = urdf_to_mjcf.to_xml_string(urdf_to_mjcf.build_mjcf(robot))
    assert ET.fromstring(xml).tag == "mujoco"
    mujoco.MjModel.from_xml_string(xml)  # the robot alone compiles too
