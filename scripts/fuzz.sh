#!/usr/bin/env bash
# Runs each fuzz target (fuzz/fuzz_targets: the NDJSON framer, the AICC
# line decoder, the protocol core fed lines, the AI-control JSON-RPC
# decoder, the configuration parser) for SECONDS, from the seeds in
# fuzz/seeds plus the corpus grown by earlier runs (fuzz/corpus), and prints
# each target's executions. A crash stops the script; its input is in
# fuzz/artifacts/TARGET/ (make it a regression test, then fix).
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 30)] [TARGET...]
# Needs nightly Rust (installed beside stable here) and cargo-fuzz
# (installed from the crate registry when missing). Not part of
# scripts/test.sh: building the instrumented targets alone takes minutes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo/fuzz"
seconds="${1:-30}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(framer aicc_line core_lines fonline_rpc config_yaml)
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked
export CARGO_TARGET_DIR="$repo/fuzz/target"
cargo +nightly fuzz build
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target"
  cp -n seeds/"$target"/* "corpus/$target/" 2> /dev/null || true
  log="$(mktemp)"
  cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 > "$log" 2>&1 || { tail -n 40 "$log"; echo "[fuzz] $target: CRASH (input in fuzz/artifacts/$target/)"; exit 1; }
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  corpus="$(ls "corpus/$target" | wc -l)"
  echo "[fuzz] $target: ${runs:-?} executions in ${seconds} s, no crash; corpus ${corpus} inputs"
  rm -f "$log"
done
