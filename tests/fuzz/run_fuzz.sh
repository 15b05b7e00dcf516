#!/usr/bin/env bash
# Builds the libFuzzer targets of the input parsers with clang++-14 (-fsanitize=fuzzer,address,
# undefined; directly against the sources, no CMake) and runs each for N seconds.
#
# Usage: tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  fuzzing time per target (default 30)
#   TARGET   cluster_yaml_fuzz, openb_csv_fuzz, sim_inputs_fuzz, market_yaml_fuzz,
#            job_spec_fuzz, api_bodies_fuzz, http_response_fuzz, http_request_fuzz,
#            replica_metrics_fuzz and/or slurm_json_fuzz (default: all ten)
# Environment: CXX (default clang++-14), FUZZ_DIR (default build/fuzz: binaries, corpora, logs,
# and crash artifacts <target>-crash-*), FUZZ_JOBS (targets built and fuzzed at once, default 2),
# FUZZ_OPT (optimisation and debug flags, default "-O1 -g": faster fuzzing; the tests' short run
# takes "-O0 -gline-tables-only", half the build time, which is most of such a run),
# FUZZ_UNITY_DIR (a build's unity sources of the core, compiled as batches: see below).
# Exit status: 0 if no target found a problem, 1 if one did, 2 if a build failed.
set -uo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${1:-30}"
shift || true
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] &&
  targets=(cluster_yaml_fuzz openb_csv_fuzz sim_inputs_fuzz market_yaml_fuzz job_spec_fuzz
           api_bodies_fuzz http_response_fuzz http_request_fuzz replica_metrics_fuzz
           slurm_json_fuzz)
cxx="${CXX:-clang++-14}"
fuzz_dir="${FUZZ_DIR:-${repo_root}/build/fuzz}"
read -r -a opt_flags <<< "${FUZZ_OPT:--O1 -g}"

if ! command -v "${cxx}" > /dev/null; then
  echo "run_fuzz.sh: ${cxx} not found; libFuzzer needs clang (set CXX)" >&2
  exit 2
fi
if ! [[ "${seconds}" =~ ^[0-9]+$ ]]; then
  echo "run_fuzz.sh: SECONDS must be a whole number, got '${seconds}'" >&2
  exit 2
fi

src="${repo_root}/src"
# The whole core (the archive gives each harness only the objects it reaches, so a parser that
# starts to need another part of the core links without this list changing) and the parsers.
mapfile -t core_sources < <(find "${src}/core" -name '*.cc' ! -name '*_test.cc' | LC_ALL=C sort)
# With FUZZ_UNITY_DIR (a build's folder of CMake's unity sources of the core, unity_N_cxx.cxx,
# each including up to 8 of its sources), the core is compiled in those batches, as the build
# compiles it (so no two sources share a batch that the build does not also compile together),
# instead of one source at a time: a third of the time. The sources no batch includes are
# compiled alone.
unity_covers=()  # per batch: the sources it includes, space-separated
if [[ -n "${FUZZ_UNITY_DIR:-}" && -d "${FUZZ_UNITY_DIR}" ]]; then
  declare -A in_batch=()
  batches=()
  for unity in "${FUZZ_UNITY_DIR}"/unity_*_cxx.cxx; do
    [[ -f "${unity}" ]] || continue
    mapfile -t included < <(sed -n 's/^#include "\(.*\.cc\)"$/\1/p' "${unity}")
    # Only a batch of this checkout's core sources is used.
    for source in "${included[@]}"; do
      [[ "${source}" == "${src}/core/"* && -f "${source}" ]] || continue 2
    done
    for source in "${included[@]}"; do in_batch["${source}"]=1; done
    batches+=("${unity}")
    unity_covers+=("${included[*]}")
  done
  alone=()
  for source in "${core_sources[@]}"; do
    [[ -n "${in_batch[${source}]:-}" ]] || alone+=("${source}")
  done
  core_sources=("${batches[@]}" "${alone[@]}")
