"""The simulator as a ROS 2 node, end to end: one instance for the module, in
a ROS domain of its own. Assertions allow for a slow machine: waits are in
sim time (from the simulator's own messages) with generous wall timeouts.

Tests run in file order and share the robot: head, arm, gripper (grasping
the cube at the spawn pose), then driving, then the bumper, then SIGTERM.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import ABOVE_CUBE_ARM, GRASP_ARM, GRIPPER_OPEN_M, SIM_DIR

rclpy = pytest.importorskip("rclpy")
from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Duration  # noqa: E402
from geometry_msgs.msg import Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

try:
    from control_msgs.action import FollowJointTrajectory, GripperCommand
    from control_msgs.msg import JointTolerance
except ImportError:
    FollowJointTrajectory = None
try:
    from ros_gz_interfaces.msg import Contacts
except ImportError:
    Contacts = None

needs_control_msgs = pytest.mark.skipif(FollowJointTrajectory is None, reason="control_msgs not built")
READY_TIMEOUT_S = 90.0
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
STOWED_ARM = {"joint1": 0.0, "joint2": -1.2, "joint3": 1.3, "joint4": 1.2}


def duration(seconds: float) -> Duration:
    return Duration(sec=int(seconds), nanosec=int((seconds % 1) * 1e9))


class SimProcess:
    def __init__(self, domain_id: str, extra_args: tuple = ()):
        self.log = tempfile.NamedTemporaryFile("w+", prefix="aicc_sim_", suffix=".log", delete=False)
        env = dict(os.environ, ROS_DOMAIN_ID=domain_id, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        self.proc = subprocess.Popen(
            [sys.executable, str(SIM_DIR / "aicc_sim.py"), "--no-sensor-noise", *extra_args],
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
        )
        self.ready = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            if line.strip() == "AICC_SIM_READY":
                self.ready.set()

    def stderr(self) -> str:
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Client:
    """A test node spinning in a background thread, keeping the latest
    message of each topic it watches."""

    def __init__(self):
        self.node = rclpy.create_node("aicc_sim_test_client")
        self.latest: dict[str, object] = {}
        self.counts: dict[str, int] = {}
        topics = {
            "/ground_truth/world": String, "/ground_truth/odom": Odometry, "/odom": Odometry, "/imu": Imu,
            "/joint_states": JointState, "/camera/image_raw": Image, "/camera/camera_info": CameraInfo,
            "/camera/depth/image_raw": Image, "/camera/depth/camera_info": CameraInfo,
        }
        if Contacts is not None:
            topics["/bumper"] = Contacts
        for topic, msg_type in topics.items():
            self.node.create_subscription(msg_type, topic, self._keeper(topic), RELIABLE)
        self.cmd_vel = self.node.create_publisher(Twist, "/cmd_vel", RELIABLE)
        self.head_topic = self.node.create_publisher(JointTrajectory, "/head_controller/joint_trajectory", RELIABLE)
        if FollowJointTrajectory is not None:
            self.head = ActionClient(self.node, FollowJointTrajectory, "/head_controller/follow_joint_trajectory")
            self.arm = ActionClient(self.node, FollowJointTrajectory, "/arm_controller/follow_joint_trajectory")
            self.gripper = ActionClient(self.node, GripperCommand, "/gripper_controller/gripper_cmd")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _keeper(self, topic):
        def keep(msg):
            self.latest[topic] = msg
            self.counts[topic] = self.counts.get(topic, 0) + 1
        return keep

    # -------------------------------------------------------------- state
    def world(self) -> dict:
        return json.loads(self.latest["/ground_truth/world"].data)

    def sim_time(self) -> float:
        stamp = self.latest["/ground_truth/odom"].header.stamp
        return stamp.sec + stamp.nanosec * 1e-9

    def joint(self, name: str) -> float:
        msg = self.latest["/joint_states"]
        return msg.position[list(msg.name).index(name)]

    def wait_for(self, predicate, timeout_s: float = 20.0, what: str = "condition"):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                value = predicate()
            except (KeyError, ValueError):
                value = None
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}")

    def sleep_sim(self, seconds: float) -> None:
        until = self.sim_time() + seconds
        self.wait_for(lambda: self.sim_time() >= until, timeout_s=10 * seconds + 5, what="sim time")

    # -------------------------------------------------------------- actions
    def send(self, client: ActionClient, goal, timeout_s: float = 30.0, feedback: list | None = None):
        """(accepted, status, result)."""
        assert client.wait_for_server(timeout_sec=10.0), "action server not available"
        future = client.send_goal_async(goal, feedback_callback=(feedback.append if feedback is not None else None))
        handle = self.wait_for(lambda: future.result() if future.done() else None, what="goal response")
        if not handle.accepted:
            return False, None, None
        result_future = handle.get_result_async()
        response = self.wait_for(lambda: result_future.result() if result_future.done() else None,
                                 timeout_s=timeout_s, what="result")
        return True, response.status, response.result

    def trajectory_goal(self, positions: dict, seconds: float):
        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = list(positions)
        goal.trajectory.points = [JointTrajectoryPoint(positions=list(positions.values()),
                                                       time_from_start=duration(seconds))]
        return goal

    def drive(self, linear: float, angular: float, sim_seconds: float, stop_when=None) -> None:
        twist = Twist()
        twist.linear.x, twist.angular.z = linear, angular
        until = self.sim_time() + sim_seconds
        while self.sim_time() < until and not (stop_when and stop_when()):
            self.cmd_vel.publish(twist)
            time.sleep(0.05)
        self.cmd_vel.publish(Twist())

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


@pytest.fixture(scope="module")
def sim():
    domain_id = os.environ.get("AICC_TEST_ROS_DOMAIN_ID", str(30 + os.getpid() % 30))
    process = SimProcess(domain_id)
    if not process.ready.wait(READY_TIMEOUT_S):
        process.stop()
        pytest.fail(f"simulator not ready in {READY_TIMEOUT_S} s:\n{process.stderr()}")
    os.environ["ROS_DOMAIN_ID"] = domain_id
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    rclpy.init()
    yield process
    process.stop()
    rclpy.shutdown()


@pytest.fixture(scope="module")
def client(sim):
    test_client = Client()
    test_client.wait_for(lambda: "/ground_truth/world" in test_client.latest and "/joint_states" in test_client.latest,
                         timeout_s=30, what="first messages")
    yield test_client
    test_client.close()


def test_every_topic_publishes_sane_messages(client):
    topics = ["/ground_truth/world", "/ground_truth/odom", "/odom", "/imu", "/joint_states", "/camera/image_raw",
              "/camera/camera_info", "/camera/depth/image_raw", "/camera/depth/camera_info"]
    if Contacts is not None:
        topics.append("/bumper")
    client.wait_for(lambda: all(t in client.latest for t in topics), what=f"all of {topics}")
    joints = client.latest["/joint_states"]
    assert len(joints.name) == 10 and "gripper_right_joint" in joints.name
    assert len(joints.position) == len(joints.velocity) == len(joints.effort) == 10
    imu = client.latest["/imu"]
    assert imu.header.frame_id == "imu_link" and imu.linear_acceleration.z == pytest.approx(9.81, abs=0.1)
    odom = client.latest["/odom"]
    assert (odom.header.frame_id, odom.child_frame_id) == ("odom", "base_footprint")
    rgb, depth = client.latest["/camera/image_raw"], client.latest["/camera/depth/image_raw"]
    assert (rgb.encoding, rgb.width, rgb.height, rgb.step, len(rgb.data)) == ("rgb8", 320, 240, 960, 320 * 240 * 3)
    assert (depth.encoding, depth.step, len(depth.data)) == ("32FC1", 1280, 320 * 240 * 4)
    assert rgb.header.frame_id == depth.header.frame_id == "camera_optical_frame"
    info = client.latest["/camera/camera_info"]
    assert info.k[0] == pytest.approx(265.23, abs=0.1) and info.k[2] == 159.5 and info.p[10] == 1.0
    world = client.world()
    assert world["objects"]["red_box"]["x"] == pytest.approx(1.5)
    assert world["camera_center_distance_m"] == pytest.approx(2.075, abs=0.02)
    assert world["bumper_in_contact"] is False


def test_depth_and_rgb_frames_share_stamps(client):
    import numpy as np

    def matched_pair():
        rgb, depth = client.latest["/camera/image_raw"], client.latest["/camera/depth/image_raw"]
        return (rgb, depth) if rgb.header.stamp == depth.header.stamp else None

    _, depth = client.wait_for(matched_pair, what="an RGB and a depth frame with one stamp")
    depth_m = np.frombuffer(bytes(depth.data), dtype="<f4").reshape(240, 320)
    assert depth_m[119:121, 159:161].mean() == pytest.approx(client.world()["camera_center_distance_m"], abs=0.02)
    assert np.isinf(depth_m[0]).all()  # sky above the walls


@needs_control_msgs
def test_head_follows_trajectory_action_with_feedback(client):
    feedback = []
    accepted, status, result = client.send(
        client.head, client.trajectory_goal({"head_pan_joint": 0.4, "head_tilt_joint": 0.3}, 1.0), feedback=feedback)
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    assert feedback and list(feedback[-1].feedback.joint_names) == ["head_pan_joint", "head_tilt_joint"]
    assert client.joint("head_pan_joint") == pytest.approx(0.4, abs=0.05)
    assert client.joint("head_tilt_joint") == pytest.approx(0.3, abs=0.05)
    # The topic interface: back to straight ahead.
    msg = JointTrajectory(joint_names=["head_pan_joint", "head_tilt_joint"])
    msg.points = [JointTrajectoryPoint(positions=[0.0, 0.0], time_from_start=duration(0.5))]
    client.head_topic.publish(msg)
    client.wait_for(lambda: abs(client.joint("head_pan_joint")) < 0.02 and abs(client.joint("head_tilt_joint")) < 0.02,
                    what="head back at 0 via the topic")


@needs_control_msgs
def test_invalid_goals_are_rejected(client):
    assert client.send(client.arm, client.trajectory_goal({"elbow": 0.1}, 1.0))[0] is False
    assert client.send(client.arm, client.trajectory_goal({"joint2": 2.5}, 1.0))[0] is False  # limit 1.571
    assert client.send(client.head, client.trajectory_goal({"joint1": 0.1}, 1.0))[0] is False  # not the head's
    goal = GripperCommand.Goal()
    goal.command.position = 0.05  # limit 0.03
    assert client.send(client.gripper, goal)[0] is False


@needs_control_msgs
def test_goal_tolerance_violation_is_reported(client):
    goal = client.trajectory_goal({"joint2": -1.0}, 0.3)
    goal.goal_tolerance = [JointTolerance(name="joint2", position=1e-6)]
    goal.goal_time_tolerance = duration(0.05)
    accepted, status, result = client.send(client.arm, goal)
    assert accepted and status == GoalStatus.STATUS_ABORTED
    assert result.error_code == FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED
    assert "joint2" in result.error_string


@needs_control_msgs
def test_arm_goal_can_be_canceled(client):
    assert client.arm.wait_for_server(timeout_sec=10.0)
    future = client.arm.send_goal_async(client.trajectory_goal({"joint1": 1.5}, 4.0))
    handle = client.wait_for(lambda: future.result() if future.done() else None, what="goal response")
    assert handle.accepted
    client.sleep_sim(0.5)
    cancel = handle.cancel_goal_async()
    client.wait_for(lambda: cancel.done(), what="cancel response")
    result_future = handle.get_result_async()
    response = client.wait_for(lambda: result_future.result() if result_future.done() else None, what="result")
    assert response.status == GoalStatus.STATUS_CANCELED
    stopped_at = client.joint("joint1")
    assert 0.05 < stopped_at < 0.8
    client.sleep_sim(1.0)
    assert client.joint("joint1") == pytest.approx(stopped_at, abs=0.05)  # held, not finishing the move
    accepted, status, _ = client.send(client.arm, client.trajectory_goal(STOWED_ARM, 1.5))
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED


@needs_control_msgs
def test_gripper_grasps_and_lifts_the_cube(client):
    cube_z_m = client.world()["objects"]["cube"]["z"]
    open_goal = GripperCommand.Goal()
    open_goal.command.position = GRIPPER_OPEN_M
    accepted, status, result = client.send(client.gripper, open_goal)
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED and result.reached_goal and not result.stalled
    for pose, seconds in ((ABOVE_CUBE_ARM, 2.0), (GRASP_ARM, 1.5)):
        accepted, status, result = client.send(client.arm, client.trajectory_goal(pose, seconds))
        assert accepted and result.error_code == FollowJointTrajectory.Result.SUCCESSFUL, result.error_string
    close_goal = GripperCommand.Goal()
    close_goal.command.position = 0.0
    close_goal.command.max_effort = 5.0
    accepted, status, result = client.send(client.gripper, close_goal)
    # Closed on the 35 mm cube: stalled short of the goal, squeezing.
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED
    assert result.stalled and not result.reached_goal
    assert result.position == pytest.approx(0.0175, abs=0.002)
    assert abs(result.effort) > 1.0
    accepted, status, result = client.send(client.arm, client.trajectory_goal(ABOVE_CUBE_ARM, 1.5))
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED
    client.sleep_sim(0.5)
    assert client.world()["objects"]["cube"]["z"] > cube_z_m + 0.09
    accepted, status, _ = client.send(client.arm, client.trajectory_goal(STOWED_ARM, 2.0))
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED


def test_cmd_vel_drives_half_a_metre_and_odometry_agrees(client):
    start_truth = client.latest["/ground_truth/odom"].pose.pose.position
    start_odom = client.latest["/odom"].pose.pose.position
    client.wait_for(lambda: client.cmd_vel.get_subscription_count() > 0, what="the sim's /cmd_vel subscription")
    client.drive(0.2, 0.0, 2.5)
    client.sleep_sim(1.0)
    end_truth = client.latest["/ground_truth/odom"].pose.pose.position
    end_odom = client.latest["/odom"].pose.pose.position
    truth_m = math.hypot(end_truth.x - start_truth.x, end_truth.y - start_truth.y)
    odom_m = math.hypot(end_odom.x - start_odom.x, end_odom.y - start_odom.y)
    # Commands go out every 50 ms wall time: allow for the first one's latency.
    assert truth_m == pytest.approx(0.5, abs=0.04)
    assert odom_m == pytest.approx(truth_m, abs=0.01)
    assert abs(end_truth.y - start_truth.y) < 0.01


@pytest.mark.skipif(Contacts is None, reason="ros_gz_interfaces not built")
def test_bumper_reports_the_red_box(client):
    client.drive(0.25, 0.0, 8.0, stop_when=lambda: client.world()["bumper_in_contact"])
    world = client.world()
    assert world["bumper_in_contact"], f"no contact; robot at {world['base']}"
    assert {c["other"] for c in world["bumper_contacts"]} == {"red_box"}
    contacts = client.wait_for(lambda: client.latest["/bumper"].contacts, timeout_s=5, what="/bumper contacts")
    contact = contacts[0]
    assert contact.collision1.name.endswith("bumper_collision") and "red_box" in contact.collision2.name
    assert contact.positions[0].x == pytest.approx(1.4, abs=0.02) and contact.normals[0].x > 0.9
    assert len(contact.depths) == len(contact.positions)
    client.drive(-0.2, 0.0, 1.0)  # back off


def test_sigterm_exits_cleanly_and_fast(sim, client):
    start = time.monotonic()
    sim.proc.send_signal(signal.SIGTERM)
    returncode = sim.proc.wait(timeout=10)
    assert returncode == 0, sim.stderr()
    assert time.monotonic() - start < 3.0
