// The control plane: every job the server accepted, the nodes, the tenants' quotas and the tokens,
// around the same Scheduler the simulator drives. Pure like the core: no I/O, threads or clock.
// Each command takes the time and appends what it changed to a store Batch (jobs, events, nodes,
// settings, tokens); the caller commits the batch before it sends the replies, so that nothing is
// acknowledged before it is durable. If the commit fails, the caller throws this object away and
// builds a new one from the store (create), which is also how a server starts after a restart or
// a crash.
//
// This class is the face the scheduling loop and the HTTP API call. The state and its rules are in
// parts, each with its own: the shared state (plane_state.h), the jobs (job_desk.h), the nodes of
// the cluster and the rented ones (node_table.h), bursting (burst_desk.h), the internal market
// (market_clerk.h); what the API shows is built by the views (plane_views.h). A command here checks
// nothing itself: it hands over to its part, and answers a Reply (reply.h) from the outcome and
// the views.
//
// Access: an admin may do everything; a user sees and acts on its own tenant's jobs only (the
// jobs of other tenants are answered "not found", so that their existence is not revealed) and
// reads nodes, queues and tenants; an agent acts for its own node and the jobs placed on it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/agent_wire.h"
#include "api/api_bodies.h"
#include "api/job_spec.h"
#include "core/error.h"
#include "server/auth.h"
#include "server/burst_desk.h"
#include "server/history.h"
#include "server/job_desk.h"
#include "server/job_listing.h"
#include "server/market_clerk.h"
#include "server/node_table.h"
#include "server/plane_state.h"
#include "server/plane_views.h"
#include "server/prewarm_calls.h"
#include "server/reply.h"
#include "server/service_desk.h"
#include "store/store.h"

namespace tidepool {

class ControlPlane {
 public:
  // Builds the state from the configuration and what the store holds: running jobs are put back
  // where they run, pending jobs queued again, drained nodes cordoned. Jobs that can no longer be
  // restored (their node left the cluster file, their tenant the tenants file) are failed with
  // the reason; those changes go to `repairs`, to be committed before serving.
  // The stored tokens are loaded into `tokens` (replacing what it held), which the caller shares
  // with the threads that authenticate requests.
  static Result<std::unique_ptr<ControlPlane>> create(ControlPlaneSetup setup,
                                                      const Snapshot& snapshot, Instant now,
                                                      Batch& repairs,
                                                      std::shared_ptr<TokenTable> tokens);
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // --- jobs (job_desk.h) ---
  // Created with the new job; done with the existing one for a repeated idempotency key and the
  // same spec; kConflict for the same key with another spec.
  Reply submit(const Principal& who, JobSpec spec, const std::string& idempotency_key, Instant now,
               Batch& batch);
  Reply cancel(const Principal& who, JobId id, Instant now, Batch& batch);
  Reply report_status(const Principal& who, JobId id, const JobStatusReport& report, Instant now,
                      Batch& batch);
  Reply report_checkpoint(const Principal& who, JobId id, const CheckpointReport& report,
                          Instant now, Batch& batch);
  // Slurm's scontrol hold/release/requeue/update (JobDesk::hold ...), each answered with the job
  // as the API shows it. kConflict for a job in another state, and for a released job that could
  // not be queued again (it failed; the body is the job).
  Reply hold(const Principal& who, JobId id, Instant now, Batch& batch);
  Reply release(const Principal& who, JobId id, Instant now, Batch& batch);
  Reply requeue_job(const Principal& who, JobId id, Instant now, Batch& batch);
  Reply update_job(const Principal& who, JobId id, const JobUpdate& update, Instant now,
                   Batch& batch);
  [[nodiscard]] Reply get_job(const Principal& who, JobId id) const;
  // GET /v1/jobs from the plane itself; the server lists from snapshots (update_listing).
  [[nodiscard]] Reply list_jobs(const Principal& who, const JobFilter& filter) const;
  // Brings `cache` (each job's listed entry, by id) up to date for the jobs in `changed` (those a
  // committed batch wrote; all of them when `cache` is empty) and returns a snapshot of it with
  // the pending jobs' reasons as of now, as version `version`.
  [[nodiscard]] std::shared_ptr<const JobListing> update_listing(
      std::map<JobId, std::shared_ptr<const ListedJob>>& cache, const std::set<JobId>& changed,
      std::int64_t version) const;
  [[nodiscard]] Reply why(const Principal& who, JobId id, Instant now) const;
  // What the job could do to run faster or waste less (PlaneViews::advice).
  [[nodiscard]] Reply advise(const Principal& who, JobId id) const;
  // --- services (service_desk.h) ---
  // GET /v1/services: the running services `who` may see, each as ServiceDesk::view shows it.
  [[nodiscard]] Reply list_services(const Principal& who, Instant now) const;
  // GET /v1/services/{id}: one service (kNotFound for a job that is not a service).
  [[nodiscard]] Reply get_service(const Principal& who, JobId id, Instant now) const;
  // Whether `who` may read (write false) or append to (write true) job `id`'s task logs: done
  // with {"job", "tasks"}, or the refusal (JobDesk::log_access).
  [[nodiscard]] Reply log_access(const Principal& who, JobId id, bool write,
                                 std::optional<int> task = std::nullopt,
                                 std::optional<std::int64_t> run = std::nullopt) const;

