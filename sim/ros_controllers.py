"""ROS faces of the simulated controllers, like ros2_control's:
- joint_trajectory_controller: <name>/joint_trajectory topic and
  <name>/follow_joint_trajectory action (control_msgs/FollowJointTrajectory);
- gripper_action_controller: <name>/gripper_cmd (control_msgs/GripperCommand).

With serve_action=False a controller serves only its joint_trajectory
topic (a bringup without the action servers, for the bridge's topic
fallback): the gripper then takes trajectories of its joint alone, with
the effort of their waypoints as its force limit (as gripper_cmd's
max_effort). An empty trajectory on the topic is refused, as recent
joint_trajectory_controllers refuse it ("Empty trajectory received."):
a one-point trajectory at time 0 is the way to hold where the joints are.

Threading: ROS callbacks run on executor threads; the simulation loop calls
tick() on its own thread. Both sides touch controller state only under the
shared lock. An action's execute callback blocks its executor thread until
the simulation loop reports the outcome, publishing feedback meanwhile.
Invalid goals are rejected at goal time, as ros2_control does (the reason
is logged); errors while executing end the goal aborted with error_code.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.qos import QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import trajectory as traj

try:
    from control_msgs.action import FollowJointTrajectory, GripperCommand
    CONTROL_MSGS_IMPORT_ERROR = None
except ImportError as error:  # built from IDL by scripts/build-interfaces.sh
    FollowJointTrajectory = GripperCommand = None
    CONTROL_MSGS_IMPORT_ERROR = error

FEEDBACK_PERIOD_S = 0.05
# A header stamp this far from the sim clock is taken as "now": the sender's
# clock is not the sim clock (e.g. wall time), and waiting for it would
# stall the goal forever.
MAX_STAMP_OFFSET_S = 10.0
# Command topics: best effort matches both reliable and best-effort publishers.
COMMAND_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)


def duration_to_s(duration) -> float:
    return duration.sec + duration.nanosec * 1e-9


def trajectory_from_msg(msg: JointTrajectory) -> traj.Trajectory:
    points = [
        traj.TrajectoryPoint(duration_to_s(p.time_from_start), list(p.positions), list(p.velocities), list(p.effort))
        for p in msg.points
    ]
    return traj.Trajectory(list(msg.joint_names), points)


def start_time_from_header(stamp, now_s: float, logger) -> float:
    stamp_s = stamp.sec + stamp.nanosec * 1e-9
    if stamp_s == 0.0:
        return now_s
    if abs(stamp_s - now_s) > MAX_STAMP_OFFSET_S:
        logger.warning(f"trajectory stamp {stamp_s:.3f} s is far from sim time {now_s:.3f} s: starting now",
                       throttle_duration_sec=10.0)
        return now_s
    return stamp_s


@dataclass
class Ticket:
    """Links one accepted goal to the simulation loop."""
    done: threading.Event = field(default_factory=threading.Event)
    outcome: traj.Outcome | None = None
    gripper_state: traj.GripperState | None = None

    def finish(self, outcome: traj.Outcome | None = None, gripper_state: traj.GripperState | None = None) -> None:
        if not self.done.is_set():
            self.outcome, self.gripper_state = outcome, gripper_state
            self.done.set()


class SharedState:
    """What the ROS threads may read of the simulation: the latest joint
    state, copied by the loop every tick, and the sim time."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now_s = 0.0
        self.positions: dict[str, float] = {}
        self.velocities: dict[str, float] = {}
        self.efforts: dict[str, float] = {}
        self.tickets: list[Ticket] = []  # every pending goal, to release on shutdown

    def release_all(self) -> None:
        for ticket in list(self.tickets):
            ticket.finish(traj.Outcome(traj.GOAL_TOLERANCE_VIOLATED, "simulator shutting down"))


