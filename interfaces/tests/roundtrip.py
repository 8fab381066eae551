#!/usr/bin/env python3
"""Round-trips the interface packages built from interfaces/ through rclpy.

In one process: a FollowJointTrajectory and a GripperCommand action server
and client exchange a goal, feedback and result, and a Contacts message is
published and received. Every field set on one side is checked on the other.

    ROS_DOMAIN_ID=73 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST \
      scripts/ros-env python3 interfaces/tests/roundtrip.py

Exits 0 and prints 'N passed, 0 failed' when everything arrived intact.
"""
import sys
import threading
import time

import rclpy
from rclpy.action import ActionClient, ActionServer
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import JointComponentTolerance, JointTolerance
from geometry_msgs.msg import Transform, Vector3, Wrench
from ros_gz_interfaces.msg import Contact, Contacts, Entity, JointWrench
from std_msgs.msg import String, UInt32
from trajectory_msgs.msg import (JointTrajectoryPoint,
                                 MultiDOFJointTrajectoryPoint)

TIMEOUT = 20.0
results = []


def check(name, ok, detail=''):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}",
          flush=True)


def wait(future, what):
    deadline = time.monotonic() + TIMEOUT
    while not future.done():
        if time.monotonic() > deadline:
            raise TimeoutError(f'timed out waiting for {what}')
        time.sleep(0.01)
    return future.result()


class Servers(Node):
    def __init__(self):
        super().__init__('interfaces_roundtrip_server')
        self.received_fjt = None
        self.received_grip = None
        ActionServer(self, FollowJointTrajectory, 'arm/follow_joint_trajectory',
                     self.execute_fjt)
        ActionServer(self, GripperCommand, 'gripper/gripper_cmd', self.execute_grip)

    def execute_fjt(self, goal_handle):
        goal = goal_handle.request
        self.received_fjt = goal
        fb = FollowJointTrajectory.Feedback()
        fb.header.frame_id = 'base_link'
        fb.joint_names = list(goal.trajectory.joint_names)
        fb.desired = goal.trajectory.points[-1]
        fb.actual.positions = [p - 0.01 for p in goal.trajectory.points[-1].positions]
        fb.multi_dof_joint_names = list(goal.multi_dof_trajectory.joint_names)
        goal_handle.publish_feedback(fb)
        goal_handle.succeed()
        result = FollowJointTrajectory.Result()
        result.error_code = FollowJointTrajectory.Result.SUCCESSFUL
        result.error_string = f'reached {len(goal.trajectory.points)} points'
        return result

    def execute_grip(self, goal_handle):
        self.received_grip = goal_handle.request
        fb = GripperCommand.Feedback(position=0.02, effort=1.5)
        goal_handle.publish_feedback(fb)
        goal_handle.abort()
        return GripperCommand.Result(position=0.021, effort=9.0, stalled=True,
                                     reached_goal=False)


def fjt_goal():
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.header.frame_id = 'base_link'
    goal.trajectory.joint_names = ['shoulder', 'elbow', 'wrist']
    for i in range(3):
        pt = JointTrajectoryPoint()
        pt.positions = [0.1 * i, -0.2 * i, 0.3 * i]
        pt.velocities = [0.0, 0.0, 0.0]
        pt.time_from_start = Duration(sec=i, nanosec=500_000_000)
        goal.trajectory.points.append(pt)
    goal.multi_dof_trajectory.joint_names = ['base']
    mpt = MultiDOFJointTrajectoryPoint()
    mpt.transforms = [Transform(translation=Vector3(x=1.0, y=2.0, z=0.0))]
    mpt.time_from_start = Duration(sec=4)
    goal.multi_dof_trajectory.points = [mpt]
    goal.path_tolerance = [JointTolerance(name='elbow', position=0.05, velocity=-1.0)]
    goal.goal_tolerance = [JointTolerance(name='wrist', position=0.01)]
    goal.component_path_tolerance = [JointComponentTolerance(
        joint_name='base', component=JointComponentTolerance.TRANSLATION, position=0.2)]
    goal.goal_time_tolerance = Duration(sec=1, nanosec=250_000_000)
    return goal


