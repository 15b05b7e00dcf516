// Bursting: a job that has waited past a threshold may run on rented capacity (a cloud's
// on-demand or spot GPUs) offered by a provider, at the offer's price, if its tenant's budget
// allows. Pure: the server runs the provider's hook for what choose_bursts decides; the simulator
// models the provider.
//
// The rule, for each pending job that has waited at least `threshold` (longest wait first, then
// job id):
//   - an offer is eligible if it rents a GPU model the job's tasks accept, has room for the job's
//     GPUs (its max_gpus less what is rented now and what this call already chose), and, for spot
//     offers, only if the job is preemptible and checkpoints (spot capacity can be taken back);
//   - the estimated cost is GPUs x (predicted runtime + start-up delay) x the offer's price;
//   - a tenant with a budget must have that much left (its budget's remaining, less what this call
//     already chose for it); a tenant without a budget is not limited;
//   - the cheapest eligible estimate wins (ties: the lower offer index). A job with none waits
//     in the pool, with the reason of the last refusal.
// Everything is ordered, so the same inputs give the same choices.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/cost_ledger.h"
#include "core/error.h"
#include "core/gpu_model.h"
#include "core/ids.h"
#include "core/money.h"
#include "core/resources.h"

namespace tidepool {

struct BurstOffer {
  std::string name;      // unique, e.g. "cloud-h100-spot"
  std::string provider;  // the provider (hook) that rents it
  GpuModelId model;
  bool spot = false;
  Micros price_per_gpu_hour = 0;  // > 0
  Seconds startup_delay = 0;      // from the decision until the job runs, >= 0 (paid for)
  std::int64_t max_gpus = 0;      // rented at once, > 0
  // Spot only: the share of its hours that the provider takes back, for the simulator's model
  // (an interruption costs the work since the last checkpoint and another start-up delay).
  Ppm interruption_per_hour = 0;
};

struct BurstPolicy {
  Seconds threshold = 2 * 3600;  // > 0
};

// Checks offers (names unique and non-empty, figures in range) and the policy; errors name
// "offers[i].<field>" or "threshold".
Result<void> validate_burst(std::span<const BurstOffer> offers, const BurstPolicy& policy);

struct BurstCandidate {
  JobId job;
  TenantId tenant;
  ModelSet models;        // the models its tasks accept
  std::int64_t gpus = 0;  // whole GPUs of the gang (a fraction counts as one)
  Seconds waited = 0;     // since it was submitted or last preempted
  Seconds predicted_runtime = 0;
  bool preemptible = false;
  bool checkpoints = false;
};

struct BurstDecision {
  JobId job;
  std::size_t offer = 0;  // index into the offers
  Micros estimated_cost = 0;
};

struct BurstRefusal {
  JobId job;
  std::string reason;  // "budget: tenant vision has 120.00 left, the cheapest offer needs 340.00"
};

struct BurstChoice {
  std::vector<BurstDecision> decisions;
  std::vector<BurstRefusal> refusals;  // candidates past the threshold that stay in the pool
};

// The candidates: which waiting jobs go to choose_bursts, and with what figures. The simulator and
// the server both build their list with burst_candidates:
//   - a job waits in the pool's queue (the driver lists those; jobs it keeps out of the pool's
//     scheduling, a simulated loan or a job already renting, it leaves out) for at least the
//     threshold, counted from when it was submitted or last preempted or queued again;
//   - a job without GPUs never bursts (offers rent GPUs);
//   - longest wait first, then job id; at most kMaxBurstCandidates (the longest waiting);
//   - GPUs: rented_gpus(job), one node per task as a provider rents them;
//   - runtime: the scheduler's prediction made at submission (core/runtime_predictor.h); for a
//     job it has no prediction of, what its predictor says with no history: the job's runtime
//     estimate, else the predictor's default runtime. (Before, the simulator fell back to a
//     literal 3600 s and skipped no CPU-only job; the server used the estimate.)
inline constexpr std::size_t kMaxBurstCandidates = 1000;

class Scheduler;
struct Job;

struct WaitingJob {
  const Job* job = nullptr;  // not null
  Seconds waited = 0;        // whole seconds in the queue
};

// The GPUs a job rents: one whole GPU for each of each task's GPUs (a fraction rents a whole).
std::int64_t rented_gpus(const Job& job);

// The candidates among `waiting` for the policy's threshold, in the order above.
std::vector<BurstCandidate> burst_candidates(std::span<const WaitingJob> waiting,
                                             const Scheduler& scheduler, const BurstPolicy& policy);

// `rented_gpus[i]`: GPUs of offer i in use now; `remaining_budget[t]`: what tenant t may still
// spend (nullopt: no budget), indexed by tenant id (a tenant past the end has no budget).
BurstChoice choose_bursts(std::span<const BurstCandidate> candidates,
                          std::span<const BurstOffer> offers,
                          std::span<const std::int64_t> rented_gpus,
                          std::span<const std::optional<Micros>> remaining_budget,
                          const BurstPolicy& policy);

// GPUs x seconds x price per GPU-hour, rounded half away from zero.
Micros rented_cost(std::int64_t gpus, Seconds seconds, Micros price_per_gpu_hour);

// The two ledger entries of `amount` (> 0) paid for job `job`'s `gpus` rented GPUs of `offer`
// (index `offer_index`, the provider account it is owed to) over [from, to]: the tenant's burst
// charge (tenant -> pool) and the pool's burst cost (pool -> provider), at the offer's price.
std::array<LedgerEntry, 2> burst_entries(JobId job, TenantId tenant, std::uint32_t offer_index,
                                         const BurstOffer& offer, std::int64_t gpus, Seconds from,
                                         Seconds to, Micros amount);

}  // namespace tidepool