  // --- nodes (node_table.h) ---
  [[nodiscard]] Reply list_nodes(const Principal& who) const;
  // GET /v1/pool: the pool as the dashboard draws it (PlaneViews::pool_map).
  [[nodiscard]] Reply pool_map(const Principal& who) const;
  // GET /v1/whoami: the caller's token, role and scope, and whether the server has a market.
  [[nodiscard]] Reply whoami(const Principal& who) const;
  Reply set_drained(const Principal& who, const std::string& node, bool drained,
                    const std::string& reason, Instant now, Batch& batch);
  Reply register_node(const Principal& who, const std::string& node,
                      const NodeRegistration& registration, Instant now, Batch& batch);
  // The reply carries what the node should run: a HeartbeatReply (api/agent_wire.h) with an
  // assignment per running job with a task on the node.
  Reply heartbeat(const Principal& who, const std::string& node, const NodeHeartbeat& heartbeat,
                  Instant now, Batch& batch);

  // --- tenants, queues, tokens (control_plane_admin.cc) ---
  [[nodiscard]] Reply list_tenants(const Principal& who) const;
  [[nodiscard]] Reply get_tenant(const Principal& who, const std::string& name) const;
  // An admin changes a tenant's entry of the tenants file (kept as a setting over restarts): the
  // scheduler is rebuilt with every live job; kConflict when one could not be put back.
  Reply put_tenant(const Principal& who, const std::string& name, const TenantUpdate& update,
                   Instant now, Batch& batch);
  [[nodiscard]] Reply list_queues(const Principal& who) const;
  Reply create_token(const Principal& who, const TokenRequest& request, Instant now, Batch& batch);
  // Creates an admin token without a caller (the server's first start); returns its secret.
  std::string bootstrap_admin(Instant now, Batch& batch);
  [[nodiscard]] Reply list_tokens(const Principal& who) const;
  Reply revoke_token(const Principal& who, const std::string& id, Instant now, Batch& batch);

  // --- the internal market (market_clerk.h) ---
  // The price in force of each GPU model (every role may read them): kNotFound when the server
  // runs without a market.
  Reply prices(Instant now);
  // GET /v1/history: the figures over time (history.h) that `who` may see: the pool's and the
  // prices to all, a tenant's to an admin and its users.
  Reply history(const Principal& who, HistoryQuery query) const;
  // A tenant's charges and lending credits per group (users: their own tenant only).
  [[nodiscard]] Reply bill(const Principal& who, const BillQuery& query) const;

  // --- bursting (burst_desk.h) ---
  // The hook runs asked for since the last call, in order.
  std::vector<ProviderCall> take_provider_calls() { return bursts_.take_provider_calls(); }
  // Hook run `call` ended (BurstDesk::provider_result); a failed `up` sends the job back to the
  // pool's queue.
  Reply provider_result(std::int64_t call, bool ok, const std::string& output, Instant now,
                        Batch& batch);

