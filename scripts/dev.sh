#!/usr/bin/env bash
# Runs the whole system locally (the embedded default): builds the Worker and the
# supervisor, applies the D1 migrations, starts the local sandbox host and `wrangler dev`
# on 127.0.0.1, and stops everything on Ctrl-C.
#
#   INSPECT_PORT        the Worker's port                 (default 8787)
#   INSPECT_HOST_PORT   the local sandbox host's port     (default INSPECT_PORT + 1)
#   INSPECT_STATE_DIR   where all local state persists    (default .state/local)
#   INSPECT_DEV_VARS    the Worker's settings file        (default .dev.vars)
#
# Every variable `.dev.vars.example` documents may be set in that file or in the
# environment (the environment wins; the run command's own values only fill what neither
# sets). At start it says which file it read and which settings are on, by name only.
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
# VS Code for the sandboxes (the host offers it when it is there).
ensure_code_server || log "code-server could not be installed; sessions will have no editor"
ensure_desktop || true
ensure_claude_code || log "Claude Code could not be installed; sessions can run OpenCode only"
# The test command builds everything once and runs this script with what it built.
if [ "${INSPECT_WORKER_PREBUILT:-}" != 1 ]; then
  build_web
  build_worker --release
fi
if [ -n "${INSPECT_SUPERVISOR_BIN:-}" ]; then
  SUPERVISOR="$INSPECT_SUPERVISOR_BIN"
else
  log "building the supervisor"
  cargo build --release -p inspect-supervisor --quiet
  SUPERVISOR="$CARGO_TARGET_DIR/release/inspect-supervisor"
fi

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

# The Worker's variables. Three layers, the later winning, empty values counting as unset:
# the run command's own (local mode, the sandbox host, the secrets key), the user's
# variables file (`.dev.vars`, or the file INSPECT_DEV_VARS names), and the process
# environment (every variable `.dev.vars.example` documents). wrangler gets the result
# in one file (not on the command line, where `ps` shows it).
DEV_VARS_FILE="${INSPECT_DEV_VARS:-$ROOT/.dev.vars}"
declare -A WORKER_VARS=() VAR_SOURCE=()
set_worker_var LOCAL_MODE true "run command"
set_worker_var SANDBOX_HOST_SECRET "$HOST_SECRET" "run command"
set_worker_var REPO_SECRETS_ENCRYPTION_KEY "$SECRETS_KEY" "run command"
if [ -f "$DEV_VARS_FILE" ]; then
  read_vars_file "$DEV_VARS_FILE" "$(basename "$DEV_VARS_FILE")"
  log "read settings from $DEV_VARS_FILE"
else
  log "no $DEV_VARS_FILE (copy .dev.vars.example there to change settings)"
fi
for name in $(documented_vars); do
  set_worker_var "$name" "${!name:-}" "environment"
done
# A local OpenAI-compatible server's model is in the catalog the sessions pick from.
if [[ "${INSPECT_MODEL:-}" == inspect/* ]] && [ -z "${WORKER_VARS[COMPATIBLE_MODELS]:-}" ]; then
  set_worker_var COMPATIBLE_MODELS "$INSPECT_MODEL" "run command"
fi
# The local sandbox host passes the model keys of this environment to its sandboxes, so
# their vendors are reachable (offered in the catalog) without a stored secret.
if [ -z "${WORKER_VARS[SANDBOX_MODEL_KEYS]:-}" ]; then
  carried=()
  for key in ANTHROPIC_API_KEY OPENAI_API_KEY; do
    [ -n "${!key:-}" ] && carried+=("$key")
  done
  if [ ${#carried[@]} -gt 0 ]; then
    set_worker_var SANDBOX_MODEL_KEYS "$(IFS=,; echo "${carried[*]}")" "run command"
  fi
fi
# The run command starts the sandbox host itself, so it says where the host listens; a
# secret the user chose is given to the host as well.
if [ -n "${WORKER_VARS[SANDBOX_HOST_URL]:-}" ] && [ "${VAR_SOURCE[SANDBOX_HOST_URL]}" != "run command" ]; then
  log "SANDBOX_HOST_URL is set by the run command (the host it starts listens on port $HOST_PORT; INSPECT_HOST_PORT moves it)"
fi
set_worker_var SANDBOX_HOST_URL "http://127.0.0.1:$HOST_PORT" "run command"
HOST_SECRET="${WORKER_VARS[SANDBOX_HOST_SECRET]}"

(umask 077
 : > "$STATE_DIR/worker.env"
 for name in $(printf '%s\n' "${!WORKER_VARS[@]}" | sort); do
   value="${WORKER_VARS[$name]//$'\n'/\\n}"
   if [[ "$value" == *"'"* ]]; then
     printf '%s="%s"\n' "$name" "${value//\"/\\\"}"
   else
     printf "%s='%s'\n" "$name" "$value"
   fi >> "$STATE_DIR/worker.env"
 done)
# Names only, never values.
for source in "run command" "$(basename "$DEV_VARS_FILE")" environment; do
  names=()
  for name in "${!VAR_SOURCE[@]}"; do
    [ "${VAR_SOURCE[$name]}" = "$source" ] && names+=("$name")
  done
  if [ ${#names[@]} -gt 0 ]; then
    log "settings from $source: $(printf '%s\n' "${names[@]}" | sort | tr '\n' ' ')"
  fi
done

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

# The three Workers in one process: the session Worker (the front door, on $PORT), the
# control plane Worker it binds, and the providers Worker both bind.
write_bound_config plane "$STATE_DIR/plane" "$STATE_DIR/worker.env"
write_bound_config providers "$STATE_DIR/providers" "$STATE_DIR/worker.env"
# wrangler's local trace collector (every invocation's tail events, for its local explorer)
# costs the one runtime thread ~12 % under load: off unless X_LOCAL_OBSERVABILITY says so.
(cd "$ROOT" && X_LOCAL_OBSERVABILITY="${X_LOCAL_OBSERVABILITY:-false}" exec setsid wrangler dev --local --ip 127.0.0.1 --port "$PORT" \
  -c wrangler.toml -c "$STATE_DIR/plane/wrangler.toml" -c "$STATE_DIR/providers/wrangler.toml" \
  --persist-to "$STATE_DIR/wrangler" --show-interactive-dev-session=false \
  --env-file "$STATE_DIR/worker.env") &
pids+=($!)

names=("the sandbox host" "wrangler dev")
for _ in $(seq 600); do
  if curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
    log "Open-Inspect is running at http://127.0.0.1:$PORT  (state: $STATE_DIR; Ctrl-C stops)"
    break
  fi
  # A part that ended on its way up (a port taken meanwhile, say) ends the run, in words.
  for i in "${!pids[@]}"; do
    kill -0 "${pids[$i]}" 2>/dev/null || { log "${names[$i]} exited while starting (its output is above)"; exit 1; }
  done
  sleep 0.2
done
wait -n "${pids[@]}" || true
