#!/usr/bin/env bash
# Installs everything aicc-ros2 needs on a fresh Debian 12 / Ubuntu machine:
#   - apt packages (clang/libclang for r2r's bindgen, cmake for interface
#     packages, Mesa EGL for the headless simulator, Python 3.11, iproute2
#     for the fault tests' network namespaces);
#   - ROS 2 Kilted from PyPI wheels into .deps/ros2 (project-local, git-ignored),
#     with the fixes r2r needs (see docs/toolchain.md);
#   - interface packages the wheels lack (control_msgs, ros_gz_interfaces,
#     tf2_msgs),
#     built from the IDL files under interfaces/;
#   - MuJoCo for the simulated robot;
#   - colcon (with colcon-ros-cargo) and cargo-ament-build, to build the
#     package as a ROS user does (scripts/colcon-check.sh).
# Idempotent: each step checks a stamp and is skipped when nothing changed.
#
# With a sourced ROS 2 (Humble, Jazzy or Kilted: ROS_DISTRO and
# AMENT_PREFIX_PATH set), the wheels are not installed; the build uses that
# ROS, and only the simulator's Python packages are added (a venv that sees
# the system's rclpy).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$repo/.deps"
prefix="$deps/ros2"
log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "not root and no sudo: run as root, or install sudo (su -c 'apt-get install sudo')"
  sudo_cmd=(sudo)
fi

own_ros=0
if [ -n "${ROS_DISTRO:-}" ] && [ -n "${AMENT_PREFIX_PATH:-}" ] && [[ "$AMENT_PREFIX_PATH" != *"$prefix"* ]]; then
  own_ros=1
  log "using the sourced ROS 2 '$ROS_DISTRO' at $AMENT_PREFIX_PATH"
fi

# --- apt packages -----------------------------------------------------------
command -v apt-get >/dev/null || die "apt-get not found: this script supports Debian/Ubuntu. Elsewhere install clang, libclang, cmake, Python 3.11 and Mesa EGL by hand, then rerun."
# curl: the tests' HTTP client for the console and the cross-protocol requests.
apt_wanted=(clang libclang-dev cmake pkg-config libegl1 libegl-mesa0 libgl1-mesa-dri ca-certificates iproute2 curl)
python_bin=""
if [ "$own_ros" -eq 1 ]; then
  python_bin="$(command -v python3 || true)"
  apt_wanted+=(python3-venv)
else
  # The ROS 2 Kilted wheels on PyPI are built for CPython 3.11 only.
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      python_bin="$(command -v "$candidate")"; break
    fi
  done
  if [ -z "$python_bin" ] || [ "$python_bin" = /usr/bin/python3.11 ] || [ "$python_bin" = /usr/bin/python3 ]; then
    apt_wanted+=(python3.11 python3.11-venv python3.11-dev)
  fi
fi
missing=()
for pkg in "${apt_wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing apt packages: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq || die "apt-get update failed: check the network or the apt sources"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed. Python 3.11 is required for the ROS 2 Kilted wheels; on a release without it, source your own ROS 2 (see README) and rerun."
fi
[ -n "$python_bin" ] || python_bin="$(command -v python3.11 || true)"
[ -n "$python_bin" ] || die "Python 3.11 not found after installing it: install python3.11 python3.11-venv python3.11-dev"
command -v cargo >/dev/null || die "cargo not found: install Rust with rustup (https://rustup.rs) or 'apt-get install cargo', then rerun"

stamp_matches() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# --- Python prefix: ROS 2 wheels (or, with an own ROS, only the sim's packages)
if [ "$own_ros" -eq 1 ]; then
  venv="$deps/sim-venv"
  want="own-ros $ROS_DISTRO $(sha256sum "$repo/scripts/requirements-sim.txt" | cut -c1-16)"
  if ! stamp_matches "$venv/.aicc-stamp" "$want"; then
    log "creating $venv for the simulator (sees the system rclpy)"
    "$python_bin" -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$repo/scripts/requirements-sim.txt"
    echo "$want" > "$venv/.aicc-stamp"
  fi
  bash "$repo/scripts/setup-mcp.sh"
  log "done (own ROS 2). Build with 'cargo build --release'."
  exit 0
