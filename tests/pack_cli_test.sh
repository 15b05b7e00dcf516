#!/usr/bin/env bash
# End-to-end checks of `tidepool sim pack` on the shipped openb data.
#
# Usage: pack_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: outputs, compare, missing-nodes, missing-pods, unknown-policy, bad-seeds,
#   bad-pod-row, published-only-without-compare.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup pack "$@"

data="$source_dir/data/openb"
nodes="$data/openb_node_list_gpu_node.csv"
pods="$data/openb_pod_list_default.csv"
published="$data/fgd-results"

case "$case_name" in
  outputs)
    "$tidepool" sim pack --nodes "$nodes" --pods "$pods" --policy all --seeds 42-43 \
      --threads 2 --out "$work/out"
    for pair in allocation.csv:analysis_allo_discrete.csv fragmentation.csv:analysis_frag_discrete.csv; do
      ours="$work/out/${pair%%:*}"
      theirs="$published/${pair##*:}"
      [[ -f $ours ]] || fail "$ours was not written"
      [[ "$(head -n 1 "$ours")" == "$(head -n 1 "$theirs")" ]] ||
        fail "the header of ${ours##*/} differs from the published ${theirs##*/}"
      rows=$(tail -n +2 "$ours" | grep -c .) || true
      # 7 policies x 2 seeds.
      [[ $rows -eq 14 ]] || fail "${ours##*/} has $rows data rows, expected 14"
      echo "ok: ${ours##*/}: published header, $rows rows"
    done
    ;;
  compare)
    "$tidepool" sim pack --nodes "$nodes" --pods "$pods" --policy all --seeds 42 --threads 2 \
      --out "$work/out" --compare "$published" >"$work/stdout"
    cat "$work/stdout"
    grep -qF "Beside the published FGD results" "$work/stdout" || fail "no comparison table printed"
    table=$(sed -n '/Beside the published FGD results/,$p' "$work/stdout")
    for label in 01-Random 02-DotProd 03-GpuClustering 04-GpuPacking 05-BestFit 06-FGD \
      07-Tidepool; do
      grep -qF -- "$label" <<<"$table" || fail "the comparison table has no row for $label"
    done
    echo "ok: the comparison table lists every policy"
    ;;
  missing-nodes)
    expect_error "--nodes" "$work/no-such-nodes.csv" -- \
      sim pack --nodes "$work/no-such-nodes.csv" --pods "$pods" --out "$work/out"
    ;;
  missing-pods)
    expect_error "--pods" "$work/no-such-pods.csv" -- \
      sim pack --nodes "$nodes" --pods "$work/no-such-pods.csv" --out "$work/out"
    ;;
  unknown-policy)
    expect_error "--policy" "magic" -- \
      sim pack --nodes "$nodes" --pods "$pods" --policy magic --out "$work/out"
    ;;
  bad-seeds)
    expect_error "--seeds" "'a'" -- \
      sim pack --nodes "$nodes" --pods "$pods" --seeds a --out "$work/out"
    expect_error "--seeds" "5-3" -- \
      sim pack --nodes "$nodes" --pods "$pods" --seeds 5-3 --out "$work/out"
    ;;
  bad-pod-row)
    printf '%s\n' "name,cpu_milli,memory_mib,num_gpu,gpu_milli" "pod-0,1000,1024,1,1000" \
      "pod-1,1000,1024,2,500" >"$work/bad_pods.csv"
    expect_error "bad_pods.csv:3" "gpu_milli" -- \
      sim pack --nodes "$nodes" --pods "$work/bad_pods.csv" --out "$work/out"
    printf '%s\n' "name,cpu_milli,memory_mib,num_gpu,gpu_milli" "pod-0,-1000,1024,1,1000" \
      >"$work/negative_pods.csv"
    expect_error "negative_pods.csv:2" "cpu_milli" -- \
      sim pack --nodes "$nodes" --pods "$work/negative_pods.csv" --out "$work/out"
    [[ ! -e "$work/out/allocation.csv" ]] || fail "results were written despite the bad input"
    ;;
  published-only-without-compare)
    expect_error "--published-only" "--compare" -- \
      sim pack --nodes "$nodes" --pods "$pods" --published-only --out "$work/out"
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac
