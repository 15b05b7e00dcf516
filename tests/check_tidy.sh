#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy: bugprone, performance, some modernize) on the C++ sources of src/
# that a change touched: the files changed since BASE (default: the commit before HEAD) and those
# changed but not committed. A finding fails the test, with the file, line and check named.
#
# Usage: check_tidy.sh SOURCE_DIR BUILD_DIR [BASE]
#   BUILD_DIR  a CMake build folder (the release build's); the compile database is made in it
#   BASE       a commit; also the environment variable TIDEPOOL_TIDY_BASE (e.g. origin/main to
#              check a whole branch). A header is checked through the sources that include it.
# Skips, with a message and exit status 0, when clang-tidy or git history is not there.
set -euo pipefail

source_dir=$1
build_dir=$2
base=${3:-${TIDEPOOL_TIDY_BASE:-HEAD~1}}
cd "$source_dir"

tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
if [[ -z $tidy ]]; then
  echo "SKIPPED: clang-tidy is not installed (apt-get install clang-tidy)"
  exit 0
fi
if [[ ! -d $build_dir ]]; then
  echo "check_tidy: no build folder $build_dir; configure the build first" >&2
  exit 1
fi
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "SKIPPED: no commit '$base' to compare with (a shallow clone?)"
  exit 0
fi

# The sources changed since BASE (committed or not), and the sources of src/ that include a
# changed header of src/ (a header is checked where it is compiled).
mapfile -t changed < <({
  git diff --name-only "$base" -- 'src/*.cc' 'src/*.h'
  git ls-files --others --exclude-standard -- 'src/*.cc' 'src/*.h'
} | sort -u)
sources=()
for file in "${changed[@]}"; do
  [[ -f $file ]] || continue
  if [[ $file == *.cc ]]; then
    sources+=("$file")
  else
    header=${file#src/}
    mapfile -t users < <(grep -rlF --include='*.cc' "#include \"$header\"" src || true)
    sources+=("${users[@]}")
  fi
done
mapfile -t sources < <(printf '%s\n' "${sources[@]}" | sed '/^$/d' | sort -u)
# A unity build's database names its batches, not the sources: clang-tidy reads one made by
# configuring (not building) the same sources one file at a time, beside the build.
database=$build_dir/tidy-database
if ! cmake -S "$PWD" -B "$database" -G Ninja -DTIDEPOOL_UNITY_BUILD=OFF \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_BUILD_TYPE=Release >"$build_dir/tidy-database.log" 2>&1; then
  cat "$build_dir/tidy-database.log" >&2
  echo "check_tidy: could not configure a compile database in $database" >&2
  exit 1
fi
# The sources include C++ that protoc generates into the build tree (the etcd store's API).
if ! cmake --build "$database" --target tidepool_store_etcd_protos >>"$build_dir/tidy-database.log" 2>&1; then
  cat "$build_dir/tidy-database.log" >&2
  echo "check_tidy: could not generate the protobuf sources in $database" >&2
  exit 1
fi
# Only what the build compiles (the fuzz harnesses and benchmarks are not in this database).
checked=()
for file in "${sources[@]}"; do
  grep -qF "\"file\": \"$PWD/$file\"" "$database/compile_commands.json" && checked+=("$file")
done
if [[ ${#checked[@]} -eq 0 ]]; then
  echo "check_tidy: no source of src/ changed since $base"
  exit 0
fi

# clang-14 reads GCC's -std=c++23 as c++2b, knows none of GCC's own warning options, and cannot
# compile libstdc++ 12's <expected> (tests/fuzz/expected_shim.h stands in for it).
extra=(--extra-arg=-std=c++2b --extra-arg=-Wno-unknown-warning-option
       --extra-arg=-include --extra-arg="$PWD/tests/fuzz/expected_shim.h")
echo "check_tidy: ${#checked[@]} source(s) changed since $base"
status=0
printf '%s\n' "${checked[@]}" |
  xargs -P "${TIDY_JOBS:-2}" -n 4 "$tidy" -p "$database" --quiet "${extra[@]}" \
    >"$build_dir/check_tidy.log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
  grep -E "(warning|error): " "$build_dir/check_tidy.log" | sort -u
  echo "check_tidy: findings above (full output: $build_dir/check_tidy.log)"
  exit 1
fi
echo "check_tidy: no finding in ${#checked[@]} source(s)"
