#!/usr/bin/env bash
# Runs each fuzz target (fuzz/fuzz_targets: the NDJSON framer, the AICC
# line decoder, the protocol core fed lines, the AI-control JSON-RPC
# decoder, the configuration parser, the conformance scenario parser, the
# MCP adapter's inbound path) for SECONDS, from the seeds in fuzz/seeds
# (and, for scenarios, conformance/scenarios) plus the corpus grown by
# earlier runs (fuzz/corpus), and prints each target's executions. A crash
# stops the script with the sanitizer's or the panic's report; the input
# and the whole log are in fuzz/artifacts/TARGET/ (make the input a seed or
# a regression test, then fix).
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 30)] [TARGET...]
# AICC_FUZZ_DEV=1 builds and runs the targets unoptimised (cargo fuzz
# --dev): a few times fewer executions per second, but a build several
# minutes shorter, which is what a 30-second smoke wants (scripts/test.sh).
# Needs nightly Rust (installed beside stable here) and cargo-fuzz
# (installed from the crate registry when missing). Not part of
# scripts/test.sh: building the instrumented targets alone takes minutes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo/fuzz"
seconds="${1:-30}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(framer aicc_line core_lines ai_control_rpc config_yaml scenario_yaml mcp_inbound)
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked
export CARGO_TARGET_DIR="$repo/fuzz/target"
profile=()
[ "${AICC_FUZZ_DEV:-0}" = 1 ] && profile=(--dev)
# cargo fuzz has no --locked: this refuses a fuzz/Cargo.lock that the build
# would rewrite (a test run must leave the tree as it found it).
cargo +nightly metadata --locked --format-version 1 > /dev/null || {
  echo "[fuzz] fuzz/Cargo.lock is not current (above): run cargo +nightly update --workspace in fuzz/ and commit it" >&2
  exit 1
}
cargo +nightly fuzz build "${profile[@]}"
echo "[fuzz] targets built, ${SECONDS} s after the start"
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target"
  cp -n seeds/"$target"/* "corpus/$target/" 2> /dev/null || true
  if [ "$target" = scenario_yaml ]; then
    find "$repo/conformance/scenarios" -name '*.yaml' -exec cp -n {} "corpus/$target/" \;
  fi
  log="$(mktemp)"
  cargo +nightly fuzz run "${profile[@]}" "$target" "corpus/$target" -- -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 > "$log" 2>&1 || {
    mkdir -p "artifacts/$target"
    mv "$log" "artifacts/$target/run.log"
    # The report itself, not only the log's tail (a leak report comes after pages of stack).
    grep -n -m 1 -A 30 -E '==[0-9]+==ERROR|panicked at|deadly signal' "artifacts/$target/run.log" || tail -n 40 "artifacts/$target/run.log"
    echo "[fuzz] $target: CRASH (input and log in fuzz/artifacts/$target/)"
    exit 1
  }
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  corpus="$(ls "corpus/$target" | wc -l)"
  echo "[fuzz] $target: ${runs:-?} executions in ${seconds} s, no crash; corpus ${corpus} inputs"
  rm -f "$log"
done
