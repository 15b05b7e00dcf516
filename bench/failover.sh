#!/usr/bin/env bash
# Failover of the highly available control plane: a three-member etcd, three servers, clients
# submitting through the leader-following CLI while the leader is killed (SIGKILL) again and
# again. Prints the time from each kill to the first submission accepted after it (median, max)
# and what a failover must never do (acknowledged jobs lost or duplicated, running jobs restarted,
# GPUs double-booked). It is the test tests/server/ha_failover_test.cc at a larger scale.
#
# Usage: bench/failover.sh [KILLS] [CLIENTS] [BUILD_DIR]   (defaults: 20, 8, build/release)
set -euo pipefail

kills=${1:-20}
clients=${2:-8}
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=${3:-$repo/build/release}
for value in "$kills" "$clients"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || {
    echo "usage: bench/failover.sh [KILLS] [CLIENTS] [BUILD_DIR]" >&2
    exit 2
  }
done
test_binary="$build/tests/server/ha_failover_test"
[[ -x $test_binary ]] || {
  echo "bench/failover.sh: $test_binary is not built (cmake --build --preset release)" >&2
  exit 2
}
TIDEPOOL_SOURCE_DIR="$repo" TIDEPOOL_FAILOVER_KILLS="$kills" TIDEPOOL_FAILOVER_CLIENTS="$clients" \
  "$test_binary" --gtest_filter='HaFailoverTest.KillingTheLeader*'
