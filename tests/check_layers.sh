#!/usr/bin/env bash
# Checks that every #include "FOLDER/..." under src/LAYER/ names LAYER itself or a layer that
# src/layers.txt lets LAYER use, and that every folder of src/ is a layer of the table.
#
# Usage: check_layers.sh [SOURCE_DIR]   (default: the repository root above this script)
# Fails listing each offending include as FILE:LINE: LAYER may not use FOLDER.
set -euo pipefail

script_dir=${BASH_SOURCE[0]%/*}
[[ $script_dir == "${BASH_SOURCE[0]}" ]] && script_dir=.
root=${1:-"$script_dir/.."}
cd "$root"

table=src/layers.txt
[[ -f $table ]] || {
  echo "check_layers: $table is missing" >&2
  exit 1
}

declare -A allowed
while IFS= read -r line; do
  [[ $line =~ ^([a-z_]+):(.*)$ ]] || continue
  allowed[${BASH_REMATCH[1]}]=" ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} "
done <"$table"

status=0
for dir in src/*/; do
  layer=${dir#src/}
  layer=${layer%/}
  if [[ -z ${allowed[$layer]+set} ]]; then
    echo "src/$layer is not a layer of $table: add it there"
    status=1
    continue
  fi
  # Project headers only: "folder/file.h" where folder is a folder of src/.
  while IFS=: read -r file number used; do
    [[ -d src/$used ]] || continue
    if [[ ${allowed[$layer]} != *" $used "* ]]; then
      echo "$file:$number: $layer may not use $used"
      status=1
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' "$dir" \
    --include='*.h' --include='*.cc' |
    sed -E 's/^([^:]+):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]+"([a-z_]+)\/.*/\1:\2:\3/')
done
if [[ $status -eq 0 ]]; then
  echo "check_layers: every include follows $table"
fi
exit $status
