#!/usr/bin/env bash
# Sourced by the scripts that need a real Slurm (bench/submit/slurm_baseline.sh,
# tests/shadow_slurm_test.sh): a throw-away Slurm cluster on 127.0.0.1 in a folder of its own,
# with fake GPUs, started and stopped by PID. Needs root (SlurmUser=root, mknod) and Debian's
# slurm-wlm and munge.
#
#   slurm_enter_netns NAME SCRIPT ARG...
#       Re-executes `bash SCRIPT ARG...` in a private network namespace (loopback only) where that
#       works, and returns (to carry on in the host's namespace, saying so) where it does not.
#       slurmctld and slurmd bind 0.0.0.0 (Slurm has no bind-address setting), so inside one
#       nothing is reachable from outside at all. Besides bringing lo up it gives lo a second
#       address, 127.0.0.2/32: Slurm resolves with getaddrinfo(AF_INET, AI_ADDRCONFIG), and glibc
#       answers EAI_NONAME to that when the only IPv4 address is 127.0.0.1. Call it after anything
#       that needs the network (apt-get). The variable SLURM_CLUSTER_IN_NETNS marks the second run.
#   slurm_cluster_start DIR PARTITION NODES GPUS CPUS [SCHEDULER_PARAMETERS]
#       Starts munged, slurmctld and one slurmd per node in DIR (an empty folder, its path short
#       enough for a unix socket): NODES nodes named tp1..tpNODES (NodeAddr 127.0.0.1, a port
#       each), GPUS fake GPUs on each (character devices of the NVIDIA major number; gres.conf
#       with AutoDetect=off, so slurmd only stat()s them), all in PARTITION, the default one.
#       CPUS: the CPUs each node declares (SlurmdParameters=config_overrides, so that more than
#       the machine has do not drain it), or 0 for what slurmd -C finds. SCHEDULER_PARAMETERS,
#       when given, is the SchedulerParameters line. Waits until every node
#       is idle (60 s at most). Sets SLURM_CONF (exported), slurm_nodes (their names, an array),
#       slurm_pids (the daemons' PIDs); returns non-zero with the logs' tails on stderr when a
#       daemon does not start.
#   slurm_cluster_stop
#       Stops every daemon slurm_cluster_start started, by PID (SIGTERM, then SIGKILL after 30 s),
#       slurmd first. Leaves DIR to the caller.
# More than one node needs slurmd to serve several node names on one host: Debian's build does
# (each slurmd is started with -N NAME and listens on the port its node line gives).

slurm_cluster_pids=()
slurm_cluster_dir=""

slurm_enter_netns() {
  local name="$1" script="$2"
  shift 2
  [[ -z "${SLURM_CLUSTER_IN_NETNS:-}" ]] || return 0
  if command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 \
    && unshare --net true >/dev/null 2>&1; then
    export SLURM_CLUSTER_IN_NETNS=1
    exec unshare --net -- bash -c '
      if ! { ip link set lo up && ip addr add 127.0.0.2/32 dev lo; }; then
        echo "$0: cannot set up lo in the private network namespace" >&2
        exit 3
      fi
      exec bash "$@"' "${name}" "${script}" "$@"
  fi
  echo "${name}: note: no private network namespace (unshare --net failed); slurmctld and slurmd will listen on 0.0.0.0" >&2
}

# slurm_stop_pid NAME PID: SIGTERM, wait up to 30 s, then SIGKILL. Only our own children.
slurm_stop_pid() {
  local name="$1" pid="$2" i
  [[ -n "${pid}" ]] || return 0
  kill -0 "${pid}" 2>/dev/null || { wait "${pid}" 2>/dev/null || true; return 0; }
  kill -TERM "${pid}" 2>/dev/null || true
  for ((i = 0; i < 300; i++)); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${pid}" 2>/dev/null; then
    echo "${name} (pid ${pid}) ignored SIGTERM for 30 s, sending SIGKILL" >&2
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  wait "${pid}" 2>/dev/null || true
}

