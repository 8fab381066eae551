#!/usr/bin/env bash
# Builds the ROS 2 interface packages under interfaces/ (control_msgs and
# ros_gz_interfaces subsets) with CMake and the rosidl generators from the
# ROS 2 Kilted wheels, and installs them into PREFIX (the wheels' venv):
#   scripts/build-interfaces.sh PREFIX
# scripts/setup.sh calls it last. Build trees live in .deps/build/<pkg>, with
# the full log in .deps/build/<pkg>/build.log.
#
# Idempotent: PREFIX/.interfaces-stamp holds a hash of the packages' files and
# of this script; when it matches (and the packages are installed) nothing is
# done. setup.sh removes the stamp whenever it reinstalls the wheels.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[interfaces] %s\n' "$*" >&2; }
die() { printf '[interfaces] ERROR: %s\n' "$*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 PREFIX (the ROS 2 wheels prefix, e.g. .deps/ros2)"
[ -d "$1" ] || die "prefix $1 does not exist: run scripts/setup.sh first"
prefix="$(cd "$1" && pwd)"
python="$prefix/bin/python3"
[ -x "$python" ] || die "$python not found: $prefix is not the wheels' venv"
command -v cmake >/dev/null || die "cmake not found: apt-get install cmake (scripts/setup.sh does)"
src_root="$repo/interfaces"
build_root="$repo/.deps/build"
stamp_file="$prefix/.interfaces-stamp"

# --- ROS distro of the prefix ---------------------------------------------------
# control_msgs' FollowJointTrajectory text differs between distros (see
# interfaces/README.md): Humble/Jazzy carry control_msgs 5.x, Kilted/Rolling
# 6.x. The wheels' distribution names say which distro they are
# (ros_kilted_rclpy-*.dist-info); AICC_ROS_DISTRO overrides.
distro="${AICC_ROS_DISTRO:-}"
if [ -z "$distro" ]; then
  distro="$(ls "$prefix"/lib/python3.11/site-packages 2>/dev/null | sed -n 's/^ros_\([a-z]*\)_rclpy-.*\.dist-info$/\1/p' | head -n1)"
fi
case "$distro" in
  humble|iron|jazzy) control_msgs_distro=jazzy ;;
  kilted|rolling) control_msgs_distro=kilted ;;
  "") die "cannot tell the ROS distro of $prefix (no ros_<distro>_rclpy wheel): set AICC_ROS_DISTRO=jazzy or kilted" ;;
  *) die "unknown ROS distro '$distro' (AICC_ROS_DISTRO or the wheels): expected humble, jazzy, kilted or rolling" ;;
esac
log "ROS distro $distro: control_msgs FollowJointTrajectory as in $control_msgs_distro"

# Every folder under interfaces/ with a package.xml is a package. They do not
# depend on each other; if one ever does, list the order here explicitly.
packages=()
for xml in "$src_root"/*/package.xml; do
  [ -e "$xml" ] && packages+=("$(basename "$(dirname "$xml")")")
done
[ "${#packages[@]}" -gt 0 ] || die "no packages under $src_root"

# --- Skip when nothing changed -----------------------------------------------
want="$(
  cd "$src_root"
  {
    find "${packages[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    sha256sum "$repo/scripts/build-interfaces.sh" | cut -d' ' -f1
    echo "control_msgs_distro=$control_msgs_distro"
    cat "$prefix/.aicc-stamp" 2>/dev/null || true
  } | sha256sum | cut -c1-16
)"
installed=1
for pkg in "${packages[@]}"; do
  [ -e "$prefix/share/ament_index/resource_index/rosidl_interfaces/$pkg" ] || installed=0
done
if [ "$installed" -eq 1 ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$want" ]; then
  log "up to date: ${packages[*]}"
  exit 0
fi
rm -f "$stamp_file"

# --- Fix the wheels' exported CMake files ------------------------------------
# The wheels were built in a manylinux image: their *__rosidl_generator_py
# targets carry Python/numpy include dirs under /opt/python/cp311-cp311/...,
# which CMake rejects ("non-existent path") when a package depends on them.
# Point them at this venv's Python and numpy (idempotent: only files that
# still mention /opt/python are rewritten).
"$python" - "$prefix" <<'PY' || die "could not rewrite the wheels' *__rosidl_generator_py CMake exports"
import glob, os, re, sys, sysconfig
import numpy
prefix = sys.argv[1]
py_inc = sysconfig.get_paths()["include"]
np_inc = numpy.get_include()
if not os.path.exists(os.path.join(py_inc, "Python.h")):
    sys.exit(f"Python.h not found in {py_inc}: install the Python 3.11 headers (python3.11-dev)")
pattern = re.compile(r'(INTERFACE_INCLUDE_DIRECTORIES\s+")([^"]*/opt/python/[^"]*)(")')
def fix(value):
    out = []
    for d in value.split(";"):
        if "/opt/python/" in d:
            d = np_inc if "numpy" in d else py_inc
        if d not in out:
            out.append(d)
    return ";".join(out)
