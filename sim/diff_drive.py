"""Differential drive: body velocity command -> wheel speeds, and wheel
odometry from the wheel encoders (joint positions), as Gazebo's diff-drive
plugin does. No ROS here."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class DiffDriveGeometry:
    wheel_radius_m: float
    wheel_separation_m: float
    max_wheel_speed_rad_s: float
    # Motor controllers ramp the speed; an unramped step would spin the wheels
    # (traction ~1 g at best) and make odometry drift. 30 rad/s^2 ~ 1 m/s^2.
    max_wheel_accel_rad_s2: float = 30.0


class DiffDriveController:
    """Holds the last command (no timeout: the bridge above owns deadman
    stops) and ramps the wheel speeds toward it."""

    def __init__(self, geometry: DiffDriveGeometry):
        self.geometry = geometry
        self.target_rad_s = (0.0, 0.0)  # left, right
        self.command_rad_s = [0.0, 0.0]

    def set_body_velocity(self, linear_m_s: float, angular_rad_s: float) -> None:
        g = self.geometry
        if not (math.isfinite(linear_m_s) and math.isfinite(angular_rad_s)):
            linear_m_s = angular_rad_s = 0.0
        half_track_m = g.wheel_separation_m / 2.0
        left = (linear_m_s - angular_rad_s * half_track_m) / g.wheel_radius_m
        right = (linear_m_s + angular_rad_s * half_track_m) / g.wheel_radius_m
        # Scale both wheels down together so the path curvature is kept.
        fastest = max(abs(left), abs(right))
        if fastest > g.max_wheel_speed_rad_s:
            scale = g.max_wheel_speed_rad_s / fastest
            left, right = left * scale, right * scale
        self.target_rad_s = (left, right)

    def update(self, dt_s: float) -> tuple[float, float]:
        """Advances the ramp by dt_s; returns (left, right) wheel speed commands."""
        max_change = self.geometry.max_wheel_accel_rad_s2 * dt_s
        for i, target in enumerate(self.target_rad_s):
            change = min(max(target - self.command_rad_s[i], -max_change), max_change)
            self.command_rad_s[i] += change
        return self.command_rad_s[0], self.command_rad_s[1]


class WheelOdometry:
    """Dead reckoning from wheel joint positions (midpoint integration)."""

    def __init__(self, wheel_radius_m: float, wheel_separation_m: float):
        self.wheel_radius_m = wheel_radius_m
        self.wheel_separation_m = wheel_separation_m
        self.x_m = 0.0
        self.y_m = 0.0
        self.yaw_rad = 0.0
        self.linear_m_s = 0.0
        self.angular_rad_s = 0.0
        self._last_rad: tuple[float, float] | None = None

    def jump(self, dx_m: float, dy_m: float, dyaw_rad: float) -> None:
        """Shifts the pose in the odometry frame, as a wheel slip, a
        controller reset or a relocalisation would: the next readings go on
        from there. A fault for tests, not something the wheels measured."""
        self.x_m += dx_m
        self.y_m += dy_m
        yaw = self.yaw_rad + dyaw_rad
        self.yaw_rad = math.atan2(math.sin(yaw), math.cos(yaw))

    def reset(self) -> None:
        """Back to the origin, as a restarted diff-drive controller."""
        self.x_m = self.y_m = self.yaw_rad = 0.0

    def update(self, left_rad: float, right_rad: float, left_rad_s: float, right_rad_s: float) -> None:
        if self._last_rad is None:
            self._last_rad = (left_rad, right_rad)
        left_m = (left_rad - self._last_rad[0]) * self.wheel_radius_m
        right_m = (right_rad - self._last_rad[1]) * self.wheel_radius_m
        self._last_rad = (left_rad, right_rad)
        distance_m = (left_m + right_m) / 2.0
        turn_rad = (right_m - left_m) / self.wheel_separation_m
        heading_rad = self.yaw_rad + turn_rad / 2.0
        self.x_m += distance_m * math.cos(heading_rad)
        self.y_m += distance_m * math.sin(heading_rad)
        self.yaw_rad = math.atan2(math.sin(self.yaw_rad + turn_rad), math.cos(self.yaw_rad + turn_rad))
        self.linear_m_s = self.wheel_radius_m * (left_rad_s + right_rad_s) / 2.0
        self.angular_rad_s = self.wheel_radius_m * (right_rad_s - left_rad_s) / self.wheel_separation_m
