// The control plane's side of bursting (core/burst.h): a pending job that waited past the market
// file's burst threshold is sent to capacity rented from a provider, through the provider's hook.
//
// A rental, step by step:
//   1. Each pass, the jobs waiting past the threshold (longest first) go through choose_bursts
//      with the offers, the GPUs each offer has rented now and the tenants' remaining budgets. A
//      chosen job leaves the scheduler's queue (it stays pending) and gets a BurstRun: one node per
//      task, named "<offer>-<job>-<rental>-<task>", and an agent token per node.
//   2. The server runs `<hook> up` with the request on stdin (provider_hooks.h): the offer, the
//      job, and per node its name, task, GPUs and agent token. The hook rents the machines and
//      starts `tidepool agent --node NAME --token TOKEN` on each (cloud-init, a pod, ...).
//   3. Each rented node's agent registers like any agent (it needs as many GPUs as its task).
//      Once all have, the job runs there: placement on the rented nodes, assignments in their
//      heartbeats, exits and checkpoints reported as usual. The pool's scheduler never sees it.
//   4. When the job ends (succeeded, failed, cancelled, stopped at a cap), or a rented node falls
//      silent, or the nodes do not come up within the offer's start-up delay plus the heartbeat
//      timeout plus two minutes, the server runs `<hook> down` with the nodes, revokes their
//      tokens, and (for a silent node or a late start) queues the job in the pool again.
//   5. Money: the tenant is charged the offer's price for every rented GPU from the `up` request
//      to the release (start-up paid), at each ledger posting and at the end; the same amount is
//      booked as owed to the provider (EntryKind::kBurstCharge / kBurstCost). A failed `up`
//      rented nothing and is not charged; the offer then rests for max(threshold, 5 minutes).
//
// Hooks must be idempotent: after a restart the server asks `up` again (with new tokens) for a
// rental whose nodes had not all registered, and `down` may be asked for nodes already gone.
//
// The desk gives rentals up; queueing their jobs in the pool again is the job desk's
// (JobDesk::requeue_from_burst), which the control plane calls with what the desk returns.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/market_clerk.h"
#include "server/node_table.h"
#include "server/plane_state.h"

namespace tidepool {

// A run of a burst provider's hook (market file: burst.providers[].hook) that the control plane
// asks for; the server runs it (provider_hooks.h) once the round that asked is committed, as
// `<hook> up|down` with `request` on its standard input, and reports the end with
// ControlPlane::provider_result().
struct ProviderCall {
  std::int64_t id = 0;
  std::string provider;
  std::string hook;
  std::string action;  // "up" or "down"
  JobId job;
  nlohmann::json request;
};

// A rental given up: its job goes back to the pool's queue for `reason`, charged up to now
// (`charge`) or not (nothing was rented).
struct LostRental {
  JobId job;
  std::string reason;
  bool charge = true;
};

class BurstDesk {
 public:
  BurstDesk(PlaneState& state, MarketClerk& clerk, NodeTable& nodes)
      : state_(state), clerk_(clerk), nodes_(nodes) {}

  // After a restart: the rented nodes of the live jobs again, and `up` asked again for rentals
  // that had not come up. Returns the rentals whose offer left the market file.
  std::vector<LostRental> restore(Instant now, Batch& repairs);

  // Sends the jobs that waited past the market's threshold to rented capacity (choose_bursts).
  void rent_waiting(Instant now, Batch& batch);
  // Rentals whose nodes did not come up in time, and rented nodes that fell silent.
  std::vector<LostRental> lost_rentals(Instant now);
  // Ends a job's rental: charged up to now (`charge`, unless nothing was rented), `down` asked,
  // tokens revoked, nodes forgotten.
  void release(ServerJob& job, const std::string& reason, bool charge, Instant now, Batch& batch);

  // A rented node's agent registered: kConflict when it has fewer GPUs than its task needs.
  Outcome<void> register_node(const std::string& node, const NodeRegistration& registration,
                              Instant now, Batch& batch);
  // A rented node's agent was heard from (NodeTable::heard_from); returns the job it runs, if it
  // runs.
  std::vector<const ServerJob*> heard_from(const PlaneNode& node, Instant now, Batch& batch);

  // The hook runs asked for since the last call, in order.
  std::vector<ProviderCall> take_provider_calls();
  // Hook run `call` ended: `ok` false (a non-zero exit, a timeout, no such program) with what it
  // printed. A failed `up` of a rental still awaited gives it up (returned); the offer is not
  // used again for a while. A failed `down` is an event for the operator (the nodes may still be
  // rented).
  std::optional<LostRental> provider_result(std::int64_t call, bool ok, const std::string& output,
                                            Instant now, Batch& batch);

  // --- what the views show ---
  // Why a waiting job was not rented at the last pass, by job.
  [[nodiscard]] const std::map<JobId, std::string>& refusals() const { return refusals_; }
  // The GPUs rented now (coming up or in use) of each offer, by offer index.
  [[nodiscard]] std::vector<std::int64_t> rented_gpus_by_offer() const;
  [[nodiscard]] std::int64_t rentals() const { return rentals_; }  // since the server started

 private:
  // Asks the offer's provider for the job's nodes, with an agent token for each.
  void rent(ServerJob& job, std::size_t offer, Instant now, Batch& batch);
  // (Re)asks `up` for a job's rental, with fresh agent tokens (old ones revoked).
  void request_up(ServerJob& job, Instant now, Batch& batch);
  // When every node of a pending job's rental has registered, the job runs there.
  void start_when_up(ServerJob& job, Instant now, Batch& batch);
  // Queues a run of the hook of `run`'s provider for `job`: `request` with the action, provider,
  // offer and job added. Returns the call's id.
  std::int64_t ask_provider(const ServerJob& job, const BurstRun& run, const std::string& action,
                            nlohmann::json request);

  PlaneState& state_;
  MarketClerk& clerk_;
  NodeTable& nodes_;
  std::vector<ProviderCall> provider_calls_;  // asked, not yet taken
  std::int64_t next_call_id_ = 1;
  std::map<std::int64_t, std::pair<JobId, Instant>> awaited_up_;  // (job, requested)
  std::map<std::string, Instant> offer_paused_until_;             // after a failed `up`
  std::map<JobId, std::string> refusals_;                         // job -> why it was not rented
  std::int64_t rentals_ = 0;
};

}  // namespace tidepool
