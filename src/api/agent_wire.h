// The messages between a node's agent (agent/agent.h) and the server (server/control_plane.h):
// one plain struct per message, the JSON it is written as (*_to_json, what the sender sends) and
// read from (*_from_json, what the receiver reads). Both sides use these and nothing else, so that
// what the agent sends is what the server reads, and an agent and a server of different versions
// keep talking as long as the shapes below hold.
//
// The agent's requests, read by the server. As api_bodies.h: every field is checked and an Error
// names it ("devices[2].nvlink_peers[0]", "gpus[1].utilization_percent") and says why; unknown
// keys are errors; a null value of a key is the same as leaving it out, and a null body the same
// as an empty map. Integers are JSON integers; strings valid UTF-8 without NUL.
//
//   POST /v1/nodes/{name}/register   NodeRegistration
//   POST /v1/nodes/{name}/heartbeat  NodeHeartbeat (GpuReading per GPU)
//   POST /v1/jobs/{id}/status        JobStatusReport (also from a user, or a job's own script)
//   POST /v1/jobs/{id}/checkpoint    CheckpointReport (also from `tidepool checkpoint`)
//   POST /v1/jobs/{id}/logs?task=T&run=R&offset=O  the task's output bytes as the body; the
//                                    reply LogAppendReply, or 409 with LogConflict
//
// The server's replies, read by the agent: every field is checked as above, but unknown keys are
// ignored, so that a newer server may add to a reply an older agent reads.
//
//   the reply to a heartbeat         HeartbeatReply (NodeAssignment per job to run on the node)
//
// No exception escapes these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/replica_metrics.h"
#include "api/step_report.h"
#include "core/error.h"
#include "core/mig.h"

namespace tidepool {

// Limits of the messages below.
inline constexpr int kMinExitCode = -255;
inline constexpr int kMaxExitCode = 255;
inline constexpr std::size_t kMaxHeartbeatJobs = 4096;   // job ids of a heartbeat or its reply
inline constexpr std::size_t kMaxHeartbeatSteps = 4096;  // tasks' step reports of a heartbeat

// --- registration ---

// A MIG instance of a GPU in MIG mode, as the agent discovered it (agent/gpu_backend.h:
// MigDevice): its UUID (what CUDA_VISIBLE_DEVICES names), its profile and first memory slice
// (core/mig.h) and its own memory.
struct MigSlice {
  std::string uuid;  // "MIG-..."
  MigProfile profile = MigProfile::k1g10gb;
  int start = 0;  // 0..7
  std::int64_t memory_mib = 0;

  friend bool operator==(const MigSlice&, const MigSlice&) = default;
};

// One GPU as the agent discovered it (agent/gpu_backend.h: GpuInfo).
struct GpuDevice {
  int index = 0;                  // 0..15, the backend's order
  std::string uuid;               // "GPU-..."
  std::string model;              // "NVIDIA H100 80GB HBM3", or "H100" for fake GPUs
  std::int64_t memory_mib = 0;    // total device memory, >= 0
  std::string pci_bus_id;         // "0000:1b:00.0"
  int numa_node = -1;             // -1..1023; -1: unknown
  std::vector<int> nvlink_peers;  // GPU indices 0..15 it reaches over NVLink
  std::vector<MigSlice> mig{};    // in MIG mode: its instances (a valid layout); else empty

