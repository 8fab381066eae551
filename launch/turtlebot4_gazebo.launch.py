"""The bridge beside the standard TurtleBot 4 Gazebo (gz sim) simulation.

NOT RUN HERE: these machines have no Gazebo (see README, "Gazebo"). Written
for a ROS 2 Jazzy install with turtlebot4_gz_bringup:

    ros2 launch aicc_ros2 turtlebot4_gazebo.launch.py
    ros2 launch aicc_ros2 turtlebot4_gazebo.launch.py model:=lite world:=warehouse

Starts turtlebot4_gz.launch.py (unless start_gazebo:=false) and the bridge
with the turtlebot4 profile and use_sim_time:=true.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    params_file = LaunchConfiguration("params_file")
    namespace = LaunchConfiguration("namespace")
    return LaunchDescription([
        DeclareLaunchArgument("start_gazebo", default_value="true", description="Start the TurtleBot 4 Gazebo bringup"),
        DeclareLaunchArgument("model", default_value="standard", description="standard or lite"),
        DeclareLaunchArgument("world", default_value="warehouse", description="turtlebot4_gz_bringup world"),
        DeclareLaunchArgument("params_file",
                              default_value=PathJoinSubstitution([FindPackageShare("aicc_ros2"), "config", "turtlebot4.yaml"]),
                              description="Bridge profile"),
        DeclareLaunchArgument("namespace", default_value="", description="Robot namespace (the profile's namespace key must match)"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare("turtlebot4_gz_bringup"), "launch", "turtlebot4_gz.launch.py"])),
            launch_arguments={"model": LaunchConfiguration("model"), "world": LaunchConfiguration("world"),
                              "namespace": namespace}.items(),
            condition=IfCondition(LaunchConfiguration("start_gazebo")),
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare("aicc_ros2"), "launch", "bridge.launch.py"])),
            launch_arguments={"params_file": params_file, "namespace": namespace, "use_sim_time": "true"}.items(),
        ),
    ])
