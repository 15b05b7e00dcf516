// The services of the control plane (`kind: service`, api/service_spec.h): each keeps its
// replicas, jobs of one task that the scheduler places like any other (they count against the
// service's tenant, in its queue, with the service's spread rule), at the count the core
// autoscaler wants. Pure like the core: no I/O, threads or clock.
//
// A service's job runs from its submission until it is cancelled; it is never queued, placed or
// live itself. Every scheduling round (ControlPlane::schedule), for each service:
//   - its replicas' phases: pending (waiting for a place), starting (placed; no figures yet and
//     within `startup` of its start), ready (it reported figures, or `startup` passed), draining
//     (taken out of service: no longer an endpoint; stopped `drain` after);
//   - a draining replica whose `drain` has passed is stopped (cancelled, "drained");
//   - the ready replicas' latest figures (from their agents' heartbeats, at most kFreshFigures
//     old) make one Observation for the service's Autoscaler (core/autoscaler.h);
//   - the autoscaler's decision and core/service_replicas.h's plan: replicas are submitted,
//     withdrawn, stopped or drained. A replica that ended (it failed, its node died, a user
//     cancelled it) is no longer counted, so the plan replaces it.
// The autoscaler's state (its windows) lives in memory: after a restart a service starts its
// windows again from the replicas' next reports, holding its replica count until then.
//
// The figures a service's Observation carries, from its ready replicas' reports:
//   queue_per_replica        the requests waiting, summed;
//   concurrency_per_replica  the requests in flight (or, without that gauge, the mean
//                            concurrency by Little's law), summed;
//   p95_latency_ms           the p95s weighted by each replica's request rate (the highest when
//                            no replica gives a rate); and when every reporting replica gives its
//                            rate and mean latency, the load for the queueing model: the rates
//                            summed and the rate-weighted mean service time (latency less the
//                            time queued).
//
// Cost-first: a service that declares what a replica does on some of its GPU models
// (service.models: throughput and p95) gets each new replica on the model with the lowest price
// per thousand requests that meets its p95 target (any rate, for another target) and has room for
// it now: its tenant's quota admits it and a node holds it (core/cost_first.h; the market's
// standard price per GPU-hour in force, or one price for all without a market). The replica's
// spec then names that model alone; with no such model the replica may take any of the service's
// models, as the scheduler finds. The last choice and its reason are in the view.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/agent_wire.h"
#include "core/autoscaler.h"
#include "core/service_replicas.h"
#include "server/job_desk.h"
#include "server/market_clerk.h"
#include "server/node_table.h"
#include "server/plane_state.h"

namespace tidepool {

// The longest wait before a failed replica is replaced (ServiceDesk::note_failures).
inline constexpr Millis kMaxReplicaBackoff = std::chrono::minutes{5};

// How old a replica's figures may be and still count (a few agent heartbeats).
inline constexpr Millis kFreshFigures = std::chrono::seconds{10};

class ServiceDesk {
 public:
  ServiceDesk(PlaneState& state, JobDesk& jobs, const NodeTable& nodes, const MarketClerk& clerk)
      : state_(state), jobs_(jobs), nodes_(nodes), clerk_(clerk) {}

  // A running service job (new, or loaded after a restart) is kept from now.
  void adopt(const ServerJob& service);
  [[nodiscard]] bool is_service(JobId id) const { return services_.contains(id); }
  [[nodiscard]] bool any() const { return !services_.empty(); }

  // One round: drains, figures, the autoscaler's decision, and the plan applied (file comment).
  void tick(Instant now, Batch& batch);

  // After a pass: the replicas it started get their ports (ensure_port), before any heartbeat
  // sends them to their agents.
  void placed(Instant now, Batch& batch);

  // The service ended (cancelled): every replica it has is cancelled too (stopped, not drained),
  // and the service is no longer kept.
  void ended(const ServerJob& service, Instant now, Batch& batch);

  // The agent of `node` reported these figures: each is kept for a running replica of this
  // run with its task on `node`; others are ignored (a late report, another node's job).
  void note_figures(const std::string& node, const std::vector<ReplicaReport>& reports,
                    Instant now);

