#!/usr/bin/env bash
# Deploys Open-Inspect to Cloudflare with wrangler:
#   1. builds the web client and the three Workers (the session Worker, wrangler.toml; the
#      control plane Worker, worker/plane.toml; the providers Worker, worker/providers.toml;
#      bound by service bindings);
#   2. finds the D1 database `open-inspect` (creates it when missing) and writes its id
#      into the two configurations that use it;
#   3. applies the D1 migrations to it;
#   4. sets the Workers' secrets from a file you fill in (KEY=value lines, as in
#      .dev.vars.example; empty values are skipped), never printing a value;
#   5. deploys them: the providers Worker, then (the first time: the session Worker without
#      its binding to the control plane) the control plane, then the session Worker; and
#      checks /health.
#
#   scripts/deploy.sh [--secrets FILE] [--dry-run]
#
# --secrets defaults to .deploy.secrets (kept out of git). --dry-run does everything that
# needs no Cloudflare account: the builds, the secrets file's check, and
# `wrangler deploy --dry-run` (the test command runs this, so a broken deploy
# configuration fails CI). Log in first with `wrangler login`, or set CLOUDFLARE_API_TOKEN
# (and CLOUDFLARE_ACCOUNT_ID).
source "$(dirname "$0")/toolchain.sh"

DRY_RUN=0
SECRETS_FILE="$ROOT/.deploy.secrets"
DB_NAME="open-inspect"
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --secrets) SECRETS_FILE="$2"; shift ;;
    --secrets=*) SECRETS_FILE="${1#--secrets=}" ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) log "unknown argument: $1"; exit 2 ;;
  esac
  shift
done

ensure_toolchain
if [ "${INSPECT_WORKER_PREBUILT:-}" != 1 ]; then
  build_web
  build_worker --release
fi

# The secrets: names checked against the documented ones, values never printed.
declare -A DEPLOY_SECRETS=()
if [ -f "$SECRETS_FILE" ]; then
  declare -A WORKER_VARS=() VAR_SOURCE=()
  read_vars_file "$SECRETS_FILE" secrets
  known=" $(documented_vars | tr '\n' ' ') "
  for name in "${!WORKER_VARS[@]}"; do
    if [[ "$known" != *" $name "* ]]; then
      log "$SECRETS_FILE: $name is not a setting this Worker reads (see .dev.vars.example)"; exit 1
    fi
    if [ "$name" = LOCAL_MODE ] && [ "${WORKER_VARS[$name]}" = true ]; then
      log "$SECRETS_FILE: LOCAL_MODE=true must never be set on a deployed Worker"; exit 1
    fi
    DEPLOY_SECRETS[$name]="${WORKER_VARS[$name]}"
  done
  log "secrets to set from $SECRETS_FILE: $(printf '%s\n' "${!DEPLOY_SECRETS[@]}" | sort | tr '\n' ' ')"
  for required in REPO_SECRETS_ENCRYPTION_KEY; do
    [ -n "${DEPLOY_SECRETS[$required]:-}" ] || log "warning: $required is not in $SECRETS_FILE (secrets will be refused until it is set)"
  done
else
  log "no secrets file ($SECRETS_FILE): secrets already set on the Worker stay as they are"
fi

if [ "$DRY_RUN" = 1 ]; then
  for config in wrangler.toml worker/plane.toml worker/providers.toml; do
    out="$CARGO_TARGET_DIR/deploy-dry-run/$(basename "$config" .toml)"
    rm -rf "$out"
    mkdir -p "$(dirname "$out")"
    (cd "$ROOT" && wrangler deploy --dry-run -c "$config" --outdir "$out") >"$out.log" 2>&1 || {
      cat "$out.log" >&2; log "wrangler deploy --dry-run -c $config failed"; exit 1
    }
    log "$config:"
    grep -E "Total Upload|bindings|env\.|Durable|D1|Assets|schedule" "$out.log" >&2 || true
  done
  log "dry run passed: the bundles are in $CARGO_TARGET_DIR/deploy-dry-run"
  exit 0
fi

