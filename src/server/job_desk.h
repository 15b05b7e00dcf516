// The rules of the jobs' lives in the control plane: submission (checked, admitted, idempotent,
// arrays of jobs), cancellation, what agents report (status, checkpoints) and who may write task
// logs; Slurm's scontrol hold, release, requeue and update; dependencies (after_ok); and the
// moves every part of the plane makes a job go through: a run starts or stops, a job is queued
// again, or ends.
//
// Access: an admin may do everything; a user acts on its own tenant's jobs only (the jobs of
// other tenants are "not found", so that their existence is not revealed); an agent reports for
// the jobs its node runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/api_bodies.h"
#include "api/job_spec.h"
#include "server/burst_desk.h"
#include "server/market_clerk.h"
#include "server/plane_state.h"
#include "server/submission_gate.h"

namespace tidepool {

// The refusal of a task number past a job's `tasks` ("job 4 has 2 tasks, 0..1").
Error no_such_task(JobId job, std::int64_t tasks);

class JobDesk {
 public:
  JobDesk(PlaneState& state, MarketClerk& clerk, BurstDesk& bursts)
      : state_(state), clerk_(clerk), bursts_(bursts), gate_(state.setup()) {}

  // --- loading (job_desk_runs.cc) ---
  // A job read from the store. A live one goes back into the scheduler (running where it runs,
  // pending in the queue); one that can no longer (its node left the cluster file, its tenant the
  // tenants file) is failed with the reason, the change going to `repairs`.
  void load(ServerJob job, Instant now, Batch& repairs);
  // After loading: cancels the pending jobs after a job that ended without success (a server
  // stopped between the two).
  void settle_loaded_dependents(Instant now, Batch& repairs);
  // Puts a live job into `scheduler` (the plane's, or one rebuilt): running ones where they run,
  // pending ones in the queue; on failure `scheduler` is left without it.
  Result<void> restore(Scheduler& scheduler, const ServerJob& job, Instant now) const;

  // --- commands ---
  struct Submitted {
    const ServerJob* job = nullptr;
    bool created = false;  // false: the job first created with the same idempotency key
  };
  // A new job (or, with spec.array, one per index), or the one created before with the same
  // idempotency key and spec; kConflict for the same key with another spec.
  Outcome<Submitted> submit(const Principal& who, JobSpec spec, const std::string& idempotency_key,
                            Instant now, Batch& batch);
  // A new replica of `service` (a running service job; service_desk.h): a job of one task with
  // the service's template, class inference, submitted for the service's submitter and outside
  // the admission limits (the service was admitted). Its env gains TIDEPOOL_SERVICE (the
  // service's id); its port (TIDEPOOL_PORT) comes when it starts (ServiceDesk::ensure_port).
  // A `model` (not empty) is the one GPU model it may take (the service's cost-first choice).
  Outcome<const ServerJob*> submit_replica(const ServerJob& service, const std::string& model,
                                           Instant now, Batch& batch);
  Outcome<const ServerJob*> cancel(const Principal& who, JobId id, Instant now, Batch& batch);
  Outcome<const ServerJob*> report_status(const Principal& who, JobId id,
                                          const JobStatusReport& report, Instant now, Batch& batch);
  Outcome<const ServerJob*> report_checkpoint(const Principal& who, JobId id,
                                              const CheckpointReport& report, Instant now,
                                              Batch& batch);
  // Slurm's scontrol (job_desk_holds.cc), each for a job `who` may see (a user: its tenant's;
  // agents may not): hold keeps a pending job out of scheduling (pending, kind "held") until
  // release; requeue stops a running job's run and queues it again (it resumes from its last
  // checkpoint), as a preemption would; update changes a pending job's priority and limits,
  // checked as a submission is. kConflict for a job in another state. A release that cannot queue
  // the job again fails it (its state says so).
  Outcome<const ServerJob*> hold(const Principal& who, JobId id, Instant now, Batch& batch);
  Outcome<const ServerJob*> release(const Principal& who, JobId id, Instant now, Batch& batch);
  Outcome<const ServerJob*> requeue(const Principal& who, JobId id, Instant now, Batch& batch);
  Outcome<const ServerJob*> update(const Principal& who, JobId id, const JobUpdate& update,
                                   Instant now, Batch& batch);
  // Whether `who` may read (write false) or append to (write true) job `id`'s task logs: the job,
  // or the refusal. Reading: whoever sees the job; writing: an admin, the agent of the node that
  // runs (or, stopping, ran) `task` in the job's latest run, which must be `run`
  // (check_agent_report), or for an earlier run (its late output) the agent of a node that a run
  // of the job used.
  [[nodiscard]] Outcome<const ServerJob*> log_access(const Principal& who, JobId id, bool write,
                                                     std::optional<int> task,
                                                     std::optional<std::int64_t> run) const;

