"""Trajectory validation, interpolation and outcomes (no ROS, no physics)."""

import pytest

import trajectory as traj
from diff_drive import DiffDriveController, DiffDriveGeometry, WheelOdometry


@pytest.fixture
def arm(robot):
    joints = [robot.joints[n] for n in ("joint1", "joint2", "joint3", "joint4")]
    return traj.JointGroupController("arm", joints, {"joint1": 0.0, "joint2": 0.0, "joint3": 0.0, "joint4": 0.0})


def point(t, *positions, velocities=()):
    return traj.TrajectoryPoint(t, list(positions), list(velocities))


def test_validation_codes(arm):
    ok = traj.Trajectory(["joint1"], [point(1.0, 0.5)])
    assert arm.validate(ok) is None
    assert arm.validate(traj.Trajectory(["joint9"], [point(1.0, 0.5)])).code == traj.INVALID_JOINTS
    assert arm.validate(traj.Trajectory(["joint1"], [])).code == traj.INVALID_GOAL
    assert arm.validate(traj.Trajectory(["joint1"], [point(1.0, 3.5)])).code == traj.INVALID_GOAL  # > 2.827
    assert arm.validate(traj.Trajectory(["joint1"], [point(1.0, 0.1), point(1.0, 0.2)])).code == traj.INVALID_GOAL
    assert arm.validate(traj.Trajectory(["joint1", "joint2"], [point(1.0, 0.1)])).code == traj.INVALID_GOAL
    assert arm.validate(traj.Trajectory(["joint1"], [point(1.0, float("nan"))])).code == traj.INVALID_GOAL


def test_linear_and_cubic_interpolation():
    linear = traj.TrajectoryExecution(traj.Trajectory(["a"], [point(2.0, 1.0)]), {"a": 0.0}, start_time_s=10.0)
    assert linear.sample(10.0)["a"] == pytest.approx(0.0)
    assert linear.sample(11.0)["a"] == pytest.approx(0.5)
    assert linear.sample(13.0)["a"] == pytest.approx(1.0)
    cubic = traj.TrajectoryExecution(
        traj.Trajectory(["a"], [point(1.0, 1.0, velocities=[0.0]), point(2.0, 2.0, velocities=[0.0])]),
        {"a": 0.0}, start_time_s=0.0)
    assert cubic.sample(0.5)["a"] == pytest.approx(0.5)  # symmetric smoothstep midpoint
    assert cubic.sample(0.25)["a"] == pytest.approx(0.15625)  # 3s^2 - 2s^3 at s = 0.25
    assert cubic.sample(1.5)["a"] == pytest.approx(1.5)


def test_a_trajectory_gives_its_smallest_waypoint_effort_as_a_force_limit():
    squeeze = traj.Trajectory(["finger", "other"], [traj.TrajectoryPoint(0.5, [0.01, 0.0], [0.0, 0.0], [3.0, 9.0]),
                                                   traj.TrajectoryPoint(1.0, [0.0, 0.0], [0.0, 0.0], [2.5, 9.0])])
    execution = traj.TrajectoryExecution(squeeze, {"finger": 0.03, "other": 0.0}, start_time_s=0.0)
    assert execution.effort_limit("finger", 10.0) == pytest.approx(2.5)
    assert execution.effort_limit("other", 5.0) == pytest.approx(5.0), "never above the URDF limit"
    assert execution.effort_limit("absent", 10.0) == pytest.approx(10.0)
    no_effort = traj.TrajectoryExecution(traj.Trajectory(["finger"], [point(1.0, 0.0)]), {"finger": 0.03}, start_time_s=0.0)
    assert no_effort.effort_limit("finger", 10.0) == pytest.approx(10.0)


def test_setpoints_respect_velocity_limit(arm):
    arm.start(traj.Trajectory(["joint1"], [point(0.01, 2.0)]), now_s=0.0)
    actual = dict(arm.setpoints)
    arm.update(now_s=0.1, dt_s=0.1, actual=actual)
    assert arm.setpoints["joint1"] == pytest.approx(0.48)  # 4.8 rad/s * 0.1 s


