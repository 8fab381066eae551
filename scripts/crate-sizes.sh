#!/usr/bin/env bash
# Prints the lines of Rust in each part of the workspace (code, tests and
# comments alike): the node at the top (src/), its integration tests
# (tests/), each crate under crates/, and the fuzz targets.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
count() { git ls-files -- "$@" | grep '\.rs$' | xargs -r cat | wc -l; }
printf '%-22s %7s\n' part lines
printf '%-22s %7s\n' "src (aicc_ros2)" "$(count src build.rs)"
printf '%-22s %7s\n' "tests (aicc_ros2)" "$(count tests)"
for crate in crates/*/; do
  printf '%-22s %7s\n' "${crate%/}" "$(count "$crate")"
done
printf '%-22s %7s\n' fuzz "$(count fuzz)"
