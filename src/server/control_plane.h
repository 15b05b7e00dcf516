// The control plane's state and rules: every job the server accepted, the nodes, the tenants'
// quotas and the tokens, around the same Scheduler the simulator drives. Pure like the core: no
// I/O, threads or clock. Each command takes the time and appends what it changed to a store Batch
// (jobs, events, nodes, settings, tokens); the caller commits the batch before it sends the
// replies, so that nothing is acknowledged before it is durable. If the commit fails, the caller
// throws this object away and builds a new one from the store (create), which is also how a
// server starts after a restart or a crash.
//
// Access: an admin may do everything; a user sees and acts on its own tenant's jobs only (the
// jobs of other tenants are answered "not found", so that their existence is not revealed) and
// reads nodes, queues and tenants; an agent acts for its own node and the jobs placed on it.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/agent_wire.h"
#include "api/api_bodies.h"
#include "api/job_spec.h"
#include "config/cluster_file.h"
#include "core/budget_watch.h"
#include "core/error.h"
#include "core/scheduler.h"
#include "core/tenants.h"
#include "server/auth.h"
#include "server/gpu_telemetry.h"
#include "server/job_listing.h"
#include "server/queue_waits.h"
#include "server/reply.h"
#include "server/server_job.h"
#include "server/server_market.h"
#include "store/store.h"

namespace tidepool {

// The server stamps times in milliseconds; the scheduler counts whole seconds.
inline Seconds to_seconds(std::int64_t ms) { return ms / 1000; }

// The refusal of a task number past a job's `tasks` ("job 4 has 2 tasks, 0..1").
Error no_such_task(std::int64_t job, std::int64_t tasks);

// Per-tenant admission limits of POST /v1/jobs (server configuration `admission:`); a tenant's
// entry in the tenants file may set its own max_pending_jobs and submissions_per_second.
struct AdmissionLimits {
  std::int64_t max_pending_jobs = 5000;       // pending at once
  std::int64_t submissions_per_second = 200;  // new jobs per second on average; 0: no limit
  std::int64_t submission_burst = 1000;       // and at most this many at once
};

// What the server was configured with.
struct ControlPlaneSetup {
  ClusterSpec cluster;
  TenantsSpec tenants;  // with its model ids interned into cluster.models
  SchedulerConfig scheduler;
  // A node whose agent registered and then sent nothing for this long is NotReady: cordoned, and
  // its running jobs requeued (resuming from their last checkpoint).
  std::int64_t heartbeat_timeout_ms = 30'000;
  // A declared node takes jobs only once its agent has registered it. True: every declared node
  // takes jobs as if an agent ran there (jobs "run" without processes: for benchmarks and tests
  // of the API alone).
  bool simulate_unregistered_nodes = false;
  IdleGpuRule idle_gpu;  // when an allocated GPU's low use raises an alert
  // The internal market (server_market.h); none: no prices, charges or budgets.
  std::optional<MarketSpec> market;
  Seconds ledger_posting_interval = kDefaultLedgerPostingInterval;
  AdmissionLimits admission;
};

// GET /v1/bill: a tenant's ledger entries whose interval ends in [from, to), grouped.
enum class BillGrouping : std::uint8_t { kTeam, kJob, kModel, kLabel };
Result<BillGrouping> parse_bill_grouping(std::string_view text);
struct BillQuery {
  std::string tenant;
  std::int64_t from = 0;  // Unix seconds
  std::int64_t to = 0;
  BillGrouping by = BillGrouping::kTeam;
};

// A run of a burst provider's hook (market file: burst.providers[].hook) that the control plane
// asks for; the server runs it (provider_hooks.h) once the round that asked is committed, as
// `<hook> up|down` with `request` on its standard input, and reports the end with
// provider_result(). See control_plane_burst.cc for the requests.
struct ProviderCall {
  std::int64_t id = 0;
  std::string provider;
  std::string hook;
  std::string action;  // "up" or "down"
  std::int64_t job = 0;
  nlohmann::json request;
};

class ControlPlane {
 public:
  // Builds the state from the configuration and what the store holds: running jobs are put back
  // where they run, pending jobs queued again, drained nodes cordoned. Jobs that can no longer be
  // restored (their node left the cluster file, their tenant the tenants file) are failed with
  // the reason; those changes go to `repairs`, to be committed before serving.
  // The stored tokens are loaded into `tokens` (replacing what it held), which the caller shares
  // with the threads that authenticate requests.
  static Result<std::unique_ptr<ControlPlane>> create(ControlPlaneSetup setup,
                                                      const Snapshot& snapshot, std::int64_t now_ms,
                                                      Batch& repairs,
                                                      std::shared_ptr<TokenTable> tokens);

