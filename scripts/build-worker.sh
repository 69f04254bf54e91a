#!/usr/bin/env bash
# Builds the Worker (wasm + JS glue) into worker/build/. Pass --dev for a faster, larger build.
source "$(dirname "$0")/toolchain.sh"
ensure_toolchain
build_worker "${1:---release}"
