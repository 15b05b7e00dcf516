// Shadow mode (`tidepool shadow`): the jobs another scheduler (Slurm) ran, as it ran them, beside
// the schedule the core Scheduler (core/scheduler.h) makes of the same jobs on the same nodes. A
// discrete-event driver on a virtual clock, as the simulator's (sim/cluster_simulation.h); no
// wall clock, no I/O, no threads. Observed input comes from sim_cli (Slurm's JSON, trace files).
//
// Rules:
//   - Times are integer seconds since the epoch in ObservedJob and in the results; the run itself
//     counts from the earliest submit. `now` is the time of the observation: nothing after it was
//     seen. Every job must keep the bounds of sim/observed_job.h (check_observed), and `now` be
//     a time there: the run refuses the stream otherwise, naming the job and the field.
//   - A job's run time is the one the observed scheduler's run showed (end - start). A job still
//     running at `now`, or never started (still pending, or cancelled before it started), has no
//     known run time: it is censored. Placed by Tidepool, a censored job holds its GPUs to the end
//     of the run. A job cancelled before it started is listed, but neither schedule places it.
//   - Each job chosen for Tidepool (the share, ShadowShare) is submitted at its submit time as a
//     gang: one task per node it ran on (as asked, for a job not started), its GPUs split evenly
//     over them (the remainder to the first tasks), each task with its share of the job's CPU and
//     memory; any GPU model; topology preferred node for one task, leaf for more; not preemptible
//     (the observed scheduler preempted nothing), with the job's time limit, when known, as its
//     runtime estimate. Tidepool's pass starts it where and when the policy says; it ends after
//     its observed run time.
//   - A job not chosen keeps the observed scheduler's start and nodes in Tidepool's schedule too
//     (Scheduler::adopt, on the lowest-numbered free GPUs of each of its nodes), for its observed
//     run time, so that the chosen jobs share the pool with it as they would in a partial
//     rollout. When Tidepool's jobs hold what it needs at that time, it waits until its nodes have
//     room and is counted as displaced (ShadowRun::displaced), with the seconds it waited.
//   - Events at one time are taken finishes first, then starts of jobs not chosen, then arrivals
//     (each by job index); then one pass. The run goes on after `now` until no event is left, so
//     that every job with a known run time gets Tidepool's start even when Tidepool starts it
//     later than the observed scheduler did.
//   - Both schedules are measured by one function on a copy of the pool (the observed one's GPUs
//     on a node taken lowest-numbered first), over the jobs compared (the chosen ones): waits
//     (start - submit) of the jobs started, the makespan (last end - first submit, over jobs
//     whose end is known), the GPU allocation (all jobs) averaged over [first submit, makespan],
//     FGD's fragmentation (core/fragmentation.h, against the task shapes of all jobs) averaged
//     likewise, and communication of the multi-GPU jobs: nodes spanned and the efficiency model's
//     slowdown and communication share (core/efficiency_model.h; profiles drawn from the seed and
//     the job's index, the same for both schedules).
//   - Everything is ordered (by time, then job index): the same input gives the same report.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/cluster_file.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/scheduler.h"
#include "core/tenants.h"
#include "sim/observed_job.h"

namespace tidepool {

enum class ShareRule : std::uint8_t { kHash, kTenant };

// Which jobs go to Tidepool: `percent` of them (0..100), chosen by the hash of each job's id
// (kHash), or of its tenant's name (kTenant: whole tenants, each in with probability percent).
struct ShadowShare {
  int percent = 100;
  ShareRule rule = ShareRule::kHash;
  std::uint64_t seed = 0;
};

// Whether `job` is in the share (deterministic: FNV-1a of the seed and the id or tenant).
bool in_share(const ShadowShare& share, const ObservedJob& job);

struct ShadowSettings {
  std::string policy = "tidepool";  // scheduler_policy's names
  ShadowShare share;
  std::uint64_t seed = 42;  // communication profiles of the efficiency model
  // The tenants, their guarantees and borrowing limits, as a tenants file gives them (its models
  // interned in the cluster's catalog); every job's tenant must be one of them. None: derived
  // from the stream (see tenants_of in shadow_schedule.cc: each tenant guaranteed a part of each
  // model in proportion to its GPU time so far).
  std::optional<TenantsSpec> tenants;
};

// One task's place: a node and its GPUs.
struct ShadowPlace {
  std::string node;
  GpuSet gpus = 0;
};

// One job as each schedule has it.
struct ShadowJobResult {
  bool chosen = false;  // in the share: placed by Tidepool
  std::optional<std::int64_t> observed_start;
  std::optional<std::int64_t> observed_end;
  std::vector<ShadowPlace> observed_places;  // as measured (GPUs numbered lowest free first)
  std::optional<std::int64_t> tidepool_start;
  std::optional<std::int64_t> tidepool_end;
  std::vector<ShadowPlace> tidepool_places;
  Seconds displaced_seconds = 0;  // a job not chosen that waited for room Tidepool's jobs held
};

// The figures of one schedule over the jobs compared.
struct ShadowSummary {
  int jobs = 0;     // compared (chosen, not cancelled before starting)
  int started = 0;  // of those, started in this schedule
  double wait_mean_s = 0;
  Seconds wait_p50_s = 0;
  Seconds wait_p95_s = 0;
  Seconds wait_max_s = 0;
  Seconds makespan_s = 0;             // first submit to last known end of the compared jobs
  double gpu_allocation_percent = 0;  // all jobs' GPUs, time average over the makespan
  double fragmentation_percent = 0;   // FGD fragmented GPU capacity, time average likewise
  int multi_gpu_jobs = 0;             // compared jobs of 2 GPUs or more that started
  double nodes_per_multi_gpu_job = 0;
  int multi_node_jobs = 0;     // of those, spread over more than one node
  double slowdown_mean = 1.0;  // efficiency model, over multi-GPU jobs
  double comm_share_mean = 0;  // communication share of the step, likewise
  int conflicts = 0;  // jobs the pool could not hold where the schedule put them (left out)
};

struct ShadowRun {
  std::int64_t first_submit = 0;
  std::int64_t now = 0;
  std::vector<ShadowJobResult> jobs;  // in the order of the input
  ShadowSummary observed;
  ShadowSummary tidepool;
  int chosen = 0;                           // jobs in the share
  int displaced = 0;                        // jobs not chosen that Tidepool's jobs held up
  std::vector<std::string> chosen_tenants;  // tenants with a job in the share, sorted
};

// The run described in the file comment, of `jobs` on the pool of `cluster` (every node a job ran
// on must be one of its nodes), observed at `now`. Fails naming the job for one that cannot be
// read as a Tidepool job, or the policy for an unknown one.
Result<ShadowRun> run_shadow(const ClusterSpec& cluster, std::span<const ObservedJob> jobs,
                             std::int64_t now, const ShadowSettings& settings);

}  // namespace tidepool