fi

want="$(cat "$repo/scripts/requirements-ros.txt" "$repo/scripts/constraints-ros.txt" | sha256sum | cut -c1-16) $("$python_bin" -c 'import sys; print(sys.version.split()[0])')"
if ! stamp_matches "$prefix/.aicc-stamp" "$want"; then
  log "installing ROS 2 Kilted wheels and MuJoCo into $prefix (about a minute)"
  rm -rf "$prefix"
  mkdir -p "$deps"
  "$python_bin" -m venv "$prefix"
  "$prefix/bin/pip" install -q --disable-pip-version-check \
    -r "$repo/scripts/requirements-ros.txt" -c "$repo/scripts/constraints-ros.txt" \
    || die "pip install of the ROS 2 wheels failed (is PyPI reachable?)"
  rm -f "$prefix/.interfaces-stamp"
  echo "$want" > "$prefix/.aicc-stamp"
fi

# --- Fixes for r2r against the wheels (idempotent) --------------------------
site="$prefix/lib/python3.11/site-packages"
# r2r links -lrmw_implementation; the wheels' librcl links Fast DDS's rmw directly.
[ -e "$prefix/lib/librmw_implementation.so" ] || ln -sf librmw_fastrtps_cpp.so "$prefix/lib/librmw_implementation.so"
# The wheels vendor libssl, tinyxml2, lttng... in *.libs folders: link them
# into one directory so a single rpath/LD_LIBRARY_PATH entry covers them.
for lib in "$site"/*.libs/*.so*; do
  [ -e "$prefix/lib/$(basename "$lib")" ] || ln -s "$lib" "$prefix/lib/$(basename "$lib")"
done
# librcl pulls *_rosidl_generator_py libraries that need libpython: link it
# here too, so binaries need no other library directory.
py_libdir="$("$python_bin" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')"
py_multiarch="$("$python_bin" -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH") or "")')"
libpython=""
for dir in "$py_libdir" "$py_libdir/$py_multiarch"; do
  [ -e "$dir/libpython3.11.so" ] && { libpython="$dir/libpython3.11.so"; break; }
done
[ -n "$libpython" ] || die "libpython3.11.so not found under $py_libdir: install python3.11-dev"
ln -sf "$(readlink -f "$libpython")" "$prefix/lib/libpython3.11.so"
ln -sf "$(readlink -f "$libpython")" "$prefix/lib/libpython3.11.so.1.0"

# --- Interface packages built from IDL ---------------------------------------
"$repo/scripts/build-interfaces.sh" "$prefix"

# --- colcon and cargo-ament-build (scripts/colcon-check.sh) -----------------
colcon_venv="$deps/colcon"
want="$(sha256sum "$repo/scripts/requirements-colcon.txt" | cut -c1-16)"
if ! stamp_matches "$colcon_venv/.aicc-stamp" "$want"; then
  log "installing colcon with colcon-ros-cargo into $colcon_venv"
  rm -rf "$colcon_venv"
  "$python_bin" -m venv "$colcon_venv"
  "$colcon_venv/bin/pip" install -q --disable-pip-version-check -r "$repo/scripts/requirements-colcon.txt" \
    || die "pip install of colcon failed (is PyPI reachable?)"
  echo "$want" > "$colcon_venv/.aicc-stamp"
fi
ament_build_version=0.1.11
if [ ! -x "$deps/cargo/bin/cargo-ament-build" ] || ! stamp_matches "$deps/cargo/.aicc-stamp" "$ament_build_version"; then
  log "installing cargo-ament-build $ament_build_version into $deps/cargo (about a minute)"
  cargo install --quiet --locked --root "$deps/cargo" --version "$ament_build_version" cargo-ament-build \
    || die "cargo install cargo-ament-build failed (is the crate registry reachable?)"
  echo "$ament_build_version" > "$deps/cargo/.aicc-stamp"
fi

# --- The MCP host the `aicc mcp` tests use (no ROS) ---------------------------
bash "$repo/scripts/setup-mcp.sh"

log "done: ROS 2 Kilted prefix at $prefix. 'cargo build --release' now works with no environment."
