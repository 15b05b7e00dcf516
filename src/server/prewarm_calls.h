// The runs of the pre-warm hook (server configuration `prewarm:`, plane_state.h's PrewarmSetup)
// that the control plane asks for after its passes (prewarm_after_pass, core/prewarm.h): the
// loop runs each as `<hook> prewarm` with its request on stdin (provider_hooks.h) once the round
// that asked is committed. The outcome is logged and counted (tidepool_prewarm_calls_total); it
// never changes what is scheduled. Hooks must be idempotent: after a restart the server calls
// again for the starts it expects.
//
// The request, one line of JSON:
//   {"action": "prewarm",
//    "job": {"id": 42, "name": "train", "tenant": "vision", "queue": "default", "tasks": 2,
//            "gpus_per_task": 8, "env": {"DATA": "s3://corpus/v3"}, "labels": {...}},
//    "nodes": ["h100-a-01", "h100-a-02"],
//    "predicted_start": "2026-12-01T01:00:00Z", "predicted_start_in_seconds": 600,
//    "lead_seconds": 600}
// `nodes` are those expected for the job that were not called for it before (cluster file names,
// as the agents register them); `env` and `labels` are the job spec's (where a job names its
// data); `predicted_start_in_seconds` is from the call (0 when the start is due).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/cluster_file.h"
#include "core/instant.h"
#include "core/prewarm.h"
#include "server/server_job.h"

namespace tidepool {

struct PrewarmHookCall {
  JobId job;
  std::string hook;
  nlohmann::json request;
};

// The request of `call` for `job` at `now`, its nodes named as `cluster` names them; `lead` is
// the configured lead.
[[nodiscard]] nlohmann::json prewarm_request(const PrewarmCall& call, const ServerJob& job,
                                             const ClusterSpec& cluster, Seconds lead, Instant now);

// A Unix time in whole seconds as RFC 3339 in UTC ("2026-12-01T01:00:00Z").
[[nodiscard]] std::string rfc3339_utc(Seconds unix_time);

}  // namespace tidepool