  // The replica's side of its assignment (where its agent reads its figures), giving a running
  // replica its port first if it has none yet (ensure_port); nullopt for a job that is not a
  // replica.
  std::optional<ReplicaAssignment> replica_assignment(ServerJob& job, Instant now, Batch& batch);

  // The service as the API shows it: {"service": 7, "name", "tenant", "state", "min_replicas",
  // "max_replicas", "target": {"metric", "value"}, "spread", "wanted", "decision": {"wanted",
  // "panic", "reason", "at_ms"} (null before the first), "replicas": [{"job", "phase", "node",
  // "port", "since_ms", "figures": {...} | null}], "endpoints": [{"job", "node", "url"}],
  // "model_choice": {"model", "reason"} | null}.
  // The endpoints are the ready replicas with a port: where to send requests.
  [[nodiscard]] nlohmann::json view(const ServerJob& service, Instant now) const;

  // The next time a round has something to do for the services (their autoscalers decide every
  // round while any service runs).
  [[nodiscard]] std::optional<Instant> next_wakeup(Instant now) const;

 private:
  struct Reported {
    std::int64_t run = 0;
    Instant at;
    ReplicaFigures figures;
  };
  // A cost-first choice of a replica's model: the model ("" when none was chosen) and why.
  struct ModelChoice {
    std::string model;
    std::string reason;
  };
  struct Service {
    Autoscaler scaler;
    std::optional<ScaleDecision> decision;
    Instant decided_at;
    std::optional<ModelChoice> model_choice;  // the last one
    // Back-off: the live replicas at the last round, the replicas that failed in a row since one
    // was last ready, and when the next replica may be submitted after such a failure.
    std::vector<JobId> seen;
    int failures = 0;
    Instant retry_at = kNotYet;
    Instant failed_at = kNotYet;  // the last failure
  };
  // Notes the replicas that ended failed since the last round (`live`: the live ones now):
  // after each, the next replica waits 2^failures seconds (at most kMaxReplicaBackoff), so that a
  // replica that cannot start is not replaced every round; a replica that started after the last
  // failure and became ready ends the back-off.
  void note_failures(const ServerJob& service, Service& kept, const std::vector<JobId>& live,
                     Instant now, Batch& batch);

  // The model of the next replica of a service that declares models' figures (file comment);
  // nullopt for one that declares none.
  [[nodiscard]] std::optional<ModelChoice> choose_model(const ServerJob& service) const;

  // The live replicas of a service, in id order (a copy: ending one changes the plane's set).
  [[nodiscard]] std::vector<JobId> replicas_of(JobId service) const;
  // Where a node's replicas are reached: its agent's registered address, or its name.
  [[nodiscard]] std::string address_of(const std::string& node) const;
  [[nodiscard]] ReplicaPhase phase_of(const ServerJob& replica, Instant now) const;
  // The figures of `replica` for its current run, if fresh.
  [[nodiscard]] const ReplicaFigures* fresh_figures(const ServerJob& replica, Instant now) const;
  // The service's observation from its ready replicas' figures; nullopt when none reported.
  [[nodiscard]] std::optional<Observation> observe(const ServerJob& service,
                                                   const std::vector<JobId>& replicas,
                                                   Instant now) const;
  // Gives a running replica of a service with a metrics_port the lowest port from it that no
  // other running replica (of any service) has at the same address (its node's registered
  // address, or its name: nodes that share a machine share its ports): replicas sharing a
  // machine do not collide, a replica alone there serves on metrics_port itself, and the port
  // its agent scrapes is the server's, never one of another service's replicas.
  void ensure_port(ServerJob& replica, Instant now, Batch& batch);
  void apply(ServerJob& service, Service& kept, std::vector<JobId> replicas,
             const ReplicaPlan& plan, Instant now, Batch& batch);

  PlaneState& state_;
  JobDesk& jobs_;
  const NodeTable& nodes_;
  const MarketClerk& clerk_;
  std::map<JobId, Service> services_;
  std::map<JobId, Reported> figures_;  // by replica
};

}  // namespace tidepool
