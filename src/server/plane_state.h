// The state that every part of the control plane (control_plane.h) shares: the configuration, the
// pool's scheduler, the jobs and which of them are live, the tokens, and how a command writes down
// what it changed: a store Batch, with its events. Each part keeps its own rules and members (the
// job desk, the node table, the burst desk, the market clerk); what is here is what all of them
// read or change. Pure like the core: no I/O, threads or clock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/cluster_file.h"
#include "config/market_file.h"
#include "core/error.h"
#include "core/ledger_books.h"
#include "core/prewarm.h"
#include "core/scheduler.h"
#include "core/tenants.h"
#include "server/auth.h"
#include "server/gpu_telemetry.h"
#include "server/queue_waits.h"
#include "server/reply.h"
#include "server/server_job.h"
#include "server/server_market.h"
#include "store/store.h"

namespace tidepool {

// The server stamps times in milliseconds; the scheduler counts whole seconds.

// Per-tenant admission limits of POST /v1/jobs (server configuration `admission:`); a tenant's
// entry in the tenants file may set its own max_pending_jobs and submissions_per_second.
struct AdmissionLimits {
  std::int64_t max_pending_jobs = 5000;       // pending at once
  std::int64_t submissions_per_second = 200;  // new jobs per second on average; 0: no limit
  std::int64_t submission_burst = 1000;       // and at most this many at once
};

// Data pre-warming (server configuration `prewarm:`; core/prewarm.h): a lead time before a
// waiting job's predicted start on the nodes expected to free up for it, the loop runs
// `<hook> prewarm` with the job and those nodes (prewarm_calls.h), so that its data is staged.
struct PrewarmSetup {
  std::string hook;       // an executable file
  PrewarmConfig planner;  // the lead; the horizon twice the lead, as the simulator's
  Millis timeout = std::chrono::minutes{5};  // a hook running longer is stopped (a failure)
};

// What the server was configured with.
struct ControlPlaneSetup {
  ClusterSpec cluster;
  TenantsSpec tenants;  // with its model ids interned into cluster.models
  SchedulerConfig scheduler;
  // A node whose agent registered and then sent nothing for this long is NotReady: cordoned, and
  // its running jobs requeued (resuming from their last checkpoint).
  Millis heartbeat_timeout{30'000};
  // A declared node takes jobs only once its agent has registered it. True: every declared node
  // takes jobs as if an agent ran there (jobs "run" without processes: for benchmarks and tests
  // of the API alone).
  bool simulate_unregistered_nodes = false;
  IdleGpuRule idle_gpu;  // when an allocated GPU's low use raises an alert
  // The internal market (server_market.h); none: no prices, charges or budgets.
  std::optional<MarketSpec> market;
  Seconds ledger_posting_interval = kDefaultLedgerPostingInterval;
  // The most ledger entries one round stores (0: no limit), under a store's commit limits (the
  // control loop sets it): a posting of more (one entry per running job) is stored over the rounds
  // that follow it, at once, in seq order.
  std::int64_t ledger_entries_per_round = 0;
  // How long a closed day's ledger entries are kept by job, and as the day's own, before they are
  // folded further (core/ledger_books.h).
  BookTerms ledger_books;
  AdmissionLimits admission;
  // Retention: a job that ended this many days ago leaves the server and its store (not one that
  // a live job runs after; ControlPlane::remove_finished). The server's default: 92 days.
  std::int64_t finished_jobs_kept_days = 92;
  // The figures' history (history.h, GET /v1/history): a sample this often, kept this long.
  Millis history_interval = std::chrono::minutes{5};
  std::int64_t history_hours_kept = 14 * 24;
  std::optional<PrewarmSetup> prewarm;  // none: no pre-warming
  // A running job's reported steps (core/step_stats.h) reach the store with its next write, or at
  // the first heartbeat this long after a report was left unwritten: a server that stops loses at
  // most this much of them.
  Millis steps_stored_every = std::chrono::minutes{1};
};

// Whether `who` holds an admin token, or kForbidden saying what it holds.
[[nodiscard]] Outcome<void> check_admin(const Principal& who);

class PlaneState {
 public:
  PlaneState(ControlPlaneSetup setup, Scheduler scheduler, std::shared_ptr<TokenTable> tokens);