def test_a_trajectory_starts_from_the_measured_state_as_a_client_plans_it(arm):
    # The joint measured at 0.1 rad moving at 1 rad/s (its setpoint elsewhere,
    # at 0): a line onwards at 1 rad/s asks 1 rad/s all the way, no catch-up
    # from the setpoint or from rest.
    arm.start(traj.Trajectory(["joint1"], [traj.TrajectoryPoint(0.5, [0.6], [1.0])]), now_s=0.0,
              measured_positions={"joint1": 0.1}, measured_velocities={"joint1": 1.0})
    actual = dict(arm.setpoints)
    demands = []
    for step in range(1, 50):
        arm.update(now_s=step * 0.01, dt_s=0.01, actual=actual)
        demands.append(arm.demand_velocity["joint1"])
    assert max(demands) == pytest.approx(1.0, abs=1e-6)
    assert min(demands) == pytest.approx(1.0, abs=1e-6)
    # From rest at the setpoints (no measured state: the old start), the same
    # waypoint asks 1.6 rad/s on the way: what a client planning from the
    # measured state would not expect.
    at_rest = traj.JointGroupController("arm", list(arm.joints.values()), {"joint1": 0.0})
    at_rest.start(traj.Trajectory(["joint1"], [traj.TrajectoryPoint(0.5, [0.6], [1.0])]), now_s=0.0)
    peak = 0.0
    for step in range(1, 50):
        at_rest.update(now_s=step * 0.01, dt_s=0.01, actual=actual)
        peak = max(peak, at_rest.demand_velocity["joint1"])
    assert peak == pytest.approx(1.61, abs=0.01)


def test_goal_outcomes(arm):
    arm.start(traj.Trajectory(["joint1"], [point(0.5, 0.3)]), now_s=0.0)
    actual = {"joint1": 0.0, "joint2": 0.0, "joint3": 0.0, "joint4": 0.0}
    assert arm.update(0.2, 0.01, actual) is None  # still running
    assert arm.update(0.6, 0.01, actual) is None  # late, within goal_time_tolerance
    outcome = arm.update(0.5 + traj.DEFAULT_GOAL_TIME_TOLERANCE_S + 0.01, 0.01, actual)
    assert outcome.code == traj.GOAL_TOLERANCE_VIOLATED
    arm.start(traj.Trajectory(["joint1"], [point(0.5, 0.3)]), now_s=10.0)
    actual["joint1"] = 0.29
    assert arm.update(10.5, 0.01, actual).code == traj.SUCCESSFUL


def test_path_tolerance(arm):
    trajectory = traj.Trajectory(["joint1"], [point(1.0, 1.0)], path_tolerance={"joint1": 0.05})
    arm.start(trajectory, now_s=0.0)
    actual = {"joint1": 0.0, "joint2": 0.0, "joint3": 0.0, "joint4": 0.0}
    assert arm.update(0.5, 0.01, actual).code == traj.PATH_TOLERANCE_VIOLATED


def test_gripper_stall_and_reach():
    execution = traj.GripperCommandExecution(goal_position=0.0, max_effort=5.0, now_s=0.0)
    assert execution.update(0.1, 0.02, -0.05, 5.0) is None  # moving
    assert execution.update(0.3, 0.0175, 0.0, 5.0) is None  # stopped, not long enough
    state = execution.update(0.3 + traj.GripperCommandExecution.STALL_TIMEOUT_S + 0.01, 0.0175, 0.0, 5.0)
    assert state.stalled and not state.reached_goal
    reached = traj.GripperCommandExecution(0.02, 5.0, 0.0).update(0.1, 0.0195, 0.0, 1.0)
    assert reached.reached_goal and not reached.stalled


def test_diff_drive_kinematics_clamp_and_ramp():
    drive = DiffDriveController(DiffDriveGeometry(0.033, 0.26, max_wheel_speed_rad_s=8.0, max_wheel_accel_rad_s2=30.0))
    drive.set_body_velocity(0.2, 0.0)
    assert drive.target_rad_s == pytest.approx((0.2 / 0.033, 0.2 / 0.033))
    assert drive.update(0.1) == pytest.approx((3.0, 3.0))  # ramped: 30 rad/s^2 * 0.1 s
    drive.set_body_velocity(0.5, 1.0)  # too fast: both wheels scaled, curvature kept
    left, right = drive.target_rad_s
    assert max(abs(left), abs(right)) == pytest.approx(8.0)
    assert (right - left) / (right + left) == pytest.approx((1.0 * 0.13) / 0.5)


def test_wheel_odometry_arc():
    odometry = WheelOdometry(0.033, 0.26)
    odometry.update(0.0, 0.0, 0.0, 0.0)
    # Quarter turn in place: wheels travel +-(pi/2 * 0.13) m.
    wheel_rad = (3.141592653589793 / 2 * 0.13) / 0.033
    for i in range(1, 101):
        odometry.update(-wheel_rad * i / 100, wheel_rad * i / 100, -1.0, 1.0)
    assert odometry.yaw_rad == pytest.approx(3.141592653589793 / 2, abs=1e-9)
    assert abs(odometry.x_m) < 1e-9 and abs(odometry.y_m) < 1e-9
    assert odometry.angular_rad_s == pytest.approx(2 * 0.033 / 0.26)
