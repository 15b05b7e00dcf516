// The files `tidepool sim run` writes for one policy's run (sim/cluster_simulation.h), in
// <dir>/<policy>/:
//
//   jobs.csv       one row per job of the run, by id (the workload's jobs, then the loans' jobs):
//                  job,name,tenant,class,gpus,submit_s,start_s,end_s,queue_s,preemptions,
//                  lost_gpu_seconds,nodes,leaves,slowdown,comm_overhead,est_mfu,
//                  predicted_runtime_s,main_pending_reason
//                  start_s / end_s are empty for a job that never started / ended; tenant by name;
//                  class by job_class_name; reason by pending_kind_name; comm_overhead is
//                  SimJobResult::comm_share. The job of loan k (0-based; its id is
//                  workload size + k, as the simulator numbers them) is named "loan-<k+1>", as the
//                  simulator names it, of class training, submitted at the loan's start.
//                  The services' replicas follow, named "<service>-<n>".
//   timeline.csv   one row per sample: time_s, gpus_<tenant> (allocated GPUs, one column per
//                  tenant in book order), allocated_gpus, queued, running, free_gpus,
//                  fragmented_gpus, fragmentation (= fragmented_gpus / free_gpus, 0 when none
//                  free).
//   costs.csv      with a market only: one row per tenant (book order): tenant, charges,
//                  lending_credits, net (credits - charges), budget_alerts, budget_exhaustions,
//                  budget_held_h, spend_anomalies; money with 2 decimals.
//   services.csv   with services only: one row per service tick: service, time_s, rate_rps (the
//                  true rate, 3 decimals), ready, live (not draining), wanted (the autoscaler's),
//                  oracle (the fewest replicas meeting the target at that rate), p95_ms (empty:
//                  overloaded or none ready).
//   summary.json   the SimSummary figures under their own names, pending_seconds keyed by
//                  pending_kind_name, tenant_guarantee_ratio keyed by tenant name,
//                  class_gpu_hours_in_horizon keyed by job_class_name,
//                  inference_max_wait_in_window_s null when no such job (-1), the loans with
//                  served_after_s null when never served, training GPU-hours outside windows
//                  keyed by tenant, the services' figures (share of the time above the p95
//                  target, replica-hours against the oracle's), the policy's name, and "cost": null
//                  without a market, else the SimCost figures (money as text with 2 decimals,
//                  GPU-hours as numbers) with per-tenant charges and credits.
//
// GPUs are printed with up to 3 decimals ("12", "0.5"); ratios in the CSV files with 4 decimals.
// CSV fields holding a comma, quote or line break are quoted (RFC 4180). The output depends only on
// the run (wall_seconds is the one figure that differs between identical runs).
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "sim/cluster_simulation.h"

namespace tidepool {

void write_jobs_csv(std::ostream& out, const ClusterSimRun& run, std::span<const SimJob> workload,
                    std::span<const SimLoan> loans);
void write_timeline_csv(std::ostream& out, const ClusterSimRun& run);
void write_costs_csv(std::ostream& out, const ClusterSimRun& run);
void write_services_csv(std::ostream& out, const ClusterSimRun& run);
// summary.json's text (indented, ending with a newline).
std::string summary_json_text(const ClusterSimRun& run, std::string_view policy);

// Creates <dir>/<policy>/ and writes the three files there; returns that folder. Errors name
// "--out" and the path that could not be created or written.
Result<std::string> write_sim_run_report(const std::string& dir, std::string_view policy,
                                         const ClusterSimRun& run, std::span<const SimJob> workload,
                                         std::span<const SimLoan> loans);

}  // namespace tidepool