class TrajectoryControllerRos:
    """<name>/joint_trajectory + <name>/follow_joint_trajectory for one group."""

    def __init__(self, node, name: str, group: traj.JointGroupController, shared: SharedState, callback_group,
                 serve_action: bool = True):
        self.node, self.name, self.group, self.shared = node, name, group, shared
        self.logger = node.get_logger()
        self.ticket: Ticket | None = None
        node.create_subscription(JointTrajectory, f"{name}/joint_trajectory", self._on_topic, COMMAND_QOS,
                                 callback_group=callback_group)
        self.action_server = None
        if FollowJointTrajectory is not None and serve_action:
            self.action_server = ActionServer(
                node, FollowJointTrajectory, f"{name}/follow_joint_trajectory", self._execute,
                callback_group=callback_group, goal_callback=self._on_goal,
                cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            )

    # ---------------------------------------------------------- topic
    def _on_topic(self, msg: JointTrajectory) -> None:
        trajectory = trajectory_from_msg(msg)
        with self.shared.lock:
            problem = self.group.validate(trajectory)
            if problem is not None:
                self.logger.warning(f"{self.name}: ignoring trajectory: {problem.message}")
                return
            self.preempt("preempted by a trajectory on the topic")
            self.group.start(trajectory, start_time_from_header(msg.header.stamp, self.shared.now_s, self.logger),
                             self.shared.positions, self.shared.velocities)

    # ---------------------------------------------------------- action
    def _goal_trajectory(self, goal) -> traj.Trajectory:
        trajectory = trajectory_from_msg(goal.trajectory)
        trajectory.goal_tolerance = {t.name: t.position for t in goal.goal_tolerance if t.position > 0}
        trajectory.path_tolerance = {t.name: t.position for t in goal.path_tolerance if t.position > 0}
        trajectory.goal_time_tolerance_s = duration_to_s(goal.goal_time_tolerance)
        return trajectory

    def _on_goal(self, goal) -> GoalResponse:
        problem = self.group.validate(self._goal_trajectory(goal))
        if problem is not None:
            self.logger.warning(f"{self.name}: rejecting goal (error {problem.code}): {problem.message}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def preempt(self, reason: str) -> None:
        """Ends the running goal, if any. joint_trajectory_controller reports
        a preempted goal with INVALID_GOAL; it ends aborted here (rcl_action
        only lets a goal end canceled after a cancel request)."""
        if self.ticket is not None:
            self.ticket.finish(traj.Outcome(traj.INVALID_GOAL, reason))
            self.ticket = None

    def _execute(self, goal_handle):
        goal = goal_handle.request
        ticket = Ticket()
        with self.shared.lock:
            self.preempt("preempted by a newer goal")
            self.group.start(self._goal_trajectory(goal),
                             start_time_from_header(goal.trajectory.header.stamp, self.shared.now_s, self.logger),
                             self.shared.positions, self.shared.velocities)
            self.ticket = ticket
            self.shared.tickets.append(ticket)
        try:
            return self._wait_for_outcome(goal_handle, ticket)
        finally:
            with self.shared.lock:
                self.shared.tickets.remove(ticket)

    def _wait_for_outcome(self, goal_handle, ticket: Ticket):
        result = FollowJointTrajectory.Result()
        while not ticket.done.wait(FEEDBACK_PERIOD_S):
            if goal_handle.is_cancel_requested:
                with self.shared.lock:
                    if self.ticket is ticket:
                        self.group.hold(self.shared.positions)
                        self.ticket = None
                goal_handle.canceled()
                result.error_code, result.error_string = traj.SUCCESSFUL, "canceled"
                return result
            goal_handle.publish_feedback(self._feedback(goal_handle.request.trajectory.joint_names))
        outcome = ticket.outcome
        result.error_code, result.error_string = outcome.code, outcome.message
        if not goal_handle.is_active:
            return result
        if outcome.succeeded:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _feedback(self, joint_names):
        feedback = FollowJointTrajectory.Feedback()
        with self.shared.lock:
            now_s = self.shared.now_s
            desired = [self.group.desired[n] for n in joint_names]
            actual = [self.shared.positions[n] for n in joint_names]
            velocities = [self.shared.velocities[n] for n in joint_names]
        feedback.header.stamp.sec = int(now_s)
        feedback.header.stamp.nanosec = int((now_s % 1.0) * 1e9)
        feedback.joint_names = list(joint_names)
        feedback.desired = JointTrajectoryPoint(positions=desired)
        feedback.actual = JointTrajectoryPoint(positions=actual, velocities=velocities)
        feedback.error = JointTrajectoryPoint(positions=[d - a for d, a in zip(desired, actual)])
        return feedback

    # ---------------------------------------------------------- loop side
    def tick(self, now_s: float, dt_s: float) -> None:
        """Called by the simulation loop with the lock held."""
        outcome = self.group.update(now_s, dt_s, self.shared.positions)
        if outcome is not None and self.ticket is not None:
            self.ticket.finish(outcome)
            self.ticket = None

    def destroy(self) -> None:
        if self.action_server is not None:
            self.action_server.destroy()


class GripperControllerRos:
    """<name>/gripper_cmd (GripperCommand) and <name>/joint_trajectory for a
    parallel gripper driven through one joint (the others mimic it).
    GripperCommand.position is that joint's position (as in
    gripper_action_controller); max_effort 0 means the URDF effort limit."""

    def __init__(self, node, name: str, group: traj.JointGroupController, shared: SharedState, sim_effort_limit,
                 callback_group, allow_stalling: bool = True, serve_action: bool = True):
        self.node, self.name, self.group, self.shared = node, name, group, shared
        self.logger = node.get_logger()
        self.joint = next(iter(group.joints.values()))
        self.set_effort_limit = sim_effort_limit  # callable(joint_name, effort), loop thread only
        self.allow_stalling = allow_stalling
        self.trajectory = TrajectoryControllerRos(node, name, group, shared, callback_group, serve_action=serve_action)
        self.execution: traj.GripperCommandExecution | None = None
        self.ticket: Ticket | None = None
        self.effort_limit = self.joint.effort
        self.action_server = None
        if GripperCommand is not None and serve_action:
            self.action_server = ActionServer(
                node, GripperCommand, f"{name}/gripper_cmd", self._execute, callback_group=callback_group,
                goal_callback=self._on_goal, cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            )

    def _on_goal(self, goal) -> GoalResponse:
        position, max_effort = goal.command.position, goal.command.max_effort
        if not (self.joint.lower - traj.LIMIT_SLACK <= position <= self.joint.upper + traj.LIMIT_SLACK):
            self.logger.warning(f"{self.name}: rejecting position {position:.4f} outside "
                                f"[{self.joint.lower}, {self.joint.upper}] m")
            return GoalResponse.REJECT
        if max_effort < 0:
            self.logger.warning(f"{self.name}: rejecting negative max_effort {max_effort}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def preempt(self) -> None:
        if self.ticket is not None:
            name = self.joint.name
            self.ticket.finish(None, traj.GripperState(self.shared.positions[name], self.shared.efforts[name],
                                                       stalled=False, reached_goal=False))
            self.ticket = None
        self.execution = None

    def _execute(self, goal_handle):
        command = goal_handle.request.command
        max_effort = self.joint.effort if command.max_effort == 0 else min(command.max_effort, self.joint.effort)
        ticket = Ticket()
        with self.shared.lock:
            self.preempt()
            self.trajectory.preempt("preempted by a gripper command")
            self.group.move_to({self.joint.name: command.position})
            self.effort_limit = max_effort
            self.execution = traj.GripperCommandExecution(command.position, max_effort, self.shared.now_s)
            self.ticket = ticket
            self.shared.tickets.append(ticket)
        try:
            return self._wait_for_outcome(goal_handle, ticket)
        finally:
            with self.shared.lock:
                self.shared.tickets.remove(ticket)

    def _state_msg(self, cls, state: traj.GripperState):
        msg = cls()
        msg.position, msg.effort, msg.stalled, msg.reached_goal = state.position, state.effort, state.stalled, state.reached_goal
        return msg

    def _current_state(self) -> traj.GripperState:
        with self.shared.lock:
            name = self.joint.name
            return traj.GripperState(self.shared.positions[name], self.shared.efforts[name], False, False)

    def _wait_for_outcome(self, goal_handle, ticket: Ticket):
        while not ticket.done.wait(FEEDBACK_PERIOD_S):
            if goal_handle.is_cancel_requested:
                with self.shared.lock:
                    if self.ticket is ticket:
                        self.group.hold(self.shared.positions)
                        self.execution, self.ticket = None, None
                goal_handle.canceled()
                return self._state_msg(GripperCommand.Result, self._current_state())
            goal_handle.publish_feedback(self._state_msg(GripperCommand.Feedback, self._current_state()))
        state = ticket.gripper_state
        result = self._state_msg(GripperCommand.Result, state)
        if not goal_handle.is_active:
            return result
        if state.reached_goal or (state.stalled and self.allow_stalling):
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def tick(self, now_s: float, dt_s: float) -> None:
        """Called by the simulation loop with the lock held."""
        if self.group.execution is not None:
            # A trajectory took over: it drives with its waypoints' effort,
            # or the full URDF effort when they give none.
            self.preempt()
            self.effort_limit = self.group.execution.effort_limit(self.joint.name, self.joint.effort)
        self.set_effort_limit(self.joint.name, self.effort_limit)
        self.trajectory.tick(now_s, dt_s)
        if self.execution is None:
            return
        name = self.joint.name
        state = self.execution.update(now_s, self.shared.positions[name], self.shared.velocities[name],
                                      self.shared.efforts[name])
        if state is not None:
            self.execution = None
            if self.ticket is not None:
                self.ticket.finish(None, state)
                self.ticket = None

    def destroy(self) -> None:
        self.trajectory.destroy()
        if self.action_server is not None:
            self.action_server.destroy()