  // --- jobs ---
  // Each command answers a Reply (reply.h): done, or refused with why.
  // Created with the new job; done with the existing one for a repeated idempotency key and the
  // same spec; kConflict for the same key with another spec.
  Reply submit(const Principal& who, JobSpec spec, const std::string& idempotency_key,
               std::int64_t now_ms, Batch& batch);
  Reply cancel(const Principal& who, std::int64_t id, std::int64_t now_ms, Batch& batch);
  Reply report_status(const Principal& who, std::int64_t id, const JobStatusReport& report,
                      std::int64_t now_ms, Batch& batch);
  Reply report_checkpoint(const Principal& who, std::int64_t id, const CheckpointReport& report,
                          std::int64_t now_ms, Batch& batch);
  // Slurm's scontrol hold/release/requeue/update (control_plane_holds.cc), each for a job `who`
  // may see (a user: its tenant's; agents may not): hold keeps a pending job out of scheduling
  // (pending, kind "held") until release; requeue stops a running job's run and queues it again
  // (it resumes from its last checkpoint), as a preemption would; update changes a pending job's
  // priority and limits, checked as a submission is. kConflict for a job in another state.
  Reply hold(const Principal& who, std::int64_t id, std::int64_t now_ms, Batch& batch);
  Reply release(const Principal& who, std::int64_t id, std::int64_t now_ms, Batch& batch);
  Reply requeue_job(const Principal& who, std::int64_t id, std::int64_t now_ms, Batch& batch);
  Reply update_job(const Principal& who, std::int64_t id, const JobUpdate& update,
                   std::int64_t now_ms, Batch& batch);
  [[nodiscard]] Reply get_job(const Principal& who, std::int64_t id) const;
  // GET /v1/jobs from the plane itself; the server lists from snapshots (update_listing).
  [[nodiscard]] Reply list_jobs(const Principal& who, const JobFilter& filter) const;
  // Brings `cache` (each job's listed entry, by id) up to date for the jobs in `changed` (those a
  // committed batch wrote; all of them when `cache` is empty) and returns a snapshot of it with
  // the pending jobs' reasons as of now, as version `version`.
  [[nodiscard]] std::shared_ptr<const JobListing> update_listing(
      std::map<std::int64_t, std::shared_ptr<const ListedJob>>& cache,
      const std::set<std::int64_t>& changed, std::int64_t version) const;
  [[nodiscard]] Reply why(const Principal& who, std::int64_t id, std::int64_t now_ms) const;

  // --- nodes ---
  [[nodiscard]] Reply list_nodes(const Principal& who) const;
  Reply set_drained(const Principal& who, const std::string& node, bool drained,
                    const std::string& reason, std::int64_t now_ms, Batch& batch);
  Reply register_node(const Principal& who, const std::string& node,
                      const NodeRegistration& registration, std::int64_t now_ms, Batch& batch);
  // The reply carries what the node should run: a HeartbeatReply (api/agent_wire.h) with an
  // assignment per running job with a task on the node (assignment_of).
  Reply heartbeat(const Principal& who, const std::string& node, const NodeHeartbeat& heartbeat,
                  std::int64_t now_ms, Batch& batch);
  // Whether `who` may read (write false) or append to (write true) job `id`'s task logs: done
  // with {"job", "tasks"}, or the refusal. Reading: whoever sees the job; writing: an admin, the
  // agent of the node that runs (or, stopping, ran) `task` in the job's latest run, which must
  // be `run` (agent_report_refusal), or for an earlier run (its late output) the agent of a node
  // that a run of the job used.
  [[nodiscard]] Reply log_access(const Principal& who, std::int64_t id, bool write,
                                 std::optional<int> task = std::nullopt,
                                 std::optional<std::int64_t> run = std::nullopt) const;

