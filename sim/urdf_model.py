"""A small URDF reader (xml.etree only): links, joints, limits, geometry,
inertials, materials and the <gazebo> extensions the simulator uses.

It reads plain URDF (no xacro). Only primitive geometry (box, cylinder,
sphere) is supported, which is all urdf/aicc_bot.urdf uses.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MOVABLE_JOINT_TYPES = ("revolute", "continuous", "prismatic")


@dataclass
class Pose:
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def quat_wxyz(self) -> np.ndarray:
        return rpy_to_quat_wxyz(*self.rpy)

    def matrix(self) -> np.ndarray:
        """4x4 homogeneous transform child-in-parent."""
        out = np.eye(4)
        out[:3, :3] = rpy_to_matrix(*self.rpy)
        out[:3, 3] = self.xyz
        return out


@dataclass
class Geometry:
    name: str
    kind: str  # "box" | "cylinder" | "sphere"
    size: tuple[float, ...]  # box: full x y z; cylinder: radius, length; sphere: radius
    origin: Pose
    rgba: tuple[float, float, float, float] | None = None


@dataclass
class Inertial:
    origin: Pose
    mass_kg: float
    # ixx, iyy, izz, ixy, ixz, iyz (MJCF fullinertia order)
    inertia: tuple[float, float, float, float, float, float]


@dataclass
class Link:
    name: str
    visuals: list[Geometry] = field(default_factory=list)
    collisions: list[Geometry] = field(default_factory=list)
    inertial: Inertial | None = None


@dataclass
class Mimic:
    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass
class Joint:
    name: str
    type: str
    parent: str
    child: str
    origin: Pose
    axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    lower: float | None = None
    upper: float | None = None
    effort: float | None = None
    velocity: float | None = None
    damping: float = 0.0
    friction: float = 0.0
    mimic: Mimic | None = None

    @property
    def movable(self) -> bool:
        return self.type in MOVABLE_JOINT_TYPES

    @property
    def has_position_limits(self) -> bool:
        return self.type in ("revolute", "prismatic") and self.lower is not None and self.upper is not None


@dataclass
class CameraSensor:
    link: str
    name: str
    horizontal_fov_rad: float
    near_m: float
    far_m: float
    update_rate_hz: float
    width_px: int
    height_px: int


@dataclass(frozen=True)
class LidarSensor:
    link: str
    name: str
    samples: int
    angle_min_rad: float
    angle_max_rad: float
    range_min_m: float
    range_max_m: float
    update_rate_hz: float


@dataclass
class Robot:
    name: str
    links: dict[str, Link]
    joints: dict[str, Joint]  # in document order
    # link name -> (mu1, mu2) from <gazebo reference=...>
    friction: dict[str, tuple[float, float]] = field(default_factory=dict)
    camera: CameraSensor | None = None
    lidar: "LidarSensor | None" = None
    imu_link: str | None = None
    contact_collisions: list[str] = field(default_factory=list)

    @property
    def root_link(self) -> str:
        children = {j.child for j in self.joints.values()}
        roots = [name for name in self.links if name not in children]
        if len(roots) != 1:
            raise ValueError(f"URDF must have exactly one root link, found {roots}")
        return roots[0]

    def child_joints(self, link_name: str) -> list[Joint]:
        return [j for j in self.joints.values() if j.parent == link_name]

    def movable_joints(self) -> list[Joint]:
        return [j for j in self.joints.values() if j.movable]

    def link_pose_in(self, link_name: str, ancestor: str) -> np.ndarray:
        """4x4 transform of link_name in ancestor's frame at zero joint positions."""
        transform = np.eye(4)
        current = link_name
        while current != ancestor:
            joint = next((j for j in self.joints.values() if j.child == current), None)
            if joint is None:
                raise ValueError(f"{ancestor} is not an ancestor of {link_name}")
            transform = joint.origin.matrix() @ transform
            current = joint.parent
        return transform


# ---------------------------------------------------------------- rotations

