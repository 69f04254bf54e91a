#!/usr/bin/env bash
# The first calls to try against a sandbox vendor's real account, with the same settings
# the Worker reads (see docs/providers.md, "First real run"). With --create it makes (and
# deletes) one sandbox on your account. The test command runs it against each vendor's
# fake (tests/tests/suites/provider_smoke.rs).
#
#   scripts/provider-smoke.sh VENDOR [--create]
#
# VENDOR: e2b | daytona | vercel | opencomputer | modal | kubernetes. Settings come from
# the environment (export them, or `set -a; . ./.dev.vars; set +a` first). Each call prints
# what it asked, the HTTP status and the start of the answer, and whether that is what the
# provider's code expects; the script exits non-zero when any call did not answer so.
set -uo pipefail

vendor="${1:-}"
create=false
[ "${2:-}" = "--create" ] && create=true
failures=0
last_body=""

need() {
  for name in "$@"; do
    if [ -z "${!name:-}" ]; then
      echo "missing setting: $name" >&2
      exit 2
    fi
  done
}

# call EXPECTED_STATUS METHOD URL [BODY] -- HEADER...: one call; the answer in $last_body.
call() {
  local expected="$1" method="$2" url="$3" body="${4:-}"
  shift 4
  [ "${1:-}" = "--" ] && shift
  local args=(-sS -X "$method" -o /tmp/provider-smoke.$$ -w '%{http_code}' --max-time 60)
  for h in "$@"; do args+=(-H "$h"); done
  if [ -n "$body" ]; then args+=(-H 'Content-Type: application/json' --data "$body"); fi
  local status
  status=$(curl "${args[@]}" "$url") || status="no answer"
  last_body=$(head -c 400 /tmp/provider-smoke.$$ 2>/dev/null)
  rm -f /tmp/provider-smoke.$$
  if [ "$status" = "$expected" ]; then
    echo "ok    $method ${url%%\?*} -> $status"
  else
    echo "FAIL  $method ${url%%\?*} -> $status (expected $expected): $last_body"
    failures=$((failures + 1))
  fi
}

# expect_field NAME: the last answer carries the JSON field NAME.
expect_field() {
  if printf '%s' "$last_body" | grep -q "\"$1\""; then
    echo "ok    the answer has \"$1\""
  else
    echo "FAIL  the answer has no \"$1\": $last_body"
    failures=$((failures + 1))
  fi
}

# field NAME: the first string value of NAME in the last answer.
field() {
  printf '%s' "$last_body" | sed -n "s/.*\"$1\" *: *\"\([^\"]*\)\".*/\1/p" | head -n 1
}

case "$vendor" in
e2b)
  need E2B_API_KEY E2B_TEMPLATE_ID
  api="${E2B_API_URL:-https://api.e2b.app}"
  key="X-API-Key: $E2B_API_KEY"
  # The list's state and metadata are non-exploded form parameters: one key each.
  call 200 GET "$api/v2/sandboxes?metadata=openinspect_framework%3Dopen-inspect&state=running,paused" "" -- "$key"
  call 200 GET "$api/templates/$E2B_TEMPLATE_ID" "" -- "$key"
  if $create; then
    call 201 POST "$api/sandboxes" "{\"templateID\":\"$E2B_TEMPLATE_ID\",\"timeout\":120,\"secure\":true,\"metadata\":{\"openinspect_framework\":\"open-inspect-smoke\"}}" -- "$key"
    expect_field sandboxID
    expect_field envdAccessToken
    id=$(field sandboxID)
    if [ -n "$id" ]; then
      call 200 GET "$api/sandboxes/$id" "" -- "$key"
      call 204 DELETE "$api/sandboxes/$id" "" -- "$key"
    fi
  fi
  ;;
daytona)
  need DAYTONA_API_KEY DAYTONA_SNAPSHOT
  api="${DAYTONA_API_URL:-https://app.daytona.io/api}"
  auth="Authorization: Bearer $DAYTONA_API_KEY"
  call 200 GET "$api/sandbox?labels=%7B%22openinspect_framework%22%3A%22open-inspect%22%7D" "" -- "$auth"
  call 200 GET "$api/snapshots/$DAYTONA_SNAPSHOT" "" -- "$auth"
  expect_field state
  if $create; then
    call 200 POST "$api/sandbox" "{\"snapshot\":\"$DAYTONA_SNAPSHOT\",\"labels\":{\"openinspect_framework\":\"open-inspect-smoke\"},\"autoStopInterval\":5}" -- "$auth"
    expect_field id
    id=$(field id)
    if [ -n "$id" ]; then
      call 200 GET "$api/sandbox/$id" "" -- "$auth"
      expect_field state
      call 200 GET "$api/sandbox/$id/ports/3000/signed-preview-url?expiresInSeconds=3900" "" -- "$auth"
      expect_field url
      call 200 DELETE "$api/sandbox/$id" "" -- "$auth"
    fi
  fi
  ;;