  // --- pre-warming (prewarm_calls.h) ---
  // The pre-warm hook runs the passes asked for since the last call, in order (none without
  // pre-warming).
  std::vector<PrewarmHookCall> take_prewarm_calls() { return std::exchange(prewarm_calls_, {}); }

  // --- scheduling ---
  // Whether something changed since the last schedule() that a pass should see.
  [[nodiscard]] bool wants_pass() const { return state_.dirty(); }
  // Stops jobs past their max_runtime or max_cost, marks silent nodes NotReady (requeueing their
  // jobs) and gives up rentals that failed, runs a scheduler pass and applies it (with
  // pre-warming: each start counted as pre-warmed or not, the hook's calls asked for), sends the
  // jobs waiting past the burst threshold to rented capacity, and posts the ledger when due.
  void schedule(Instant now, Batch& batch);

  // Writes the documents of the jobs a round changed into `batch`, once per job and as each job
  // stands now: the methods above only name a changed job in `batch.jobs` (a record without a
  // document), so a job submitted and started in one round is serialised once. Call it when the
  // round is done, before the batch is committed; create() seals its repairs itself.
  void seal(Batch& batch) const { state_.seal(batch); }
  // The next time a pass has something to do without an outside event, if any. Cheap: the jobs'
  // own deadlines (max_runtime, the burst threshold) are those the last pass found; a job started
  // or requeued outside a pass since then is seen by the next pass (the tick's at the latest).
  // A pre-warm call falling due is one (PrewarmPlanner::due_at).
  [[nodiscard]] std::optional<Instant> next_wakeup(Instant now) const;

  // --- retention ---
  // Removes up to `most` jobs that ended setup.finished_jobs_kept_days before `now` from the
  // plane and (batch.jobs_removed) the store, but those a live job runs after. Whether more are
  // due (the caller calls again at once).
  bool remove_finished(Instant now, std::size_t most, Batch& batch);

  // --- figures for metrics ---
  using Figures = PlaneFigures;
  [[nodiscard]] Figures figures() const { return views_.figures(); }
  [[nodiscard]] std::int64_t last_event_seq() const { return state_.last_event_seq(); }

 private:
  ControlPlane(ControlPlaneSetup setup, Scheduler scheduler, std::shared_ptr<TokenTable> tokens);

  // Marks NotReady the nodes whose agents fell silent, and requeues their running jobs.
  void check_liveness(Instant now, Batch& batch);
  // A heartbeat added steps to `job`: stages its document when steps have waited unwritten for
  // setup.steps_stored_every (ControlPlaneSetup).
  void note_steps(const ServerJob& job, Instant now, Batch& batch);
  // Builds a scheduler from `tenants` and puts every live job back into it, the nodes cordoned
  // as they are.
  Result<Scheduler> rebuild_scheduler(const TenantsSpec& tenants, Instant now) const;
  // The tenants file with the tenants changed by PUT /v1/tenants.
  static Result<TenantsSpec> apply_overrides(TenantsSpec base,
                                             const std::map<std::string, TenantUpdate>& overrides,
                                             const GpuModelCatalog& models);

  // The parts, each given those it calls (declared in that order: a part is built after them).
  PlaneState state_;
  MarketClerk clerk_{state_};
  NodeTable nodes_{state_, clerk_};
  BurstDesk bursts_{state_, clerk_, nodes_};
  JobDesk jobs_{state_, clerk_, bursts_};
  ServiceDesk services_{state_, jobs_, nodes_, clerk_};
  PlaneViews views_{state_, jobs_, nodes_, bursts_, clerk_};
  History history_{state_.setup().history_interval, state_.setup().history_hours_kept};
  std::map<std::string, TenantUpdate> tenant_overrides_;  // PUT /v1/tenants, by tenant
  std::optional<Instant> jobs_wakeup_;                    // the jobs' deadlines at the last pass
  std::vector<PrewarmHookCall> prewarm_calls_;            // asked, not yet taken
  // The running jobs whose reported steps are not all written, since when (note_steps); jobs no
  // longer running leave it at the next retention sweep (remove_finished).
  std::map<JobId, Instant> steps_unstored_since_;
};

}  // namespace tidepool
