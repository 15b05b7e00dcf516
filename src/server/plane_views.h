// What the API shows of the control plane, as JSON: jobs and why they wait, the listings'
// snapshots, nodes, tenants, queues, tokens, prices and bills, and the figures for metrics. Built
// here, from the parts that keep the state and its rules (plane_state.h, job_desk.h, node_table.h,
// burst_desk.h, market_clerk.h), which the views only read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "server/burst_desk.h"
#include "server/history.h"
#include "server/job_desk.h"
#include "server/job_listing.h"
#include "server/market_clerk.h"
#include "server/node_table.h"
#include "server/plane_state.h"

namespace tidepool {

// The control plane's figures for metrics (server_metrics.h).
struct PlaneFigures {
  std::map<std::string, std::int64_t> jobs_by_state;
  std::int64_t gpus_total = 0;
  std::int64_t gpu_milli_allocated = 0;
  std::int64_t nodes_total = 0;
  std::int64_t nodes_drained = 0;
  std::int64_t nodes_not_ready = 0;                           // and not drained
  std::int64_t node_failures = 0;                             // since the server started
  std::map<std::string, std::int64_t> requeued_by_cause;      // "preemption", "node_failure"
  std::map<std::string, std::int64_t> lost_work_ms_by_cause;  // run time not checkpointed
  std::map<std::string, std::int64_t> tenant_gpu_milli;       // in use, by tenant
  std::int64_t last_event_seq = 0;
  std::string gpu_metrics;  // Prometheus text of the GPUs' figures (gpu_telemetry.h)
  // The market's figures (empty without one), money in micro-credits.
  std::map<std::pair<std::string, std::string>, Micros> price_per_gpu_hour;  // (model, class)
  std::map<std::string, Micros> tenant_charges;                              // all time
  std::map<std::string, Micros> tenant_credits;
  std::map<std::string, Ppm> tenant_budget_spend;  // this quarter's spend / budget
  std::map<std::string, std::int64_t> burst_gpus;  // rented now (coming up or in use), by offer
  std::int64_t burst_rentals = 0;                  // since the server started
  std::map<std::string, QueueWaits> tenant_queue_waits;  // starts since the server started
  std::int64_t internal_errors = 0;  // internal.error events since the server started
  // Job runs started on the pool's nodes since the server started, by whether each was
  // pre-warmed (every node it started on called for it; server configuration `prewarm:`).
  std::int64_t starts_prewarmed = 0;
  std::int64_t starts_not_prewarmed = 0;
  // Pending jobs that may start (not held, their dependencies met): for each tenant with one, the
  // Unix ms its longest-waiting one began to wait (submitted, or last requeued).
  std::map<std::string, std::int64_t> tenant_oldest_pending_ms;
  // Guarantees not honoured, by (tenant, model), in thousandths of a GPU: the part of the
  // tenant's unused guarantee of the model that its pending jobs (those that may start, and not
  // held back by its borrowing limit, its budget or a tidal window) ask for, counting only jobs
  // the unused guarantee covers whole. Every tenant and model of the book is listed, 0 when
  // none; a job that accepts several models counts under each.
  std::map<std::pair<std::string, std::string>, std::int64_t> guarantee_shortfall_milli;
  // Spend anomalies raised since the server started; with a market, every tenant (0: none).
  std::map<std::string, std::int64_t> tenant_spend_anomalies;
  // Step telemetry (core/step_stats.h) of the running jobs that reported steps, by job id: their
  // step-time quantiles, communication share and MFU, each when known.
  struct JobSteps {
    std::string tenant;
    std::int64_t p50_us = 0;
    std::int64_t p90_us = 0;
    std::int64_t p99_us = 0;
    std::optional<double> comm_share;
    std::optional<double> mfu;
  };
  std::map<std::int64_t, JobSteps> running_job_steps;
  // Per tenant, over the same jobs: the step time of those with a communication share and the part
  // of it spent communicating, and the model FLOPs done by those with a known MFU and what their
  // GPUs could have done in that time (their step time x peak).
  struct TenantSteps {
    double step_seconds = 0;
    double comm_seconds = 0;
    double model_flops = 0;
    double peak_flops = 0;
  };
  std::map<std::string, TenantSteps> tenant_steps;
};

// Thousandths of a GPU as a JSON number of GPUs: whole when they are (8000: 8), else 0.5.
[[nodiscard]] nlohmann::json milli_as_gpus(std::int64_t milli);

class PlaneViews {
 public:
  PlaneViews(const PlaneState& state, const JobDesk& jobs, const NodeTable& nodes,
             const BurstDesk& bursts, const MarketClerk& clerk)
      : state_(state), jobs_(jobs), nodes_(nodes), bursts_(bursts), clerk_(clerk) {}

