#!/bin/bash
# The folders of src/ are layers (doc/ARCHITECTURE.md, "Layers"): a file may
# include its own folder and the folders below it, never one above or
# beside it. bin/ includes only the public API (include/rt/) and its own
# headers. Prints every include against the order and fails on any.
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
# Lowest first. rt/ is the public API (include/rt/), usable everywhere.
order=(rt util store squash hpc run image app builder)
rank() {
  local i
  for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
bad=0
checked=0
while IFS= read -r file; do
  rel=${file#"$src"/}
  case $rel in
    src/*) from=${rel#src/}; from=${from%%/*} ;;
    bin/*) from=bin ;;
  esac
  [ "$from" = bin ] || [ "$(rank "$from")" -ge 0 ] || { echo "check-layers: $rel: folder $from is in no layer" >&2; bad=1; continue; }
  while IFS= read -r inc; do
    to=${inc%%/*}
    [ "$inc" != "$to" ] || continue  # a header beside it (bin/)
    checked=$((checked + 1))
    if [ "$from" = bin ]; then
      [ "$to" = rt ] && continue
    else
      [ "$(rank "$to")" -ge 0 ] || { echo "check-layers: $rel includes $inc: $to is in no layer" >&2; bad=1; continue; }
      [ "$to" = "$from" ] || [ "$(rank "$to")" -lt "$(rank "$from")" ] && continue
    fi
    echo "check-layers: $rel includes $inc: $from may not include $to (order: ${order[*]}; bin: rt only)" >&2
    bad=1
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file")
done < <(find "$src/src" "$src/bin" -name '*.cpp' -o -name '*.hpp' | sort)
[ "$bad" = 0 ] || exit 1
echo "check-layers: $checked includes follow the order ${order[*]} (bin: rt only)"
