"""The MuJoCo side of the simulator, without ROS: model construction from
the URDF, stepping, joint servo setpoints, and sensor/ground-truth readouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

import urdf_to_mjcf
import world
from urdf_model import Joint, Robot, parse_urdf

GEOM = mujoco.mjtObj.mjOBJ_GEOM
BODY = mujoco.mjtObj.mjOBJ_BODY


@dataclass
class Contact:
    """One contact point between a watched geom and another geom."""
    geom: str  # the watched geom (e.g. the bumper)
    geom_body: str
    other: str
    other_body: str
    other_id: int
    position_m: np.ndarray  # world frame
    normal: np.ndarray  # world frame, pointing from the watched geom to the other
    depth_m: float  # penetration, > 0
    force_n: np.ndarray  # force on the watched geom, world frame


def quat_to_yaw(quat_wxyz: np.ndarray) -> float:
    w, x, y, z = quat_wxyz
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


class Simulation:
    """MuJoCo model + data built from a URDF and the room in world.py."""

    def __init__(self, robot: Robot, options: urdf_to_mjcf.MjcfOptions | None = None,
                 objects: tuple[world.WorldObject, ...] = world.OBJECTS):
        self.robot = robot
        self.objects = objects
        self.model = world.build_model(robot, options, objects)
        self.data = mujoco.MjData(self.model)
        self.timestep_s = float(self.model.opt.timestep)
        self.movable_joints: list[Joint] = robot.movable_joints()
        self._qpos_adr = {j.name: int(self.model.joint(j.name).qposadr[0]) for j in self.movable_joints}
        self._dof_adr = {j.name: int(self.model.joint(j.name).dofadr[0]) for j in self.movable_joints}
        self._actuator_id = {
            j.name: int(self.model.actuator(j.name).id) for j in self.movable_joints if j.mimic is None
        }
        self.root_body_id = int(self.model.body(robot.root_link).id)
        self.floor_geom_id = int(self.model.geom(world.FLOOR_GEOM).id)
        self._force6 = np.zeros(6)
        mujoco.mj_forward(self.model, self.data)

    @classmethod
    def from_urdf(cls, path: str | Path, options: urdf_to_mjcf.MjcfOptions | None = None) -> "Simulation":
        return cls(parse_urdf(path), options)

    # ------------------------------------------------------------ stepping
    @property
    def time_s(self) -> float:
        return float(self.data.time)

    def step(self, n_steps: int = 1, on_step=None) -> None:
        """`n_steps` physics steps; `on_step(self)` after each one when given
        (what happens between two readouts, e.g. a brief contact)."""
        if on_step is None:
            mujoco.mj_step(self.model, self.data, nstep=n_steps)
            return
        for _ in range(n_steps):
            mujoco.mj_step(self.model, self.data)
            on_step(self)

    # ------------------------------------------------------------ joints
    def joint_position(self, name: str) -> float:
        return float(self.data.qpos[self._qpos_adr[name]])

    def joint_velocity(self, name: str) -> float:
        return float(self.data.qvel[self._dof_adr[name]])

    def joint_effort(self, name: str) -> float:
        """Actuator force/torque at the joint (N or N*m); a mimic joint
        reports its leader's effort, as ros2_control's mimic joints do."""
        joint = self.robot.joints[name]
        if joint.mimic is not None:
            return joint.mimic.multiplier * self.joint_effort(joint.mimic.joint)
        return float(self.data.qfrc_actuator[self._dof_adr[name]])

    def set_joint_position(self, name: str, position: float) -> None:
        """Teleports a joint (and its mimics) and holds it there: for the
        initial pose only."""
        self.data.qpos[self._qpos_adr[name]] = position
        if name in self._actuator_id:
            self.data.ctrl[self._actuator_id[name]] = position
        for joint in self.movable_joints:
            if joint.mimic is not None and joint.mimic.joint == name:
                self.data.qpos[self._qpos_adr[joint.name]] = joint.mimic.offset + joint.mimic.multiplier * position
        mujoco.mj_forward(self.model, self.data)

    def set_control(self, name: str, value: float) -> None:
        """Position (m or rad) for position servos, velocity (rad/s) for wheels."""
        self.data.ctrl[self._actuator_id[name]] = value

    def control(self, name: str) -> float:
        return float(self.data.ctrl[self._actuator_id[name]])

    def set_effort_limit(self, name: str, effort: float) -> None:
        """Changes a servo's force limit at run time (gripper max_effort)."""
        actuator = self._actuator_id[name]
        self.model.actuator_forcerange[actuator] = (-effort, effort)
        self.model.jnt_actfrcrange[self.model.joint(name).id] = (-effort, effort)

    # ------------------------------------------------------------ base
    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(position_m xyz, quaternion wxyz) of the root link in the world."""
        return self.data.xpos[self.root_body_id].copy(), self.data.xquat[self.root_body_id].copy()

    def base_twist_local(self) -> tuple[np.ndarray, np.ndarray]:
        """(linear m/s, angular rad/s) of the root link, in its own frame."""
        velocity = np.zeros(6)
        mujoco.mj_objectVelocity(self.model, self.data, BODY, self.root_body_id, velocity, 1)
        return velocity[3:].copy(), velocity[:3].copy()

    # ------------------------------------------------------------ imu
    def imu(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(orientation wxyz in the world, angular velocity rad/s and linear
        acceleration m/s^2 including gravity, both in the IMU frame)."""
        sensor = self.data.sensor
        return (
            sensor(urdf_to_mjcf.IMU_QUAT_SENSOR).data.copy(),
            sensor(urdf_to_mjcf.IMU_GYRO_SENSOR).data.copy(),
            sensor(urdf_to_mjcf.IMU_ACCEL_SENSOR).data.copy(),
        )

    # ------------------------------------------------------------ contacts
    def geom_ids(self, names: list[str]) -> set[int]:
        return {int(self.model.geom(name).id) for name in names}

    def _body_name(self, geom_id: int) -> str:
        return self.model.body(int(self.model.geom_bodyid[geom_id])).name

    def contacts_of(self, geom_ids: set[int], ignore_floor: bool = True) -> list[Contact]:
        contacts = []
        for i in range(self.data.ncon):
            raw = self.data.contact[i]
            if raw.geom1 in geom_ids:
                mine, other, sign = raw.geom1, raw.geom2, 1.0
            elif raw.geom2 in geom_ids:
                mine, other, sign = raw.geom2, raw.geom1, -1.0
            else:
                continue
            if ignore_floor and other == self.floor_geom_id:
                continue
            mujoco.mj_contactForce(self.model, self.data, i, self._force6)
            frame = raw.frame.reshape(3, 3)
            # mj_contactForce is the force geom1 exerts on geom2, in the contact frame.
            force_on_geom2 = frame.T @ self._force6[:3]
            contacts.append(Contact(
                geom=self.model.geom(mine).name, geom_body=self._body_name(mine),
                other=self.model.geom(other).name, other_body=self._body_name(other), other_id=int(other),
                position_m=raw.pos.copy(), normal=sign * frame[0].copy(), depth_m=max(0.0, -float(raw.dist)),
                force_n=-sign * force_on_geom2,
            ))
        return contacts

    # ------------------------------------------------------------ camera / rays
    def camera_pose(self, camera: str) -> tuple[np.ndarray, np.ndarray]:
        """(position, optical axis unit vector) of a MuJoCo camera (it looks along its -Z)."""
        cam = self.data.camera(camera)
        return cam.xpos.copy(), -cam.xmat.reshape(3, 3)[:, 2].copy()

    def ray_distance(self, origin: np.ndarray, direction: np.ndarray, exclude_body: int) -> float | None:
        """Distance to the first rendered surface (world and robot visuals)."""
        groups = np.zeros(6, dtype=np.uint8)
        groups[urdf_to_mjcf.WORLD_GROUP] = 1
        groups[urdf_to_mjcf.ROBOT_VISUAL_GROUP] = 1
        geom_id = np.zeros(1, dtype=np.int32)
        distance = mujoco.mj_ray(self.model, self.data, origin, direction, groups, 1, exclude_body, geom_id)
        return None if distance < 0 else float(distance)

    # ------------------------------------------------------------ world
    def place_object(self, name: str, x_m: float, y_m: float, yaw_rad: float | None = None,
                     z_m: float | None = None) -> None:
        """Moves an object of the world (generators: AICC place_object). A
        movable one is teleported at rest; a fixed one moves with its body.
        Raises KeyError for an unknown name, ValueError outside the room."""
        obj = next((o for o in self.objects if o.name == name), None)
        if obj is None:
            raise KeyError(f"no object '{name}' (objects: {', '.join(o.name for o in self.objects)})")
        limit = world.ROOM_HALF_SIZE_M - 0.05
        if not (abs(x_m) <= limit and abs(y_m) <= limit):
            raise ValueError(f"({x_m:.2f}, {y_m:.2f}) is outside the room (|x|, |y| <= {limit} m)")
        body = self.model.body(name)
        if obj.movable:
            adr = int(self.model.joint(f"{name}_freejoint").qposadr[0])
            qpos = self.data.qpos[adr:adr + 7]
            z = float(qpos[2]) if z_m is None else z_m
            yaw = quat_to_yaw(qpos[3:7]) if yaw_rad is None else yaw_rad
            qpos[:] = (x_m, y_m, z, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
            dof = int(self.model.joint(f"{name}_freejoint").dofadr[0])
            self.data.qvel[dof:dof + 6] = 0.0
        else:
            z = float(self.model.body_pos[body.id][2]) if z_m is None else z_m
            self.model.body_pos[body.id] = (x_m, y_m, z)
            if yaw_rad is not None:
                self.model.body_quat[body.id] = (math.cos(yaw_rad / 2), 0.0, 0.0, math.sin(yaw_rad / 2))
        mujoco.mj_forward(self.model, self.data)

    def object_positions(self) -> dict[str, np.ndarray]:
        return {obj.name: self.data.xpos[self.model.body(obj.name).id].copy() for obj in self.objects}

    def object_poses(self) -> dict[str, tuple[float, float, float, float]]:
        """(x, y, z, yaw) of every object in the world frame."""
        poses = {}
        for obj in self.objects:
            body = self.model.body(obj.name).id
            x, y, z = (float(v) for v in self.data.xpos[body])
            poses[obj.name] = (x, y, z, quat_to_yaw(self.data.xquat[body]))
        return poses

    def park_object(self, name: str, x_m: float, y_m: float) -> None:
        """Moves an object anywhere, the room's limits aside (a parking
        place outside it), at its initial height and heading, at rest."""
        obj = next(o for o in self.objects if o.name == name)
        body = self.model.body(name)
        quat = (math.cos(obj.yaw_rad / 2), 0.0, 0.0, math.sin(obj.yaw_rad / 2))
        if obj.movable:
            adr = int(self.model.joint(f"{name}_freejoint").qposadr[0])
            self.data.qpos[adr:adr + 7] = (x_m, y_m, obj.position_m[2], *quat)
            dof = int(self.model.joint(f"{name}_freejoint").dofadr[0])
            self.data.qvel[dof:dof + 6] = 0.0
        else:
            self.model.body_pos[body.id] = (x_m, y_m, obj.position_m[2])
            self.model.body_quat[body.id] = quat
        mujoco.mj_forward(self.model, self.data)

    def reset_objects(self) -> None:
        """Every object back where the world started it."""
        for obj in self.objects:
            self.park_object(obj.name, obj.position_m[0], obj.position_m[1])

    def teleport_base(self, x_m: float, y_m: float) -> None:
        """Moves the robot to (x, y) in the world keeping its heading and
        height, at rest. The wheels do not turn, so wheel odometry does not
        see it (a test's scene, not something a robot can do)."""
        adr = int(self.model.joint(urdf_to_mjcf.free_joint_name(self.robot)).qposadr[0])
        dof = int(self.model.joint(urdf_to_mjcf.free_joint_name(self.robot)).dofadr[0])
        self.data.qpos[adr] = x_m
        self.data.qpos[adr + 1] = y_m
        self.data.qvel[dof:dof + 6] = 0.0
        mujoco.mj_forward(self.model, self.data)

    def robot_geom_mask(self) -> np.ndarray:
        """Per geom: whether it belongs to the robot (its root body's tree)."""
        root_of_body = self.model.body_rootid
        return np.array([root_of_body[self.model.geom_bodyid[g]] == self.root_body_id for g in range(self.model.ngeom)])
