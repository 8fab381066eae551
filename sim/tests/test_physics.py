"""Physics of the generated model, without ROS: driving, resting, IMU,
bumper, arm servos, grasping, and the rendered camera."""

import math

import mujoco
import numpy as np
import pytest

import trajectory as traj
from control_loop import ControlLoop
from physics import Simulation, quat_to_yaw
from urdf_to_mjcf import MjcfOptions

from conftest import ABOVE_CUBE_ARM, GRASP_ARM, GRIPPER_OPEN_M, URDF_PATH


def make_loop(**options) -> ControlLoop:
    return ControlLoop(Simulation.from_urdf(URDF_PATH, MjcfOptions(**options)))


def tilt_rad(quat_wxyz) -> float:
    """Angle between the body z axis and the world z axis."""
    w, x, y, z = quat_wxyz
    return math.acos(max(-1.0, min(1.0, 1 - 2 * (x * x + y * y))))


def drive(loop: ControlLoop, linear_m_s: float, angular_rad_s: float, seconds: float, settle_s: float = 1.0):
    """Commands a body velocity, then zero; returns max height and tilt seen."""
    max_z_m, max_tilt = 0.0, 0.0
    for command, duration in (((linear_m_s, angular_rad_s), seconds), ((0.0, 0.0), settle_s)):
        loop.drive.set_body_velocity(*command)
        for _ in range(round(duration / loop.period_s)):
            loop.run(loop.period_s)
            position, quat = loop.sim.base_pose()
            max_z_m, max_tilt = max(max_z_m, position[2]), max(max_tilt, tilt_rad(quat))
    return max_z_m, max_tilt


def test_robot_rests_on_its_wheels():
    loop = make_loop()
    loop.run(1.0)
    position, quat = loop.sim.base_pose()
    assert abs(position[2]) < 0.001 and tilt_rad(quat) < 0.01
    wheel_geoms = loop.sim.geom_ids(["wheel_left_collision", "wheel_right_collision"])
    caster_geoms = loop.sim.geom_ids(["caster_back_collision", "caster_front_collision"])
    wheel_n = sum(np.linalg.norm(c.force_n) for c in loop.sim.contacts_of(wheel_geoms, ignore_floor=False))
    caster_n = sum(np.linalg.norm(c.force_n) for c in loop.sim.contacts_of(caster_geoms, ignore_floor=False))
    # Casters must not carry the weight, or the wheels slip.
    assert wheel_n > 0.9 * (wheel_n + caster_n)
    weight_n = loop.sim.model.body_subtreemass[loop.sim.root_body_id] * 9.81
    assert wheel_n + caster_n == pytest.approx(weight_n, rel=0.02)


def test_drive_half_a_metre_straight():
    loop = make_loop()
    loop.run(0.3)
    start, _ = loop.sim.base_pose()
    max_z_m, max_tilt = drive(loop, 0.2, 0.0, 2.5)
    end, quat = loop.sim.base_pose()
    # Ramps up and down are symmetric: 0.2 m/s for 2.5 s is 0.5 m.
    assert end[0] - start[0] == pytest.approx(0.5, abs=0.01)
    assert abs(end[1] - start[1]) < 0.002 and abs(quat_to_yaw(quat)) < 0.005
    assert max_z_m < 0.002, "the robot jumped"
    assert max_tilt < math.radians(3), "the robot tipped"
    odometry = loop.odometry
    assert math.hypot(odometry.x_m - (end[0] - start[0]), odometry.y_m - (end[1] - start[1])) < 0.005


def test_turn_in_place_and_arc_odometry_match_truth():
    loop = make_loop()
    drive(loop, 0.0, -1.0, math.pi / 2)  # turn right: away from the pedestal
    _, quat = loop.sim.base_pose()
    assert quat_to_yaw(quat) == pytest.approx(-math.pi / 2, abs=0.05)
    assert loop.odometry.yaw_rad == pytest.approx(quat_to_yaw(quat), abs=0.01)
    drive(loop, 0.15, 0.5, 2.0)
    position, quat = loop.sim.base_pose()
    assert math.hypot(loop.odometry.x_m - position[0], loop.odometry.y_m - position[1]) < 0.01
    assert loop.odometry.yaw_rad == pytest.approx(quat_to_yaw(quat), abs=0.02)