  // --- tenants, queues, tokens ---
  [[nodiscard]] Reply list_tenants(const Principal& who) const;
  [[nodiscard]] Reply get_tenant(const Principal& who, const std::string& name) const;
  Reply put_tenant(const Principal& who, const std::string& name, const TenantUpdate& update,
                   std::int64_t now_ms, Batch& batch);
  [[nodiscard]] Reply list_queues(const Principal& who) const;
  Reply create_token(const Principal& who, const TokenRequest& request, std::int64_t now_ms,
                     Batch& batch);
  // Creates an admin token without a caller (the server's first start); returns its secret.
  std::string bootstrap_admin(std::int64_t now_ms, Batch& batch);
  [[nodiscard]] Reply list_tokens(const Principal& who) const;
  Reply revoke_token(const Principal& who, const std::string& id, std::int64_t now_ms,
                     Batch& batch);

  // --- the internal market (control_plane_market.cc) ---
  // The price in force of each GPU model: kNotFound when the server runs without a market.
  Reply prices(const Principal& who, std::int64_t now_ms);
  // A tenant's charges and lending credits per group (users: their own tenant only).
  [[nodiscard]] Reply bill(const Principal& who, const BillQuery& query) const;

  // --- bursting (control_plane_burst.cc) ---
  // The hook runs asked for since the last call, in order.
  std::vector<ProviderCall> take_provider_calls();
  // Hook run `call` ended: `ok` false (a non-zero exit, a timeout, no such program) with what it
  // printed. A failed `up` gives the rental up: its nodes are released (`down`) and the job waits
  // in the pool again; the offer is not used again for a while. A failed `down` is an event for
  // the operator (the nodes may still be rented).
  Reply provider_result(std::int64_t call, bool ok, const std::string& output, std::int64_t now_ms,
                        Batch& batch);

  // --- scheduling ---
  // Whether something changed since the last schedule() that a pass should see.
  [[nodiscard]] bool wants_pass() const { return dirty_; }
  // Stops jobs past their max_runtime, runs a scheduler pass and applies it.
  void schedule(std::int64_t now_ms, Batch& batch);

  // Writes the documents of the jobs a round changed into `batch`, once per job and as each job
  // stands now: the methods above only name a changed job in `batch.jobs` (a record without a
  // document), so a job submitted and started in one round is serialised once. Call it when the
  // round is done, before the batch is committed; create() seals its repairs itself.
  void seal(Batch& batch) const;
  // The next time a pass has something to do without an outside event, if any. Cheap: the jobs'
  // own deadlines (max_runtime, the burst threshold) are those the last pass found; a job started
  // or requeued outside a pass since then is seen by the next pass (the tick's at the latest).
  [[nodiscard]] std::optional<std::int64_t> next_wakeup_ms(std::int64_t now_ms) const;

  // --- figures for metrics ---
  struct Figures {
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
  };
  [[nodiscard]] Figures figures() const;
  [[nodiscard]] std::int64_t last_event_seq() const { return last_event_seq_; }

 private:
  struct NodeInfo {
    std::string name;
    bool drained = false;
    std::string drain_reason;
    std::int64_t drained_ms = 0;
    bool not_ready = false;  // its agent missed heartbeats
    std::int64_t not_ready_ms = 0;
    std::int64_t registered_ms = 0;  // 0: no agent ever registered it (a declared node)
    std::int64_t last_heartbeat_ms = 0;
    NodeRegistration reported;
  };
  // Whether the node takes new jobs: not drained, its agent registered (or
  // simulate_unregistered_nodes) and heard from within the heartbeat timeout.
  [[nodiscard]] bool schedulable(const NodeInfo& info) const;
  // Why it takes none, for `tidepool nodes` (empty when it does).
  [[nodiscard]] std::string unschedulable_reason(const NodeInfo& info) const;

  // A rented node (control_plane_burst.cc): which job's task it is for, and its agent.
  struct BurstNode {
    std::int64_t job = 0;
    int task = 0;
    std::int64_t registered_ms = 0;  // 0: its agent has not registered yet
    std::int64_t last_heartbeat_ms = 0;
    NodeRegistration reported;
  };

  ControlPlane(ControlPlaneSetup setup, Scheduler scheduler);

