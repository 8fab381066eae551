"""The simulator with --controller-interface topic (a bringup without the
action servers): the head, arm and gripper controllers serve no action,
and take trajectory_msgs/JointTrajectory on <controller>/joint_trajectory;
an empty trajectory is refused (as recent joint_trajectory_controllers
refuse it) and one waypoint at time 0 holds a controller there. One
simulator for the module, in a ROS domain of its own; waits are in sim time.
"""

from __future__ import annotations

import os

import pytest

rclpy = pytest.importorskip("rclpy")

from test_ros_sim import READY_TIMEOUT_S, RELIABLE, Client, SimProcess, duration  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

try:
    from control_msgs.action import FollowJointTrajectory  # noqa: F401
except ImportError:
    FollowJointTrajectory = None


@pytest.fixture(scope="module")
def client():
    domain_id = os.environ.get("AICC_TEST_ROS_DOMAIN_ID_TOPICS", str(60 + os.getpid() % 30))
    process = SimProcess(domain_id, ("--controller-interface", "topic"))
    if not process.ready.wait(READY_TIMEOUT_S):
        process.stop()
        pytest.fail(f"simulator not ready in {READY_TIMEOUT_S} s:\n{process.stderr()}")
    os.environ["ROS_DOMAIN_ID"] = domain_id
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    rclpy.init()
    test_client = Client()
    test_client.wait_for(lambda: "/ground_truth/odom" in test_client.latest and "/joint_states" in test_client.latest,
                         timeout_s=30, what="first messages")
    yield test_client
    test_client.close()
    process.stop()
    rclpy.shutdown()


PUBLISHERS: dict = {}


def publish(client, controller: str, positions: dict, seconds: float | None) -> None:
    """A trajectory of one waypoint at `seconds` (no points when None),
    from one publisher per controller (a new publisher's first message may
    go before the subscriber has matched it)."""
    publisher = PUBLISHERS.get(controller)
    if publisher is None:
        publisher = client.node.create_publisher(JointTrajectory, f"/{controller}/joint_trajectory", RELIABLE)
        client.wait_for(lambda: publisher.get_subscription_count() > 0, what=f"{controller} subscriber")
        client.sleep_sim(0.5)
        PUBLISHERS[controller] = publisher
    msg = JointTrajectory(joint_names=list(positions))
    if seconds is not None:
        msg.points = [JointTrajectoryPoint(positions=list(positions.values()), time_from_start=duration(seconds))]
    publisher.publish(msg)


@pytest.mark.skipif(FollowJointTrajectory is None, reason="control_msgs not built")
def test_no_action_server_answers(client):
    for action in (client.head, client.arm, client.gripper):
        assert not action.wait_for_server(timeout_sec=2.0), "an action server answered with --controller-interface topic"


def test_head_arm_and_gripper_follow_their_topics(client):
    publish(client, "head_controller", {"head_pan_joint": 0.3, "head_tilt_joint": -0.2}, 1.0)
    publish(client, "arm_controller", {"joint1": 0.4, "joint2": -0.8, "joint3": 0.9, "joint4": 0.6}, 2.0)
    publish(client, "gripper_controller", {"gripper_left_joint": 0.012}, 1.0)
    client.sleep_sim(3.0)
    assert client.joint("head_pan_joint") == pytest.approx(0.3, abs=0.03)
    assert client.joint("head_tilt_joint") == pytest.approx(-0.2, abs=0.03)
    assert client.joint("joint1") == pytest.approx(0.4, abs=0.03)
    assert client.joint("joint4") == pytest.approx(0.6, abs=0.03)
    assert client.joint("gripper_left_joint") == pytest.approx(0.012, abs=0.002)


def test_an_empty_trajectory_is_refused_and_a_waypoint_at_time_zero_holds_the_arm(client):
    start = client.joint("joint1")
    publish(client, "arm_controller", {"joint1": start + 1.2, "joint2": -0.8, "joint3": 0.9, "joint4": 0.6}, 4.0)
    client.sleep_sim(1.0)
    publish(client, "arm_controller", {"joint1": 0.0, "joint2": 0.0, "joint3": 0.0, "joint4": 0.0}, None)
    at_empty = client.joint("joint1")
    client.sleep_sim(0.3)
    going = client.joint("joint1")
    # 1.2 rad in 4 s: 0.09 rad in 0.3 s, had the empty trajectory been ignored.
    assert going > at_empty + 0.05, f"joint1 {at_empty} -> {going}: the empty trajectory stopped the arm"
    here = {name: client.joint(name) for name in ("joint1", "joint2", "joint3", "joint4")}
    publish(client, "arm_controller", here, 0.0)
    client.sleep_sim(0.3)
    stopped = client.joint("joint1")
    assert stopped == pytest.approx(here["joint1"], abs=0.03), f"joint1 at {stopped}: not held at {here['joint1']}"
    client.sleep_sim(2.0)
    assert client.joint("joint1") == pytest.approx(stopped, abs=0.03), "the arm went on after the hold"
