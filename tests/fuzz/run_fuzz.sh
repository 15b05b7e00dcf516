#!/usr/bin/env bash
# Builds the libFuzzer targets of the input parsers with clang++-14 (-fsanitize=fuzzer,address,
# undefined; directly against the sources, no CMake) and runs each for N seconds.
#
# Usage: tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  fuzzing time per target (default 30)
#   TARGET   cluster_yaml_fuzz, openb_csv_fuzz and/or sim_inputs_fuzz (default: all three)
# Environment: CXX (default clang++-14), FUZZ_DIR (default build/fuzz: binaries, corpora, logs,
# and crash artifacts <target>-crash-*).
# Exit status: 0 if no target found a problem, 1 if one did, 2 if a build failed.
set -uo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${1:-30}"
shift || true
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(cluster_yaml_fuzz openb_csv_fuzz sim_inputs_fuzz)
cxx="${CXX:-clang++-14}"
fuzz_dir="${FUZZ_DIR:-${repo_root}/build/fuzz}"

if ! command -v "${cxx}" > /dev/null; then
  echo "run_fuzz.sh: ${cxx} not found; libFuzzer needs clang (set CXX)" >&2
  exit 2
fi
if ! [[ "${seconds}" =~ ^[0-9]+$ ]]; then
  echo "run_fuzz.sh: SECONDS must be a whole number, got '${seconds}'" >&2
  exit 2
fi

src="${repo_root}/src"
# The parsers and what they reach of the core; the rest of the core is not linked.
sources=(
  "${src}/core/gpu_model.cc" "${src}/core/job.cc" "${src}/core/node.cc" "${src}/core/pool.cc"
  "${src}/core/task.cc" "${src}/core/tenants.cc" "${src}/core/tidal_window.cc"
  "${src}/core/topology.cc" "${src}/sim/csv.cc" "${src}/sim/openb_trace.cc"
  "${src}/sim/cluster_file.cc" "${src}/sim/philly_trace.cc" "${src}/sim/tenants_file.cc"
  "${src}/sim/yaml_reader.cc"
)
flags=(
  -std=c++2b -g -O1 -fno-omit-frame-pointer
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -include "${repo_root}/tests/fuzz/expected_shim.h" -I "${src}"
)
traces="${repo_root}/../shared/traces/openb"

mkdir -p "${fuzz_dir}"
status=0
for target in "${targets[@]}"; do
  harness="${repo_root}/tests/fuzz/${target}.cc"
  if [[ ! -f "${harness}" ]]; then
    echo "run_fuzz.sh: no target ${target} (${harness})" >&2
    exit 2
  fi
  echo "== ${target}: building"
  if ! "${cxx}" "${flags[@]}" "${harness}" "${sources[@]}" -lyaml-cpp -lfmt \
      -o "${fuzz_dir}/${target}" 2> "${fuzz_dir}/${target}.build.log"; then
    cat "${fuzz_dir}/${target}.build.log" >&2
    exit 2
  fi

  # Seed corpus: the example cluster file, the first lines of the openb lists where present, or
  # for sim_inputs_fuzz a Philly trace head, the example tenants file and two windows.
  corpus="${fuzz_dir}/corpus/${target}"
  mkdir -p "${corpus}"
  case "${target}" in
    cluster_yaml_fuzz)
      cp "${repo_root}"/data/clusters/*.yaml "${corpus}/" 2> /dev/null
      dict="${repo_root}/tests/fuzz/cluster_yaml.dict"
      ;;
    openb_csv_fuzz)
      for list in openb_node_list_gpu_node.csv openb_pod_list_default.csv \
                  openb_pod_list_gpushare20.csv; do
        [[ -f "${traces}/${list}" ]] && head -n 20 "${traces}/${list}" > "${corpus}/${list}"
      done
      dict="${repo_root}/tests/fuzz/openb_csv.dict"
      ;;
    sim_inputs_fuzz)
      # The first byte picks the parser (b % 3): '0' Philly trace, '1' tenants file, '2' window.
      philly="${repo_root}/data/philly/philly-2017-09-10-first-2000.csv"
      [[ -f "${philly}" ]] && { printf '0'; head -n 20 "${philly}"; } > "${corpus}/philly.csv"
      for tenants in "${repo_root}"/data/tenants/*.yaml; do
        [[ -f "${tenants}" ]] && { printf '1'; cat "${tenants}"; } \
          > "${corpus}/tenants-$(basename "${tenants}")"
      done
      printf '2inference:08:00-24:00:64' > "${corpus}/window-inference"
      printf '2training:22:30-6:00:1' > "${corpus}/window-wrap"
      dict="${repo_root}/tests/fuzz/sim_inputs.dict"
      ;;
    *) dict="" ;;
  esac

  echo "== ${target}: fuzzing for ${seconds} s"
  log="${fuzz_dir}/${target}.log"
  args=(-max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 -max_len=4096
        -print_final_stats=1 -artifact_prefix="${fuzz_dir}/${target}-")
  [[ -n "${dict}" ]] && args+=(-dict="${dict}")
  UBSAN_OPTIONS=print_stacktrace=1 "${fuzz_dir}/${target}" "${args[@]}" "${corpus}" \
    > "${log}" 2>&1
  rc=$?
  runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "${log}" | grep -oE '[0-9]+$')"
  cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "${log}" | tail -n 1)"
  if [[ ${rc} -eq 0 ]]; then
    echo "== ${target}: no problem found (${runs:-?} inputs, ${cov:-no coverage line})"
  else
    status=1
    echo "== ${target}: FAILED (exit ${rc}); the report:"
    grep -E -A 40 '^==[0-9]+==ERROR|runtime error|SUMMARY|deadly signal|Test unit written' \
      "${log}" | head -n 80
    echo "   full log: ${log}"
    ls "${fuzz_dir}/${target}"-crash-* "${fuzz_dir}/${target}"-timeout-* \
      "${fuzz_dir}/${target}"-oom-* 2> /dev/null | sed 's/^/   artifact: /'
  fi
done
exit "${status}"
