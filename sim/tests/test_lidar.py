"""The simulated LiDAR and the profiles' reshaped robots, without ROS."""

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

import profiles
from lidar import Lidar, LidarSpec
from physics import Simulation
from urdf_model import parse_urdf
from urdf_to_mjcf import MjcfOptions

URDF = Path(__file__).resolve().parents[2] / "urdf" / "aicc_bot.urdf"


def lidar_of(robot, sim):
    s = robot.lidar
    spec = LidarSpec(s.link, s.name, s.samples, s.angle_min_rad, s.angle_max_rad, s.range_min_m, s.range_max_m,
                     s.update_rate_hz)
    return Lidar(sim.model, spec, robot.link_pose_in(s.link, robot.root_link), sim.root_body_id)


@pytest.mark.parametrize("name", sorted(profiles.PROFILES))
def test_each_profile_scans_the_room_from_its_lidar_frame(name):
    robot = parse_urdf(profiles.reshape_urdf(URDF.read_text(), profiles.PROFILES[name]))
    # Facing the south wall (-x) from 1 m in front of it.
    sim = Simulation(robot, MjcfOptions(x_m=-1.0, yaw_rad=math.pi))
    mujoco.mj_forward(sim.model, sim.data)
    lidar = lidar_of(robot, sim)
    ranges = lidar.scan(sim.data)
    assert len(ranges) == robot.lidar.samples
    if robot.lidar.range_max_m > 4 * math.sqrt(2):
        assert np.isfinite(ranges).all(), "every wall of the room is within range"
    else:
        assert np.isinf(ranges).any(), "the far corners lie beyond a 3.5 m LDS: +inf (REP-117)"
    # The beam along the robot's +x (its heading) meets the wall 1 m ahead of
    # base_footprint, measured from the scanner.
    laser_x, yaw = robot.link_pose_in(robot.lidar.link, robot.root_link)[0, 3], math.atan2(
        *robot.link_pose_in(robot.lidar.link, robot.root_link)[[1, 0], 0])
    forward_beam = round((-yaw - robot.lidar.angle_min_rad) / lidar.spec.angle_increment_rad) % len(ranges)
    assert ranges[forward_beam] == pytest.approx(1.0 - laser_x, abs=0.01)


def test_the_robot_is_transparent_to_its_own_lidar():
    robot = parse_urdf(URDF.read_text())
    sim = Simulation(robot, MjcfOptions())
    mujoco.mj_forward(sim.model, sim.data)
    ranges = lidar_of(robot, sim).scan(sim.data)
    assert ranges.min() > 0.5, "no return from the mast, head or arm"


def test_profiles_reshape_the_outline():
    tb4 = parse_urdf(profiles.reshape_urdf(URDF.read_text(), profiles.PROFILES["turtlebot4"]))
    chassis = [c for c in tb4.links["base_link"].collisions if c.kind == "cylinder"]
    assert chassis and chassis[0].size[0] == pytest.approx(0.171)
    assert "rplidar_link" in tb4.links and tb4.lidar.samples == 720
    assert profiles.reshape_urdf(URDF.read_text(), profiles.PROFILES["sim"]) == URDF.read_text()
