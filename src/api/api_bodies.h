// The bodies of the API's requests other than a job spec (job_spec.h), parsed from JSON (or YAML,
// converted by parse_body) into plain structs. Every function checks each field and fails with an
// Error naming it ("quota.H100.guaranteed_gpus", "state") and saying why; unknown keys are errors.
// An empty body (a null value) is accepted where every field is optional, and a null value of a
// key is the same as leaving the key out. Numbers and strings are read as job_spec.h says: JSON
// integers where an integer is expected, strings (valid UTF-8, no NUL) where a string is.
// No exception escapes these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "core/error.h"

namespace tidepool {

// Limits of the bodies below.
inline constexpr int kMinExitCode = -255;
inline constexpr int kMaxExitCode = 255;
inline constexpr std::size_t kMaxTenantQueues = 256;
inline constexpr std::size_t kMaxTenantGpuModels = 64;
inline constexpr std::size_t kMaxHeartbeatJobs = 4096;

// POST /v1/jobs/{id}/status, from the agent running the job:
//   {"state": "running" | "succeeded" | "failed", "exit_code": 0, "message": "...",
//    "task": 0, "run": 1}
// state is required; exit_code optional (-255..255); message optional (at most 4 KiB); task
// (0..99999) says which task ended: a job succeeds when each of its tasks did, and fails with
// its first failed task; without it the report is the whole job's. run (>= 1, the job's "starts"
// when the run began) makes a late report of an earlier run harmless: it is refused.
struct JobStatusReport {
  std::string state;
  std::optional<int> exit_code;
  std::string message;
  std::optional<int> task;
  std::optional<std::int64_t> run;
};
Result<JobStatusReport> job_status_report_from_json(const nlohmann::json& value);

// POST /v1/jobs/{id}/checkpoint: {"step": 1200, "path": "/ckpt/12/step-1200", "note": "epoch 3",
// "run": 2}; all optional (step >= 0; path and note at most 4 KiB; run >= 1, as for status). The
// next run of the job gets the path in TIDEPOOL_RESUME_FROM.
struct CheckpointReport {
  std::optional<std::int64_t> step;
  std::string path;
  std::string note;
  std::optional<std::int64_t> run;
};
Result<CheckpointReport> checkpoint_report_from_json(const nlohmann::json& value);

// PUT /v1/tenants/{name}: the tenant's entry of the tenants file, as JSON:
//   {"weight": 2, "queues": ["ranking", "retrieval"],
//    "quota": {"H100": {"guaranteed_gpus": 64, "borrowing_limit_gpus": 32,
//                       "lending_limit_gpus": 64}}}
// weight optional (1..kMaxTenantWeight, as in the tenants file; default 1); queues optional
// (1..kMaxTenantQueues names as check_name, unique, default ["default"]); quota optional (at most
// kMaxTenantGpuModels models, named as check_name); GPU figures are numbers or strings with up to
// 3 decimals, 0..kMaxQuotaMilli/1000, stored in milli-GPUs; each of the three optional (absent:
// see core/tenants.h); the lending limit at most the guarantee.
struct QuotaSpec {
  std::int64_t guaranteed_milli = 0;
  std::optional<std::int64_t> borrowing_limit_milli;
  std::optional<std::int64_t> lending_limit_milli;
};
struct TenantUpdate {
  std::int64_t weight = 1;
  std::vector<std::string> queues;         // never empty after parsing
  std::map<std::string, QuotaSpec> quota;  // by GPU model name
};
Result<TenantUpdate> tenant_update_from_json(const nlohmann::json& value);

// POST /v1/tokens (admin): {"role": "user", "tenant": "vision", "node": "", "description": ""}.
// role required (admin | user | agent); tenant (a name) required exactly for user, node (a name)
// exactly for agent, an empty string counting as absent; description optional (at most 256
// characters).
struct TokenRequest {
  std::string role;
  std::string tenant;
  std::string node;
  std::string description;
};
Result<TokenRequest> token_request_from_json(const nlohmann::json& value);

// One GPU as the agent discovered it (agent/gpu_backend.h).
struct GpuDevice {
  int index = 0;
  std::string uuid;
  std::string model;
  std::int64_t memory_mib = 0;
  std::string pci_bus_id;
  int numa_node = -1;
  std::vector<int> nvlink_peers;