  [[nodiscard]] bool may_see(const Principal& who, const ServerJob& job) const;
  // The job as the API shows it: server_job_to_json, and for a pending job "pending": its
  // reason's kind and text.
  [[nodiscard]] nlohmann::json job_view(const ServerJob& job) const;
  // A pending job's reason: {"kind", "reason"}.
  [[nodiscard]] nlohmann::json pending_json(const ServerJob& job) const;
  // The job if `who` may see it, else kNotFound.
  [[nodiscard]] Outcome<const ServerJob*> visible_job(const Principal& who, std::int64_t id) const;
  // Whether the agent `who` may report about (or write the log of) `job`'s task `task` (any task
  // of its node when none) in run `run`, or the refusal: an agent writes only for the
  // job's latest run (`run` is required and must be job.starts), and only from a node that run
  // placed the task on (last_placement). A node the job left cannot act on it any more. Other
  // roles are not checked here.
  [[nodiscard]] Outcome<void> check_agent_report(const Principal& who, const ServerJob& job,
                                                 std::optional<int> task,
                                                 std::optional<std::int64_t> run) const;
  // --- dependencies (control_plane_dependencies.cc) ---
  // The jobs of job.spec.after_ok that have not succeeded (yet).
  [[nodiscard]] std::vector<std::int64_t> unmet_dependencies(const ServerJob& job) const;
  // A pending job the scheduler does not hold: on rented capacity, held, or waiting for jobs.
  [[nodiscard]] bool outside_scheduler(const ServerJob& job) const;
  // Whether `spec`'s after_ok can be, or why not (a job `who` cannot see, or one that ended
  // without success).
  [[nodiscard]] Outcome<void> check_dependencies(const Principal& who, const JobSpec& spec) const;
  // {"kind": "dependency", "reason", "after": the unmet ids}.
  [[nodiscard]] nlohmann::json dependency_pending_json(
      const std::vector<std::int64_t>& unmet) const;
  // `ended` reached a final state: the jobs waiting for it are queued (all they wait for
  // succeeded) or cancelled (it did not succeed).
  void settle_dependents(const ServerJob& ended, std::int64_t now_ms, Batch& batch);
  // Indexes a live job's after_ok in dependents_.
  void note_dependencies(const ServerJob& job);
  // Puts the job in parked_ or takes it out, as it now is (after any change of state or hold).
  void note_parked(const ServerJob& job);
  // Cancels `job` because `ended`, which it runs after, did not succeed.
  void cancel_after(ServerJob& job, const ServerJob& ended, std::int64_t now_ms, Batch& batch);
  // After loading: cancels the pending jobs after a job that ended without success (a server
  // stopped between the two).
  void settle_loaded_dependents(std::int64_t now_ms, Batch& repairs);
  // --- admission (control_plane_admission.cc) ---
  // Whether a new job of `tenant` is let in now, or why not (kTooMany: its tenant has
  // max_pending_jobs waiting, or submits faster than its rate); a job let through takes one
  // submission token. `jobs` new jobs at once (an array) count each against max_pending_jobs and
  // as one submission.
  Outcome<void> check_admission(const std::string& tenant, TenantId id, std::int64_t now_ms,
                                std::int64_t jobs = 1);
  // --- submission (control_plane.cc, control_plane_arrays.cc) ---
  struct ArrayPlace {
    std::int64_t job = 0;  // the array's first job; 0: not of an array
    std::int64_t index = 0;
  };
  // Checks and queues one new job; `admitted` > 0 takes the admission of that many jobs (an
  // array's first job takes the whole array's), 0 none.
  Reply admit(const Principal& who, JobSpec spec, const std::string& idempotency_key,
              std::int64_t now_ms, Batch& batch, std::int64_t admitted, ArrayPlace array);
  // One job per index of spec.array, ids in a row; refused whole when its first job is.
  Reply submit_array(const Principal& who, const JobSpec& spec, const std::string& idempotency_key,
                     std::int64_t now_ms, Batch& batch);
  // The spec an array's job `index` gets: no `array`, TIDEPOOL_ARRAY_JOB_ID and _INDEX in env.
  static JobSpec array_member(JobSpec spec, std::int64_t array_job, std::int64_t index);
  // What a submission answers: the job, and for an array's first job "array": its jobs.
  [[nodiscard]] nlohmann::json submitted_view(const ServerJob& job) const;
  // A token bucket in thousandths of a submission.
  struct SubmitBucket {
    std::int64_t milli_tokens = 0;
    std::int64_t updated_ms = 0;
  };
  std::map<std::string, SubmitBucket> submit_buckets_;  // by tenant
  // The job for the core, checked against `book` (tenant, queue) and the cluster.
  // Takes a pending job out of the scheduler (held, or to be queued again with a new spec).
  void withdraw_pending(const ServerJob& job, std::int64_t now_ms, Batch& batch);
  // Queues the job (as `core`) in the scheduler with the service of its ended runs; on failure
  // the scheduler is left without it.
  Result<void> enqueue(const Job& core, const ServerJob& job, std::int64_t now_ms, Batch& batch);
  // Whether the pool's scheduler holds the job: running on the pool's nodes, or pending in its
  // queue (not held, not waiting for other jobs, not on rented capacity).
  [[nodiscard]] bool in_scheduler(const ServerJob& job) const;
  // A core call that fails only if the plane and its scheduler disagree (a bug, not an input):
  // an internal.error event naming `what` failed and why, and a count in the figures, so that it
  // is seen; the command goes on with the plane's own view.
  void internal_error(std::string what, const Error& error, std::int64_t now_ms, Batch& batch);
  // The job if `who` may act on it (not an agent; a job it may see), else the refusal.
  Outcome<ServerJob*> actionable_job(const Principal& who, std::int64_t id,
                                     std::string_view action);
  // The job if `who` may see it and it runs, else kNotFound or kConflict.
  Outcome<ServerJob*> running_job(const Principal& who, std::int64_t id);
  Result<Job> to_core_job(const ServerJob& job, const TenantBook& book) const;
  // Puts a live job into `scheduler`: running ones where they run, pending ones in the queue.
  Result<void> restore(Scheduler& scheduler, const ServerJob& job, std::int64_t now_ms) const;
  // Gives the job, just queued or adopted, the service of its ended runs.
  static Result<void> credit_ended_runs(Scheduler& scheduler, const ServerJob& job);
  Result<std::vector<Assignment>> to_assignments(const ServerJob& job) const;
  std::vector<TaskPlace> to_places(const std::vector<Assignment>& assignments) const;
  void emit(Batch& batch, std::int64_t now_ms, std::string kind, const nlohmann::json& document);
  // GPU-seconds a live job has received as of the last pass; nullopt for a job the scheduler
  // does not hold (ended, or run on rented nodes).
  [[nodiscard]] std::optional<std::int64_t> attained_gpu_seconds(const ServerJob& job) const;
  // A pending job starts now: how long it waited goes to its tenant's queue_waits_.
  void observe_queue_wait(const ServerJob& job, std::int64_t now_ms);
  void record_job(Batch& batch, const ServerJob& job, std::int64_t now_ms, std::string kind);
  // Names `job` as changed in `batch`; seal() writes its document.
  static void stage(Batch& batch, const ServerJob& job);
  void record_node(Batch& batch, const NodeInfo& node);
  // Ends a running job (its resources return) or takes back a pending one, in the final state.
  void end_job(ServerJob& job, JobState state, std::string reason, std::int64_t now_ms,
               Batch& batch);
  // Books the end of a running job's run that did not finish it (preempted, or its node failed):
  // the work since its last checkpoint is lost; the nodes join ran_on.
  void stop_run(ServerJob& job, const std::string& cause, std::int64_t now_ms);
  // A NotReady node heard from again: schedulable unless drained.
  // (`was_schedulable`: before the agent was heard from; the scheduler learns of a change.)
  void mark_ready(NodeId id, bool was_schedulable, std::int64_t now_ms, Batch& batch);
  // A job becomes live (pending or running) or stops being live: live_ and timed_.
  void add_live(const ServerJob& job);
  void drop_live(std::int64_t id);
  // The soonest deadline of a live job after `now_ms`: a running job's max_runtime, a waiting
  // job's burst threshold (one walk over the live jobs, once per pass).
  [[nodiscard]] std::optional<std::int64_t> jobs_wakeup(std::int64_t now_ms) const;
  // Marks NotReady the nodes whose agents fell silent, and requeues their running jobs.
  void check_liveness(std::int64_t now_ms, Batch& batch);
  // Queues a job that no longer runs (or never started) in the scheduler again, pending for
  // `reason`; one that cannot be queued any more fails.
  void queue_again(ServerJob& job, const std::string& reason, std::int64_t now_ms, Batch& batch);
  // Takes a running job off its nodes and queues it again: its node failed (`node_failure`, a
  // fault), or a user asked (`tidepool requeue`). `reason` is the stop's; the job then waits
  // "requeued after a node failure" or with `reason`, saying where it resumes from.
  void requeue(ServerJob& job, bool node_failure, const std::string& reason, std::int64_t now_ms,
               Batch& batch);
  // What a node's agent needs to run its part of a running job (see heartbeat).
  [[nodiscard]] NodeAssignment assignment_of(const ServerJob& job, const std::string& node) const;
  static Result<TenantsSpec> apply_overrides(TenantsSpec base,
                                             const std::map<std::string, TenantUpdate>& overrides,
                                             GpuModelCatalog& models);
  // Builds a scheduler from the current tenants and puts every live job back into it.
  Result<Scheduler> rebuild_scheduler(const TenantsSpec& tenants, std::int64_t now_ms) const;
  [[nodiscard]] nlohmann::json tenant_json(TenantId tenant) const;
  // The running jobs with a task on each node, by NodeId, from one walk over the live jobs.
  [[nodiscard]] std::vector<std::vector<const ServerJob*>> running_by_node() const;
  // The node as the API shows it, with `running`: the running jobs with a task on it.
  [[nodiscard]] nlohmann::json node_json(NodeId id,
                                         const std::vector<const ServerJob*>& running) const;

  // --- the internal market (control_plane_market.cc) ---
  // Opens the market of setup_.market (if any) over `tenants`, with the stored ledger, and meters
  // the running jobs from now on; budget changes go to `repairs`.
  Result<void> open_market(const Snapshot& snapshot, const TenantsSpec& tenants,
                           std::int64_t now_ms, Batch& repairs);
  // Accrues the meter up to now: before any change of what runs or of the nodes.
  void meter_advance(std::int64_t now_ms, Batch& batch);
  void meter_start(const ServerJob& job, const std::vector<Assignment>& assignments,
                   std::int64_t now_ms, Batch& batch);
  void meter_stop(const ServerJob& job, std::int64_t now_ms, Batch& batch);
  // Moves the entries not yet stored into the batch.
  void store_ledger(Batch& batch);
  // When a posting is due: posts, stores, checks budgets and (once a UTC day) spend anomalies.
  void post_ledger(std::int64_t now_ms, Batch& batch);
  // The budget watch's events as server events and settings records; `announce` false: holds are
  // applied without budget.exhausted events (at start).
  void check_budgets(std::int64_t now_ms, Batch& batch, bool announce = true);
  void check_anomalies(std::int64_t now_ms, Batch& batch);
  // A meter failure (a bug, not an input): an event, so that it is seen.
  void market_failed(const Error& error, std::int64_t now_ms, Batch& batch);
  void market_figures(Figures& figures) const;
  // Stops the running jobs charged their max_cost, as those past their max_runtime are.
  void stop_over_cost(std::int64_t now_ms, Batch& batch);
  // Tells the scheduler which tenants are held back for budget (after a rebuild).
  void apply_budget_holds(std::int64_t now_ms, Batch& batch);

