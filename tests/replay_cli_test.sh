#!/usr/bin/env bash
# End-to-end checks of `tidepool sim replay` and of pools given as cluster files.
#
# Usage: replay_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: outputs, queueing, cluster-file, bad-input.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup replay "$@"
data="$source_dir/data/openb"

case "$case_name" in
  outputs)
    "$tidepool" sim replay --nodes "$data/openb_node_list_gpu_node.csv" \
      --pods "$data/openb_pod_list_default.csv" --policy fgd --out "$work/out" >"$work/stdout"
    [[ $(head -1 "$work/out/timeline.csv") == \
      "time,gpu_allocated_percent,cpu_allocated_percent,gpu_fragmented_percent,queued,running" ]] ||
      fail "timeline.csv header"
    [[ $(wc -l <"$work/out/queueing.csv") -eq 8153 ]] || fail "queueing.csv should have 8152 pods"
    grep -q "fgd" "$work/stdout" || fail "summary table missing"
    ;;
  queueing)
    # One node with one GPU: b arrives while a runs and starts when a leaves (delay 100 s); c
    # asks for two GPUs and can never run.
    printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,8000,16384,1,T4\n' >"$work/nodes.csv"
    cat >"$work/pods.csv" <<'PODS'
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
a,1000,1024,1,1000,,LS,Running,0,200,0
b,1000,1024,1,1000,,LS,Running,100,400,100
c,1000,1024,2,1000,,LS,Running,50,500,50
PODS
    "$tidepool" sim replay --nodes "$work/nodes.csv" --pods "$work/pods.csv" --out "$work/out" \
      >"$work/stdout"
    grep -qx "a,0,0,0,n1,started" "$work/out/queueing.csv" || fail "a should start at 0"
    grep -qx "b,100,200,100,n1,started" "$work/out/queueing.csv" || fail "b should wait 100 s"
    grep -qx "c,50,,,,rejected" "$work/out/queueing.csv" || fail "c should be rejected"
    ;;
  cluster-file)
    "$tidepool" sim pack --cluster "$source_dir/data/clusters/example.yaml" \
      --pods "$data/openb_pod_list_default.csv" --policy tidepool --seeds 1 --out "$work/pack" \
      >"$work/stdout" 2>"$work/stderr"
    grep -q "on 23 nodes / 176 GPUs" "$work/stderr" || fail "example cluster not read ($(cat "$work/stderr"))"
    printf 'site: s\nspines:\n  - name: sp\n    leaves:\n      - name: l\n        nodes:\n          - name: n\n            gpus: 20\n            gpu_model: H100\n            cpus: 8\n            memory_gib: 64\n' \
      >"$work/bad.yaml"
    expect_error "gpus" "20" -- sim pack --cluster "$work/bad.yaml" \
      --pods "$data/openb_pod_list_default.csv" --out "$work/x"
    expect_error "--nodes" "--cluster" -- sim pack --cluster "$work/bad.yaml" \
      --nodes "$data/openb_node_list_gpu_node.csv" --pods "$data/openb_pod_list_default.csv" \
      --out "$work/x"
    ;;
  bad-input)
    printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,8000,16384,1,T4\n' >"$work/nodes.csv"
    printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\nx,1,1,1,1000,,5\n' \
      >"$work/pods.csv"
    expect_error "x" "creation" -- sim replay --nodes "$work/nodes.csv" --pods "$work/pods.csv" \
      --out "$work/x"
    expect_error "--interval" -- sim replay --nodes "$work/nodes.csv" \
      --pods "$data/openb_pod_list_default.csv" --interval 0 --out "$work/x"
    expect_error "--nodes" -- sim replay --pods "$data/openb_pod_list_default.csv" --out "$work/x"
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac
echo "PASS: $case_name"
