#!/usr/bin/env bash
# Runs the benchmarks against the local stack: builds the release Worker, then the
# benchmark binaries in release mode. Results go to stdout; docs/benchmarks.md records them.
source "$(dirname "$0")/toolchain.sh"
ensure_toolchain
ensure_chromium
build_web
build_worker --release
export INSPECT_WORKER_PREBUILT=1
# The Workers' sizes (raw and gzip -9 of the wasm; wrangler's own report is in
# `scripts/deploy.sh --dry-run`).
for out in build build-plane build-providers; do
  wasm="$ROOT/worker/$out/index_bg.wasm"
  echo "worker/$out: wasm $(stat -c %s "$wasm") B, gzip -9 $(gzip -9 -c "$wasm" | wc -c) B"
done
cargo run --release --quiet -p inspect-bench -- session
export INSPECT_SUPERVISOR_BIN="$CARGO_TARGET_DIR/release/inspect-supervisor"
cargo build --release --quiet -p inspect-supervisor
cargo run --release --quiet -p inspect-bench -- sandbox
# The same fresh sandboxes with a 3-s setup hook (the agent warms up while it runs).
INSPECT_BENCH=setup cargo run --release --quiet -p inspect-bench -- sandbox
# The scale curve: 100, 300 and 1,000 sessions at once (INSPECT_SCALE changes the sizes).
cargo run --release --quiet -p inspect-bench -- scale
# Automations: 1,000 schedules due in one cron tick, each run exactly once (three times);
# then the same with room for one sandbox (the rest wait, woken in order).
INSPECT_BENCH_RUNS=3 cargo run --release --quiet -p inspect-bench -- automations
INSPECT_BENCH_CAP=1 cargo run --release --quiet -p inspect-bench -- automations
# A burst of 2,000 prompts over 2,000 watched sessions, the provider slow: each prompt's echo.
cargo run --release --quiet -p inspect-bench -- echo
# The inbox: a prompt's end to its author's open inbox socket; the analytics query over
# 10,000 sessions in the index.
cargo run --release --quiet -p inspect-bench -- inbox
# The changes panel's capture: 20,000 files with 200 changed, median of 9.
cargo run --release --quiet -p inspect-bench -- changes
# A terminal's keystroke → echo through the Worker, the object, the supervisor and a PTY.
cargo run --release --quiet -p inspect-bench -- terminal
# The egress proxy's cost: git clone of a 50 MB repository, open vs off-but-the-server.
cargo run --release --quiet -p inspect-bench -- egress

# The browser: the first page's JavaScript and render time, and a 5,000-event timeline
# (render, long tasks while scrolling to the top), three runs.
for run in 1 2 3; do
  cargo test --release --quiet -p inspect-tests --test suites -- web:: --nocapture 2>&1 \
    | grep -E '^\[(timeline|e2e)\] (metrics|\{)' || true
done