  [[nodiscard]] const ControlPlaneSetup& setup() const { return setup_; }
  [[nodiscard]] Scheduler& scheduler() { return scheduler_; }
  [[nodiscard]] const Scheduler& scheduler() const { return scheduler_; }
  // After a tenants change: a scheduler rebuilt with every live job (ControlPlane::put_tenant).
  void replace_scheduler(Scheduler scheduler) { scheduler_ = std::move(scheduler); }

  // --- jobs ---
  // Every job the server accepted, by id.
  [[nodiscard]] std::map<JobId, ServerJob>& jobs() { return jobs_; }
  [[nodiscard]] const std::map<JobId, ServerJob>& jobs() const { return jobs_; }
  // The live jobs (pending or running), by id; the job desk keeps it (JobDesk::add_live).
  [[nodiscard]] const std::set<JobId>& live() const { return live_; }
  void set_live(const ServerJob& job, bool live);
  // The live replicas of a service, by id (empty for any other job); kept by set_live.
  [[nodiscard]] const std::set<JobId>& live_replicas(JobId service) const;
  // Users see their tenant's jobs, agents those their node runs or ran, admins all (may_see_job).
  [[nodiscard]] bool may_see(const Principal& who, const ServerJob& job) const;
  // The job if `who` may see it, else kNotFound (another tenant's job is "not found" too).
  [[nodiscard]] Outcome<const ServerJob*> visible_job(const Principal& who, JobId id) const;
  [[nodiscard]] Outcome<ServerJob*> visible_job(const Principal& who, JobId id);
  // The running jobs with a task on each node of the cluster file, by NodeId, from one walk over
  // the live jobs.
  [[nodiscard]] std::vector<std::vector<const ServerJob*>> running_by_node() const;
  // The same for one node, in id order, without that walk (a heartbeat asks it, thousands of
  // times a second in a large pool): from the jobs placed on the node, which note_placed keeps.
  [[nodiscard]] std::vector<const ServerJob*> running_on(NodeId node) const;
  // The job was given its placement (a pass started it; a restart found it running): it is one
  // that running_on may answer for its nodes. A job that later stops or moves needs no call.
  void note_placed(const ServerJob& job);
  // The jobs of job.spec.after_ok that have not succeeded (yet), as the spec names them.
  [[nodiscard]] std::vector<std::int64_t> unmet_dependencies(const ServerJob& job) const;
  // A pending job the scheduler does not hold: on rented capacity, held, or waiting for jobs.
  [[nodiscard]] bool outside_scheduler(const ServerJob& job) const;
  // Whether the pool's scheduler holds the job: running on the pool's nodes, or pending in its
  // queue (not held, not waiting for other jobs, not on rented capacity).
  [[nodiscard]] bool in_scheduler(const ServerJob& job) const;

  // --- the pool ---
  // A node of the cluster file by name, as the pool numbers it.
  [[nodiscard]] std::optional<NodeId> pool_node(std::string_view name) const;
  // The job for the core, checked against `book` (tenant, queue) and the cluster.
  [[nodiscard]] Result<Job> to_core_job(const ServerJob& job, const TenantBook& book) const;
  [[nodiscard]] Result<std::vector<Assignment>> to_assignments(const ServerJob& job) const;
  [[nodiscard]] std::vector<TaskPlace> to_places(const std::vector<Assignment>& assignments) const;
  // Takes a job the scheduler queues out of it (held, rented, or to be queued again).
  void withdraw_pending(const ServerJob& job, Instant now, Batch& batch);
  // GPU-seconds a live job has received as of the last pass; nullopt for a job the scheduler
  // does not hold (ended, or run on rented nodes).
  [[nodiscard]] std::optional<std::int64_t> attained_gpu_seconds(const ServerJob& job) const;

  // --- scheduling passes ---
  // Whether something changed since the last pass that a pass should see.
  [[nodiscard]] bool dirty() const { return dirty_; }
  void mark_dirty() { dirty_ = true; }
  // A pass runs at `now` (what the scheduler knows is as of then).
  void passed(Instant now);
  [[nodiscard]] Instant last_pass() const { return last_pass_; }

