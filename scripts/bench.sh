#!/usr/bin/env bash
# Runs the benchmarks against the local stack: builds the release Worker, then the
# benchmark binaries in release mode. Results go to stdout; BENCHMARKS.md records them.
source "$(dirname "$0")/toolchain.sh"
ensure_toolchain
build_worker --release
export INSPECT_WORKER_PREBUILT=1
cargo run --release --quiet -p inspect-tests --bin session-bench
export INSPECT_SUPERVISOR_BIN="$CARGO_TARGET_DIR/release/inspect-supervisor"
cargo build --release --quiet -p inspect-supervisor
cargo run --release --quiet -p inspect-tests --bin sandbox-bench
