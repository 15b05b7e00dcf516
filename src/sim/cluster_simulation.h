// The multi-tenant experiment behind `tidepool sim run`: jobs of a trace arrive at their submit
// times and are scheduled by the core Scheduler (core/scheduler.h) with one policy; they run for
// their trace duration stretched by the slowdown of where they were placed
// (core/efficiency_model.h), may be preempted and resumed, and leave. A discrete-event driver on a
// virtual clock (integer seconds since the first submit); no wall clock, no I/O, no threads.
//
// Rules:
//   - Events at one time are taken finishes first, then loan starts, then arrivals (by job id);
//     then one scheduling pass runs. A pass also runs when the scheduler asks for one
//     (Scheduler::next_wakeup: windows, loans). Everything is ordered, so a run is reproducible.
//   - A job's trace duration is its runtime under the ideal (compact) placement. Placed with a
//     slowdown s (>= 1), it needs s x the remaining work in wall time. Preempted, it keeps the work
//     up to its last checkpoint (PreemptedJob::kept_seconds, converted back by the same s) and
//     loses the rest; it resumes from there when started again. A job with max_runtime stops when
//     it has run that long (loan jobs).
//   - Per-job communication figures come from draw_comm_profile(seed, job id), so every policy
//     sees the same jobs.
//   - Samples every `sample_interval` seconds show the state after every event before that time.
//   - The run ends when no event is left. Jobs still pending then never fit (counted apart).
//   - Services (sim/service_model.h) tick every `tick` seconds over their [start, end): their
//     replicas report, the core autoscaler decides, and replicas are submitted (one task, placed
//     with the service's spread), withdrawn, stopped or drained as core/service_replicas.h plans.
//     Replicas run until stopped; at a service's end all its replicas stop.
//   - With a market, the meter is advanced to each event's time before anything changes; useful
//     work is what a job keeps (its trace duration when it finishes, work up to its stop when a
//     cap stops it), in GPU-seconds at ideal placement: time lost to preemption and slow
//     placement is paid for but not useful.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/job.h"
#include "core/job_advice.h"
#include "core/pending_reason.h"
#include "core/pool.h"
#include "core/prewarm.h"
#include "core/scheduler.h"
#include "core/tenants.h"
#include "sim/service_model.h"
#include "sim/sim_market.h"