  // --- a job's moves (job_desk_runs.cc) ---
  // Ends a running job (its resources return) or takes back a pending one, in the final state.
  void end_job(ServerJob& job, JobState state, std::string reason, Instant now, Batch& batch);
  // Takes a running job off its nodes and queues it again: its node failed (`node_failure`, a
  // fault), or a user asked (`tidepool requeue`). `reason` is the stop's; the job then waits
  // "requeued after a node failure" or with `reason`, saying where it resumes from.
  void requeue_run(ServerJob& job, bool node_failure, const std::string& reason, Instant now,
                   Batch& batch);
  // A rental given up (burst_desk.h): released, and the job queued in the pool.
  void requeue_from_burst(const LostRental& lost, Instant now, Batch& batch);
  // Stops the running jobs past their max_runtime.
  void stop_overdue(Instant now, Batch& batch);
  // Applies a scheduler pass: its preemptions and starts; `prewarmed` says how each start stood
  // with its pre-warm (prewarm_after_pass; empty without pre-warming).
  void apply_pass(const PassResult& pass, const std::vector<PrewarmedStart>& prewarmed, Instant now,
                  Batch& batch);
  // The soonest deadline of a live job after `now`: a running job's max_runtime, a waiting
  // job's burst threshold (one walk over the live jobs, once per pass).
  [[nodiscard]] std::optional<Instant> next_deadline(Instant now) const;

  // --- retention (job_desk_retention.cc) ---
  // Removes up to `most` jobs that ended before `before` from the plane, naming them in
  // batch.jobs_removed; keeps those a live job runs after (its after_ok names them) and those the
  // round changed (in batch.jobs). Whether more are due. The next job id goes into the batch's
  // settings, so that no id is given twice when the highest stored job was removed.
  bool remove_finished(Instant before, std::size_t most, Batch& batch);
  // After loading: the next job id as a removal stored it, if past the highest stored job's.
  void load_next_id(const std::vector<KeyedRecord>& settings);

  // --- figures ---
  [[nodiscard]] const std::map<std::string, std::int64_t>& requeued_by_cause() const {
    return requeued_by_cause_;
  }
  [[nodiscard]] const std::map<std::string, std::int64_t>& lost_work_ms_by_cause() const {
    return lost_work_ms_by_cause_;
  }

 private:
  // An array's place: its first job and the index; job 0: not of an array.
  struct ArrayPlace {
    JobId job;
    std::int64_t index = 0;
  };
  // Checks and queues one new job; `admitted` > 0 takes the admission of that many jobs (an
  // array's first job takes the whole array's), 0 none.
  Outcome<const ServerJob*> admit(const Principal& who, JobSpec spec,
                                  const std::string& idempotency_key, Instant now, Batch& batch,
                                  std::int64_t admitted, ArrayPlace array,
                                  JobId replica_of = JobId{});
  // One job per index of spec.array, ids in a row; refused whole when its first job is
  // (job_desk_arrays.cc).
  Outcome<const ServerJob*> submit_array(const Principal& who, const JobSpec& spec,
                                         const std::string& idempotency_key, Instant now,
                                         Batch& batch);
  // The spec an array's job `index` gets: no `array`, TIDEPOOL_ARRAY_JOB_ID and _INDEX in env.
  static JobSpec array_member(JobSpec spec, JobId array_job, std::int64_t index);
  // Whether a new job of `tenant` is let in now (SubmissionGate), its held jobs and those
  // waiting for others counted as pending too: neither is a way around the limit.
  Outcome<void> check_admission(const std::string& tenant, TenantId id, Instant now,
                                std::int64_t jobs);

