#!/usr/bin/env bash
# Every link between the repository's own Markdown files points at something there: a file
# or folder that exists, and a heading that exists (markdown-link-check, offline: links to
# other sites are not followed). The test command runs it.
source "$(dirname "$0")/toolchain.sh"
ensure_node
cd "$ROOT" || exit 1
mapfile -t files < <(git ls-files '*.md')
failed=0
for f in "${files[@]}"; do
  if ! out="$(markdown-link-check --quiet --config "$ROOT/scripts/check-links.json" "$f" 2>&1)"; then
    echo "$out"
    failed=1
  fi
done
if [ "$failed" = 0 ]; then
  log "links: every link of ${#files[@]} Markdown files reaches its file and heading"
fi
exit "$failed"
