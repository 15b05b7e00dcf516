#!/usr/bin/env bash
# Sourced by the benchmarks (bench/submit/run.sh, bench/scale/run.sh): starts a three-member etcd
# on free ports of 127.0.0.1 with its data under a folder, fsync on, as a highly available
# Tidepool runs it.
#
#   start_etcd_cluster DIR [ETCD_FLAG...]
#
# Each member gets the flags given after DIR (limits, compaction). Sets:
#   etcd_endpoints  the members' client host:port, comma-separated (a store's `endpoints`)
#   etcd_pids       their PIDs (an array); the caller stops them, by PID, when it is done
# Needs python3 (to find free ports) and etcd on PATH.

# A port of 127.0.0.1 that nothing listens on now.
etcd_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_etcd_cluster() {
  local dir="$1"
  shift
  local cluster="" i
  local -a ports=()
  for i in 0 1 2; do
    ports+=("$(etcd_free_port)" "$(etcd_free_port)")
  done
  etcd_endpoints=""
  etcd_pids=()
  for i in 0 1 2; do
    cluster+="${cluster:+,}m${i}=http://127.0.0.1:${ports[$((2 * i + 1))]}"
    etcd_endpoints+="${etcd_endpoints:+,}127.0.0.1:${ports[$((2 * i))]}"
  done
  for i in 0 1 2; do
    etcd --name "m${i}" --data-dir "${dir}/etcd-m${i}" \
      --listen-client-urls "http://127.0.0.1:${ports[$((2 * i))]}" \
      --advertise-client-urls "http://127.0.0.1:${ports[$((2 * i))]}" \
      --listen-peer-urls "http://127.0.0.1:${ports[$((2 * i + 1))]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${ports[$((2 * i + 1))]}" \
      --initial-cluster "${cluster}" --initial-cluster-state new "$@" \
      > "${dir}/etcd-m${i}.log" 2>&1 &
    etcd_pids+=($!)
  done
}