  // --- bursting (control_plane_burst.cc) ---
  // Sends the jobs that waited past the market's threshold to rented capacity (choose_bursts).
  void burst_waiting(std::int64_t now_ms, Batch& batch);
  // Asks the offer's provider for the job's nodes, with an agent token for each.
  void rent(ServerJob& job, std::size_t offer, std::int64_t now_ms, Batch& batch);
  // (Re)asks `up` for a job's rental, with fresh agent tokens (old ones revoked).
  void request_up(ServerJob& job, std::int64_t now_ms, Batch& batch);
  // Charges the job's rented GPUs up to now.
  void charge_burst(ServerJob& job, std::int64_t now_ms, Batch& batch);
  // Ends a job's rental: charged up to now (unless nothing was rented), `down` asked, tokens
  // revoked, nodes forgotten.
  void release_burst(ServerJob& job, const std::string& reason, bool charge, std::int64_t now_ms,
                     Batch& batch);
  // A rental that failed or whose node fell silent: released, and the job queued in the pool.
  void requeue_from_burst(ServerJob& job, const std::string& reason, bool charge,
                          std::int64_t now_ms, Batch& batch);
  // Rentals whose nodes did not come up in time, and rented nodes that fell silent.
  void check_bursts(std::int64_t now_ms, Batch& batch);
  // When every node of a pending job's rental has registered, the job runs there.
  void start_when_up(ServerJob& job, std::int64_t now_ms, Batch& batch);
  Reply register_burst_node(const std::string& node, const NodeRegistration& registration,
                            std::int64_t now_ms, Batch& batch);
  Reply burst_heartbeat(const std::string& node, const NodeHeartbeat& heartbeat,
                        std::int64_t now_ms, Batch& batch);
  // A rented node as GET /v1/nodes lists it.
  [[nodiscard]] nlohmann::json burst_node_json(const std::string& node) const;
  [[nodiscard]] std::optional<std::size_t> offer_index(const std::string& name) const;
  // The hook of a provider of the market file ("" if none).
  [[nodiscard]] std::string hook_of(const std::string& provider) const;
  // Revokes the tokens with these ids (those not revoked yet).
  void revoke_tokens(const std::vector<std::string>& ids, Batch& batch);
  // The GPUs each task of a job rents: whole GPUs (a fraction rents one); and the whole job's.
  [[nodiscard]] static int rented_gpus_per_task(const JobSpec& spec);
  [[nodiscard]] static std::int64_t rented_gpus(const JobSpec& spec);
  // The GPUs rented now (coming up or in use) of each offer, by offer index.
  [[nodiscard]] std::vector<std::int64_t> rented_gpus_by_offer() const;
  // Queues a run of the hook of `run`'s provider for `job`: `request` with the action, provider,
  // offer and job added. Returns the call's id.
  std::int64_t ask_provider(const ServerJob& job, const BurstRun& run, const std::string& action,
                            nlohmann::json request);
  // A pending job's reason while its rented nodes come up.
  [[nodiscard]] nlohmann::json burst_pending_json(const ServerJob& job) const;
  // Rebuilds the rented nodes of the live jobs (a restart) and asks `up` again for rentals that
  // had not come up.
  void restore_bursts(std::int64_t now_ms, Batch& repairs);