fi
sources=(
  "${core_sources[@]}"
  "${src}/config/csv.cc" "${src}/sim/openb_trace.cc"
  "${src}/config/cluster_file.cc" "${src}/sim/philly_trace.cc" "${src}/config/tenants_file.cc"
  "${src}/config/yaml_reader.cc" "${src}/config/duration_text.cc" "${src}/config/market_file.cc"
  "${src}/config/quoted_text.cc" "${src}/sim/services_file.cc" "${src}/sim/service_model.cc"
)
# The request body readers, added for the targets that test them.
server_sources=(
  "${src}/api/agent_wire.cc" "${src}/api/api_bodies.cc" "${src}/api/body_fields.cc"
  "${src}/api/job_spec.cc" "${src}/api/replica_metrics.cc" "${src}/api/service_spec.cc"
  "${src}/api/step_report.cc"
)
# The CLI's HTTP response reader.
client_sources=("${src}/api/http_response.cc")
# Shadow mode's readers of Slurm's JSON and of trace files, and the bounds of what they read.
shadow_sources=("${src}/sim/observed_job.cc" "${src}/sim_cli/slurm_json.cc"
                "${src}/sim_cli/shadow_trace.cc" "${src}/cli/output_format.cc")
# The server's HTTP front end (Boost.Beast, header only) and its target grammar.
http_sources=("${src}/server/http_server.cc" "${src}/server/http_route.cc")
# spdlog as Debian builds it (its pkg-config flags).
spdlog_flags=(-DSPDLOG_SHARED_LIB -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL)
flags=(
  -std=c++2b "${opt_flags[@]}" -fno-omit-frame-pointer
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -include "${repo_root}/tests/fuzz/expected_shim.h" -I "${src}" "${spdlog_flags[@]}"
)
traces="${repo_root}/../shared/traces/openb"

mkdir -p "${fuzz_dir}/obj"
# Every source is compiled once (again only when it or a header changed since) into one archive
# that each harness links against, two at a time; a harness pulls in only the objects it needs.
object_flags=(-std=c++2b "${opt_flags[@]}" -fno-omit-frame-pointer
              -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
              -include "${repo_root}/tests/fuzz/expected_shim.h" -I "${src}" "${spdlog_flags[@]}")
