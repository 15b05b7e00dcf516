// Slurm's own JSON (22.05, data_parser v0.0.38: `squeue --json`, `sacct --json`, `sinfo --json`)
// read as the observed stream of shadow mode (sim/shadow_schedule.h). It is external input: a
// field that is missing or of the wrong type is an error naming the job (or node) and the field
// ("squeue jobs[3] (job 17) submit_time: expected an integer, got \"x\""); nothing here throws or
// does I/O.
//
// squeue --json, per entry of "jobs":
//   job_id (integer; a task of an array is "<array_job_id>_<array_task_id>", and the record of
//   an array's tasks not started yet, array_task_id null, is skipped: each task is listed once it
//   starts),
//   account and user_name (strings; the tenant is the account, else the user, else "uid <n>"),
//   partition, submit_time, start_time and end_time (integers, seconds since the epoch; 0 when
//   not yet), job_state, nodes (a hostlist, "tp[1-2]") or job_resources.allocated_nodes[].nodename,
//   node_count, cpus, tasks, time_limit (minutes, or null for none), the GPUs from tres_alloc_str
//   ("gres/gpu=4", the total, when accounting tracks GPUs) else tres_per_job (a total),
//   tres_per_node (per node) or tres_per_task (per task), each "gres:gpu:N", "gres:gpu:TYPE:N",
//   "gres/gpu=N" or "gres/gpu:TYPE=N"; memory from memory_per_node or memory_per_cpu (MiB) when
//   set (asked for with --mem or --mem-per-cpu), else none.
// sacct --json (Slurm's accounting; needs slurmdbd), per entry of "jobs":
//   job_id, array.{job_id,task_id}, account, user, partition, time.{submission,start,end,limit},
//   state.current, nodes ("None assigned" before it starts), required.{CPUs,memory},
//   tres.allocated / tres.requested (lists of {type, name, count}: the GPUs are type "gres" name
//   "gpu").
// States: PENDING (and REQUEUED, RESV_DEL_HOLD...) has not started; RUNNING, SUSPENDED,
// CONFIGURING, STAGE_OUT and the like run; COMPLETED, COMPLETING, FAILED, CANCELLED, TIMEOUT,
// NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE have ended (one that ended without a
// start time or nodes was cancelled before it started). A non-empty "errors" list of the reply is
// an error.
// sinfo --json, per entry of "nodes": name, cpus, real_memory (MiB), gres ("gpu:4",
// "gpu:a100:4(S:0-1)", several joined by ','; the GPU model is the first type named, else
// `default_model`), partitions. Every node is one NVLink domain under one leaf switch.
// Figures: Slurm's "not set" and "unlimited" numbers (NO_VAL, INFINITE: 4294967294 and
// 4294967295, and their 64-bit forms) read as absent; every figure read, and every total made of
// them (GPUs per node times nodes, memory per CPU times CPUs, minutes as seconds), must keep the
// bounds of sim/observed_job.h, else it is an error naming the field: no job returned breaks
// check_observed().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/cluster_file.h"
#include "core/error.h"
#include "sim/shadow_schedule.h"

namespace tidepool {

// The GPUs a TRES text names ("gres:gpu:2", "gres/gpu:a100=2", entries joined by ','): their sum,
// nullopt when it names none; an error naming `field` for a GPU entry without a count.
Result<std::optional<int>> gpus_in_tres(std::string_view text, const std::string& field);

// Jobs of a `squeue --json` reply (optionally only those of `partition`).
Result<std::vector<ObservedJob>> read_squeue_json(const nlohmann::json& reply,
                                                  std::string_view partition = {});

// Jobs of a `sacct --json` reply (optionally only those of `partition`).
Result<std::vector<ObservedJob>> read_sacct_json(const nlohmann::json& reply,
                                                 std::string_view partition = {});

// The nodes of a `sinfo --json` reply (optionally only those in `partition`) as a pool.
Result<ClusterSpec> read_sinfo_json(const nlohmann::json& reply, std::string_view default_model,
                                    std::string_view partition = {});

// The newest knowledge of each job over several observations: a record that has ended beats one
// that runs, which beats one that waits; at the same stage the later one (`update`) wins. Jobs
// keep the order they were first seen in.
void merge_observations(std::vector<ObservedJob>& known, std::vector<ObservedJob> update);

}  // namespace tidepool