namespace tidepool {

// One job of the workload; its Job::id must be its index in the workload.
struct SimJob {
  Job job;
  Seconds duration = 0;  // runtime under ideal placement (>= 0)
  std::string name;      // as the trace names it ("philly-12", "inference-3", "loan-1")
};

// An emergency loan in the experiment: at `start` the tenant's guarantee of `model` grows by
// `gpus` GPUs until `start + duration`, and a milestone job of `gpus` GPUs (gangs of whole nodes'
// worth of GPUs) is submitted for it, with priority class `priority` and max runtime `duration`.
struct SimLoan {
  TenantId tenant;
  GpuModelId model;
  int gpus = 64;
  Seconds start = 0;
  Seconds duration = 0;
  int priority = 100;
};

// Pre-warming as the simulator measures it (core/prewarm.h). The staging model: a job's data must
// be on a node before it computes there; staging takes stage_seconds per start (a dataset read at
// the storage's rate: e.g. 300 GB at 1 GB/s is 5 minutes), on all its nodes at once. A start whose
// nodes were all called for it `lead` seconds before computes min(lead, stage_seconds) sooner
// than one that stages after it starts. The schedule is not changed: the figures say what the
// calls would save.
struct SimPrewarmSettings {
  PrewarmConfig planner;
  Seconds stage_seconds = 300;
};

struct ClusterSimSettings {
  std::uint64_t seed = 42;        // per-job communication profiles
  Seconds sample_interval = 600;  // timeline rows
  // Training GPU-hours are also totalled over [0, horizon) (0: up to the last submit time), to
  // compare runs with and without other work in the pool.
  Seconds horizon = 0;
  // Training GPU-hours outside windows are totalled over [measure_from, horizon).
  Seconds measure_from = 0;
  // The internal market (sim/sim_market.h): when set, every job is charged at the price in force
  // (loan jobs at the emergency class), lenders are credited, budgets hold tenants back, and the
  // run's cost figures are reported.
  std::optional<SimMarketSettings> market;
  // Inference services beside the workload; their replicas get job ids after it (and the loans).
  std::vector<SimServiceSpec> services;
  // The advice rule whose MFU gain the summary reports (est_mfu_advised_*).
  AdviceConfig advice;
  SimPrewarmSettings prewarm;
};

// What happened to one job.
struct SimJobResult {
  JobId id;
  std::optional<Seconds> first_start;
  std::optional<Seconds> end;  // when it finished (or was stopped at its max runtime)
  Seconds queue_seconds = 0;   // all its time pending, up to its end (or the end of the run)
  int preemptions = 0;
  std::int64_t lost_gpu_seconds = 0;
  std::int64_t gpu_seconds = 0;  // allocated GPU-seconds, all segments
  int nodes = 0;                 // spanned by its last placement
  int leaves = 0;
  double slowdown = 1.0;                                  // of its last placement
  double comm_share = 0.0;                                // GPU-seconds-weighted over its segments
  double est_mfu = 0.0;                                   // GPU-seconds-weighted over its segments
  Seconds predicted_runtime = 0;                          // at submission
  PendingKind main_reason = PendingKind::kNotConsidered;  // the reason it waited longest for
  bool backfilled = false;                                // its first start was a backfill
};

// The pool at one instant.
struct SimSample {
  Seconds time = 0;
  std::vector<std::int64_t> tenant_milli;  // allocated per tenant (book order)
  std::int64_t allocated_milli = 0;
  int queued = 0;
  int running = 0;
  std::int64_t free_gpus = 0;
  std::int64_t fragmented_gpus = 0;  // free GPUs on nodes that are partly used
};

struct SimLoanResult {
  SimLoan loan;
  JobId job;
  std::optional<Seconds> served_after;  // from the loan's start until its job started
  Seconds end = 0;
  std::int64_t held_after_end_milli = 0;  // the loan job's GPUs still held after the end (0)
};

// Queueing of one tenant's finished trace jobs (seconds).
struct TenantQueueing {
  int jobs = 0;
  double avg_s = 0;
  Seconds p95_s = 0;
  Seconds p99_s = 0;
  Seconds max_s = 0;
};

// The figures of summary.json.
struct SimSummary {
  int jobs = 0;  // jobs of the trace (not inference replicas or loan jobs)
  int finished = 0;
  int never_started = 0;
  double avg_queue_s = 0;  // over finished jobs of the trace (not generated ones)
  Seconds p50_queue_s = 0;
  Seconds p95_queue_s = 0;
  Seconds p99_queue_s = 0;
  Seconds max_queue_s = 0;  // the longest wait of a finished trace job
  double avg_jct_s = 0;
  std::vector<TenantQueueing> tenant_queueing;  // per tenant (book order)
  Seconds makespan_s = 0;
  double gpu_allocation_avg = 0;   // time-average allocated / capacity over [0, makespan]
  double comm_overhead_share = 0;  // multi-GPU jobs: communication share of their GPU-seconds
  double est_mfu = 0;              // GPU-seconds-weighted over all jobs
  // est_mfu had every job followed the advice of core/job_advice.h on its steps (the model's):
  // gradient accumulation, the compact placement, and both.
  double est_mfu_advised_accumulate = 0;
  double est_mfu_advised_compact = 0;
  double est_mfu_advised_both = 0;
  int jobs_advised_accumulate = 0;  // trace jobs given that advice on some run (segment)
  int jobs_advised_compact = 0;
  // Pre-warming (SimPrewarmSettings): calls made, starts (first and after a preemption), starts
  // pre-warmed (every node called for the job), those called at least stage_seconds before, and
  // the start delay the calls saved: per start on average, and in GPU-hours (GPUs x delay).
  int prewarm_calls = 0;
  int starts = 0;
  int prewarmed_starts = 0;
  // Starts after waiting at least the lead (those a call could have reached in time), and of them
  // those pre-warmed.
  int starts_after_lead = 0;
  int prewarmed_starts_after_lead = 0;
  int fully_staged_starts = 0;
  double start_delay_saved_avg_s = 0;
  double start_delay_saved_gpu_hours = 0;
  int preemptions = 0;
  double lost_gpu_hours_share = 0;  // lost / allocated GPU-seconds
  // min over tenants of received / min(demand, guarantee), the guarantee less its share of what
  // open windows protect (TenantBook::hold_outside_quotas)
  double min_tenant_guarantee_ratio = 0;
  std::string min_guarantee_tenant;
  std::vector<double> tenant_guarantee_ratio;  // per tenant (book order); 1 when it wanted none
  double wall_seconds = 0;                     // set by the caller
  // Predictor against the tenant-mean baseline, over finished trace jobs (seconds).
  Seconds predictor_median_abs_error_s = 0;
  Seconds baseline_median_abs_error_s = 0;
  int backfilled = 0;
  PendingSeconds pending_seconds{};  // all jobs' pending time per reason
  // Per job class: GPU-hours allocated in [0, horizon), and the most a job of the class waited
  // while a tidal window for it was open (seconds; -1 when no such job).
  std::vector<double> class_gpu_hours_in_horizon;  // indexed by JobClass
  // Per tenant (book order): training GPU-hours in [0, horizon) while no tidal window was open.
  std::vector<double> tenant_training_gpu_hours_outside_windows;
  Seconds inference_max_wait_in_window_s = -1;
  std::vector<SimLoanResult> loans;
};

struct ClusterSimRun {
  SimSummary summary;
  std::optional<SimCost> cost;     // with a market
  std::vector<SimJobResult> jobs;  // by job id
  std::vector<SimSample> samples;
  std::vector<std::string> tenant_names;
  std::vector<SimServiceResult> services;  // in the order of the settings' services
  std::vector<SimJob> replica_jobs;        // the services' replicas, by id after the loans' jobs
};

// Runs `workload` (plus `loans`) on `pool` under `config`. Fails on a workload that is not
// indexed by id or that the scheduler refuses (the error names the job).
Result<ClusterSimRun> run_cluster_simulation(Pool pool, TenantBook book,
                                             const SchedulerConfig& config,
                                             std::span<const SimJob> workload,
                                             std::span<const SimLoan> loans,
                                             const ClusterSimSettings& settings);

}  // namespace tidepool
