"""The bridge beside the standard TurtleBot 3 Gazebo simulation.

NOT RUN HERE: these machines have no Gazebo (see README, "Gazebo"). Written
for a ROS 2 Jazzy install with turtlebot3_gazebo (or, with the arm,
turtlebot3_manipulation_gazebo):

    export TURTLEBOT3_MODEL=waffle_pi
    ros2 launch aicc_ros2 turtlebot3_gazebo.launch.py
    ros2 launch aicc_ros2 turtlebot3_gazebo.launch.py manipulation:=true

Starts the Gazebo bringup (unless start_gazebo:=false, e.g. when it runs
already) and the bridge with the turtlebot3 profile and use_sim_time:=true,
so that every age and stamp counts in Gazebo's /clock.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    start_gazebo = LaunchConfiguration("start_gazebo")
    manipulation = LaunchConfiguration("manipulation")
    params_file = LaunchConfiguration("params_file")
    namespace = LaunchConfiguration("namespace")
    without_arm = PythonExpression(["'", start_gazebo, "' == 'true' and '", manipulation, "' != 'true'"])
    with_arm = PythonExpression(["'", start_gazebo, "' == 'true' and '", manipulation, "' == 'true'"])
    return LaunchDescription([
        DeclareLaunchArgument("start_gazebo", default_value="true", description="Start the TurtleBot 3 Gazebo bringup"),
        DeclareLaunchArgument("manipulation", default_value="false",
                              description="Use turtlebot3_manipulation_gazebo (OpenMANIPULATOR-X) instead of turtlebot3_gazebo"),
        DeclareLaunchArgument("params_file",
                              default_value=PathJoinSubstitution([FindPackageShare("aicc_ros2"), "config", "turtlebot3.yaml"]),
                              description="Bridge profile"),
        DeclareLaunchArgument("namespace", default_value="", description="Robot namespace"),
        # turtlebot3_gazebo: the TurtleBot3 world, model from $TURTLEBOT3_MODEL.
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare("turtlebot3_gazebo"), "launch", "turtlebot3_world.launch.py"])),
            launch_arguments={"use_sim_time": "true"}.items(),
            condition=IfCondition(without_arm),
        ),
        # turtlebot3_manipulation_gazebo: Waffle Pi with OpenMANIPULATOR-X and
        # its arm_controller / gripper_controller (what the profile names).
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare("turtlebot3_manipulation_gazebo"), "launch", "gazebo.launch.py"])),
            condition=IfCondition(with_arm),
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare("aicc_ros2"), "launch", "bridge.launch.py"])),
            launch_arguments={"params_file": params_file, "namespace": namespace, "use_sim_time": "true"}.items(),
        ),
    ])