def test_wheel_speed_saturates_at_urdf_limit():
    loop = make_loop()
    drive(loop, 1.0, 0.0, 1.0, settle_s=0.0)  # asks for 30 rad/s; the URDF allows 8
    assert loop.velocities["wheel_left_joint"] == pytest.approx(8.0, abs=0.3)


def test_imu_at_rest_reads_gravity():
    loop = make_loop()
    loop.run(0.5)
    quat, gyro, accel = loop.sim.imu()
    np.testing.assert_allclose(accel, [0, 0, 9.81], atol=0.05)
    np.testing.assert_allclose(gyro, [0, 0, 0], atol=1e-3)
    assert tilt_rad(quat) < 0.01


def test_bumper_touches_the_red_box_not_the_floor():
    # Spawn 0.2 m before the red box's face (box centre x = 1.5, half size 0.1).
    loop = make_loop(x_m=1.2)
    bumper = loop.sim.geom_ids(loop.sim.robot.contact_collisions)
    loop.run(0.5)
    assert loop.sim.contacts_of(bumper) == []
    drive(loop, 0.15, 0.0, 1.0, settle_s=0.0)  # reaches the box after ~0.4 s
    # Pushing on with spinning wheels, the bumper chatters a little against
    # the box, like a real one: most samples show the contact.
    samples = []
    for _ in range(50):
        loop.run(loop.period_s)
        samples.append(loop.sim.contacts_of(bumper))
    touching = [contacts for contacts in samples if contacts]
    assert len(touching) > 0.6 * len(samples)
    assert {c.other for contacts in touching for c in contacts} == {"red_box"}
    contact = touching[-1][0]
    assert contact.normal[0] > 0.9  # from the bumper toward the box (+x)
    assert contact.position_m[0] == pytest.approx(1.4, abs=0.01)  # on the box's face
    # The box pushes the bumper back (-x) with the wheels' traction.
    push_n = max(-c.force_n[0] for contacts in touching for c in contacts)
    assert push_n > 2.0


def test_arm_servos_reach_and_hold_a_pose():
    loop = make_loop()
    arm = loop.groups["arm"]
    goal = {"joint1": 0.5, "joint2": 0.6, "joint3": -0.4, "joint4": 0.3}
    arm.start(traj.Trajectory(list(goal), [traj.TrajectoryPoint(1.5, list(goal.values()))]), loop.sim.time_s)
    loop.run(2.5)
    for name, position in goal.items():
        assert loop.positions[name] == pytest.approx(position, abs=traj.DEFAULT_GOAL_TOLERANCE_RAD), name
    assert arm.outcome is not None and arm.outcome.code == traj.SUCCESSFUL


def move(loop: ControlLoop, group: str, goal: dict, seconds: float) -> None:
    controller = loop.groups[group]
    controller.start(traj.Trajectory(list(goal), [traj.TrajectoryPoint(seconds, list(goal.values()))]),
                     loop.sim.time_s)
    loop.run(seconds + 0.5)


def test_arm_grasps_and_lifts_the_cube():
    loop = make_loop()
    cube_start = loop.sim.object_positions()["cube"]
    move(loop, "gripper", {"gripper_left_joint": GRIPPER_OPEN_M}, 0.5)
    move(loop, "arm", ABOVE_CUBE_ARM, 2.0)
    move(loop, "arm", GRASP_ARM, 1.5)
    ee = loop.sim.data.xpos[loop.sim.model.body("end_effector_link").id].copy()
    assert np.linalg.norm(ee - cube_start - [0, 0, 0.0075]) < 0.01
    loop.sim.set_effort_limit("gripper_left_joint", 5.0)
    move(loop, "gripper", {"gripper_left_joint": 0.0}, 0.8)
    # Closed on the 35 mm cube: each finger stops ~17.5 mm from the centre.
    assert loop.positions["gripper_left_joint"] == pytest.approx(0.0175, abs=0.002)
    assert loop.positions["gripper_right_joint"] == pytest.approx(0.0175, abs=0.002)
    assert loop.efforts["gripper_left_joint"] < -1.0  # squeezing (toward closed)
    move(loop, "arm", ABOVE_CUBE_ARM, 1.5)
    loop.run(2.0)  # hold it: it must not creep out of the fingers
    cube_now = loop.sim.object_positions()["cube"]
    assert cube_now[2] - cube_start[2] > 0.09, "the cube was not lifted"
    ee = loop.sim.data.xpos[loop.sim.model.body("end_effector_link").id]
    assert np.linalg.norm(cube_now - ee) < 0.01