  friend bool operator==(const GpuDevice&, const GpuDevice&) = default;
};

// POST /v1/nodes/{name}/register (agent): what the agent found on its node:
//   {"gpu_model": "H100", "gpus": 8, "cpu_milli": 96000, "memory_mib": 1048576,
//    "agent_version": "0.1.0", "hostname": "gpu-a1", "address": "10.0.0.11",
//    "leaf": "leaf-1", "spine": "spine-0",
//    "devices": [{"index": 0, "uuid": "GPU-...", "model": "NVIDIA H100 80GB HBM3",
//                 "memory_mib": 81559, "pci_bus_id": "0000:1b:00.0", "numa_node": 0,
//                 "nvlink_peers": [1, 2, 3],
//                 "mig": [{"uuid": "MIG-...", "profile": "3g.40gb", "start": 4,
//                          "memory_mib": 40192}]}]}
// every field optional (gpus 0..16, cpu_milli and memory_mib >= 0, strings at most 256
// characters; devices at most 16, index and peers 0..15, numa_node -1..1023; a device's keys all
// optional too). address is what the tasks of a gang on other nodes use to reach this one
// (MASTER_ADDR). A device's mig lists its MIG instances when the GPU is in MIG mode (at most 7:
// uuid, profile "1g.10gb" .. "7g.80gb", start 0..7 and memory_mib >= 0, each required), which
// together must make a valid layout (core/mig.h). to_json writes every string and every device
// key (empty strings too) but mig, which only a GPU in MIG mode has, and gpus, cpu_milli and
// memory_mib when they are set; the server also stores this document as the node's "reported"
// registration and shows it in the node's "agent".
struct NodeRegistration {
  std::string gpu_model;
  std::optional<int> gpus;
  std::optional<std::int64_t> cpu_milli;
  std::optional<std::int64_t> memory_mib;
  std::string agent_version;
  std::string hostname;
  std::string address;
  std::string leaf;
  std::string spine;
  std::vector<GpuDevice> devices;

  friend bool operator==(const NodeRegistration&, const NodeRegistration&) = default;
};
nlohmann::json node_registration_to_json(const NodeRegistration& registration);
Result<NodeRegistration> node_registration_from_json(const nlohmann::json& value);

// --- heartbeat ---

// One GPU's sample as the heartbeat carries it (agent/gpu_backend.h: GpuSample, with the model and
// total memory of GpuInfo). A figure the GPU cannot report is 0.
struct GpuReading {
  int index = 0;                             // the GPU's index on its node, 0..15
  std::string model;                         // "H100", "NVIDIA H100 80GB HBM3"; may be empty
  int utilization_percent = 0;               // 0..100
  std::int64_t memory_used_mib = 0;          // device memory in use
  std::int64_t memory_total_mib = 0;         // 0: unknown (the memory never counts as high)
  int power_milliwatts = 0;                  // board power draw, 0..10^8
  int temperature_celsius = 0;               // GPU die, -273..1000
  std::uint64_t throttle_reasons = 0;        // NVML's nvmlClocksThrottleReason* bit mask; 0: none
  std::uint64_t ecc_errors_uncorrected = 0;  // since the driver loaded

  friend bool operator==(const GpuReading&, const GpuReading&) = default;
};

// POST /v1/nodes/{name}/heartbeat (agent):
//   {"running_jobs": [12, 13], "healthy_gpus": 8,
//    "gpus": [{"index": 0, "model": "H100", "utilization_percent": 93, "memory_used_mib": 61000,
//              "memory_total_mib": 81559, "power_milliwatts": 612000, "temperature_celsius": 71,
//              "throttle_reasons": 0, "ecc_errors_uncorrected": 0}],
//    "replicas": [<ReplicaReport>, ...], "steps": [<TaskSteps>, ...]}
// every field optional (job ids > 0, each at most once, at most 4096 of them; healthy_gpus
// 0..16; at most 16 GPUs, each index once, figures >= 0 and below 2^63, utilization 0..100,
// temperature -273..1000; a GPU's keys all optional too; at most 4096 replicas, each (job, run)
// once; at most 4096 steps, each (job, run, task) once). to_json writes running_jobs, gpus and
// replicas (empty lists too), every key of each GPU, a replica's job, run and the figures it has,
// healthy_gpus when it is set, and steps when there are some.
// What the agent read from one of its service replicas (the task of a job with a `replica` in its
// assignment) at its latest scrape: the job, its run, and the figures (api/replica_metrics.h), each
// absent when the replica did not say it:
//   {"job": 31, "run": 1, "requests_waiting_milli": 2000, "requests_in_flight_milli": 4000,
//    "requests_per_s_milli": 12500, "mean_latency_ms": 180, "p95_latency_ms": 420,
//    "mean_queue_time_ms": 20, "mean_concurrency_milli": 3900}
// job (required) >= 1, run >= 0, each figure 0..10^15; unknown keys are errors. Nothing of a failed
// scrape is sent (the agent logs why): a replica's bytes never leave its node but as these
// integers.
struct ReplicaReport {
  std::int64_t job = 0;
  std::int64_t run = 0;
  ReplicaFigures figures;