log "checking the Cloudflare login"
(cd "$ROOT" && wrangler whoami >/dev/null) || { log "not logged in: run 'wrangler login' or set CLOUDFLARE_API_TOKEN"; exit 1; }

database_id() {
  (cd "$ROOT" && wrangler d1 list --json) | node -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      const db = JSON.parse(s).find((d) => d.name === process.argv[1]);
      if (db) console.log(db.uuid ?? db.id ?? "");
    });' "$DB_NAME"
}
DB_ID="$(database_id)"
if [ -z "$DB_ID" ]; then
  log "creating the D1 database $DB_NAME"
  (cd "$ROOT" && wrangler d1 create "$DB_NAME" >/dev/null)
  DB_ID="$(database_id)"
fi
[ -n "$DB_ID" ] || { log "could not find or create the D1 database $DB_NAME"; exit 1; }
sed -i "s/^database_id = \".*\"/database_id = \"$DB_ID\"/" "$ROOT/wrangler.toml" "$ROOT/worker/plane.toml"
log "D1 database $DB_NAME: $DB_ID (written to wrangler.toml and worker/plane.toml)"

log "applying D1 migrations"
(cd "$ROOT" && wrangler d1 migrations apply DB --remote)

if [ ${#DEPLOY_SECRETS[@]} -gt 0 ]; then
  # JSON for `wrangler secret bulk`, written by node from the environment (not argv, which
  # `ps` shows) into a file only this user can read, removed at once.
  secrets_json="$(mktemp)"
  chmod 600 "$secrets_json"
  trap 'rm -f "$secrets_json"' EXIT
  (
    for name in "${!DEPLOY_SECRETS[@]}"; do export "INSPECT_DEPLOY_SECRET_$name=${DEPLOY_SECRETS[$name]}"; done
    node -e '
      const out = {};
      for (const [k, v] of Object.entries(process.env)) {
        if (k.startsWith("INSPECT_DEPLOY_SECRET_")) out[k.slice("INSPECT_DEPLOY_SECRET_".length)] = v;
      }
      require("fs").writeFileSync(process.argv[1], JSON.stringify(out));' "$secrets_json"
  )
  log "setting ${#DEPLOY_SECRETS[@]} secrets on the three Workers"
  (cd "$ROOT" && wrangler secret bulk "$secrets_json" >/dev/null)
  (cd "$ROOT" && wrangler secret bulk "$secrets_json" -c worker/plane.toml >/dev/null)
  (cd "$ROOT" && wrangler secret bulk "$secrets_json" -c worker/providers.toml >/dev/null)
  rm -f "$secrets_json"
fi

# The providers Worker binds nothing: it goes first, so both others find it.
log "deploying the providers Worker"
(cd "$ROOT" && wrangler deploy -c worker/providers.toml)
# The other two name each other: the session Worker binds the control plane's service, the
# control plane binds the session Worker's objects. The first time neither exists, so the
# session Worker goes first without its binding to the control plane.
if ! (cd "$ROOT" && wrangler deployments list -c worker/plane.toml >/dev/null 2>&1); then
  log "first deploy: the session Worker without its binding to the control plane"
  bootstrap="$ROOT/.wrangler-bootstrap.toml"
  awk '/^\[\[services\]\]/{block=1; held=$0; next}
       block==1 {block=0; if ($0 ~ /"PLANE"/) {skip=1; next} print held}
       skip==1 {skip=0; next} {print}' "$ROOT/wrangler.toml" > "$bootstrap"
  (cd "$ROOT" && wrangler deploy -c "$bootstrap") || { rm -f "$bootstrap"; exit 1; }
  rm -f "$bootstrap"
fi
log "deploying the control plane Worker"
(cd "$ROOT" && wrangler deploy -c worker/plane.toml)
log "deploying the session Worker"
deploy_log="$(mktemp)"
(cd "$ROOT" && wrangler deploy) | tee "$deploy_log"
url="$(grep -Eo 'https://[^ ]+\.workers\.dev' "$deploy_log" | head -1 || true)"
if [ -n "$url" ]; then
  log "checking $url/health"
  curl -fsS "$url/health" && echo
fi