  ControlPlaneSetup setup_;
  Scheduler scheduler_;
  std::optional<ServerMarket> market_;
  BudgetWatch budget_watch_;  // budgets and spend anomalies of the market (core/budget_watch.h)
  std::shared_ptr<TokenTable> tokens_;
  std::map<std::int64_t, ServerJob> jobs_;
  std::set<std::int64_t> live_;  // pending or running
  // The pending jobs outside the scheduler because they are held or wait for other jobs (they
  // count against their tenant's max_pending_jobs all the same); kept by note_parked.
  std::set<std::int64_t> parked_;
  // The pending jobs waiting for each job (their after_ok), by the job they wait for.
  std::map<std::int64_t, std::set<std::int64_t>> dependents_;
  std::set<std::int64_t> timed_;  // the live jobs with a max_runtime (add_live, drop_live)
  std::map<std::pair<std::string, std::string>, std::int64_t> idempotency_;  // (tenant, key)
  std::vector<NodeInfo> nodes_;                                              // by NodeId
  std::map<std::string, NodeId> node_ids_;
  std::map<std::string, TenantUpdate> tenant_overrides_;
  std::int64_t next_job_id_ = 1;
  std::int64_t last_event_seq_ = 0;
  bool dirty_ = true;
  GpuTelemetry telemetry_;
  std::int64_t node_failures_ = 0;
  std::int64_t internal_errors_ = 0;
  std::map<std::string, std::int64_t> requeued_by_cause_;
  std::map<std::string, std::int64_t> lost_work_ms_by_cause_;
  std::map<std::string, BurstNode> burst_nodes_;  // by node name
  std::vector<ProviderCall> provider_calls_;      // asked, not yet taken
  std::int64_t next_call_id_ = 1;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> awaited_up_;  // (job, requested)
  std::map<std::string, std::int64_t> offer_paused_until_ms_;                 // after a failed `up`
  std::map<std::int64_t, std::string> burst_refusals_;  // job -> why it was not rented
  std::int64_t burst_rentals_ = 0;
  std::map<std::string, QueueWaits> queue_waits_;  // by tenant, since the server started
  std::int64_t last_pass_ms_ = 0;                  // when the last scheduling pass ran
  std::optional<std::int64_t> jobs_wakeup_ms_;     // jobs_wakeup() at the last pass
};

}  // namespace tidepool