  // --- pre-warming (core/prewarm.h), with setup().prewarm only ---
  [[nodiscard]] PrewarmPlanner* prewarm() { return prewarm_ ? &*prewarm_ : nullptr; }
  [[nodiscard]] const PrewarmPlanner* prewarm() const { return prewarm_ ? &*prewarm_ : nullptr; }
  // A pending job left the scheduler's queue without starting (cancelled, held, updated, sent to
  // rented capacity): the calls made for it no longer count for a later start.
  void forget_prewarm(JobId job) {
    if (prewarm_) prewarm_->forget(job);
  }
  // A pass started a job on the pool's nodes, pre-warmed or not (counted since the plane was
  // made, for the metrics).
  void count_start(bool prewarmed) { ++(prewarmed ? starts_prewarmed_ : starts_not_prewarmed_); }
  [[nodiscard]] std::int64_t starts_prewarmed() const { return starts_prewarmed_; }
  [[nodiscard]] std::int64_t starts_not_prewarmed() const { return starts_not_prewarmed_; }

  // --- tokens ---
  [[nodiscard]] TokenTable& tokens() { return *tokens_; }
  [[nodiscard]] const TokenTable& tokens() const { return *tokens_; }
  // Puts the token in the table and in the batch.
  void store_token(const TokenRecord& token, Batch& batch);
  // Revokes the tokens with these ids (those not revoked yet).
  void revoke_tokens(const std::vector<std::string>& ids, Batch& batch);

  // --- what a command changed ---
  void emit(Batch& batch, Instant now, std::string kind, const nlohmann::json& document);
  // Names `job` as changed in `batch` (a record without a document); seal() writes it.
  static void stage(Batch& batch, const ServerJob& job);
  // Stages the job and emits `kind` with where it stands.
  void record_job(Batch& batch, const ServerJob& job, Instant now, std::string kind);
  // Writes the documents of the jobs a round changed into `batch`, once per job and as each job
  // stands now (see ControlPlane::seal).
  void seal(Batch& batch) const;
  // A core call that fails only if the plane and its scheduler disagree (a bug, not an input):
  // an internal.error event naming `what` failed and why, and a count in the figures, so that it
  // is seen; the command goes on with the plane's own view.
  void internal_error(std::string what, const Error& error, Instant now, Batch& batch);
  [[nodiscard]] std::int64_t last_event_seq() const { return last_event_seq_; }
  void set_last_event_seq(std::int64_t seq) { last_event_seq_ = seq; }
  [[nodiscard]] std::int64_t internal_errors() const { return internal_errors_; }

  // --- figures ---
  // A pending job starts now: how long it waited goes to its tenant's queue waits.
  void observe_queue_wait(const ServerJob& job, Instant now);
  [[nodiscard]] const std::map<std::string, QueueWaits>& queue_waits() const {
    return queue_waits_;
  }

 private:
  ControlPlaneSetup setup_;
  Scheduler scheduler_;
  std::shared_ptr<TokenTable> tokens_;
  std::map<JobId, ServerJob> jobs_;
  std::set<JobId> live_;
  std::map<JobId, std::set<JobId>> live_replicas_;  // by service; no empty sets
  // By NodeId: jobs placed on the node since it was last pruned, some of which may have stopped
  // or moved since (running_on checks each and drops those; mutable for that).
  mutable std::vector<std::vector<JobId>> placed_on_;
  std::map<std::string, NodeId, std::less<>> pool_nodes_;  // the cluster file's, by name
  std::int64_t last_event_seq_ = 0;
  std::int64_t internal_errors_ = 0;
  bool dirty_ = true;
  Instant last_pass_;                              // when the last scheduling pass ran
  std::map<std::string, QueueWaits> queue_waits_;  // by tenant, since the server started
  std::optional<PrewarmPlanner> prewarm_;          // with setup_.prewarm
  std::int64_t starts_prewarmed_ = 0;              // since the plane was made
  std::int64_t starts_not_prewarmed_ = 0;
};

}  // namespace tidepool