@pytest.fixture(scope="module")
def rendered():
    from camera import RgbdCamera

    loop = make_loop()
    loop.run(0.2)
    sim = loop.sim
    camera = RgbdCamera(sim.model, "camera", 320, 240, sim.robot.camera.far_m)
    rgb, depth = camera.render(sim.data)
    origin, axis = sim.camera_pose("camera")
    ray_m = sim.ray_distance(origin, axis, int(sim.model.cam_bodyid[sim.model.camera("camera").id]))
    sim.set_joint_position("head_tilt_joint", -0.6)  # look up at the sky
    sky_rgb, sky_depth = camera.render(sim.data)
    camera.close()
    return {"rgb": rgb, "depth": depth, "ray_m": ray_m, "sky_depth": sky_depth, "intrinsics": camera.intrinsics}


def test_camera_sees_red_box_ahead_upright(rendered):
    rgb = rendered["rgb"].astype(int)
    red = (rgb[..., 0] > 150) & (rgb[..., 1] < 60) & (rgb[..., 2] < 60)
    rows, cols = np.nonzero(red)
    assert red.sum() > 300, "red box not visible"
    # Straight ahead: centred horizontally; below the horizon (box top 0.2 m,
    # camera 0.628 m high), so in the lower half: not upside down.
    assert abs(cols.mean() - 159.5) < 5
    assert rows.min() > 120
    # Its width: 0.2 m at 1.475 m through a ~265 px focal length.
    assert cols.max() - cols.min() + 1 == pytest.approx(0.2 * 265.2 / 1.475, abs=3)
    # Sky (light blue) at the top of the image, floor (grey) at the bottom.
    assert rgb[5, :, 2].mean() > rgb[5, :, 0].mean()
    assert abs(rgb[-5, :, 0].mean() - rgb[-5, :, 2].mean()) < 20


def test_depth_is_metric_along_the_optical_axis(rendered):
    depth, rgb = rendered["depth"], rendered["rgb"].astype(int)
    assert depth.dtype == np.float32
    # The optical axis passes over the box and hits the wall at x = 2.0.
    centre = depth[119:121, 159:161].mean()
    assert centre == pytest.approx(rendered["ray_m"], abs=0.005)
    assert centre == pytest.approx(2.0 + 0.075, abs=0.01)
    red = (rgb[..., 0] > 150) & (rgb[..., 1] < 60) & (rgb[..., 2] < 60)
    # The camera sees the box's top and its front face; the face (the lower
    # rows) is a plane at x = 1.4: constant depth along the optical axis.
    rows = np.nonzero(red)[0]
    face = red & (np.arange(red.shape[0])[:, None] > rows.max() - 10)
    assert face.sum() > 200
    np.testing.assert_allclose(depth[face], 1.4 + 0.075, atol=0.005)
    # Looking level, every pixel sees the room (walls are 1 m high, the
    # sky shows above them) -- and the sky is +inf.
    assert np.isinf(depth[:20]).all()
    assert np.isfinite(depth[-20:]).all()
    assert np.isinf(rendered["sky_depth"][:60]).all()


def test_intrinsics_follow_fovy(rendered):
    intrinsics = rendered["intrinsics"]
    assert intrinsics.fx_px == pytest.approx(120 / math.tan(math.radians(48.6868) / 2), rel=1e-4)
    assert (intrinsics.cx_px, intrinsics.cy_px) == (159.5, 119.5)


def test_mjcf_compiles_for_other_image_sizes():
    sim = Simulation.from_urdf(URDF_PATH, MjcfOptions(image_width_px=640, image_height_px=480))
    assert sim.model.vis.global_.offwidth == 640
    assert mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_CAMERA, "camera") >= 0