for path in glob.glob(os.path.join(prefix, "share", "*", "cmake", "*__rosidl_generator_py*.cmake")):
    with open(path) as f:
        text = f.read()
    if "/opt/python/" not in text:
        continue
    new = pattern.sub(lambda m: m.group(1) + fix(m.group(2)) + m.group(3), text)
    if "/opt/python/" in new:
        sys.exit(f"unexpected /opt/python reference left in {path}")
    with open(path, "w") as f:
        f.write(new)
PY

# --- Build environment --------------------------------------------------------
site="$prefix/lib/python3.11/site-packages"
ld_path="$prefix/lib"
for d in "$site"/*.libs; do [ -d "$d" ] && ld_path="$ld_path:$d"; done
export LD_LIBRARY_PATH="$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export AMENT_PREFIX_PATH="$prefix"
export CMAKE_PREFIX_PATH="$prefix"
export PATH="$prefix/bin:$PATH"
unset PYTHONPATH
jobs="$(nproc 2>/dev/null || echo 2)"
# Install the Python modules into the venv's own site-packages, so that its
# python3 imports them with no PYTHONPATH.
py_install_dir="$("$python" -c 'import os, sys, sysconfig; print(os.path.relpath(sysconfig.get_path("purelib"), sys.prefix))')"

# A build tree configured against another prefix or wheel set starts afresh.
tree_id="$prefix $(cat "$prefix/.aicc-stamp" 2>/dev/null || true)"

total_start=$SECONDS
for pkg in "${packages[@]}"; do
  build="$build_root/$pkg"
  if [ -d "$build" ] && [ "$(cat "$build/.aicc-tree" 2>/dev/null || true)" != "$tree_id" ]; then
    rm -rf "$build"
  fi
  mkdir -p "$build"
  echo "$tree_id" > "$build/.aicc-tree"
  blog="$build/build.log"
  : > "$blog"
  start=$SECONDS
  log "$pkg: building ($jobs jobs, log: ${blog#"$repo"/})"
  step() {
    local what="$1"; shift
    if ! "$@" >>"$blog" 2>&1; then
      tail -n 25 "$blog" | sed 's/^/    /' >&2
      die "$pkg: $what failed; full log: $blog"
    fi
  }
  step "cmake configure" cmake -S "$src_root/$pkg" -B "$build" \
    -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_TESTING=OFF \
    -DPython3_EXECUTABLE="$python" \
    -DPython3_FIND_VIRTUALENV=ONLY \
    -DPYTHON_INSTALL_DIR="$py_install_dir" \
    -DCONTROL_MSGS_DISTRO="$control_msgs_distro"
  step "build" cmake --build "$build" --parallel "$jobs"
  step "install" cmake --install "$build"
  [ -e "$prefix/share/ament_index/resource_index/rosidl_interfaces/$pkg" ] \
    || die "$pkg: installed, but $prefix/share/ament_index/resource_index/rosidl_interfaces/$pkg is missing; full log: $blog"
  log "$pkg: done in $((SECONDS - start)) s"
done

echo "$want" > "$stamp_file"
log "built ${packages[*]} in $((SECONDS - total_start)) s"