  friend bool operator==(const GpuDevice&, const GpuDevice&) = default;
};

// POST /v1/nodes/{name}/register (agent): what the agent found on its node:
//   {"gpu_model": "H100", "gpus": 8, "cpu_milli": 96000, "memory_mib": 1048576,
//    "agent_version": "0.1.0", "hostname": "gpu-a1", "address": "10.0.0.11",
//    "leaf": "leaf-1", "spine": "spine-0",
//    "devices": [{"index": 0, "uuid": "GPU-...", "model": "NVIDIA H100 80GB HBM3",
//                 "memory_mib": 81559, "pci_bus_id": "0000:1b:00.0", "numa_node": 0,
//                 "nvlink_peers": [1, 2, 3]}]}
// every field optional (gpus 0..16, cpu_milli and memory_mib >= 0, strings at most 256
// characters; devices at most 16, index and peers 0..15, numa_node -1..1023). address is what
// the tasks of a gang on other nodes use to reach this one (MASTER_ADDR).
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
};
nlohmann::json node_registration_to_json(const NodeRegistration& registration);
Result<NodeRegistration> node_registration_from_json(const nlohmann::json& value);

// One GPU's sample as the heartbeat carries it (agent/gpu_backend.h: GpuSample, with the model and
// total memory of GpuInfo). A figure the GPU cannot report is 0.
struct GpuReading {
  int index = 0;                             // the GPU's index on its node, 0..15
  std::string model;                         // "H100", "NVIDIA H100 80GB HBM3"; may be empty
  int utilization_percent = 0;               // 0..100
  std::int64_t memory_used_mib = 0;          // device memory in use
  std::int64_t memory_total_mib = 0;         // 0: unknown (the memory never counts as high)
  int power_milliwatts = 0;                  // board power draw
  int temperature_celsius = 0;               // GPU die
  std::uint64_t throttle_reasons = 0;        // NVML's nvmlClocksThrottleReason* bit mask; 0: none
  std::uint64_t ecc_errors_uncorrected = 0;  // since the driver loaded
};

// POST /v1/nodes/{name}/heartbeat (agent):
//   {"running_jobs": [12, 13], "healthy_gpus": 8,
//    "gpus": [{"index": 0, "model": "H100", "utilization_percent": 93, "memory_used_mib": 61000,
//              "memory_total_mib": 81559, "power_milliwatts": 612000, "temperature_celsius": 71,
//              "throttle_reasons": 0, "ecc_errors_uncorrected": 0}]}
// every field optional (job ids > 0, each at most once, at most 4096 of them; healthy_gpus
// 0..16; at most 16 GPUs, each index once, figures >= 0, utilization 0..100, temperature
// -273..1000).
struct NodeHeartbeat {
  std::vector<std::int64_t> running_jobs;
  std::optional<int> healthy_gpus;
  std::vector<GpuReading> gpus;
};
Result<NodeHeartbeat> node_heartbeat_from_json(const nlohmann::json& value);

// POST /v1/nodes/{name}/drain: {"reason": "maintenance"}; optional (at most 256 characters).
struct DrainRequest {
  std::string reason;
};
Result<DrainRequest> drain_request_from_json(const nlohmann::json& value);

// PATCH /v1/jobs/{id} (scontrol update): new values for a pending job's priority and limits,
// {"priority": 500, "max_runtime": "2h", "runtime_estimate": "30m", "max_cost": "40.00"}, any
// of them (null clears an optional one). The other fields of a spec cannot change: a job of
// another shape is another job.
struct JobUpdate {
  nlohmann::json fields;  // the keys given (only those four)
};
Result<JobUpdate> job_update_from_json(const nlohmann::json& value);
// `spec` with the update's values, checked as a submitted spec is (job_spec_from_json), so that
// an update can make nothing a submission could not.
Result<JobSpec> apply_job_update(const JobSpec& spec, const JobUpdate& update);

}  // namespace tidepool