newest_header="$(find "${src}" -name '*.h' -newer "${fuzz_dir}/libfuzzdeps.a" 2> /dev/null | head -n 1)"
[[ -f "${fuzz_dir}/libfuzzdeps.a" ]] || newest_header=yes
# Objects of other flags are built again.
[[ "$(cat "${fuzz_dir}/obj/flags" 2> /dev/null)" == "${opt_flags[*]}" ]] || newest_header=yes
echo "${opt_flags[*]}" > "${fuzz_dir}/obj/flags"
objects=()
pids=()
batch=0
for source in "${sources[@]}" "${server_sources[@]}" "${client_sources[@]}" "${http_sources[@]}" \
              "${shadow_sources[@]}"; do
  object="${fuzz_dir}/obj/$(basename "$(dirname "${source}")")_$(basename "${source}" .cc).o"
  objects+=("${object}")
  # A batch is up to date when its object is newer than each source it includes.
  inputs=("${source}")
  if [[ "${source}" == *.cxx ]]; then
    read -r -a inputs <<< "${unity_covers[${batch}]}"
    batch=$((batch + 1))
  fi
  fresh=yes
  for input in "${inputs[@]}"; do [[ "${object}" -nt "${input}" ]] || fresh=""; done
  [[ -z "${newest_header}" && -n "${fresh}" ]] && continue
  "${cxx}" "${object_flags[@]}" -c "${source}" -o "${object}" 2> "${object}.log" &
  pids+=($!)
  if [[ ${#pids[@]} -ge 2 ]]; then
    wait "${pids[0]}" || { cat "${fuzz_dir}"/obj/*.log >&2; exit 2; }
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do
  wait "${pid}" || { cat "${fuzz_dir}"/obj/*.log >&2; exit 2; }
done
rm -f "${fuzz_dir}/libfuzzdeps.a"
ar rcs "${fuzz_dir}/libfuzzdeps.a" "${objects[@]}"

# One target: builds its harness, seeds its corpus and fuzzes it, printing what it found. Returns
# 0 if it found no problem, 1 if it did, 2 if the harness did not build.
fuzz_target() {
  local target=$1 harness corpus dict log args rc runs cov failed=0
  harness="${repo_root}/tests/fuzz/${target}.cc"
  if [[ ! -f "${harness}" ]]; then
    echo "run_fuzz.sh: no target ${target} (${harness})" >&2
    return 2
  fi
  echo "== ${target}: building"
  if ! "${cxx}" "${flags[@]}" "${harness}" "${fuzz_dir}/libfuzzdeps.a" -lyaml-cpp -lfmt \
      -lspdlog -lssl -lcrypto -pthread \
      -o "${fuzz_dir}/${target}" 2> "${fuzz_dir}/${target}.build.log"; then
    cat "${fuzz_dir}/${target}.build.log" >&2
    return 2
  fi

  # Seed corpus: the example cluster file, the first lines of the openb lists where present, for
  # sim_inputs_fuzz a Philly trace head, the example tenants file, two windows and the example
  # services file, and for the
  # body targets the example job specs in data/examples (api_bodies_fuzz: and one body of each
  # other kind); for replica_metrics_fuzz a vLLM and a Triton scrape and one of escapes.
  corpus="${fuzz_dir}/corpus/${target}"
  mkdir -p "${corpus}"
  case "${target}" in
    cluster_yaml_fuzz)
      cp "${repo_root}"/data/clusters/*.yaml "${corpus}/" 2> /dev/null
      # MIG: a node with a partitioned GPU, and one partitioned on demand.
      printf '%s\n' 'site: s' 'spines:' '  - name: sp' '    leaves:' '      - name: lf' \
        '        nodes:' \
        '          - {name: a, gpu_model: A100, gpus: 2, cpus: 8, memory_gib: 64, mig: {0: [3g.40gb@0, 2g.20gb@4, 1g.10gb@6]}}' \
        '          - {name: b, gpu_model: H100, gpus: 2, cpus: 8, memory_gib: 64, mig: on_demand}' \
        > "${corpus}/mig.yaml"
      dict="${repo_root}/tests/fuzz/cluster_yaml.dict"
      ;;
    market_yaml_fuzz)
      cp "${repo_root}"/data/market/*.yaml "${corpus}/" 2> /dev/null
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
      # The first byte picks the parser (b % 4): '0' Philly trace, '1' tenants file, '2' window,
      # '3' services file.
      philly="${repo_root}/data/philly/philly-2017-09-10-first-2000.csv"
      [[ -f "${philly}" ]] && { printf '0'; head -n 20 "${philly}"; } > "${corpus}/philly.csv"
      for tenants in "${repo_root}"/data/tenants/*.yaml; do
        [[ -f "${tenants}" ]] && { printf '1'; cat "${tenants}"; } \
          > "${corpus}/tenants-$(basename "${tenants}")"
      done
      printf '2inference:08:00-24:00:64' > "${corpus}/window-inference"
      printf '2training:22:30-6:00:1' > "${corpus}/window-wrap"
      { printf '3'; cat "${repo_root}/data/services/example.yaml"; } > "${corpus}/services"
      dict="${repo_root}/tests/fuzz/sim_inputs.dict"
      ;;
    job_spec_fuzz | api_bodies_fuzz)
      # The first byte picks the format (b % 2): '0' JSON, '1' YAML.
      examples="${repo_root}/data/examples"
      for spec in "${examples}"/*.yaml; do
        [[ -f "${spec}" ]] && { printf '1'; cat "${spec}"; } > "${corpus}/$(basename "${spec}")"
      done
      for spec in "${examples}"/*.json; do
        [[ -f "${spec}" ]] && { printf '0'; cat "${spec}"; } > "${corpus}/$(basename "${spec}")"
      done
      printf '1name: nb\ntenant: vision\nmig_profile: 3g.40gb\ngpu_model: [A100, H100]\n' \
        > "${corpus}/mig-spec"
      if [[ "${target}" == api_bodies_fuzz ]]; then
        printf '0{"state": "failed", "exit_code": 1, "message": "oom"}' > "${corpus}/status"
        printf '0{"step": 1200, "note": "epoch 3"}' > "${corpus}/checkpoint"
        printf '0{"weight": 2, "queues": ["ranking"], "quota": {"H100": %s}}' \
          '{"guaranteed_gpus": 64, "borrowing_limit_gpus": "32.5", "lending_limit_gpus": 8}' \
          > "${corpus}/tenant"
        printf '1role: agent\nnode: gpu-07\ndescription: rack 3\n' > "${corpus}/token"
        printf '0{"gpu_model": "H100", "gpus": 8, "cpu_milli": 96000, "memory_mib": 1048576}' \
          > "${corpus}/register"
        printf '1running_jobs: [12, 13]\nhealthy_gpus: 8\n' > "${corpus}/heartbeat"
        printf '0{"running_jobs": [31], "replicas": [{%s, %s}]}' \
          '"job": 31, "run": 1, "requests_waiting_milli": 2000, "requests_per_s_milli": 12500' \
          '"mean_latency_ms": 180, "p95_latency_ms": 420, "mean_concurrency_milli": 3900' \
          > "${corpus}/heartbeat-replicas"
        printf '0{"node": "gpu-a1", "jobs": [12], "assignments": [{%s, %s}]}' \
          '"job": 12, "run": 2, "world_size": 2, "tasks": [{"index": 1, "gpus": [4, 5]}]' \
          '"command": ["python", "train.py"], "env": {"EPOCHS": "3"}, "checkpoint_step": null' \
          > "${corpus}/heartbeat-reply"
        printf '0{"assignments": [{%s, "tasks": [{%s, "mig": {%s}}]}]}' \
          '"job": 14, "run": 1, "command": ["jupyter"]' '"index": 0, "gpus": [1]' \
          '"profile": "3g.40gb", "start": 4, "uuid": "MIG-4f1e"' \
          > "${corpus}/heartbeat-reply-mig"
        printf '0{"assignments": [{%s, %s}]}' '"job": 31, "run": 1, "command": ["serve"]' \
          '"replica": {"service": 7, "port": 8001, "metric_names": {"requests_running": "r"}}' \
          > "${corpus}/heartbeat-reply-replica"
        printf '0{"job": 12, "task": 0, "run": 2, "size": 1049600}' > "${corpus}/log-append"
        printf '0{"reason": "maintenance"}' > "${corpus}/drain"
      fi
      dict="${repo_root}/tests/fuzz/job_spec.dict"
      ;;
    http_response_fuzz)
      printf 'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{"id": 7}' \
        > "${corpus}/created"
      printf 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=1\r\nWiki\r\n0\r\nT: 1\r\n\r\n' \
        > "${corpus}/chunked"
      printf 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n' \
        > "${corpus}/interim"
      printf 'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end' > "${corpus}/close"
      dict="${repo_root}/tests/fuzz/http_response.dict"
      ;;
    http_request_fuzz)
      printf 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' > "${corpus}/healthz"
      printf 'GET /v1/jobs/%%FF HTTP/1.1\r\nHost: x\r\n\r\n' > "${corpus}/bad-utf8"
      printf 'POST /v1/a/b?q=%%41+b HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody' \
        > "${corpus}/post"
      printf 'POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n0\r\n\r\n' \
        > "${corpus}/chunked"
      printf 'POST /private HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc' \
        > "${corpus}/refused"
      printf 'GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n' \
        > "${corpus}/pipelined"
      dict="${repo_root}/tests/fuzz/http_request.dict"
      ;;
    replica_metrics_fuzz)
      printf '%s\n' '# HELP vllm:num_requests_running Requests in model execution batches.' \
        '# TYPE vllm:num_requests_running gauge' \
        'vllm:num_requests_running{model_name="m"} 8.0' \
        '# TYPE vllm:e2e_request_latency_seconds histogram' \
        'vllm:e2e_request_latency_seconds_sum{model_name="m"} 150.5' \
        'vllm:e2e_request_latency_seconds_bucket{le="0.5",model_name="m"} 40.0' \
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 150.0' \
        'vllm:e2e_request_latency_seconds_count{model_name="m"} 150.0' > "${corpus}/vllm"
      printf '%s\n' '# TYPE nv_inference_request_success counter' \
        'nv_inference_request_success{model="resnet",version="1"} 1600' \
        'nv_inference_request_duration_us{model="resnet",version="1"} 8000000' \
        'nv_inference_pending_request_count{model="resnet",version="1"} 4' > "${corpus}/triton"
      printf '%s\n' 'esc{path="C:\\DIR",error="a\nb \"q\""} +Inf 1395066363000' 'x NaN' \
        > "${corpus}/escapes"
      dict="${repo_root}/tests/fuzz/replica_metrics.dict"
      ;;
    slurm_json_fuzz)
      # The first byte picks the reader (b % 4): '0' squeue, '1' sacct, '2' sinfo, '3' a trace
      # file. Replies recorded from Slurm, each cut to one entry (the inputs are at most 4 KiB):
      # squeue's job that ended, the one that ran and one that waited; sacct's; sinfo's node.
      testdata="${repo_root}/src/sim_cli/testdata"
      for seed in 0:slurm_22.05_squeue_late.json:jobs:0 0:slurm_22.05_squeue_early.json:jobs:1 \
                  0:slurm_22.05_squeue_early.json:jobs:2 1:sacct_dbv0.0.38.json:jobs:0 \
                  2:slurm_22.05_sinfo.json:nodes:0; do
        IFS=: read -r pick file list entry <<< "${seed}"
        [[ -f "${testdata}/${file}" ]] || continue
        { printf '%s' "${pick}"
          python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); k, i = sys.argv[2], int(sys.argv[3]); r[k] = r[k][i:i + 1]; print(json.dumps(r, separators=(",", ":")))' \
            "${testdata}/${file}" "${list}" "${entry}"; } > "${corpus}/${file%.json}-${entry}.json"
      done
      printf '3%s\n' 'id,tenant,submit,gpus,start,end,nodes,cpus,memory_mib,time_limit' \
        '7,vision,1700000000,8,1700000060,1700003600,tp[1-2],16,65536,7200' \
        '8,nlp,1700000100,1,,,,,,' > "${corpus}/trace.csv"
      printf '3%s\n' '{"id": "7_1", "tenant": "a", "submit": 5, "gpus": 2, "start": 9, "nodes": ["x"]}' \
        > "${corpus}/trace.jsonl"
      dict="${repo_root}/tests/fuzz/slurm_json.dict"
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
    failed=1
    echo "== ${target}: FAILED (exit ${rc}); the report:"
    grep -E -A 40 '^==[0-9]+==ERROR|runtime error|SUMMARY|deadly signal|Test unit written' \
      "${log}" | head -n 80
    echo "   full log: ${log}"
    ls "${fuzz_dir}/${target}"-crash-* "${fuzz_dir}/${target}"-timeout-* \
      "${fuzz_dir}/${target}"-oom-* 2> /dev/null | sed 's/^/   artifact: /'
  fi
  return "${failed}"
}

# FUZZ_JOBS targets at a time (default 2; each fuzzer is one process), each target's report printed
# whole once it is done, in the order the targets were started.
jobs="${FUZZ_JOBS:-2}"
if ! [[ "${jobs}" =~ ^[1-9][0-9]*$ ]]; then
  echo "run_fuzz.sh: FUZZ_JOBS must be a whole number from 1, got '${jobs}'" >&2
  exit 2
fi
status=0
pids=()
names=()
collect() {
  local rc=0
  wait "${pids[0]}" || rc=$?
  cat "${fuzz_dir}/${names[0]}.report"
  ((rc > status)) && status=${rc}
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
}
for target in "${targets[@]}"; do
  fuzz_target "${target}" > "${fuzz_dir}/${target}.report" 2>&1 &
  pids+=($!)
  names+=("${target}")
  if [[ ${#pids[@]} -ge ${jobs} ]]; then collect; fi
done
while [[ ${#pids[@]} -gt 0 ]]; do collect; done
exit "${status}"