  // The job if `who` may act on it (not an agent; a job it may see), else the refusal.
  Outcome<ServerJob*> actionable_job(const Principal& who, JobId id, std::string_view action);
  // The job if `who` may see it and it runs, else kNotFound or kConflict.
  Outcome<ServerJob*> running_job(const Principal& who, JobId id);
  // Whether the agent `who` may report about (or write the log of) `job`'s task `task` (any task
  // of its node when none) in run `run`, or the refusal: an agent writes only for the job's
  // latest run (`run` is required and must be job.starts), and only from a node that run placed
  // the task on (last_placement). A node the job left cannot act on it any more. Other roles are
  // not checked here.
  [[nodiscard]] static Outcome<void> check_agent_report(const Principal& who, const ServerJob& job,
                                                        std::optional<int> task,
                                                        std::optional<std::int64_t> run);

  // --- runs (job_desk_runs.cc) ---
  // Queues the job (as `core`) in the scheduler with the service of its ended runs; on failure
  // the scheduler is left without it.
  Result<void> enqueue(const Job& core, const ServerJob& job, Instant now, Batch& batch);
  // Queues a job that no longer runs (or never started) in the scheduler again, pending for
  // `reason`; one that cannot be queued any more fails.
  void queue_again(ServerJob& job, const std::string& reason, Instant now, Batch& batch);
  // Books the end of a running job's run that did not finish it (preempted, or its node failed):
  // the work since its last checkpoint is lost; the nodes join ran_on.
  void stop_run(ServerJob& job, const std::string& cause, Instant now);
  // A job becomes live (pending or running) or stops being live.
  void add_live(const ServerJob& job);
  void drop_live(const ServerJob& job);

  // --- dependencies (job_desk_dependencies.cc) ---
  // Whether `spec`'s after_ok can be, or why not (a job `who` cannot see, or one that ended
  // without success).
  [[nodiscard]] Outcome<void> check_dependencies(const Principal& who, const JobSpec& spec) const;
  // `ended` reached a final state: the jobs waiting for it are queued (all they wait for
  // succeeded) or cancelled (it did not succeed).
  void settle_dependents(const ServerJob& ended, Instant now, Batch& batch);
  // Indexes a live job's after_ok in dependents_.
  void note_dependencies(const ServerJob& job);
  // Puts the job in parked_ or takes it out, as it now is (after any change of state or hold).
  void note_parked(const ServerJob& job);
  // Cancels `job` because `ended`, which it runs after, did not succeed.
  void cancel_after(ServerJob& job, const ServerJob& ended, Instant now, Batch& batch);

  PlaneState& state_;
  MarketClerk& clerk_;
  BurstDesk& bursts_;
  SubmissionGate gate_;
  JobId next_job_id_{1};
  std::map<std::pair<std::string, std::string>, JobId> idempotency_;  // (tenant, key)
  std::set<JobId> timed_;  // the live jobs with a max_runtime (add_live, drop_live)
  // The pending jobs outside the scheduler because they are held or wait for other jobs (they
  // count against their tenant's max_pending_jobs all the same); kept by note_parked.
  std::set<JobId> parked_;
  // The pending jobs waiting for each job (their after_ok), by the job they wait for.
  std::map<JobId, std::set<JobId>> dependents_;
  std::map<std::string, std::int64_t> requeued_by_cause_;
  std::map<std::string, std::int64_t> lost_work_ms_by_cause_;
};

}  // namespace tidepool
