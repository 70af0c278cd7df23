#!/bin/bash
# Every option of every subcommand is in its man page, the completions and --help.
set -euo pipefail
: "${RT:?}" "${RT_SOURCE_DIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
n=0
for cmd in exec run shell pull import convert images inspect rm prune login; do
  page="$RT_SOURCE_DIR/man/rt-$cmd.1"
  [ -f "$page" ] || fail "no man page $page"
  # A page that is only ".so man1/X.1" documents its command in X.1.
  if so=$(sed -n 's/^\.so man1\///p' "$page") && [ -n "$so" ]; then page="$RT_SOURCE_DIR/man/$so"; fi
  opts=$("$RT" "$cmd" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
  [ -n "$opts" ] || fail "rt $cmd --help lists no options"
  for o in $opts; do
    grep -qF -- "${o//-/\\-}" "$page" || fail "$o missing from $page"
    grep -q -- "$o" "$RT_SOURCE_DIR/completions/rt.bash" || fail "$o missing from completions/rt.bash"
    n=$((n + 1))
  done
done
grep -q "rt-exec" "$RT_SOURCE_DIR/man/rt.1" || fail "rt(1) does not point to rt-exec(1)"
echo "ok: $n options documented"
