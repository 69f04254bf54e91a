#!/usr/bin/env bash
# Runs the whole system locally (the embedded default): builds the Worker and the
# supervisor, applies the D1 migrations, starts the local sandbox host and `wrangler dev`
# on 127.0.0.1, and stops everything on Ctrl-C.
#
#   INSPECT_PORT        the Worker's port                 (default 8787)
#   INSPECT_HOST_PORT   the local sandbox host's port     (default INSPECT_PORT + 1)
#   INSPECT_STATE_DIR   where all local state persists    (default .state/local)
#   SANDBOX_IDLE_TIMEOUT_SECONDS  idle sandboxes are snapshotted and stopped after this
#                                  (default 600)
#
# The agent's model: set ANTHROPIC_API_KEY or OPENAI_API_KEY and INSPECT_MODEL
# (`provider/model`), or point INSPECT_MODEL_BASE_URL at an OpenAI-compatible server
# (with INSPECT_MODEL=inspect/<model> and, if it needs one, INSPECT_MODEL_API_KEY).
source "$(dirname "$0")/toolchain.sh"

PORT="${INSPECT_PORT:-8787}"
HOST_PORT="${INSPECT_HOST_PORT:-$((PORT + 1))}"
STATE_DIR="${INSPECT_STATE_DIR:-$ROOT/.state/local}"
mkdir -p "$STATE_DIR"
STATE_DIR="$(cd "$STATE_DIR" && pwd)"

ensure_toolchain
build_web
build_worker --release
log "building the supervisor"
cargo build --release -p inspect-supervisor --quiet
SUPERVISOR="$CARGO_TARGET_DIR/release/inspect-supervisor"

# The secret shared by the Worker and the sandbox host, made once per state directory.
if [ ! -s "$STATE_DIR/host-secret" ]; then
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$STATE_DIR/host-secret")
fi
HOST_SECRET="$(cat "$STATE_DIR/host-secret")"

# The key that seals secrets at rest, made once per state directory (losing it loses the
# stored secrets, not the sessions).
if [ ! -s "$STATE_DIR/secrets-key" ]; then
  (umask 077 && head -c 32 /dev/urandom | base64 | tr -d '\n' > "$STATE_DIR/secrets-key")
fi
SECRETS_KEY="$(cat "$STATE_DIR/secrets-key")"

# The Worker's variables, kept in a file (not on the command line, where `ps` shows them).
(umask 077 && cat > "$STATE_DIR/worker.env" <<VARS
LOCAL_MODE=true
SANDBOX_HOST_URL=http://127.0.0.1:$HOST_PORT
SANDBOX_HOST_SECRET=$HOST_SECRET
REPO_SECRETS_ENCRYPTION_KEY=$SECRETS_KEY
${SANDBOX_IDLE_TIMEOUT_SECONDS:+SANDBOX_IDLE_TIMEOUT_SECONDS=$SANDBOX_IDLE_TIMEOUT_SECONDS}
VARS
)

log "applying D1 migrations"
(cd "$ROOT" && wrangler d1 migrations apply DB --local --persist-to "$STATE_DIR/wrangler" >/dev/null)

pids=()
cleanup() {
  # Stop the children first, whatever happens to our own output (a closed pipe must not
  # end this function early).
  trap - INT TERM EXIT
  trap '' PIPE
  set +e
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  log "stopped" 2>/dev/null
}
trap cleanup INT TERM EXIT

# Each child leads its own process group, so stopping it stops everything it started.
SANDBOX_HOST_SECRET="$HOST_SECRET" \
INSPECT_OPENCODE_BIN="${INSPECT_OPENCODE_BIN:-$ROOT/node_modules/opencode-linux-x64/bin/opencode}" \
  setsid "$SUPERVISOR" host \
  --listen "127.0.0.1:$HOST_PORT" --data-dir "$STATE_DIR/sandboxes" &
pids+=($!)

(cd "$ROOT" && exec setsid wrangler dev --local --ip 127.0.0.1 --port "$PORT" \
  --persist-to "$STATE_DIR/wrangler" --show-interactive-dev-session=false \
  --env-file "$STATE_DIR/worker.env") &
pids+=($!)

for _ in $(seq 600); do
  if curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
    log "Open-Inspect is running at http://127.0.0.1:$PORT  (state: $STATE_DIR; Ctrl-C stops)"
    break
  fi
  sleep 0.2
done
wait -n "${pids[@]}" || true
