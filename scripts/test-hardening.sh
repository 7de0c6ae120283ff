#!/usr/bin/env bash
# The hardening checks of tensorasync, one part per argument (default: all):
#   soak        tests/soak.rs: TA_SOAK_OPS random C ABI operations per round
#               (default 100000), 4 threads, 64 tensors, two rounds; prints
#               RSS after each round and operations per second
#   failpoints  tests/failpoints.rs with the `failpoints` feature: allocation
#               failures during submission return OUT_OF_MEMORY, enroll and
#               leak nothing
#   fuzz        the C ABI fuzzer (fuzz/, cargo-fuzz + libFuzzer under
#               AddressSanitizer, nightly) for TA_FUZZ_SECONDS (default 120)
#               from the checked-in corpus; prints libFuzzer's final counts
#   loom        the loom models of the core's concurrency protocols
# Run from anywhere; installs cargo-fuzz if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(soak failpoints fuzz loom)

part() { printf '\n--> hardening: %s\n' "$*"; }

soak() {
  part "soak (${TA_SOAK_OPS:=100000} operations per round)"
  TA_SOAK_OPS=$TA_SOAK_OPS cargo test --release -p tensorasync-ffi --test soak -- --ignored --nocapture
}

failpoints() {
  part "allocation failpoints"
  cargo test --release -p tensorasync-ffi --features failpoints --test failpoints
}

fuzz() {
  if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    part "no nightly toolchain: the fuzz run is skipped"
    return 0
  fi
  if ! cargo fuzz --version >/dev/null 2>&1; then
    part "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
  fi
  local secs=${TA_FUZZ_SECONDS:-120}
  part "fuzzing the C ABI for $secs s (AddressSanitizer)"
  # New inputs go to a scratch directory (the first one libFuzzer is
  # given); the checked-in corpus is only read.
  local scratch log
  scratch=$(mktemp -d)
  log=$(mktemp)
  (cd fuzz && cargo +nightly fuzz build c_abi)
  local rc=0
  (cd fuzz && cargo +nightly fuzz run c_abi "$scratch" corpus/c_abi -- \
      -max_total_time="$secs" -timeout=60 -rss_limit_mb=4096 -print_final_stats=1) >"$log" 2>&1 || rc=$?
  # libFuzzer's last status line (execs, cov, ft) and its final stats.
  grep -E '^#[0-9]+' "$log" | tail -n 1 || true
  grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)' "$log" || true
  if [ $rc -ne 0 ]; then
    tail -n 80 "$log"
    echo "the fuzzer failed (exit status $rc); the input is under fuzz/artifacts/c_abi/"
  fi
  rm -rf "$scratch" "$log"
  return $rc
}

loom() {
  part "loom models (LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:=3}; at most 3 minutes each)"
  # The lib's tests, optimized (the bench profile), with `--cfg loom` given
  # to this crate alone (cargo rustc) and the checker by the `loom` feature:
  # the dependencies are the release build's, not a build of their own.
  local bin
  bin=$(cargo rustc -p tensorasync --lib --profile bench --features loom --message-format=json-render-diagnostics \
    -- --cfg loom | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
  [ -x "$bin" ] || { echo "loom: no test binary was built"; return 1; }
  # Each model in a process of its own, two at a time: the models' threads
  # are loom's coroutines, whose stacks contend for the process's memory map
  # when two models share a process (each then ran 3.5x slower).
  local models=(loom_epoch_queue_enrollment loom_epoch_queue_release_mid_flight loom_event_completion_and_callbacks
    loom_reports_follow_the_edges)
  local dir rc=0 i m
  dir=$(mktemp -d)
  for ((i = 0; i < ${#models[@]}; i += 2)); do
    local pids=()
    for m in "${models[@]:i:2}"; do
      LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS timeout 180 \
        "$bin" "runtime::loom_models::$m" --exact --nocapture >"$dir/$m.log" 2>&1 &
      pids+=($!)
    done
    for m in "${pids[@]}"; do wait "$m" || rc=1; done
  done
  for m in "${models[@]}"; do
    echo "--- $m"
    if grep -q "^test result: ok. 1 passed" "$dir/$m.log"; then
      grep -E "interleavings|^test " "$dir/$m.log"
    else
      rc=1
      tail -n 60 "$dir/$m.log"
    fi
  done
  rm -rf "$dir"
  return $rc
}

for p in "${parts[@]}"; do
  case $p in
    soak|failpoints|fuzz|loom) "$p" ;;
    *) echo "unknown part: $p (soak, failpoints, fuzz, loom)"; exit 2 ;;
  esac
done
