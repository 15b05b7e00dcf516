// The job history of a running server (the reply of GET /v1/jobs, jobs as server/server_job.h
// writes them) as a workload of the multi-tenant simulation (sim/cluster_simulation.h), for
// `tidepool plan capacity --from-server`. Nothing here does I/O: the caller fetches the jobs and
// gives the time.
//
// read_server_history() reads the reply's "jobs":
//   - each job needs id, spec (a job spec, api/job_spec.h), state, submitted_ms and
//     transitions (objects with state and at_ms); ended_ms is read when present. A missing or
//     mistyped field is an error naming the job and the field ("job 12 submitted_ms: missing";
//     "jobs[3] id" before the id is known);
//   - the window: jobs submitted at or after `window.from_ms` are kept, older ones only counted
//     (and not read further);
//   - run time: the time the job actually ran, the sum of its runs. A run starts at a transition
//     to running and ends at the next transition (preempted, pending, succeeded, failed or
//     cancelled); a run still open ends at `window.now_ms` for a running job, else at ended_ms
//     (or now when there is none). Runs are summed in milliseconds, a negative run (clocks that
//     went back) counting 0, and the sum is rounded up to whole seconds: a job that ran held its
//     GPUs for at least a second;
//   - a job that never ran (still pending, or cancelled before it started) is kept with the
//     runtime_estimate of its spec, else its max_runtime; with neither it is left out and its id
//     listed in `unknown_runtime`.
//
// history_workload() makes one SimJob per kept job, as the server makes its core Job
// (tenant and queue by name in the book, class, priority, preemptible, checkpoint interval,
// runtime estimate, max runtime, tasks x gpus_per_task at gpu_milli with the spec's CPU, memory,
// GPU models and topology), ordered by (submit time, server id), Job::id = index in the result
// (as sim/philly_workload.h), SimJob::name = "job-<server id>", submit time = seconds since the
// earliest submission kept (rounded down), duration = the run time above. Errors name the job
// ("job 12 tenant: 'vision' is not a tenant of the tenants file").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/job_spec.h"
#include "core/error.h"
#include "core/gpu_model.h"
#include "core/resources.h"
#include "core/tenants.h"
#include "sim/cluster_simulation.h"

namespace tidepool {

// Which jobs count, and the time of the question; both in milliseconds since the epoch.
struct HistoryWindow {
  std::int64_t now_ms = 0;
  std::int64_t from_ms = 0;  // jobs submitted before are left out; 0: the whole history
};

// One job of the window, as it will be simulated.
struct HistoryJob {
  std::int64_t id = 0;  // the server's job id
  JobSpec spec;
  std::int64_t submitted_ms = 0;
  Seconds runtime = 0;
  bool ran = false;      // runtime measured from its runs (else taken from its spec)
  bool running = false;  // still running: its last run counted up to now
};

struct ServerHistory {
  std::vector<HistoryJob> jobs;  // in the order of the reply
  // The earliest submission among `jobs`, in milliseconds since the epoch (0 when none).
  std::int64_t start_ms = 0;
  int before_window = 0;                      // submitted before window.from_ms: left out
  std::vector<std::int64_t> unknown_runtime;  // never ran, no estimate or max runtime: left out
};

// Reads the reply of GET /v1/jobs (an object with "jobs") as the file comment says.
Result<ServerHistory> read_server_history(const nlohmann::json& reply, const HistoryWindow& window);

// The kept jobs as a simulation workload (see the file comment); `models` are the simulated
// pool's GPU models, which every model a job accepts must be one of.
Result<std::vector<SimJob>> history_workload(const ServerHistory& history, const TenantBook& book,
                                             const GpuModelCatalog& models);

}  // namespace tidepool
