"""The simulated room: a 4 x 4 m walled floor with a few coloured objects.

Layout (world frame, robot spawns at the origin facing +x by default):
- red box 1.5 m straight ahead, on the floor;
- green cylinder front-right, blue sphere behind-left;
- a pedestal front-left of the robot with a small yellow cube on it that the
  arm can reach and grasp (the only movable object).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from urdf_to_mjcf import fmt

ROOM_HALF_SIZE_M = 2.0
WALL_THICKNESS_M = 0.1
WALL_HEIGHT_M = 1.0
FLOOR_GEOM = "floor"


@dataclass(frozen=True)
class WorldObject:
    name: str  # MuJoCo body and geom name
    shape: str  # "box" | "cylinder" | "sphere"
    size_m: tuple[float, ...]  # box: full x y z; cylinder: diameter, height; sphere: diameter
    position_m: tuple[float, float, float]  # centre, in the world frame
    rgba: tuple[float, float, float, float]
    color: str
    mass_kg: float = 0.0  # 0 = fixed to the world
    yaw_rad: float = 0.0

    @property
    def movable(self) -> bool:
        return self.mass_kg > 0.0


CUBE_SIZE_M = 0.035
PEDESTAL_SIZE_M = (0.08, 0.08, 0.10)
# Front-left, within the arm's reach, and clear of the corridor the robot
# drives straight ahead in (its near corner 0.198 m left of the centre line,
# 0.043 m outside the bundled robot's zones of +-0.155 m): at (0.30, 0.20) it
# stood 5 mm outside them, so a heading a degree or two off after a turn
# put it in the way of every move straight ahead from the spawn.
PEDESTAL_XY_M = (0.262, 0.238)
# The arm's base (joint1) sits at x = 0.062 m on the robot at the origin.
# The cube faces it, so the fingers close on two faces, not on two edges.
CUBE_YAW_RAD = math.atan2(PEDESTAL_XY_M[1], PEDESTAL_XY_M[0] - 0.062)

OBJECTS = (
    WorldObject("red_box", "box", (0.2, 0.2, 0.2), (1.5, 0.0, 0.1), (0.85, 0.1, 0.1, 1), "red"),
    WorldObject("green_cylinder", "cylinder", (0.2, 0.3), (0.6, -1.3, 0.15), (0.1, 0.7, 0.2, 1), "green"),
    WorldObject("blue_sphere", "sphere", (0.24,), (-1.0, 1.2, 0.12), (0.15, 0.3, 0.9, 1), "blue"),
    WorldObject("pedestal", "box", PEDESTAL_SIZE_M, (*PEDESTAL_XY_M, PEDESTAL_SIZE_M[2] / 2), (0.55, 0.42, 0.3, 1), "brown"),
    # A 3.5 cm, 30 g wooden cube resting on the pedestal.
    WorldObject(
        "cube", "box", (CUBE_SIZE_M,) * 3,
        (*PEDESTAL_XY_M, PEDESTAL_SIZE_M[2] + CUBE_SIZE_M / 2 + 0.0005),
        (0.95, 0.85, 0.1, 1), "yellow", mass_kg=0.03, yaw_rad=CUBE_YAW_RAD,
    ),
)


# ---------------------------------------------------------------- spare objects
# `--low-obstacles`: boxes lower than the LiDAR's plane (0.25 m on the
# bundled robot) and one taller box, parked outside the room where no
# sensor sees them, for a test to bring in (place_object, /sim_world, or
# the ground-truth channel's scenes: truth.py). A low box is wider than
# the robot (0.28 m), so that a robot driving at it straight meets it
# with its bumper, not with a wheel.
SPARE_GREY_RGBA = (0.45, 0.45, 0.48, 1)
LOW_OBSTACLES = (
    WorldObject("low_box_0", "box", (0.20, 0.36, 0.06), (0.0, 0.0, 0.03), (0.9, 0.5, 0.1, 1), "orange"),
    WorldObject("low_box_1", "box", (0.20, 0.36, 0.10), (0.0, 0.0, 0.05), (0.9, 0.5, 0.1, 1), "orange"),
    WorldObject("low_box_2", "box", (0.20, 0.36, 0.15), (0.0, 0.0, 0.075), (0.9, 0.5, 0.1, 1), "orange"),
    WorldObject("tall_box_0", "box", (0.20, 0.36, 0.50), (0.0, 0.0, 0.25), SPARE_GREY_RGBA, "grey"),
)
# Where parked objects wait: a row outside the room's north-west corner,
# behind the walls (1 m high) from every sensor of a robot inside.
PARKING_ORIGIN_M = (ROOM_HALF_SIZE_M + 1.0, ROOM_HALF_SIZE_M + 1.0)
PARKING_SPACING_M = 0.7


def parking_spot(index: int) -> tuple[float, float]:
    """The (x, y) of parking place `index`, outside the room."""
    return (PARKING_ORIGIN_M[0] + PARKING_SPACING_M * index, PARKING_ORIGIN_M[1])


def with_low_obstacles(objects: tuple[WorldObject, ...]) -> tuple[WorldObject, ...]:
    """`objects` and the spare boxes of LOW_OBSTACLES, parked outside the room."""
    from dataclasses import replace

    spares = tuple(
        replace(obj, position_m=(*parking_spot(index), obj.position_m[2]))
        for index, obj in enumerate(LOW_OBSTACLES)
    )
    return tuple(objects) + spares


def is_in_room(x_m: float, y_m: float) -> bool:
    return abs(x_m) <= ROOM_HALF_SIZE_M and abs(y_m) <= ROOM_HALF_SIZE_M


def _mjcf_size(obj: WorldObject) -> str:
    if obj.shape == "box":
        return fmt(*(s / 2 for s in obj.size_m))
    if obj.shape == "cylinder":
        return fmt(obj.size_m[0] / 2, obj.size_m[1] / 2)
    return fmt(obj.size_m[0] / 2)


def _add_assets(mujoco: ET.Element) -> None:
    asset = mujoco.find("asset")
    if asset is None:
        asset = ET.SubElement(mujoco, "asset")
    ET.SubElement(asset, "texture", name="sky", type="skybox", builtin="gradient",
                  rgb1="0.6 0.75 0.9", rgb2="0.9 0.9 0.95", width="64", height="64")
    ET.SubElement(asset, "texture", name="floor_tiles", type="2d", builtin="checker",
                  rgb1="0.75 0.75 0.72", rgb2="0.62 0.62 0.6", width="256", height="256")
    # texuniform: texrepeat is per metre, and a checker texture has 2x2 tiles,
    # so the floor shows 0.5 m tiles (a visual scale for the camera).
    ET.SubElement(asset, "material", name="floor_material", texture="floor_tiles", texrepeat="1 1",
                  texuniform="true", reflectance="0")
    ET.SubElement(asset, "material", name="wall_material", rgba="0.88 0.86 0.8 1")


def _add_lights(mujoco: ET.Element, worldbody: ET.Element) -> None:
    visual = mujoco.find("visual")
    ET.SubElement(visual, "headlight", ambient="0.35 0.35 0.35", diffuse="0.35 0.35 0.35", specular="0 0 0")
    # No shadows: they roughly double the render cost on a CPU renderer.
    ET.SubElement(worldbody, "light", name="ceiling", pos="0 0 3", dir="0 0 -1",
                  directional="true", castshadow="false", diffuse="0.5 0.5 0.5")


def _add_room(worldbody: ET.Element) -> None:
    half = ROOM_HALF_SIZE_M + WALL_THICKNESS_M
    ET.SubElement(worldbody, "geom", {"class": "world"}, name=FLOOR_GEOM, type="plane",
                  size=fmt(half, half, 0.05), material="floor_material")
    wall_z = WALL_HEIGHT_M / 2
    offset = ROOM_HALF_SIZE_M + WALL_THICKNESS_M / 2
    long_half, thin_half = half, WALL_THICKNESS_M / 2
    walls = {
        "wall_north": ((offset, 0), (thin_half, long_half)),   # +x
        "wall_south": ((-offset, 0), (thin_half, long_half)),  # -x
        "wall_west": ((0, offset), (long_half, thin_half)),    # +y
        "wall_east": ((0, -offset), (long_half, thin_half)),   # -y
    }
    for name, ((x, y), (hx, hy)) in walls.items():
        ET.SubElement(worldbody, "geom", {"class": "world"}, name=name, type="box",
                      pos=fmt(x, y, wall_z), size=fmt(hx, hy, wall_z), material="wall_material")


def _add_object(worldbody: ET.Element, obj: WorldObject) -> None:
    body = ET.SubElement(worldbody, "body", name=obj.name, pos=fmt(*obj.position_m))
    if obj.yaw_rad:
        body.set("quat", fmt(math.cos(obj.yaw_rad / 2), 0, 0, math.sin(obj.yaw_rad / 2)))
    geom = ET.SubElement(body, "geom", {"class": "world"}, name=obj.name, type=obj.shape,
                         size=_mjcf_size(obj), rgba=fmt(*obj.rgba))
    if obj.movable:
        ET.SubElement(body, "freejoint", name=f"{obj.name}_freejoint")
        geom.set("mass", fmt(obj.mass_kg))
        # Its own friction and torsional friction win over the fingers' and the
        # pedestal's, so a pinch grasp does not let the cube spin out.
        geom.set("friction", "1.0 0.01 0.0001")
        geom.set("condim", "4")
        geom.set("priority", "2")
        # Box inertia from the geom (the compiler ignores geoms for inertia).
        side = obj.size_m[0]
        inertia = obj.mass_kg * side * side / 6.0
        ET.SubElement(body, "inertial", pos="0 0 0", mass=fmt(obj.mass_kg), diaginertia=fmt(inertia, inertia, inertia))


def build_model(robot, options=None, objects: tuple[WorldObject, ...] = OBJECTS):
    """Compiled MjModel of the robot (from its URDF model) in the room."""
    import mujoco

    from urdf_to_mjcf import build_mjcf, to_xml_string

    mjcf = build_mjcf(robot, options)
    add_world(mjcf, objects)
    return mujoco.MjModel.from_xml_string(to_xml_string(mjcf))


def add_world(mujoco: ET.Element, objects: tuple[WorldObject, ...] = OBJECTS) -> None:
    """Adds floor, walls, lights and objects to a <mujoco> element made by
    urdf_to_mjcf.build_mjcf."""
    worldbody = mujoco.find("worldbody")
    _add_assets(mujoco)
    _add_lights(mujoco, worldbody)
    _add_room(worldbody)
    for obj in objects:
        _add_object(worldbody, obj)


# ---------------------------------------------------------------- seeded worlds
# `seeded_objects(seed)`: the pick task's worlds. The red cube (the target)
# stands on a pedestal somewhere around the spawn point; cubes of other
# colours on pedestals of their own are distractors; grey boxes are
# obstacles. What the seed decides, it decides the same way every time
# (Python's random.Random is stable across versions for these calls).
# Every world keeps a corridor free from the spawn point to the target's
# pedestal (the robot can drive there), and keeps every object away from
# the walls and the spawn point.
TARGET_NAME = "red_cube"
SEEDED_PEDESTAL_SIZE_M = PEDESTAL_SIZE_M
TARGET_DISTANCE_M = (0.9, 1.5)  # from the spawn point
DISTRACTOR_COLORS = (
    ("green", (0.1, 0.7, 0.2, 1)),
    ("blue", (0.15, 0.3, 0.9, 1)),
    ("yellow", (0.95, 0.85, 0.1, 1)),
)
OBSTACLE_SIZE_M = (0.25, 0.25, 0.3)
OBSTACLE_RGBA = (0.5, 0.5, 0.52, 1)
# Keep-outs: objects from the walls, from the spawn point, from each other,
# and from the straight way to the target (half-width of the corridor).
WALL_MARGIN_M = 0.45
SPAWN_CLEARANCE_M = 0.6
OBJECT_SPACING_M = 0.5
CORRIDOR_HALF_WIDTH_M = 0.4
RED_RGBA = (0.85, 0.1, 0.1, 1)


def _cube_on_pedestal(name: str, color: str, rgba, x: float, y: float, yaw: float) -> tuple[WorldObject, WorldObject]:
    pedestal = WorldObject(f"{name}_pedestal", "box", SEEDED_PEDESTAL_SIZE_M, (x, y, SEEDED_PEDESTAL_SIZE_M[2] / 2),
                           (0.55, 0.42, 0.3, 1), "brown", yaw_rad=yaw)
    cube = WorldObject(name, "box", (CUBE_SIZE_M,) * 3, (x, y, SEEDED_PEDESTAL_SIZE_M[2] + CUBE_SIZE_M / 2 + 0.0005),
                       rgba, color, mass_kg=0.03, yaw_rad=yaw)
    return pedestal, cube


def _distance_to_segment(p, a, b) -> float:
    ax, ay = a
    bx, by = b
    px, py = p
    dx, dy = bx - ax, by - ay
    length2 = dx * dx + dy * dy
    t = 0.0 if length2 == 0 else max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / length2))
    return math.hypot(px - (ax + t * dx), py - (ay + t * dy))


def seeded_objects(seed: int, distractors: int = 3, obstacles: int = 2) -> tuple[WorldObject, ...]:
    """The objects of world `seed`: the red cube on its pedestal first, then
    distractor cubes on pedestals, then obstacles."""
    import random

    rng = random.Random(seed)
    limit = ROOM_HALF_SIZE_M - WALL_MARGIN_M
    bearing = rng.uniform(-math.pi, math.pi)
    distance = rng.uniform(*TARGET_DISTANCE_M)
    tx, ty = distance * math.cos(bearing), distance * math.sin(bearing)
    tx, ty = max(-limit, min(limit, tx)), max(-limit, min(limit, ty))
    # The cube faces the spawn point, give or take 15 degrees.
    yaw = math.atan2(ty, tx) + math.radians(rng.uniform(-15.0, 15.0))
    objects = list(_cube_on_pedestal(TARGET_NAME, "red", RED_RGBA, tx, ty, yaw))
    placed = [(tx, ty)]

    def free_spot(clearance: float) -> tuple[float, float]:
        for _ in range(1000):
            x, y = rng.uniform(-limit, limit), rng.uniform(-limit, limit)
            if math.hypot(x, y) < SPAWN_CLEARANCE_M + clearance:
                continue
            if any(math.hypot(x - px, y - py) < OBJECT_SPACING_M + clearance for px, py in placed):
                continue
            if _distance_to_segment((x, y), (0.0, 0.0), (tx, ty)) < CORRIDOR_HALF_WIDTH_M + clearance:
                continue
            placed.append((x, y))
            return x, y
        raise ValueError(f"world seed {seed}: no free spot left")

    for color, rgba in [DISTRACTOR_COLORS[i % len(DISTRACTOR_COLORS)] for i in range(distractors)]:
        x, y = free_spot(0.0)
        objects.extend(_cube_on_pedestal(f"{color}_cube", color, rgba, x, y, rng.uniform(-math.pi, math.pi)))
    for i in range(obstacles):
        x, y = free_spot(OBSTACLE_SIZE_M[0] / 2)
        objects.append(WorldObject(f"obstacle_{i}", "box", OBSTACLE_SIZE_M, (x, y, OBSTACLE_SIZE_M[2] / 2),
                                   OBSTACLE_RGBA, "grey", yaw_rad=rng.uniform(-math.pi, math.pi)))
    return tuple(objects)
