#!/usr/bin/env bash
# The results the packing experiment must reproduce on the shipped default openb trace, ten seeds:
#   - each baseline's median allocation at 100% arrived is within 1.0 percentage point of the
#     FGD authors' published median, and the six rank in the published order;
#   - 07-Tidepool's median allocation is at least FGD's (measured in the same run) + 0.5 pp, and
#     its median fragmentation is no higher than FGD's;
#   - the same seeds give byte-identical result files.
#
# Usage: pack_results_test.sh TIDEPOOL_BINARY SOURCE_DIR
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 TIDEPOOL_BINARY SOURCE_DIR" >&2
  exit 2
fi
tidepool=$1
data="$2/data/openb"
work=$(mktemp -d "${TMPDIR:-/tmp}/tidepool-results-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

run() {
  "$tidepool" sim pack --nodes "$data/openb_node_list_gpu_node.csv" \
    --pods "$data/openb_pod_list_default.csv" --policy all --seeds 42-51 --out "$1" \
    >"$1.log" 2>&1 || { cat "$1.log" >&2; echo "FAIL: sim pack exited non-zero" >&2; exit 1; }
}
run "$work/a"
run "$work/b"

for file in allocation.csv fragmentation.csv; do
  cmp -s "$work/a/$file" "$work/b/$file" || { echo "FAIL: $file differs between two runs" >&2; exit 1; }
done

# Medians at 100% arrived per policy label, from a results file: "label median" lines.
medians() {
  awk -F, -v want="100" '
    NR == 1 { for (i = 1; i <= NF; ++i) if ($i == want) col = i; next }
    $col != "" { values[$2] = values[$2] " " $col }
    END {
      for (label in values) {
        n = split(substr(values[label], 2), v, " ")
        for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
        m = (n % 2 == 1) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        printf "%s %.4f\n", label, m
      }
    }' "$1" | sort
}

medians "$work/a/allocation.csv" >"$work/ours_alloc"
medians "$work/a/fragmentation.csv" >"$work/ours_frag"
medians "$data/fgd-results/analysis_allo_discrete.csv" >"$work/published_alloc"
echo "ours (allocation, fragmentation) and published allocation at 100% arrived:"
join "$work/ours_alloc" "$work/ours_frag" | join -a1 - "$work/published_alloc"

awk '
  FILENAME == ARGV[1] { ours[$1] = $2; next }
  FILENAME == ARGV[2] { frag[$1] = $2; next }
  { published[$1] = $2 }
  END {
    split("01-Random 02-DotProd 03-GpuClustering 04-GpuPacking 05-BestFit 06-FGD", order, " ")
    bad = 0
    for (i = 1; i <= 6; ++i) {
      label = order[i]
      if (!(label in ours) || !(label in published)) { print "FAIL: no median for " label; bad = 1; continue }
      diff = ours[label] - published[label]
      if (diff > 1.0 || diff < -1.0) { printf "FAIL: %s differs from the published median by %+.2f pp\n", label, diff; bad = 1 }
      if (i > 1 && !(ours[label] > ours[order[i - 1]])) { printf "FAIL: %s does not rank above %s\n", label, order[i - 1]; bad = 1 }
    }
    if (!(ours["07-Tidepool"] >= ours["06-FGD"] + 0.5)) {
      printf "FAIL: 07-Tidepool %.2f is not at least FGD %.2f + 0.5\n", ours["07-Tidepool"], ours["06-FGD"]; bad = 1
    }
    if (!(frag["07-Tidepool"] <= frag["06-FGD"])) {
      printf "FAIL: 07-Tidepool fragmentation %.2f is above FGD %.2f\n", frag["07-Tidepool"], frag["06-FGD"]; bad = 1
    }
    exit bad
  }' "$work/ours_alloc" "$work/ours_frag" "$work/published_alloc"
echo "PASS"