  // --- jobs (job_views.cc) ---
  // The job as the API shows it: server_job_to_json, and for a pending job "pending" (its
  // reason's kind and text) and for a live one the GPU-seconds of service it received.
  [[nodiscard]] nlohmann::json job(const ServerJob& job) const;
  // What the job's step figures say (api/step_report.h: step_summary_json), its all-reduce ring
  // taken as its GPUs (tasks x gpus_per_task) and its peak as peak_flops_per_s: shown as the
  // job's "step_summary" when it reported steps.
  [[nodiscard]] nlohmann::json step_summary(const ServerJob& job) const;
  // The advice for the job (advice_views.cc, core/job_advice.h) from its reported steps, its
  // placement while it runs, and its GPUs' latest utilisation: one line per advice with its
  // numbers, the figures behind each, and the MFU it would reach where the job declared its FLOPs.
  [[nodiscard]] nlohmann::json advice(const ServerJob& job) const;
  // The peak dense FLOP/s of the GPUs the job holds (its last run's when it no longer runs), by
  // its nodes' GPU models (core/gpu_peak_flops.h) and its share of each GPU; 0 when a model has no
  // known peak or the job holds no GPU.
  [[nodiscard]] double peak_flops_per_s(const ServerJob& job) const;
  // A pending job's reason: {"kind", "reason"}.
  [[nodiscard]] nlohmann::json pending(const ServerJob& job) const;
  // What a submission answers: the job, and for an array's first job "array": its jobs.
  [[nodiscard]] nlohmann::json submitted(const ServerJob& job) const;
  // Why the job waits (its reason, the time it waited for each, its place in its lane, the jobs
  // ahead `who` may see), or where it runs, or why it ended.
  [[nodiscard]] nlohmann::json why(const Principal& who, const ServerJob& job, Instant now) const;
  // Brings `cache` (each job's listed entry, by id) up to date for the jobs in `changed` (those a
  // committed batch wrote or removed; all of them when `cache` is empty) and returns a snapshot of
  // it with the pending jobs' reasons as of now, as version `version`.
  [[nodiscard]] std::shared_ptr<const JobListing> listing(
      std::map<JobId, std::shared_ptr<const ListedJob>>& cache, const std::set<JobId>& changed,
      std::int64_t version) const;

  // --- the pool (pool_views.cc) ---
  // The nodes `who` may see (an agent: its own), the cluster file's then the rented ones.
  [[nodiscard]] nlohmann::json nodes(const Principal& who) const;
  // A node of the table, with `jobs`: the running jobs with a task on it.
  [[nodiscard]] nlohmann::json node(const std::string& name) const;
  [[nodiscard]] nlohmann::json tenant(TenantId tenant) const;
  [[nodiscard]] nlohmann::json tenants(const Principal& who) const;
  [[nodiscard]] nlohmann::json queues(const Principal& who) const;
  [[nodiscard]] static nlohmann::json token(const TokenRecord& token);
  [[nodiscard]] nlohmann::json tokens() const;
  [[nodiscard]] PlaneFigures figures() const;
  // One sample of the series of the figures' history (history.h): the pool's GPUs and those
  // allocated, each tenant's guaranteed, used, borrowed and lent GPUs per model (thousandths),
  // its pending and running jobs, and with a market the prices (micro-credits per GPU-hour).
  [[nodiscard]] HistoryValues history_values() const;

  // --- the web dashboard (dashboard_views.cc) ---
  // GET /v1/pool: every node as GPU cells (per GPU index, the shares of the jobs holding it),
  // grouped by spine and leaf, with the pool's figures; a user sees other tenants' shares
  // without their jobs.
  [[nodiscard]] nlohmann::json pool_map(const Principal& who) const;

  // --- the market (market_views.cc; a market there must be) ---
  // The price in force of each GPU model, per class, with its parts.
  [[nodiscard]] nlohmann::json prices() const;
  // `tenant`'s charges and lending credits per group over the query's days.
  [[nodiscard]] nlohmann::json bill(const BillQuery& query, TenantId tenant) const;

 private:
  // A cluster node, with the running jobs with a task on it.
  [[nodiscard]] nlohmann::json cluster_node(const PlaneNode& node,
                                            const std::vector<const ServerJob*>& running) const;
  // The live jobs of a tenant's queue: waiting and running.
  struct LiveJobs {
    int pending = 0;
    int running = 0;
  };
  // The live jobs per (tenant, queue), as GET /v1/queues, /v1/tenants, /v1/pool and the history
  // count them.
  [[nodiscard]] std::map<std::pair<std::string, std::string>, LiveJobs> live_jobs() const;
  // A cluster node's state as the views name it: "ready", "not_ready" or "drained".
  [[nodiscard]] std::string_view node_state(const PlaneNode& node) const;
  // A rented node, in the shape of a cluster node's, with the rental in "rental".
  [[nodiscard]] nlohmann::json rented_node(const PlaneNode& node) const;
  // {"kind": "dependency", "reason", "after": the unmet ids}.
  [[nodiscard]] nlohmann::json dependency_pending(const std::vector<std::int64_t>& unmet) const;
  // A pending job's reason while its rented nodes come up.
  [[nodiscard]] nlohmann::json burst_pending(const ServerJob& job) const;
  void market_figures(PlaneFigures& figures) const;
  // The figures of pending jobs: the oldest wait and the guarantees not honoured, per tenant.
  void waiting_figures(PlaneFigures& figures) const;

  const PlaneState& state_;
  const JobDesk& jobs_;
  const NodeTable& nodes_;
  const BurstDesk& bursts_;
  const MarketClerk& clerk_;
};

}  // namespace tidepool