vercel)
  need VERCEL_TOKEN VERCEL_PROJECT_ID VERCEL_BASE_SNAPSHOT_ID
  api="${VERCEL_SANDBOX_API_BASE_URL:-https://vercel.com/api}"
  team=""
  [ -n "${VERCEL_TEAM_ID:-}" ] && team="&teamId=$VERCEL_TEAM_ID"
  auth="Authorization: Bearer $VERCEL_TOKEN"
  # The list takes project (not projectId) and a limit of at most 50.
  call 200 GET "$api/v2/sandboxes?project=$VERCEL_PROJECT_ID&limit=50$team" "" -- "$auth"
  expect_field sandboxes
  call 200 GET "$api/v2/sandboxes/snapshots/$VERCEL_BASE_SNAPSHOT_ID?project=$VERCEL_PROJECT_ID$team" "" -- "$auth"
  ;;
opencomputer)
  need OPENCOMPUTER_API_KEY OPENCOMPUTER_TEMPLATE
  api="${OPENCOMPUTER_API_URL:-https://app.opencomputer.dev/api}"
  key="X-API-Key: $OPENCOMPUTER_API_KEY"
  # Running sandboxes only, with tags and no metadata.
  call 200 GET "$api/sandboxes" "" -- "$key"
  if $create; then
    call 201 POST "$api/sandboxes" "{\"snapshot\":\"$OPENCOMPUTER_TEMPLATE\",\"timeout\":300,\"metadata\":{\"openinspect_framework\":\"open-inspect-smoke\"}}" -- "$key"
    expect_field sandboxID
    id=$(field sandboxID)
    if [ -n "$id" ]; then
      call 200 PUT "$api/sandboxes/$id/tags" '{"openinspect_framework":"open-inspect-smoke"}' -- "$key"
      call 200 GET "$api/sandboxes/$id" "" -- "$key"
      expect_field tags
      call 200 POST "$api/sandboxes/$id/exec/run" '{"cmd":"sh","args":["-c","id -u; echo $HOME; command -v inspect-supervisor"],"timeout":10}' -- "$key"
      expect_field exitCode
      echo "      (expect uid 1000, HOME /home/sandbox, /usr/local/bin/inspect-supervisor): $last_body"
      call 204 DELETE "$api/sandboxes/$id" "" -- "$key"
      # Its record stays: a deleted sandbox reads as stopped.
      call 200 GET "$api/sandboxes/$id" "" -- "$key"
    fi
  fi
  ;;
modal)
  need MODAL_API_SECRET
  if [ -n "${MODAL_API_URL:-}" ]; then
    url="${MODAL_API_URL//\{endpoint\}/api-health}"
  else
    need MODAL_WORKSPACE
    ws="$MODAL_WORKSPACE"
    [ -n "${MODAL_ENVIRONMENT_WEB_SUFFIX:-}" ] && ws="$ws-$MODAL_ENVIRONMENT_WEB_SUFFIX"
    url="https://$ws--open-inspect-api-health.modal.run"
  fi
  call 200 GET "$url" "" --
  expect_field runtime_version
  ;;
kubernetes)
  need K8S_API_URL K8S_TOKEN K8S_NAMESPACE
  auth="Authorization: Bearer $K8S_TOKEN"
  call 200 GET "$K8S_API_URL/api/v1/namespaces/$K8S_NAMESPACE/pods?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dopen-inspect" "" -- "$auth"
  call 200 GET "$K8S_API_URL/api/v1/namespaces/$K8S_NAMESPACE/persistentvolumeclaims?limit=1" "" -- "$auth"
  call 200 GET "$K8S_API_URL/api/v1/namespaces/$K8S_NAMESPACE/resourcequotas" "" -- "$auth"
  ;;
*)
  echo "usage: $0 e2b|daytona|vercel|opencomputer|modal|kubernetes [--create]" >&2
  exit 2
  ;;
esac

if [ "$failures" -gt 0 ]; then
  echo "$failures call(s) did not answer as the provider's code expects"
  exit 1
fi
echo "every call answered as the provider's code expects"
