#!/usr/bin/env bash
# Shows that tests/check_layers.sh can fail: on small trees built from the real src/layers.txt, a
# core file that includes a sim header and a folder missing from the table are each refused (with
# the file and line named), and a tree whose includes follow the table passes.
#
# Usage: check_layers_test.sh SOURCE_DIR
set -euo pipefail

source_dir=$1
check=$source_dir/tests/check_layers.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

make_tree() {  # a tree with the real table, core/ and sim/ following it
  local tree=$1
  mkdir -p "$tree/src/core" "$tree/src/sim"
  cp "$source_dir/src/layers.txt" "$tree/src/"
  printf '#pragma once\n#include <vector>\n' >"$tree/src/core/pool.h"
  printf '#include "core/pool.h"\n#include "sim/run.h"\n' >"$tree/src/sim/run.cc"
  printf '#pragma once\n#include "core/pool.h"\n' >"$tree/src/sim/run.h"
}

expect_refused() {  # TREE PATTERN: the check fails and says PATTERN
  local out status=0
  out=$(bash "$check" "$1" 2>&1) || status=$?
  if [[ $status -eq 0 ]]; then
    echo "FAIL: the check passed on $1:"
    echo "$out"
    exit 1
  fi
  if ! grep -qF -- "$2" <<<"$out"; then
    echo "FAIL: expected '$2' in:"
    echo "$out"
    exit 1
  fi
}

make_tree "$work/clean"
bash "$check" "$work/clean" >/dev/null || {
  echo "FAIL: a tree that follows the table was refused"
  bash "$check" "$work/clean"
  exit 1
}

make_tree "$work/back-edge"
printf '#pragma once\n\n#include "sim/run.h"\n' >"$work/back-edge/src/core/pool.h"
expect_refused "$work/back-edge" "src/core/pool.h:3: core may not use sim"

make_tree "$work/new-folder"
mkdir -p "$work/new-folder/src/web"
expect_refused "$work/new-folder" "src/web is not a layer"
echo "check_layers refuses a back edge and an unknown folder, and passes a clean tree"
