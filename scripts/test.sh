#!/usr/bin/env bash
# Runs every check and test suite: formatting, clippy (native and wasm), the web client's
# typecheck and unit tests, the native unit tests, and the integration and browser suites
# through the real runtime (wrangler dev / workerd, headless Chromium).
#
# Two steps run beside the foreground (scripts/toolchain.sh's start_job): the machine's own
# installs with the sandbox image's Debian part (downloads, mostly waiting), and the three
# release Workers (their link-time optimization keeps one core busy for minutes). The
# foreground meanwhile checks and compiles everything native, clippy linting the
# workspace's crates as they compile; the tests start once both are in.
source "$(dirname "$0")/toolchain.sh"
# A fresh target directory (a clean clone, CI) has nothing for incremental compilation to
# reuse, only its bookkeeping to write: off for that run.
[ -d "$CARGO_TARGET_DIR/debug" ] || export CARGO_INCREMENTAL=0
ensure_toolchain
ensure_nextest

installs() {
  ensure_bwrap
  ensure_chromium
  ensure_code_server
  ensure_desktop || true
  ensure_claude_code
  "$ROOT/scripts/build-image.sh" --debian-only
}
start_job installs installs
# Without binaryen's size pass: the tests run the same code, and on a fresh machine the
# pass is ~300 CPU-s of the build phase (the run command, deploy and bench keep it).
start_job workers build_worker --release --no-wasm-opt

log "cargo fmt --check"
cargo fmt --all -- --check

log "clippy (wasm32)"
# Every crate but the native-only ones (tokio) builds for the Workers; the Worker crate with
# both scripts' features, so every handler is reached (each build alone leaves the other's
# handlers unreached).
cargo clippy --workspace --exclude inspect-supervisor --exclude inspect-tests --exclude inspect-bench --exclude inspect-changes --exclude inspect-cli \
  --target wasm32-unknown-unknown --features inspect-worker/session,inspect-worker/plane \
  --quiet -- -D warnings

# Clippy natively is not a pass of its own: its driver compiles the workspace's crates (it is
# rustc with clippy's lints added), so every native build below is linted as it compiles,
# with `-D warnings` as `cargo clippy -- -D warnings` passes it. `cargo clippy` would first
# check every dependency again in its own mode (~300 s of a fresh machine's build, the
# dependencies then compiled a second time for the tests); this way each compiles once.
# What `--all-targets` covered: the libraries and programs (`cargo build --workspace`, the
# benchmarks included), their tests and the integration suites (nextest's build).
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# Nor line tables in the test command's builds (the dev profile keeps them for a person's
# own builds): the workspace's crates compile in ~12 % less CPU. A failing test still names
# its file and line (the panic's location); a backtrace names functions only.
export CARGO_PROFILE_DEV_DEBUG=false

log "the Modal app's pure part (python3 unittest)"
python3 -m unittest discover -s "$ROOT/providers/modal/app" -q
rm -rf "$ROOT/providers/modal/app/__pycache__"

log "the Markdown files' own links (scripts/check-links.sh)"
"$ROOT/scripts/check-links.sh"

log "web/src/wire.ts is generated from crates/protocol/ and current"
cargo test -p inspect-protocol --features ts --test typescript --quiet

build_web
log "web: typecheck and unit tests (vitest)"
(cd "$ROOT/web" && node_modules/.bin/tsc -p . && node_modules/.bin/vitest run --reporter=dot)

log "building (and clippy's lints on) every native crate, program and test"
cargo build --workspace --quiet
export INSPECT_SUPERVISOR_BIN="$CARGO_TARGET_DIR/debug/inspect-supervisor"
export INSPECT_CLI_BIN="$CARGO_TARGET_DIR/debug/inspect"
cargo nextest run --workspace --no-run --cargo-quiet

await_job installs
# Again in the foreground, now at once: each says where its program is.
ensure_bwrap
ensure_chromium
ensure_code_server
ensure_desktop || true
ensure_claude_code
log "the sandbox image's root (scripts/build-image.sh --root-only; cached): the terminal suite runs its sandboxes in it"
# No OCI archive: the tests run the merged root, and the archive's layers cost a minute of CPU.
INSPECT_TEST_SANDBOX_IMAGE="$("$ROOT/scripts/build-image.sh" --root-only | tail -1)"
log "the built image holds every listed tool, its supervisor stripped"
"$ROOT/scripts/check-sandbox-image.sh" --root "$INSPECT_TEST_SANDBOX_IMAGE"
export INSPECT_TEST_SANDBOX_IMAGE

await_job workers
export INSPECT_WORKER_PREBUILT=1
log "deploy configuration (scripts/deploy.sh --dry-run)"
./scripts/deploy.sh --dry-run

log "tests (cargo nextest: every suite's tests from one pool, the slowest first)"
cargo nextest run --workspace -j "${INSPECT_TEST_THREADS:-4}"
