"""Launches the aicc-ros2 bridge node with a parameters file.

    ros2 launch aicc_ros2 bridge.launch.py params_file:=/path/to/robot.yaml namespace:=robot1 use_sim_time:=true

The parameters file uses the layout of config/default.yaml
(`aicc_bridge: ros__parameters: ...`, or `/**:` for any node); the bridge
reads it strictly and refuses unknown keys. The installed profiles are in
`$(ros2 pkg prefix aicc_ros2)/share/aicc_ros2/config/` (default, sim,
turtlebot3, turtlebot4). use_sim_time overrides the file's value; beside
Gazebo or the bundled simulator set it to true.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    params_file = LaunchConfiguration("params_file")
    namespace = LaunchConfiguration("namespace")
    use_sim_time = LaunchConfiguration("use_sim_time")
    return LaunchDescription([
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([FindPackageShare("aicc_ros2"), "config", "default.yaml"]),
            description="Bridge configuration (ROS 2 parameters file)",
        ),
        DeclareLaunchArgument("namespace", default_value="", description="Robot namespace (multi-robot setups)"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="Count time in /clock (beside a simulator)"),
        Node(
            package="aicc_ros2",
            executable="aicc-ros2",
            name="aicc_bridge",
            namespace=namespace,
            # Later entries win: the argument overrides the file.
            parameters=[params_file, {"use_sim_time": ParameterValue(use_sim_time, value_type=bool)}],
            output="screen",
            emulate_tty=True,
        ),
    ])
