"""A planar 360-degree laser scanner (sensor_msgs/LaserScan), ray-cast in
MuJoCo against the world (floor, walls, objects). The robot's own body is
transparent to it, as a laser_filters footprint filter would leave it.

Beams follow REP-117 and the TurtleBot LDS/RPLIDAR drivers: angles
counter-clockwise from the scanner's +x, `angle_min` first; a beam with no
surface within `range_max` reads +inf.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

import urdf_to_mjcf


@dataclass(frozen=True)
class LidarSpec:
    link: str
    name: str
    samples: int = 360
    angle_min_rad: float = 0.0
    angle_max_rad: float = 2 * math.pi
    range_min_m: float = 0.12
    range_max_m: float = 3.5
    update_rate_hz: float = 10.0

    @property
    def angle_increment_rad(self) -> float:
        # A full circle: the last beam stops one increment short of the first.
        span = self.angle_max_rad - self.angle_min_rad
        full = abs(span - 2 * math.pi) < 1e-3
        return span / (self.samples if full else max(self.samples - 1, 1))


class Lidar:
    def __init__(self, model, spec: LidarSpec, laser_in_root: np.ndarray, root_body_id: int):
        self.model = model
        self.spec = spec
        self.laser_in_root = laser_in_root
        self.root_body_id = root_body_id
        self.groups = np.zeros(6, dtype=np.uint8)
        self.groups[urdf_to_mjcf.WORLD_GROUP] = 1
        angles = spec.angle_min_rad + spec.angle_increment_rad * np.arange(spec.samples)
        # Beam directions in the scanner's frame.
        self.local_dirs = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], axis=1)
        self.geom_ids = np.zeros(spec.samples, dtype=np.int32)
        self.dist = np.zeros(spec.samples, dtype=np.float64)

    def scan(self, data) -> np.ndarray:
        """Ranges (float32, m; +inf where nothing is within range)."""
        root = np.eye(4)
        root[:3, :3] = data.xmat[self.root_body_id].reshape(3, 3)
        root[:3, 3] = data.xpos[self.root_body_id]
        laser = root @ self.laser_in_root
        origin = laser[:3, 3].copy()
        dirs = (self.local_dirs @ laser[:3, :3].T).reshape(-1).copy()
        mujoco.mj_multiRay(self.model, data, origin, dirs, self.groups, 1, -1, self.geom_ids, self.dist, None,
                           self.spec.samples, self.spec.range_max_m)
        ranges = self.dist.astype(np.float32)
        no_hit = (self.geom_ids < 0) | (ranges > self.spec.range_max_m)
        ranges[no_hit] = np.inf
        # Too near to measure: the driver reports it as out of range (below range_min).
        return ranges