  friend bool operator==(const ReplicaReport&, const ReplicaReport&) = default;
};
inline constexpr std::int64_t kMaxReplicaFigure = 1'000'000'000'000'000;

// What one task of a job reported of its steps since the agent's last heartbeat (its
// TIDEPOOL_STEP_REPORT lines, api/step_report.h), with the lines the agent refused counted in
// stats.refused_lines:
//   {"job": 12, "run": 2, "task": 1, "stats": <step_stats_to_json>}
// every key required: job >= 1, run >= 1, task 0..99999, stats as step_stats_from_json reads it.
struct TaskSteps {
  std::int64_t job = 0;
  std::int64_t run = 0;
  int task = 0;
  StepStats stats;

  friend bool operator==(const TaskSteps&, const TaskSteps&) = default;
};

struct NodeHeartbeat {
  std::vector<std::int64_t> running_jobs;  // the jobs with a live task on the node
  std::optional<int> healthy_gpus;
  std::vector<GpuReading> gpus;
  std::vector<ReplicaReport> replicas;  // at most kMaxHeartbeatJobs
  // The tasks' step reports since the last heartbeat (TaskSteps), at most kMaxHeartbeatSteps, each
  // (job, run, task) once; the server adds each to its job's figures when the job's current run
  // has a task on the node, and ignores the others.
  std::vector<TaskSteps> steps{};

  friend bool operator==(const NodeHeartbeat&, const NodeHeartbeat&) = default;
};
nlohmann::json node_heartbeat_to_json(const NodeHeartbeat& heartbeat);
Result<NodeHeartbeat> node_heartbeat_from_json(const nlohmann::json& value);

// --- the heartbeat's reply: what the node should run ---

// A service replica's side of an assignment (api/service_spec.h): where the agent reads its
// figures and which metrics say what.
//   {"service": 7, "port": 8001, "metrics_file": "", "metrics_preset": "vllm",
//    "metric_names": {"requests_running": "my_running"}}
// service >= 1; port 0..65535, the replica's port on its node (TIDEPOOL_PORT in its env), scraped
// at http://127.0.0.1:<port>/metrics when metrics_file is empty (0: nothing to scrape);
// metrics_file an absolute path (at most 4 KiB) the replica writes; metrics_preset and
// metric_names as replica_metric_names takes them (at most 32 names).
struct ReplicaAssignment {
  std::int64_t service = 0;
  int port = 0;
  std::string metrics_file;
  std::string metrics_preset = "vllm";
  std::map<std::string, std::string, std::less<>> metric_names;

  friend bool operator==(const ReplicaAssignment&, const ReplicaAssignment&) = default;
};

// The longest uuid of a MIG instance an assignment may name.
inline constexpr std::size_t kMaxMigUuid = 128;

// The MIG instance a task of a job with a mig_profile (api/job_spec.h) runs on: its profile, its
// first memory slice on the task's one GPU (core/mig.h) and its uuid, which the agent puts in
// CUDA_VISIBLE_DEVICES once its own discovery confirms the instance (agent/assignment.h).
//   {"profile": "3g.40gb", "start": 4, "uuid": "MIG-..."}
// every key required: profile "1g.10gb" .. "7g.80gb"; start one the profile may start at
// (MigLayout{}.fits); uuid 1..128 characters of printable ASCII without spaces or commas.
struct AssignedMig {
  MigProfile profile = MigProfile::k1g10gb;
  int start = 0;
  std::string uuid;

  friend bool operator==(const AssignedMig&, const AssignedMig&) = default;
};

// One of a job's tasks on the node.
struct AssignedTask {
  int index = 0;                     // the task's rank in the job, 0 .. world_size - 1
  std::vector<int> gpus;             // GPU indices on this node, 0..15
  std::optional<AssignedMig> mig{};  // a MIG instance of its one GPU; else the whole GPUs

