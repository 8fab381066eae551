"""URDF -> MJCF converter for the aicc_bot simulator.

The simulator builds its MuJoCo model from the URDF at every start, so the
robot description has a single source (urdf/aicc_bot.urdf). Names carry over
unchanged: every URDF link becomes a MuJoCo body, every movable joint a
MuJoCo joint and an actuator of the same name, collision geoms keep their
URDF <collision name>.

What URDF does not say, and how it is filled in (a simple servo model):
- continuous joints (wheels) get velocity actuators; revolute/prismatic
  joints get position actuators (as ros2_control position interfaces);
  mimic joints get no actuator, only an equality constraint;
- every actuator's force is limited to the URDF effort limit (and the joint's
  total actuator force too): without torque limits the wheels make the robot
  jump;
- position gains are chosen so a servo reaches its effort limit at a fixed
  position error, critically damped (MuJoCo's dampratio);
- geared motors have a large reflected rotor inertia: modelled as armature.
  It matters for the wheels too: with a bare wheel's tiny inertia the stiff
  velocity servo and the contact solver disagree at a 2 ms step, and the
  base spins or surges ahead of what the wheels roll (odometry off by 30 %
  in transients);
- friction comes from <gazebo reference=...><mu1>; geoms with an explicit
  friction win over the floor's (priority 1), frictionless (mu1 = 0) geoms
  get condim 1 so casters never take traction from the wheels;
- wheel collision cylinders become ellipsoids of the same radius and width
  (a rounded tyre): a rigid cylinder touches the floor at both rim edges, and
  the two contacts scrub against each other whenever the robot turns, making
  the wheels slip by 5-50 %;
- the robot does not collide with itself (contype/conaffinity bits), only
  with the world.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from urdf_model import Geometry, Inertial, Joint, Link, Pose, Robot

# Contact bits: world geoms are (contype=1, conaffinity=1), robot geoms
# (contype=2, conaffinity=1): robot-world pairs collide, robot-robot pairs don't.
WORLD_CONTYPE, WORLD_CONAFFINITY = 1, 1
ROBOT_CONTYPE, ROBOT_CONAFFINITY = 2, 1
# Geom groups: 0 world, 1 robot visuals (rendered), 3 robot collisions (hidden).
WORLD_GROUP, ROBOT_VISUAL_GROUP, ROBOT_COLLISION_GROUP = 0, 1, 3

# Servo model (see module docstring).
REVOLUTE_ERROR_AT_FULL_EFFORT_RAD = 0.05
PRISMATIC_ERROR_AT_FULL_EFFORT_M = 0.005
WHEEL_VELOCITY_ERROR_AT_FULL_EFFORT_RAD_S = 0.5
# ~1e-7 kg*m^2 rotor behind a ~1:250 gearbox.
REVOLUTE_ARMATURE_KG_M2 = 0.005
PRISMATIC_ARMATURE_KG = 0.05
# Contacts: stiffer than MuJoCo's default (time constant 10 ms, default 20 ms)
# so the wheels sink in ~0.1 mm and roll on the URDF radius that wheel
# odometry uses (0.2 % off; 1 % with the default). Stiffer still (5 ms) makes
# the robot hop when it pushes against an obstacle with spinning wheels.
ROBOT_CONTACT_SOLREF = "0.01 1"
MIMIC_SOLREF = "0.005 1"
# Frictionless contact still needs a valid friction vector.
DEFAULT_TORSIONAL_FRICTION = 0.005
DEFAULT_ROLLING_FRICTION = 0.0001

SKYBOX_DISTANCE_FACTOR = 4.0

IMU_SITE = "imu"
IMU_ACCEL_SENSOR = "imu_accelerometer"
IMU_GYRO_SENSOR = "imu_gyro"
IMU_QUAT_SENSOR = "imu_orientation"
FREE_JOINT_SUFFIX = "_freejoint"


@dataclass
class MjcfOptions:
    timestep_s: float = 0.002
    image_width_px: int = 320
    image_height_px: int = 240
    # Initial pose of the root link (base_footprint) in the world.
    x_m: float = 0.0
    y_m: float = 0.0
    yaw_rad: float = 0.0
    # Lift the robot this much at start so nothing starts in penetration.
    spawn_clearance_m: float = 0.001


def fmt(*values: float) -> str:
    return " ".join(f"{v:.9g}" for v in values)


def vertical_fov_deg(horizontal_fov_rad: float, width_px: int, height_px: int) -> float:
    """MuJoCo cameras take a vertical field of view (degrees); Gazebo/URDF a
    horizontal one. Square pixels: tan(v/2) = tan(h/2) * height / width."""
    return math.degrees(2.0 * math.atan(math.tan(horizontal_fov_rad / 2.0) * height_px / width_px))


def free_joint_name(robot: Robot) -> str:
    return robot.root_link + FREE_JOINT_SUFFIX


# ---------------------------------------------------------------- elements

def _set_pose(elem: ET.Element, pose: Pose) -> None:
    if any(pose.xyz):
        elem.set("pos", fmt(*pose.xyz))
    if any(pose.rpy):
        elem.set("quat", fmt(*pose.quat_wxyz()))


def _geom_size(geometry: Geometry) -> str:
    if geometry.kind == "box":
        return fmt(*(s / 2.0 for s in geometry.size))  # MJCF boxes take half sizes
    if geometry.kind == "cylinder":
        radius, length = geometry.size
        return fmt(radius, length / 2.0)  # MJCF cylinders take half lengths
    return fmt(geometry.size[0])


def _add_geom(body: ET.Element, geometry: Geometry, visual: bool, tyre: bool = False) -> ET.Element:
    if tyre and geometry.kind == "cylinder":
        radius, length = geometry.size
        # Ellipsoid semi-axes in the cylinder's frame (its axis is local z).
        geom = ET.SubElement(body, "geom", name=geometry.name, type="ellipsoid", size=fmt(radius, radius, length / 2))
    else:
        geom = ET.SubElement(body, "geom", name=geometry.name, type=geometry.kind, size=_geom_size(geometry))
    _set_pose(geom, geometry.origin)
    if visual:
        geom.set("class", "robot_visual")
        if geometry.rgba is not None:
            geom.set("rgba", fmt(*geometry.rgba))
    else:
        geom.set("class", "robot_collision")
    return geom


def _apply_friction(geom: ET.Element, mu: float) -> None:
    geom.set("friction", fmt(mu, DEFAULT_TORSIONAL_FRICTION, DEFAULT_ROLLING_FRICTION))
    # Higher priority: this geom's friction is used instead of max(floor, geom).
    geom.set("priority", "1")
    if mu <= 0.0:
        geom.set("condim", "1")


def _add_inertial(body: ET.Element, inertial: Inertial) -> None:
    elem = ET.SubElement(body, "inertial", mass=fmt(inertial.mass_kg), fullinertia=fmt(*inertial.inertia))
    elem.set("pos", fmt(*inertial.origin.xyz))
    if any(inertial.origin.rpy):
        elem.set("quat", fmt(*inertial.origin.quat_wxyz()))


def _add_joint(body: ET.Element, joint: Joint) -> None:
    kind = "slide" if joint.type == "prismatic" else "hinge"
    elem = ET.SubElement(body, "joint", name=joint.name, type=kind, axis=fmt(*joint.axis))
    if joint.has_position_limits:
        elem.set("range", fmt(joint.lower, joint.upper))
    if joint.damping:
        elem.set("damping", fmt(joint.damping))
    if joint.friction:
        elem.set("frictionloss", fmt(joint.friction))
    elem.set("armature", fmt(_armature(joint)))
    if joint.mimic is None:
        # Clamp the total actuator force at the joint to the URDF effort limit.
        elem.set("actuatorfrcrange", fmt(-joint.effort, joint.effort))


def _armature(joint: Joint) -> float:
    return PRISMATIC_ARMATURE_KG if joint.type == "prismatic" else REVOLUTE_ARMATURE_KG_M2


def _add_link_contents(body: ET.Element, robot: Robot, link: Link, is_wheel: bool = False) -> None:
    if link.inertial is not None:
        _add_inertial(body, link.inertial)
    for visual in link.visuals:
        _add_geom(body, visual, visual=True)
    friction = robot.friction.get(link.name)
    for collision in link.collisions:
        geom = _add_geom(body, collision, visual=False, tyre=is_wheel)
        if friction is not None:
            _apply_friction(geom, friction[0])
    if link.name == robot.imu_link:
        ET.SubElement(body, "site", name=IMU_SITE, size="0.005", group="4")
    if robot.camera is not None and link.name == robot.camera.link:
        _add_camera(body, robot)


def _add_camera(body: ET.Element, robot: Robot) -> None:
    ET.SubElement(
        body, "camera", name=robot.camera.name, pos="0 0 0",
        # MuJoCo cameras look along their -Z with +Y up: camera x = link -Y
        # (image right), camera y = link +Z (image up) => looks along link +X.
        xyaxes="0 -1 0 0 0 1",
        # Placeholder, set from the image size in build_mjcf.
        fovy="45",
    )


def _add_body_tree(parent: ET.Element, robot: Robot, link_name: str) -> None:
    for joint in robot.child_joints(link_name):
        body = ET.SubElement(parent, "body", name=joint.child)
        _set_pose(body, joint.origin)
        if joint.movable:
            _add_joint(body, joint)
        _add_link_contents(body, robot, robot.links[joint.child], is_wheel=joint.type == "continuous")
        _add_body_tree(body, robot, joint.child)


def _add_root_body(worldbody: ET.Element, robot: Robot, options: MjcfOptions) -> None:
    root = robot.root_link
    body = ET.SubElement(worldbody, "body", name=root, pos=fmt(options.x_m, options.y_m, options.spawn_clearance_m))
    half_yaw = options.yaw_rad / 2.0
    body.set("quat", fmt(math.cos(half_yaw), 0.0, 0.0, math.sin(half_yaw)))
    ET.SubElement(body, "freejoint", name=free_joint_name(robot))
    _add_link_contents(body, robot, robot.links[root])
    _add_body_tree(body, robot, root)


def _add_actuators(mujoco: ET.Element, robot: Robot) -> None:
    actuator = ET.SubElement(mujoco, "actuator")
    for joint in robot.movable_joints():
        if joint.mimic is not None:
            continue
        forcerange = fmt(-joint.effort, joint.effort)
        if joint.type == "continuous":
            ET.SubElement(
                actuator, "velocity", name=joint.name, joint=joint.name,
                kv=fmt(joint.effort / WHEEL_VELOCITY_ERROR_AT_FULL_EFFORT_RAD_S),
                ctrlrange=fmt(-joint.velocity, joint.velocity), forcerange=forcerange,
            )
        else:
            error = PRISMATIC_ERROR_AT_FULL_EFFORT_M if joint.type == "prismatic" else REVOLUTE_ERROR_AT_FULL_EFFORT_RAD
            ET.SubElement(
                actuator, "position", name=joint.name, joint=joint.name,
                kp=fmt(joint.effort / error), dampratio="1",
                ctrlrange=fmt(joint.lower, joint.upper), forcerange=forcerange,
            )


def _add_mimic_equalities(mujoco: ET.Element, robot: Robot) -> None:
    mimics = [j for j in robot.joints.values() if j.mimic is not None]
    if not mimics:
        return
    equality = ET.SubElement(mujoco, "equality")
    for joint in mimics:
        # joint1 = offset + multiplier * joint2
        ET.SubElement(
            equality, "joint", name=f"{joint.name}_mimic", joint1=joint.name, joint2=joint.mimic.joint,
            polycoef=fmt(joint.mimic.offset, joint.mimic.multiplier, 0, 0, 0), solref=MIMIC_SOLREF,
        )


def _add_sensors(mujoco: ET.Element, robot: Robot) -> None:
    if robot.imu_link is None:
        return
    sensor = ET.SubElement(mujoco, "sensor")
    # MuJoCo's accelerometer, like a real one, reports +g upward at rest.
    ET.SubElement(sensor, "accelerometer", name=IMU_ACCEL_SENSOR, site=IMU_SITE)
    ET.SubElement(sensor, "gyro", name=IMU_GYRO_SENSOR, site=IMU_SITE)
    ET.SubElement(sensor, "framequat", name=IMU_QUAT_SENSOR, objtype="site", objname=IMU_SITE)


def _add_defaults(mujoco: ET.Element) -> None:
    default = ET.SubElement(mujoco, "default")
    visual = ET.SubElement(default, "default", {"class": "robot_visual"})
    ET.SubElement(visual, "geom", contype="0", conaffinity="0", group=str(ROBOT_VISUAL_GROUP), density="0")
    collision = ET.SubElement(default, "default", {"class": "robot_collision"})
    ET.SubElement(
        collision, "geom", contype=str(ROBOT_CONTYPE), conaffinity=str(ROBOT_CONAFFINITY),
        group=str(ROBOT_COLLISION_GROUP), solref=ROBOT_CONTACT_SOLREF, rgba="0.5 0.5 0.5 0.3",
    )
    world = ET.SubElement(default, "default", {"class": "world"})
    ET.SubElement(world, "geom", contype=str(WORLD_CONTYPE), conaffinity=str(WORLD_CONAFFINITY), group=str(WORLD_GROUP))


def _add_header(mujoco: ET.Element, robot: Robot, options: MjcfOptions) -> None:
    # Explicit inertials only: URDF links without <inertial> are massless frames.
    ET.SubElement(mujoco, "compiler", angle="radian", autolimits="true", inertiafromgeom="false")
    # implicitfast integrates joint damping and actuator velocity gains
    # implicitly: stiff servos stay stable at a 2 ms step.
    # Elliptic friction cones with impratio 10 make friction stiff: without,
    # a held cube creeps out of the fingers (~1 mm/s) and wheels creep.
    ET.SubElement(mujoco, "option", timestep=fmt(options.timestep_s), integrator="implicitfast",
                  cone="elliptic", impratio="10")
    visual = ET.SubElement(mujoco, "visual")
    ET.SubElement(visual, "global", offwidth=str(options.image_width_px), offheight=str(options.image_height_px))
    if robot.camera is not None:
        # znear/zfar are multiples of the model extent; extent is fixed at 1 m
        # so that they are distances in metres. MuJoCo draws the skybox at
        # 0.56-0.93 x zfar and it writes depth: with zfar = 4 x the camera's
        # range, sky pixels lie beyond the range and read +inf like no surface.
        ET.SubElement(visual, "map", znear=fmt(robot.camera.near_m),
                      zfar=fmt(robot.camera.far_m * SKYBOX_DISTANCE_FACTOR))
    ET.SubElement(visual, "quality", shadowsize="0")
    ET.SubElement(mujoco, "statistic", extent="1", center="0 0 0.3")


def build_mjcf(robot: Robot, options: MjcfOptions | None = None) -> ET.Element:
    """MJCF <mujoco> element for the robot alone (world.py adds the room)."""
    options = options or MjcfOptions()
    mujoco = ET.Element("mujoco", model=robot.name)
    _add_header(mujoco, robot, options)
    _add_defaults(mujoco)
    ET.SubElement(mujoco, "asset")
    worldbody = ET.SubElement(mujoco, "worldbody")
    _add_root_body(worldbody, robot, options)
    _add_actuators(mujoco, robot)
    _add_mimic_equalities(mujoco, robot)
    _add_sensors(mujoco, robot)
    if robot.camera is not None:
        fovy = vertical_fov_deg(robot.camera.horizontal_fov_rad, options.image_width_px, options.image_height_px)
        mujoco.find(f".//camera[@name='{robot.camera.name}']").set("fovy", fmt(fovy))
    return mujoco


def to_xml_string(mujoco: ET.Element) -> str:
    ET.indent(mujoco)
    return ET.tostring(mujoco, encoding="unicode")


def main() -> None:
    """Prints the MJCF of a URDF: python3 sim/urdf_to_mjcf.py urdf/aicc_bot.urdf"""
    import argparse

    from urdf_model import parse_urdf

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("urdf")
    parser.add_argument("--with-world", action="store_true", help="add the simulator's room and objects")
    args = parser.parse_args()
    mujoco = build_mjcf(parse_urdf(args.urdf))
    if args.with_world:
        import world

        world.add_world(mujoco)
    print(to_xml_string(mujoco))


if __name__ == "__main__":
    main()
