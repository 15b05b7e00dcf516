// The bodies of the API's requests other than a job spec (job_spec.h) and the messages of the
// node agents (agent_wire.h), parsed from JSON (or YAML, converted by parse_body) into plain
// structs. Every function checks each field and fails with an Error naming it
// ("quota.H100.guaranteed_gpus", "role") and saying why; unknown keys are errors.
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
inline constexpr std::size_t kMaxTenantQueues = 256;
inline constexpr std::size_t kMaxTenantGpuModels = 64;

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