def contacts_msg():
    msg = Contacts()
    msg.header.frame_id = 'world'
    msg.header.stamp.sec = 42
    c = Contact()
    c.collision1 = Entity(id=7, name='robot::gripper_left::collision', type=Entity.COLLISION)
    c.collision2 = Entity(id=9, name='cube::link::collision', type=Entity.COLLISION)
    c.positions = [Vector3(x=0.5, y=0.1, z=0.02), Vector3(x=0.5, y=0.12, z=0.02)]
    c.normals = [Vector3(z=1.0), Vector3(z=1.0)]
    c.depths = [0.001, 0.0015]
    w = JointWrench()
    w.body_1_name = String(data='gripper_left')
    w.body_1_id = UInt32(data=7)
    w.body_2_name = String(data='cube')
    w.body_2_id = UInt32(data=9)
    w.body_1_wrench = Wrench(force=Vector3(x=-2.0))
    w.body_2_wrench = Wrench(force=Vector3(x=2.0))
    c.wrenches = [w]
    msg.contacts = [c]
    return msg


def main():
    rclpy.init()
    server = Servers()
    client = Node('interfaces_roundtrip_client')
    received = []
    got_contacts = threading.Event()

    def on_contacts(msg):
        received.append(msg)
        got_contacts.set()

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    client.create_subscription(Contacts, 'contacts', on_contacts, qos)
    pub = server.create_publisher(Contacts, 'contacts', qos)
    fjt = ActionClient(client, FollowJointTrajectory, 'arm/follow_joint_trajectory')
    grip = ActionClient(client, GripperCommand, 'gripper/gripper_cmd')

    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(server)
    executor.add_node(client)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    try:
        # --- FollowJointTrajectory -------------------------------------------
        check('FollowJointTrajectory server discovered', fjt.wait_for_server(timeout_sec=TIMEOUT))
        feedback = []
        goal = fjt_goal()
        handle = wait(fjt.send_goal_async(goal, feedback_callback=feedback.append),
                      'FollowJointTrajectory goal response')
        check('FollowJointTrajectory goal accepted', handle.accepted)
        res = wait(handle.get_result_async(), 'FollowJointTrajectory result')
        check('FollowJointTrajectory result SUCCEEDED', res.status == 4, f'status {res.status}')
        check('FollowJointTrajectory result fields',
              res.result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
              and res.result.error_string == 'reached 3 points', str(res.result))
        check('FollowJointTrajectory goal arrived intact', server.received_fjt == goal,
              str(server.received_fjt))
        deadline = time.monotonic() + 2.0
        while not feedback and time.monotonic() < deadline:
            time.sleep(0.01)
        fb = feedback[0].feedback if feedback else None
        check('FollowJointTrajectory feedback',
              fb is not None and fb.joint_names == goal.trajectory.joint_names
              and fb.desired == goal.trajectory.points[-1]
              and fb.multi_dof_joint_names == ['base'], str(fb))

        # --- GripperCommand --------------------------------------------------
        check('GripperCommand server discovered', grip.wait_for_server(timeout_sec=TIMEOUT))
        ggoal = GripperCommand.Goal()
        ggoal.command.position = 0.0
        ggoal.command.max_effort = 10.0
        gfb = []
        ghandle = wait(grip.send_goal_async(ggoal, feedback_callback=gfb.append),
                       'GripperCommand goal response')
        gres = wait(ghandle.get_result_async(), 'GripperCommand result')
        check('GripperCommand goal arrived intact', server.received_grip == ggoal,
              str(server.received_grip))
        check('GripperCommand result ABORTED with fields',
              gres.status == 6 and gres.result.stalled and not gres.result.reached_goal
              and gres.result.position == 0.021 and gres.result.effort == 9.0,
              f'status {gres.status} {gres.result}')

        # --- Contacts ----------------------------------------------------------
        sent = contacts_msg()
        deadline = time.monotonic() + TIMEOUT
        while not got_contacts.is_set() and time.monotonic() < deadline:
            pub.publish(sent)
            got_contacts.wait(0.2)
        check('Contacts received', bool(received))
        check('Contacts arrived intact', bool(received) and received[0] == sent,
              str(received[0]) if received else '')
    except TimeoutError as e:
        check('no timeout', False, str(e))
    finally:
        executor.shutdown()
        server.destroy_node()
        client.destroy_node()
        rclpy.try_shutdown()

    passed = sum(results)
    failed = len(results) - passed
    print(f'{passed} passed, {failed} failed')
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == '__main__':
    sys.exit(main())