def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF rpy: fixed-axis roll about x, then pitch about y, then yaw about z."""
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def rpy_to_quat_wxyz(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return np.array([
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    ])


# ---------------------------------------------------------------- parsing

def _floats(text: str | None, default: tuple[float, ...]) -> tuple[float, ...]:
    if text is None:
        return default
    return tuple(float(v) for v in text.split())


def _parse_pose(elem: ET.Element | None) -> Pose:
    if elem is None:
        return Pose()
    return Pose(_floats(elem.get("xyz"), (0.0, 0.0, 0.0)), _floats(elem.get("rpy"), (0.0, 0.0, 0.0)))


def _parse_geometry(elem: ET.Element, name: str, rgba) -> Geometry:
    geometry = elem.find("geometry")
    if geometry is None or len(geometry) != 1:
        raise ValueError(f"{name}: <geometry> needs exactly one shape")
    shape = geometry[0]
    if shape.tag == "box":
        size = _floats(shape.get("size"), ())
    elif shape.tag == "cylinder":
        size = (float(shape.get("radius")), float(shape.get("length")))
    elif shape.tag == "sphere":
        size = (float(shape.get("radius")),)
    else:
        raise ValueError(f"{name}: unsupported geometry <{shape.tag}> (only box, cylinder, sphere)")
    return Geometry(name=name, kind=shape.tag, size=size, origin=_parse_pose(elem.find("origin")), rgba=rgba)


def _material_rgba(elem: ET.Element, materials: dict[str, tuple]) -> tuple | None:
    material = elem.find("material")
    if material is None:
        return None
    color = material.find("color")
    if color is not None:
        return _floats(color.get("rgba"), (0.5, 0.5, 0.5, 1.0))
    return materials.get(material.get("name"))


def _parse_inertial(elem: ET.Element | None) -> Inertial | None:
    if elem is None:
        return None
    inertia = elem.find("inertia")
    values = {k: float(inertia.get(k, 0.0)) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
    return Inertial(
        origin=_parse_pose(elem.find("origin")),
        mass_kg=float(elem.find("mass").get("value")),
        inertia=(values["ixx"], values["iyy"], values["izz"], values["ixy"], values["ixz"], values["iyz"]),
    )


def _parse_link(elem: ET.Element, materials: dict[str, tuple]) -> Link:
    name = elem.get("name")
    link = Link(name=name, inertial=_parse_inertial(elem.find("inertial")))
    for i, visual in enumerate(elem.findall("visual")):
        geom_name = visual.get("name") or f"{name}_visual_{i}"
        link.visuals.append(_parse_geometry(visual, geom_name, _material_rgba(visual, materials)))
    for i, collision in enumerate(elem.findall("collision")):
        geom_name = collision.get("name") or f"{name}_collision_{i}"
        link.collisions.append(_parse_geometry(collision, geom_name, None))
    return link


def _optional_float(elem: ET.Element | None, attr: str) -> float | None:
    if elem is None or elem.get(attr) is None:
        return None
    return float(elem.get(attr))


def _parse_joint(elem: ET.Element) -> Joint:
    limit = elem.find("limit")
    dynamics = elem.find("dynamics")
    mimic = elem.find("mimic")
    joint = Joint(
        name=elem.get("name"),
        type=elem.get("type"),
        parent=elem.find("parent").get("link"),
        child=elem.find("child").get("link"),
        origin=_parse_pose(elem.find("origin")),
        axis=_floats(elem.find("axis").get("xyz") if elem.find("axis") is not None else None, (1.0, 0.0, 0.0)),
        lower=_optional_float(limit, "lower"),
        upper=_optional_float(limit, "upper"),
        effort=_optional_float(limit, "effort"),
        velocity=_optional_float(limit, "velocity"),
        damping=_optional_float(dynamics, "damping") or 0.0,
        friction=_optional_float(dynamics, "friction") or 0.0,
    )
    if mimic is not None:
        joint.mimic = Mimic(mimic.get("joint"), float(mimic.get("multiplier", 1.0)), float(mimic.get("offset", 0.0)))
    if joint.type not in MOVABLE_JOINT_TYPES + ("fixed",):
        raise ValueError(f"joint {joint.name}: unsupported type {joint.type}")
    return joint


def _text_float(elem: ET.Element, path: str, default: float) -> float:
    found = elem.find(path)
    return float(found.text) if found is not None and found.text else default


def _parse_gazebo(robot: Robot, elem: ET.Element) -> None:
    reference = elem.get("reference")
    mu1, mu2 = elem.find("mu1"), elem.find("mu2")
    if reference and mu1 is not None:
        mu1_value = float(mu1.text)
        robot.friction[reference] = (mu1_value, float(mu2.text) if mu2 is not None else mu1_value)
    for sensor in elem.findall("sensor"):
        kind = sensor.get("type")
        if kind in ("camera", "depth", "rgbd_camera"):
            robot.camera = CameraSensor(
                link=reference,
                name=sensor.get("name", "camera"),
                horizontal_fov_rad=_text_float(sensor, "camera/horizontal_fov", 1.047),
                near_m=_text_float(sensor, "camera/clip/near", 0.05),
                far_m=_text_float(sensor, "camera/clip/far", 20.0),
                update_rate_hz=_text_float(sensor, "update_rate", 15.0),
                width_px=int(_text_float(sensor, "camera/image/width", 320)),
                height_px=int(_text_float(sensor, "camera/image/height", 240)),
            )
        elif kind in ("ray", "gpu_ray", "lidar", "gpu_lidar"):
            robot.lidar = LidarSensor(
                link=reference,
                name=sensor.get("name", "lidar"),
                samples=int(_text_float(sensor, "ray/scan/horizontal/samples", 360)),
                angle_min_rad=_text_float(sensor, "ray/scan/horizontal/min_angle", 0.0),
                angle_max_rad=_text_float(sensor, "ray/scan/horizontal/max_angle", 6.283185),
                range_min_m=_text_float(sensor, "ray/range/min", 0.12),
                range_max_m=_text_float(sensor, "ray/range/max", 3.5),
                update_rate_hz=_text_float(sensor, "update_rate", 10.0),
            )
        elif kind == "imu":
            robot.imu_link = reference
        elif kind == "contact":
            robot.contact_collisions += [c.text.strip() for c in sensor.findall("contact/collision")]


def parse_urdf(source: str | Path) -> Robot:
    """Parses a URDF file path, or a URDF string starting with '<'."""
    text = source if isinstance(source, str) and source.lstrip().startswith("<") else Path(source).read_text()
    root = ET.fromstring(text)
    if root.tag != "robot":
        raise ValueError("not a URDF: root element is not <robot>")
    materials = {}
    for material in root.findall("material"):
        color = material.find("color")
        if color is not None:
            materials[material.get("name")] = _floats(color.get("rgba"), (0.5, 0.5, 0.5, 1.0))
    links = {elem.get("name"): _parse_link(elem, materials) for elem in root.findall("link")}
    joints = {elem.get("name"): _parse_joint(elem) for elem in root.findall("joint")}
    robot = Robot(name=root.get("name"), links=links, joints=joints)
    for elem in root.findall("gazebo"):
        _parse_gazebo(robot, elem)
    _validate(robot)
    return robot


def _validate(robot: Robot) -> None:
    for joint in robot.joints.values():
        for end in (joint.parent, joint.child):
            if end not in robot.links:
                raise ValueError(f"joint {joint.name} refers to unknown link {end}")
        if joint.movable and (joint.effort is None or joint.velocity is None):
            raise ValueError(f"joint {joint.name}: <limit> needs effort and velocity")
        if joint.type in ("revolute", "prismatic") and not joint.has_position_limits:
            raise ValueError(f"joint {joint.name}: {joint.type} joint needs lower and upper limits")
        if joint.mimic is not None and joint.mimic.joint not in robot.joints:
            raise ValueError(f"joint {joint.name} mimics unknown joint {joint.mimic.joint}")
    robot.root_link  # raises unless there is exactly one root


def diff_drive_geometry(robot: Robot, left_joint: str, right_joint: str) -> tuple[float, float]:
    """(wheel_radius_m, wheel_separation_m) from the wheel joints' origins and
    the wheels' collision cylinders."""
    root = robot.root_link
    left_xyz = robot.link_pose_in(robot.joints[left_joint].child, root)[:3, 3]
    right_xyz = robot.link_pose_in(robot.joints[right_joint].child, root)[:3, 3]
    separation_m = float(np.linalg.norm(left_xyz - right_xyz))
    wheel_link = robot.links[robot.joints[left_joint].child]
    cylinders = [g for g in wheel_link.collisions if g.kind in ("cylinder", "sphere")]
    if not cylinders:
        raise ValueError(f"{wheel_link.name} has no cylinder/sphere collision to take the radius from")
    return float(cylinders[0].size[0]), separation_m
