"""Shared fixtures: the sim modules are imported from sim/ directly."""

import sys
from pathlib import Path

import pytest

SIM_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = SIM_DIR.parent
URDF_PATH = REPO_DIR / "urdf" / "aicc_bot.urdf"
sys.path.insert(0, str(SIM_DIR))
sys.path.insert(0, str(SIM_DIR / "tools"))


# Arm poses from inverse kinematics (gripper pitched 0.5 rad down, facing
# the cube from the arm's base, robot at the spawn pose): end effector 7.5 mm
# above the cube's centre (lower, the finger tips scrape the pedestal), and
# 11 cm above the cube.
GRASP_ARM = {"joint1": 0.872, "joint2": 1.063, "joint3": -0.425, "joint4": -0.138}
ABOVE_CUBE_ARM = {"joint1": 0.872, "joint2": 0.686, "joint3": -0.594, "joint4": 0.408}
GRIPPER_OPEN_M = 0.025


@pytest.fixture(scope="session")
def robot():
    from urdf_model import parse_urdf

    return parse_urdf(URDF_PATH)


def pytest_configure(config):
    # rosidl's parser (lark) imports deprecated stdlib modules: not ours.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:lark.*")
