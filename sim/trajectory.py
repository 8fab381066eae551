"""Joint trajectory execution like ros2_control's joint_trajectory_controller
(position interface), and a gripper command like its gripper_action_controller.
No ROS types here: the node converts messages to these classes.

Error codes are control_msgs/FollowJointTrajectory's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from urdf_model import Joint

SUCCESSFUL = 0
INVALID_GOAL = -1
INVALID_JOINTS = -2
OLD_HEADER_TIMESTAMP = -3
PATH_TOLERANCE_VIOLATED = -4
GOAL_TOLERANCE_VIOLATED = -5

DEFAULT_GOAL_TOLERANCE_RAD = 0.05
DEFAULT_GOAL_TOLERANCE_M = 0.005
DEFAULT_GOAL_TIME_TOLERANCE_S = 1.0
# Limits are checked with a little slack for float round-off in clients.
LIMIT_SLACK = 1e-6


@dataclass
class TrajectoryPoint:
    time_s: float  # time_from_start
    positions: list[float]
    velocities: list[float] = field(default_factory=list)
    efforts: list[float] = field(default_factory=list)


@dataclass
class Trajectory:
    joint_names: list[str]
    points: list[TrajectoryPoint]
    # Per joint, 0 or absent = use the default.
    goal_tolerance: dict[str, float] = field(default_factory=dict)
    path_tolerance: dict[str, float] = field(default_factory=dict)
    goal_time_tolerance_s: float = 0.0


@dataclass
class Outcome:
    code: int
    message: str

    @property
    def succeeded(self) -> bool:
        return self.code == SUCCESSFUL


def validate_trajectory(trajectory: Trajectory, joints: dict[str, Joint]) -> Outcome | None:
    """None if the trajectory can be executed by a controller owning `joints`."""
    unknown = [name for name in trajectory.joint_names if name not in joints]
    if unknown or not trajectory.joint_names:
        return Outcome(INVALID_JOINTS, f"unknown joints {unknown}; this controller has {list(joints)}")
    if len(set(trajectory.joint_names)) != len(trajectory.joint_names):
        return Outcome(INVALID_JOINTS, "duplicate joint names")
    if not trajectory.points:
        return Outcome(INVALID_GOAL, "trajectory has no points")
    previous_time_s = -math.inf
    for index, point in enumerate(trajectory.points):
        problem = _point_problem(point, trajectory.joint_names, joints, previous_time_s)
        if problem:
            return Outcome(INVALID_GOAL, f"point {index}: {problem}")
        previous_time_s = point.time_s
    return None


def _point_problem(point: TrajectoryPoint, names: list[str], joints: dict[str, Joint], previous_time_s: float) -> str:
    if len(point.positions) != len(names):
        return f"{len(point.positions)} positions for {len(names)} joints"
    if point.velocities and len(point.velocities) != len(names):
        return f"{len(point.velocities)} velocities for {len(names)} joints"
    if point.efforts and len(point.efforts) != len(names):
        return f"{len(point.efforts)} efforts for {len(names)} joints"
    if not math.isfinite(point.time_s) or point.time_s < 0 or point.time_s <= previous_time_s:
        return "time_from_start must be >= 0 and strictly increasing"
    for name, position in zip(names, point.positions):
        joint = joints[name]
        if not math.isfinite(position):
            return f"{name}: position is not finite"
        if joint.has_position_limits and not (joint.lower - LIMIT_SLACK <= position <= joint.upper + LIMIT_SLACK):
            return f"{name}: position {position:.4f} outside limits [{joint.lower}, {joint.upper}]"
    return ""


def default_goal_tolerance(joint: Joint) -> float:
    return DEFAULT_GOAL_TOLERANCE_M if joint.type == "prismatic" else DEFAULT_GOAL_TOLERANCE_RAD


def _hermite(p0: float, v0: float, p1: float, v1: float, duration_s: float, s: float) -> float:
    s2, s3 = s * s, s * s * s
    return ((2 * s3 - 3 * s2 + 1) * p0 + (s3 - 2 * s2 + s) * duration_s * v0
            + (-2 * s3 + 3 * s2) * p1 + (s3 - s2) * duration_s * v1)


class TrajectoryExecution:
    """Samples a trajectory in time. Between points it interpolates linearly,
    or with cubic Hermite splines when both points give velocities (as
    joint_trajectory_controller's spline interpolation does). Before the first
    point it moves from the start state: positions, and velocities (zero
    when not given)."""

    def __init__(self, trajectory: Trajectory, start_positions: dict[str, float], start_time_s: float,
                 start_velocities: dict[str, float] | None = None):
        self.trajectory = trajectory
        self.start_time_s = start_time_s
        velocities = start_velocities or {}
        start = TrajectoryPoint(0.0, [start_positions[n] for n in trajectory.joint_names],
                                [velocities.get(n, 0.0) for n in trajectory.joint_names])
        self._points = [start] + list(trajectory.points)

    @property
    def end_time_s(self) -> float:
        return self.start_time_s + self._points[-1].time_s

    @property
    def final_positions(self) -> dict[str, float]:
        return dict(zip(self.trajectory.joint_names, self._points[-1].positions))

    def effort_limit(self, name: str, default: float) -> float:
        """The smallest effort the waypoints give `name` (at most `default`),
        or `default` when they give none."""
        if name not in self.trajectory.joint_names:
            return default
        index = self.trajectory.joint_names.index(name)
        efforts = [abs(p.efforts[index]) for p in self.trajectory.points if p.efforts]
        return min([default, *efforts])

    def sample(self, now_s: float) -> dict[str, float]:
        t = now_s - self.start_time_s
        points = self._points
        if t >= points[-1].time_s:
            return self.final_positions
        index = next(i for i in range(1, len(points)) if t < points[i].time_s)
        before, after = points[index - 1], points[index]
        duration_s = after.time_s - before.time_s
        s = 0.0 if duration_s <= 0 else max(0.0, t - before.time_s) / duration_s
        cubic = bool(before.velocities) and bool(after.velocities)
        out = {}
        for j, name in enumerate(self.trajectory.joint_names):
            if cubic:
                out[name] = _hermite(before.positions[j], before.velocities[j], after.positions[j],
                                     after.velocities[j], duration_s, s)
            else:
                out[name] = before.positions[j] + s * (after.positions[j] - before.positions[j])
        return out


class JointGroupController:
    """Owns the position setpoints of a group of joints (head, arm or
    gripper). A new trajectory replaces the running one. Setpoints move no
    faster than the URDF velocity limits, as a servo's profile velocity."""

    def __init__(self, name: str, joints: list[Joint], initial_positions: dict[str, float]):
        self.name = name
        self.joints = {j.name: j for j in joints}
        self.setpoints = {j.name: initial_positions.get(j.name, 0.0) for j in joints}
        self.desired = dict(self.setpoints)
        # How fast the running trajectory asks each joint to move (rad/s or
        # m/s) before the setpoints' clamp to the URDF limit: what a servo
        # without a profile velocity would do. 0 without a trajectory.
        self.demand_velocity = {j.name: 0.0 for j in joints}
        self.execution: TrajectoryExecution | None = None
        self.outcome: Outcome | None = None  # of the last finished execution

    def validate(self, trajectory: Trajectory) -> Outcome | None:
        return validate_trajectory(trajectory, self.joints)

    def start(self, trajectory: Trajectory, now_s: float, measured_positions: dict[str, float] | None = None,
              measured_velocities: dict[str, float] | None = None) -> None:
        """Runs `trajectory` from `now_s`, from the joints' measured state
        when given (joint_trajectory_controller starts a new trajectory from
        the current state, position and velocity: the state a client plans
        from), else from the setpoints at rest."""
        positions = dict(self.setpoints)
        if measured_positions is not None:
            positions.update({name: measured_positions[name] for name in positions if name in measured_positions})
        velocities = {name: (measured_velocities or {}).get(name, 0.0) for name in positions}
        self.execution = TrajectoryExecution(trajectory, positions, now_s, velocities)
        # The demand is counted from where the trajectory starts.
        self._last_sample = dict(positions)
        self.outcome = None

    def move_to(self, positions: dict[str, float]) -> None:
        """Ramps the setpoints to positions with no trajectory to judge (the
        gripper command judges its own end)."""
        self.execution = None
        self.desired.update(positions)

    def hold(self, actual_positions: dict[str, float]) -> None:
        """Stops where the joints are (cancel, or an empty trajectory)."""
        self.execution = None
        for name in self.setpoints:
            self.setpoints[name] = self.desired[name] = actual_positions[name]

    def finish(self, outcome: Outcome) -> None:
        self.execution = None
        self.outcome = outcome

    def update(self, now_s: float, dt_s: float, actual: dict[str, float]) -> Outcome | None:
        """Advances setpoints; returns the outcome when the execution ends."""
        execution = self.execution
        if execution is not None:
            sampled = execution.sample(now_s)
            for name in self.demand_velocity:
                step = sampled[name] - self._last_sample[name] if name in sampled else 0.0
                self.demand_velocity[name] = step / dt_s if dt_s > 0 else 0.0
            self._last_sample.update(sampled)
            self.desired.update(sampled)
        else:
            for name in self.demand_velocity:
                self.demand_velocity[name] = 0.0
        for name, joint in self.joints.items():
            max_step = joint.velocity * dt_s
            error = self.desired[name] - self.setpoints[name]
            self.setpoints[name] += min(max(error, -max_step), max_step)
        if execution is None:
            return None
        outcome = self._check(execution, now_s, actual)
        if outcome is not None:
            self.finish(outcome)
        return outcome

    def _check(self, execution: TrajectoryExecution, now_s: float, actual: dict[str, float]) -> Outcome | None:
        trajectory = execution.trajectory
        for name, tolerance in trajectory.path_tolerance.items():
            if tolerance > 0 and now_s < execution.end_time_s and abs(actual[name] - self.desired[name]) > tolerance:
                return Outcome(PATH_TOLERANCE_VIOLATED, f"{name} is {abs(actual[name] - self.desired[name]):.4f} off the path")
        if now_s < execution.end_time_s:
            return None
        errors = {name: abs(actual[name] - goal) for name, goal in execution.final_positions.items()}
        violated = {
            name: error for name, error in errors.items()
            if error > (trajectory.goal_tolerance.get(name) or default_goal_tolerance(self.joints[name]))
        }
        if not violated:
            return Outcome(SUCCESSFUL, "")
        time_tolerance_s = trajectory.goal_time_tolerance_s or DEFAULT_GOAL_TIME_TOLERANCE_S
        if now_s > execution.end_time_s + time_tolerance_s:
            detail = ", ".join(f"{n} off by {e:.4f}" for n, e in violated.items())
            return Outcome(GOAL_TOLERANCE_VIOLATED, f"goal not reached within {time_tolerance_s:.2f} s: {detail}")
        return None


# ---------------------------------------------------------------- gripper

@dataclass
class GripperState:
    position: float
    effort: float
    stalled: bool
    reached_goal: bool


class GripperCommandExecution:
    """gripper_action_controller semantics: done when the position is within
    goal_tolerance of the goal, or when the gripper has stopped moving for
    stall_timeout (closed on an object: stalled, goal not reached)."""

    GOAL_TOLERANCE_M = 0.002
    STALL_VELOCITY_THRESHOLD_M_S = 0.001
    STALL_TIMEOUT_S = 0.5

    def __init__(self, goal_position: float, max_effort: float, now_s: float):
        self.goal_position = goal_position
        self.max_effort = max_effort
        self.last_movement_s = now_s

    def update(self, now_s: float, position: float, velocity: float, effort: float) -> GripperState | None:
        """None while running, else the final state."""
        if abs(position - self.goal_position) < self.GOAL_TOLERANCE_M:
            return GripperState(position, effort, stalled=False, reached_goal=True)
        if abs(velocity) > self.STALL_VELOCITY_THRESHOLD_M_S:
            self.last_movement_s = now_s
        elif now_s - self.last_movement_s > self.STALL_TIMEOUT_S:
            return GripperState(position, effort, stalled=True, reached_goal=False)
        return None
