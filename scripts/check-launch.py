#!/usr/bin/env python3
"""Checks a launch file against what colcon installed, without launch_ros
(which these machines do not have): the file is read, not run.

    check-launch.py PACKAGE SOURCE_LAUNCH_FILE

With the install's setup.sh sourced (AMENT_PREFIX_PATH), checks that
PACKAGE is in the ament index; that its share directory holds package.xml
(naming PACKAGE), the launch file (identical to SOURCE_LAUNCH_FILE), config/
and urdf/; that every Node(...) names PACKAGE and an executable installed in
lib/PACKAGE; that every PathJoinSubstitution([FindPackageShare(...), ...])
names an installed file; that every LaunchConfiguration is declared; and that
the node gets the params_file, namespace and use_sim_time arguments.
"""
from __future__ import annotations

import ast
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from ament_index_python.packages import PackageNotFoundError, get_package_prefix, get_package_share_directory

REQUIRED_SHARE = ["package.xml", "launch/bridge.launch.py", "config/default.yaml", "config/sim.yaml",
                  "config/turtlebot3.yaml", "config/turtlebot4.yaml", "urdf/aicc_bot.urdf"]
NODE_ARGUMENTS = {"params_file", "namespace", "use_sim_time"}


def call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def constant(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def main(package: str, source: Path) -> int:
    errors: list[str] = []
    try:
        share = Path(get_package_share_directory(package))
        prefix = Path(get_package_prefix(package))
    except PackageNotFoundError:
        print(f"package {package} is not in the ament index (AMENT_PREFIX_PATH={os.environ.get('AMENT_PREFIX_PATH')})")
        return 1
    for relative in REQUIRED_SHARE:
        if not (share / relative).is_file():
            errors.append(f"{share / relative} is not installed")
    if (share / "package.xml").is_file():
        name = ET.parse(share / "package.xml").getroot().findtext("name")
        if name != package:
            errors.append(f"installed package.xml names {name!r}, not {package!r}")
    installed_launch = share / "launch" / source.name
    if installed_launch.is_file() and installed_launch.read_bytes() != source.read_bytes():
        errors.append(f"{installed_launch} differs from {source}: rebuild")

    tree = ast.parse(source.read_text(), filename=str(source))
    # Names bound to LaunchConfiguration("x"), and every LaunchConfiguration used.
    bound: dict[str, str] = {}
    used: set[str] = set()
    declared: set[str] = set()
    for node in ast.walk(tree):
        name = call_name(node)
        if name == "LaunchConfiguration" and node.args and constant(node.args[0]):
            used.add(constant(node.args[0]))
        if name == "DeclareLaunchArgument" and node.args and constant(node.args[0]):
            declared.add(constant(node.args[0]))
        if isinstance(node, ast.Assign) and call_name(node.value) == "LaunchConfiguration" and node.value.args:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = constant(node.value.args[0])
        if name == "PathJoinSubstitution" and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            parts = node.args[0].elts
            if parts and call_name(parts[0]) == "FindPackageShare":
                owner = constant(parts[0].args[0]) if parts[0].args else None
                rest = [constant(p) for p in parts[1:]]
                if owner != package:
                    errors.append(f"line {node.lineno}: FindPackageShare({owner!r}), expected {package!r}")
                elif None in rest:
                    errors.append(f"line {node.lineno}: a path part is not a plain string: {ast.unparse(node)}")
                elif not share.joinpath(*rest).is_file():
                    errors.append(f"line {node.lineno}: {share.joinpath(*rest)} is not installed")
    for missing in sorted(used - declared):
        errors.append(f"LaunchConfiguration({missing!r}) is used but never declared")

    nodes = [n for n in ast.walk(tree) if call_name(n) == "Node"]
    if not nodes:
        errors.append("no Node(...) in the launch file")
    for node in nodes:
        keywords = {k.arg: k.value for k in node.keywords}
        if constant(keywords.get("package")) != package:
            errors.append(f"line {node.lineno}: Node(package={ast.unparse(keywords['package']) if 'package' in keywords else None}), expected {package!r}")
        executable = constant(keywords.get("executable"))
        if executable is None:
            errors.append(f"line {node.lineno}: Node has no plain executable name")
        elif not os.access(prefix / "lib" / package / executable, os.X_OK):
            errors.append(f"line {node.lineno}: executable {prefix / 'lib' / package / executable} is not installed")
        reached = set()
        for value in keywords.values():
            for inner in ast.walk(value):
                if isinstance(inner, ast.Name) and inner.id in bound:
                    reached.add(bound[inner.id])
                if call_name(inner) == "LaunchConfiguration" and inner.args and constant(inner.args[0]):
                    reached.add(constant(inner.args[0]))
        for argument in sorted(NODE_ARGUMENTS - reached):
            errors.append(f"line {node.lineno}: the node does not get the {argument!r} launch argument")
    for error in errors:
        print(f"check-launch: {error}")
    if not errors:
        print(f"check-launch: {source.name}: package {package}, executables and {len(REQUIRED_SHARE)} installed files "
              f"found under {prefix}; arguments {sorted(declared)} declared and passed")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
