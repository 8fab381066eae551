"""The simulated robot's low-level control loop, without ROS: diff-drive
wheel speeds, joint group setpoints, physics steps, joint readout and wheel
odometry. The ROS node (aicc_sim.py) and the tests both drive it."""

from __future__ import annotations

import trajectory as traj
from diff_drive import DiffDriveController, DiffDriveGeometry, WheelOdometry
from physics import Simulation
from urdf_model import diff_drive_geometry

WHEEL_JOINTS = ("wheel_left_joint", "wheel_right_joint")
CONTROLLER_JOINTS = {
    "head": ["head_pan_joint", "head_tilt_joint"],
    "arm": ["joint1", "joint2", "joint3", "joint4"],
    "gripper": ["gripper_left_joint"],  # gripper_right_joint mimics it
}
# The arm starts folded back, below the camera's field of view.
DEFAULT_INITIAL_JOINTS = {"joint2": -1.2, "joint3": 1.3, "joint4": 1.2}
CONTROL_PERIOD_S = 0.01


class ControlLoop:
    def __init__(self, sim: Simulation, initial_joints: dict[str, float] | None = None,
                 period_s: float = CONTROL_PERIOD_S):
        self.sim = sim
        self.period_s = period_s
        self.steps_per_tick = max(1, round(period_s / sim.timestep_s))
        initial = {**DEFAULT_INITIAL_JOINTS, **(initial_joints or {})}
        for name, position in initial.items():
            sim.set_joint_position(name, position)
        robot = sim.robot
        radius_m, separation_m = diff_drive_geometry(robot, *WHEEL_JOINTS)
        max_speed_rad_s = min(robot.joints[name].velocity for name in WHEEL_JOINTS)
        self.drive = DiffDriveController(DiffDriveGeometry(radius_m, separation_m, max_speed_rad_s))
        self.odometry = WheelOdometry(radius_m, separation_m)
        self.groups = {
            name: traj.JointGroupController(name, [robot.joints[j] for j in joints], initial)
            for name, joints in CONTROLLER_JOINTS.items()
        }
        # Called after every physics step when set (truth.ContactLatch.record).
        self.on_physics_step = None
        self.positions: dict[str, float] = {}
        self.velocities: dict[str, float] = {}
        self.efforts: dict[str, float] = {}
        self.read_joints()

    def apply_controls(self) -> None:
        """Writes wheel speeds (ramped) and group setpoints to the actuators.
        Groups must have been updated (JointGroupController.update) first."""
        for name, speed in zip(WHEEL_JOINTS, self.drive.update(self.period_s)):
            self.sim.set_control(name, speed)
        for group in self.groups.values():
            for name, setpoint in group.setpoints.items():
                self.sim.set_control(name, setpoint)

    def step(self) -> None:
        """One control period of physics, then joint readout and odometry."""
        self.sim.step(self.steps_per_tick, self.on_physics_step)
        self.read_joints()
        left, right = WHEEL_JOINTS
        self.odometry.update(self.positions[left], self.positions[right],
                             self.velocities[left], self.velocities[right])

    def read_joints(self) -> None:
        sim = self.sim
        self.positions = {j.name: sim.joint_position(j.name) for j in sim.movable_joints}
        self.velocities = {j.name: sim.joint_velocity(j.name) for j in sim.movable_joints}
        self.efforts = {j.name: sim.joint_effort(j.name) for j in sim.movable_joints}

    def run(self, seconds: float) -> None:
        """Runs the loop with no ROS: groups follow their trajectories."""
        for _ in range(round(seconds / self.period_s)):
            now_s = self.sim.time_s
            for group in self.groups.values():
                group.update(now_s, self.period_s, self.positions)
            self.apply_controls()
            self.step()