# The daemons' log files, and their stdout/stderr where the log file stayed empty.
slurm_cluster_logs() {
  local f
  for f in "${slurm_cluster_dir}"/log/*; do
    [[ -s "${f}" ]] || continue
    [[ "${f}" == *.out && -s "${f%.out}.log" ]] && continue
    echo "----- tail of ${f}" >&2
    tail -n 25 "${f}" >&2
  done
}

# Listening on TCP port $1 (any address)?
slurm_port_busy() {
  if command -v ss >/dev/null 2>&1; then
    [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

# The first of COUNT consecutive free ports in 20000-29999.
slurm_pick_ports() {
  local count="$1" p i k ok
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % (10000 - count)))
    ok=1
    for ((k = 0; k < count; k++)); do
      slurm_port_busy $((p + k)) && { ok=0; break; }
    done
    [[ "${ok}" -eq 1 ]] && { echo "${p}"; return 0; }
  done
  return 1
}

slurm_cluster_fail() {
  echo "$*" >&2
  slurm_cluster_logs
  return 1
}

slurm_cluster_start() {
  local dir="$1" partition="$2" nodes="$3" gpus="$4" cpus="$5" sched="${6:-}"
  local i g n ctld_ports=4 ctld_port munge_socket node_hw state idle
  slurm_cluster_dir="${dir}"
  slurm_nodes=()
  for ((n = 1; n <= nodes; n++)); do slurm_nodes+=("tp${n}"); done
  export PATH="${PATH}:/usr/sbin:/sbin"
  for i in munged slurmctld slurmd sbatch sinfo squeue scancel; do
    command -v "${i}" >/dev/null 2>&1 || { echo "${i} not found (install slurm-wlm and munge)" >&2; return 1; }
  done
  # munged insists that every directory above its socket be searchable (x) by all users.
  mkdir -p "${dir}"
  chmod 0711 "${dir}"
  mkdir -p "${dir}"/{etc,state,spool,run,log,dev,munge,munge-socket,work}
  chmod 0700 "${dir}/munge"        # key and seed: private
  chmod 0755 "${dir}/munge-socket" # socket: munged requires a directory searchable by all

  # slurmctld listens on 4 ports (clients pick one at random, as the high-throughput guide
  # suggests against listen-queue overflows); the slurmds take the ports right after them.
  ctld_port="$(slurm_pick_ports $((ctld_ports + nodes)))" \
    || { echo "no $((ctld_ports + nodes)) consecutive free TCP ports in 20000-29999" >&2; return 1; }

  # A private munged: own key, socket, pid, log and seed files; more threads than the default 2,
  # as Slurm's high-throughput guide recommends (every sbatch call needs one credential).
  munge_socket="${dir}/munge-socket/munge.socket"
  (( ${#munge_socket} < 100 )) || { echo "path too long for a unix socket: ${munge_socket} (set TMPDIR to a shorter folder)" >&2; return 1; }
  dd if=/dev/urandom of="${dir}/munge/munge.key" bs=1024 count=1 status=none
  chmod 0600 "${dir}/munge/munge.key"
  # In --foreground mode munged logs to stderr (munged.out), not to --log-file.
  munged --foreground --socket="${munge_socket}" --key-file="${dir}/munge/munge.key" \
    --pid-file="${dir}/run/munged.pid" --log-file="${dir}/log/munged.log" \
    --seed-file="${dir}/munge/munged.seed" --num-threads=10 \
    >"${dir}/log/munged.out" 2>&1 &
  slurm_cluster_pids+=($!)
  local munged_pid=$!
  for ((i = 0; i < 100; i++)); do
    [[ -S "${munge_socket}" ]] && break
    kill -0 "${munged_pid}" 2>/dev/null || { slurm_cluster_fail "munged exited at start"; return 1; }
    sleep 0.1
  done
  [[ -S "${munge_socket}" ]] || { slurm_cluster_fail "munged did not create ${munge_socket} within 10 s"; return 1; }

  # The fake GPUs: character devices with the NVIDIA major number 195, per node.
  : >"${dir}/etc/gres.conf"
  echo "AutoDetect=off" >>"${dir}/etc/gres.conf"
  for ((n = 0; n < nodes; n++)); do
    mkdir -p "${dir}/dev/${slurm_nodes[n]}" "${dir}/spool/${slurm_nodes[n]}"
    for ((g = 0; g < gpus; g++)); do
      mknod "${dir}/dev/${slurm_nodes[n]}/nvidia${g}" c 195 "${g}" \
        || { echo "mknod failed (no CAP_MKNOD, or a nodev mount? set TMPDIR elsewhere)" >&2; return 1; }
    done
    echo "NodeName=${slurm_nodes[n]} Name=gpu File=${dir}/dev/${slurm_nodes[n]}/nvidia[0-$((gpus - 1))]" \
      >>"${dir}/etc/gres.conf"
  done
  : >"${dir}/etc/plugstack.conf"

  # The node lines use the hardware as slurmd sees it (slurmd -C), without RealMemory so a
  # fluctuating figure cannot drain a node.
  node_hw="$(slurmd -C 2>/dev/null | head -n 1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ' || true)"
  [[ -n "${node_hw}" ]] || node_hw="CPUs=$(nproc) "
  [[ "${cpus}" -eq 0 ]] || node_hw="CPUs=${cpus} "
  local host
  host="$(hostname -s)"
  cat >"${dir}/etc/slurm.conf" <<EOF
# A throw-away cluster (bench/slurm_cluster_helpers.sh).
ClusterName=tidepool
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${ctld_port}-$((ctld_port + ctld_ports - 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${munge_socket}
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool/%n
SlurmctldPidFile=${dir}/run/slurmctld.pid
SlurmdPidFile=${dir}/run/slurmd-%n.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdLogFile=${dir}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=${dir}/etc/plugstack.conf
TmpFS=${dir}/work
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PriorityType=priority/basic
GresTypes=gpu
MaxJobCount=200000
EOF
  [[ -z "${sched}" ]] || echo "SchedulerParameters=${sched}" >>"${dir}/etc/slurm.conf"
  [[ "${cpus}" -eq 0 ]] || echo "SlurmdParameters=config_overrides" >>"${dir}/etc/slurm.conf"
  for ((n = 0; n < nodes; n++)); do
    echo "NodeName=${slurm_nodes[n]} NodeHostname=${host} NodeAddr=127.0.0.1 Port=$((ctld_port + ctld_ports + n)) ${node_hw}Gres=gpu:${gpus} State=UNKNOWN" \
      >>"${dir}/etc/slurm.conf"
  done
  local node_list
  node_list="$(IFS=,; echo "${slurm_nodes[*]}")"
  echo "PartitionName=${partition} Nodes=${node_list} Default=YES MaxTime=INFINITE State=UP" \
    >>"${dir}/etc/slurm.conf"
  export SLURM_CONF="${dir}/etc/slurm.conf"

  # The guide asks for high open-file and stack limits for slurmctld: raise ours to the hard
  # limits (this shell and its children only).
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  ulimit -s unlimited 2>/dev/null || true
  slurmctld -D -f "${SLURM_CONF}" >"${dir}/log/slurmctld.out" 2>&1 &
  slurm_cluster_pids+=($!)
  for ((n = 0; n < nodes; n++)); do
    slurmd -D -f "${SLURM_CONF}" -N "${slurm_nodes[n]}" >"${dir}/log/slurmd-${slurm_nodes[n]}.out" 2>&1 &
    slurm_cluster_pids+=($!)
  done

  for ((i = 0; i < 600; i++)); do
    for g in "${slurm_cluster_pids[@]}"; do
      kill -0 "${g}" 2>/dev/null || { slurm_cluster_fail "a Slurm daemon (pid ${g}) exited at start"; return 1; }
    done
    state="$(sinfo -h -N -o '%t' 2>/dev/null || true)"
    idle="$(grep -c '^idle$' <<<"${state}" || true)"
    [[ "${idle}" -eq "${nodes}" ]] && return 0
    sleep 0.1
  done
  slurm_cluster_fail "the nodes are not all idle after 60 s (sinfo states: ${state:-no answer})"
}

slurm_cluster_stop() {
  local i
  # slurmd first, then slurmctld, then munged: the reverse of the start.
  for ((i = ${#slurm_cluster_pids[@]} - 1; i >= 0; i--)); do
    slurm_stop_pid "slurm daemon" "${slurm_cluster_pids[i]}"
  done
  slurm_cluster_pids=()
}
