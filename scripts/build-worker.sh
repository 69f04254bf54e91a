#!/usr/bin/env bash
# Builds what `wrangler dev`/`deploy` serves: the web client (web/dist) and the Worker
# (wasm + JS glue: worker/build/, build-plane/, build-providers/). Pass --dev for a faster, larger Worker build.
source "$(dirname "$0")/toolchain.sh"
ensure_toolchain
build_web
build_worker "${1:---release}"