  friend bool operator==(const AssignedTask&, const AssignedTask&) = default;
};

// A running job with tasks on the node, and what its tasks need to start:
//   {"job": 12, "run": 2, "name": "bert", "tenant": "vision", "world_size": 4,
//    "tasks": [{"index": 1, "gpus": [4, 5]}], "master_addr": "10.0.0.7", "master_port": 20012,
//    "command": ["python", "train.py"], "env": {"EPOCHS": "3"}, "working_dir": "/data",
//    "cpu_milli_per_task": 4000, "memory_mib_per_task": 1024, "gpu_milli": 1000,
//    "preemptible": true, "checkpoints": true, "resume_from": "/ckpt/12/step-40",
//    "checkpoint_step": 40}
// and a task on a MIG instance (a job with a mig_profile) names it:
//    "tasks": [{"index": 0, "gpus": [1],
//               "mig": {"profile": "3g.40gb", "start": 4, "uuid": "MIG-..."}}]
// job (> 0) and command (1..256 words of at most 4 KiB) are required, the rest optional with the
// defaults below: run >= 0; name, tenant and master_addr at most 256 characters; world_size
// 1..100000; tasks at most 256, each index in 0..world_size - 1 and listed once, at most 16 GPUs
// each, and a task with mig (an AssignedMig) exactly one; master_port 0..65535; env at most 256
// entries, keys variable names, values and working_dir and resume_from at most 4 KiB;
// cpu_milli_per_task 0..10^9; memory_mib_per_task 0..2^30; gpu_milli 1..1000; checkpoint_step >= 0
// or null; replica a ReplicaAssignment or null. to_json writes every key (checkpoint_step null when
// unknown), but replica, and a task's mig, only when it is set.
struct NodeAssignment {
  std::int64_t job = 0;
  std::int64_t run = 0;  // the job's start count: a new run of the job is a new assignment
  std::string name;
  std::string tenant;
  int world_size = 1;
  std::vector<AssignedTask> tasks;  // this node's tasks
  std::string master_addr;          // where task 0 of the gang runs (MASTER_ADDR)
  int master_port = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string working_dir;  // empty: the task's own folder
  std::int64_t cpu_milli_per_task = 0;
  std::int64_t memory_mib_per_task = 0;
  int gpu_milli = 1000;      // the share of each GPU: tasks whose shares fit share one GPU
  bool preemptible = true;   // (the agent does not use it)
  bool checkpoints = false;  // the job declared a checkpoint interval: it answers a notice
  std::string resume_from;   // the last reported checkpoint; empty on a first run
  std::optional<std::int64_t> checkpoint_step;  // its step (the agent does not use it)
  std::optional<ReplicaAssignment> replica;     // a service's replica: its figures to read

  friend bool operator==(const NodeAssignment&, const NodeAssignment&) = default;
};
nlohmann::json node_assignment_to_json(const NodeAssignment& assignment);
// Reads one assignment; `path` is where it is in the reply ("assignments[2]"), and errors name
// the field under it ("assignments[2].tasks[0].index").
Result<NodeAssignment> node_assignment_from_json(const nlohmann::json& value,
                                                 const std::string& path);

// An assignment of a reply that could not be read: the job it is about (0 when even that cannot
// be read), its run (0 likewise), and why.
struct RejectedAssignment {
  std::int64_t job = 0;
  std::int64_t run = 0;
  Error error;

  friend bool operator==(const RejectedAssignment& a, const RejectedAssignment& b) {
    return a.job == b.job && a.run == b.run && a.error.field == b.error.field &&
           a.error.reason == b.error.reason;
  }
};

// The reply to POST /v1/nodes/{name}/heartbeat (server):
//   {"node": "gpu-a1", "jobs": [12], "assignments": [<NodeAssignment>, ...],
//    "heartbeat_timeout_ms": 30000}
// jobs are the ids of the assignments (> 0, each once, at most 4096); every key optional (the
// agent reads only the assignments). Each assignment is read on its own: one that is malformed
// (no command, a field of the wrong type) goes to `rejected` with its reason and the others are
// kept, so that one bad job cannot stop a node. from_json fails only when the reply is not a map
// or one of its own keys is malformed ("assignments" not a list). to_json writes node, jobs,
// assignments (empty lists too) and heartbeat_timeout_ms when it is set; never `rejected`.
struct HeartbeatReply {
  std::string node;
  std::vector<std::int64_t> jobs;
  std::vector<NodeAssignment> assignments;
  std::optional<std::int64_t> heartbeat_timeout_ms;  // >= 0
  std::vector<RejectedAssignment> rejected;          // from_json's only

