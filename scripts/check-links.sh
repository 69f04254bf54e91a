#!/usr/bin/env bash
# Every link between the repository's own Markdown files points at something there: a file
# or folder that exists, and a heading that exists (markdown-link-check, offline: links to
# other sites are not followed). The test command runs it.
source "$(dirname "$0")/toolchain.sh"
ensure_node
cd "$ROOT" || exit 1
mapfile -t files < <(git ls-files '*.md')
# One process for every file (a Node start each was ~0.7 CPU-s): it names each file with a
# dead link and fails if any has one.
failed=0
markdown-link-check --quiet --config "$ROOT/scripts/check-links.json" "${files[@]}" || failed=1
if [ "$failed" = 0 ]; then
  log "links: every link of ${#files[@]} Markdown files reaches its file and heading"
fi
exit "$failed"
