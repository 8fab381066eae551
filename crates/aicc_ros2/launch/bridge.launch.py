"""Launches the aicc-ros2 bridge node with a parameters file.

    ros2 launch aicc_ros2 bridge.launch.py params_file:=/path/to/robot.yaml namespace:=robot1

The parameters file uses the layout of config/default.yaml
(`aicc_bridge: ros__parameters: ...`); the bridge reads it strictly and
refuses unknown keys.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    params_file = LaunchConfiguration("params_file")
    namespace = LaunchConfiguration("namespace")
    return LaunchDescription([
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([FindPackageShare("aicc_ros2"), "config", "default.yaml"]),
            description="Bridge configuration (ROS 2 parameters file)",
        ),
        DeclareLaunchArgument("namespace", default_value="", description="Robot namespace (multi-robot setups)"),
        Node(
            package="aicc_ros2",
            executable="aicc-ros2",
            name="aicc_bridge",
            namespace=namespace,
            parameters=[params_file],
            output="screen",
            emulate_tty=True,
        ),
    ])