  friend bool operator==(const HeartbeatReply&, const HeartbeatReply&) = default;
};
nlohmann::json heartbeat_reply_to_json(const HeartbeatReply& reply);
Result<HeartbeatReply> heartbeat_reply_from_json(const nlohmann::json& value);

// --- reports about a job's run ---

// POST /v1/jobs/{id}/status, from the agent running the job:
//   {"state": "running" | "succeeded" | "failed", "exit_code": 0, "message": "...",
//    "task": 0, "run": 1, "steps": <step_stats_to_json>}
// state is required; exit_code optional (-255..255); message optional (at most 4 KiB); task
// (0..99999) says which task ended: a job succeeds when each of its tasks did, and fails with
// its first failed task; without it the report is the whole job's. run (>= 1, the job's "starts"
// when the run began) makes a late report of an earlier run harmless: it is refused. steps
// (optional, with task and run) are the task's step figures not yet sent in a heartbeat (the
// agent's last read of its TIDEPOOL_STEP_REPORT once it ended), as step_stats_from_json reads
// them; the server adds them to the job's. to_json writes state and message (an empty one too),
// and the others when they are set.
struct JobStatusReport {
  std::string state;
  std::optional<int> exit_code;
  std::string message;
  std::optional<int> task;
  std::optional<std::int64_t> run;
  std::optional<StepStats> steps{};

  friend bool operator==(const JobStatusReport&, const JobStatusReport&) = default;
};
nlohmann::json job_status_report_to_json(const JobStatusReport& report);
Result<JobStatusReport> job_status_report_from_json(const nlohmann::json& value);

// POST /v1/jobs/{id}/checkpoint: {"step": 1200, "path": "/ckpt/12/step-1200", "note": "epoch 3",
// "run": 2}; all optional (step >= 0; path and note at most 4 KiB; run >= 1, as for status). The
// next run of the job gets the path in TIDEPOOL_RESUME_FROM. to_json writes step and run when
// they are set, path and note when they are not empty.
struct CheckpointReport {
  std::optional<std::int64_t> step;
  std::string path;
  std::string note;
  std::optional<std::int64_t> run;

  friend bool operator==(const CheckpointReport&, const CheckpointReport&) = default;
};
nlohmann::json checkpoint_report_to_json(const CheckpointReport& report);
Result<CheckpointReport> checkpoint_report_from_json(const nlohmann::json& value);

// --- a task's output ---

// POST /v1/jobs/{id}/logs?task=0&run=2&offset=1048576 (agent) sends the bytes of a run's task
// log from `offset` as the body. The reply: {"job": 12, "task": 0, "run": 2, "size": 1049600},
// size being the bytes of that log the server now holds (every key required: job > 0, task
// 0..2^31-1, run and size >= 0).
struct LogAppendReply {
  std::int64_t job = 0;
  int task = 0;
  std::int64_t run = 0;  // 0: a log from before runs had logs of their own
  std::int64_t size = 0;

  friend bool operator==(const LogAppendReply&, const LogAppendReply&) = default;
};
nlohmann::json log_append_reply_to_json(const LogAppendReply& reply);
Result<LogAppendReply> log_append_reply_from_json(const nlohmann::json& value);

// The 409 reply when the offset is not the size the server holds: the error body ({"error",
// "field": "offset", "reason"}) with {"size": 1048576} added, the bytes it holds (required, >= 0),
// from where the agent sends again. from_json reads only "size".
struct LogConflict {
  std::int64_t size = 0;

  friend bool operator==(const LogConflict&, const LogConflict&) = default;
};
nlohmann::json log_conflict_to_json(const LogConflict& conflict);  // {"size": N}
Result<LogConflict> log_conflict_from_json(const nlohmann::json& value);

}  // namespace tidepool
