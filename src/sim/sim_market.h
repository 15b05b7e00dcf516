// The internal market inside a simulation (sim/cluster_simulation.h): the market desk the server
// drives too (core/market_desk.h: meter, ledger, usage, totals) charges every job of the run at
// the price in force and credits lenders, the budget watch (core/budget_watch.h) holds back
// tenants that spent their quarter's budget and counts spend anomalies, and the run's cost
// figures come out at the end. What is the simulator's own: its clock (postings every
// `posting_interval` seconds of simulated time, and when a job stops; `epoch` is the Unix time of
// simulation time 0) and its figures (SimCost).
//
// Budgets and anomalies are checked after each posting: a tenant whose spend in the current
// quarter reaches its budget is held back (Scheduler::set_budget_exhausted) until the first
// posting of the next quarter, or until lending credits bring it back under.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/market_file.h"
#include "core/budget.h"
#include "core/budget_watch.h"
#include "core/burst.h"
#include "core/cost_ledger.h"
#include "core/error.h"
#include "core/market_desk.h"
#include "core/pool.h"
#include "core/pricing.h"
#include "core/scheduler.h"
#include "core/tenants.h"

namespace tidepool {

struct SimMarketSettings {
  PriceSchedule prices;
  std::vector<Micros> cost_base;               // per model id of the pool
  std::vector<Micros> owned_per_hour;          // per model id: TCO of one GPU-hour, used or not
  std::vector<std::optional<Budget>> budgets;  // per tenant id (missing: no budget)
  std::int64_t epoch = 0;                      // Unix time of simulation time 0
  Seconds posting_interval = 3600;             // > 0
  // Bursting (core/burst.h): the offers of the providers, and the policy when bursting is on.
  std::vector<BurstOffer> offers;
  std::optional<BurstPolicy> burst;
};

// One tenant's money over the run.
struct SimTenantCost {
  Micros charges = 0;          // what it paid, all entries
  Micros credits = 0;          // lending credits earned
  int budget_alerts = 0;       // quarters in which it passed its soft alert
  int budget_exhaustions = 0;  // quarters in which it reached its budget
  int spend_anomalies = 0;     // days whose spend passed twice the trailing 7-day average
  Seconds budget_held_s = 0;   // time it was held back for budget
};

struct SimCost {
  std::vector<SimTenantCost> tenants;  // by tenant id
  Micros charged = 0;                  // all tenants' charges
  Micros credited = 0;                 // all lending credits
  // The pool's cost of ownership over [0, end]: every GPU, used or not, at its owned rate.
  Micros owned_cost = 0;
  std::int64_t useful_milli_seconds = 0;     // work kept, at ideal placement
  std::int64_t allocated_milli_seconds = 0;  // GPUs held, all segments
  // charged / useful GPU-hours, and owned_cost / useful GPU-hours; 0 when nothing useful ran.
  Micros charged_per_useful_gpu_hour = 0;
  Micros owned_per_useful_gpu_hour = 0;
  // Bursting: jobs sent to rented capacity, the GPU-seconds rented (start-up delays included),
  // what they cost, and spot interruptions.
  int burst_jobs = 0;
  std::int64_t burst_milli_seconds = 0;
  Micros burst_cost = 0;
  int spot_interruptions = 0;
  // The company's spend: the pool's cost of ownership plus what rented capacity cost, and that
  // per useful GPU-hour.
  Micros total_cost = 0;
  Micros total_per_useful_gpu_hour = 0;
  std::size_t ledger_entries = 0;
  bool ledger_balanced = false;  // balances sum to 0 and rebuild from the entries alone
};

// The simulator's market from a market file: the price schedule, each model's cost base and
// owned rate for the pool's catalog, and the budgets by tenant of `book`. Budgets of tenants the
// book lacks (a market file shared with other tenants files) are skipped and their names added
// to `skipped`. Bursting stays off.
Result<SimMarketSettings> sim_market_settings(const MarketSpec& market,
                                              const GpuModelCatalog& catalog,
                                              const TenantBook& book, std::int64_t epoch,
                                              std::vector<std::string>& skipped);

class SimMarket {
 public:
  // `pool` and `book` as the run starts (nothing running), at time `start`.
  static Result<SimMarket> create(SimMarketSettings settings, const Pool& pool,
                                  const TenantBook& book, Seconds start);

  // Accrues up to `now` with the pool as it stood since the last call, posts and checks budgets
  // and spend at every posting time passed (telling `scheduler` which tenants are held back).
  Result<void> advance(Seconds now, const Pool& pool, Scheduler& scheduler);
  // A job started now holding `assignments` of `pool`, in `price_class`.
  Result<void> start(const Job& job, std::span<const Assignment> assignments, const Pool& pool,
                     PriceClass price_class, Seconds now);
  // A running job stopped now (finished, preempted or stopped at its cap).
  Result<void> stop(JobId job, Seconds now);
  // Work kept by a job that finished or stopped: `milli` GPUs x `ideal_seconds` of work.
  void add_useful(std::int64_t milli, Seconds ideal_seconds);
  // What each tenant may still spend in the quarter holding `now` (nullopt: no budget), by
  // tenant id.
  [[nodiscard]] std::vector<std::optional<Micros>> remaining_budgets(Seconds now) const {
    return desk_.remaining_budgets(now);
  }
  // A job ran on rented capacity of offer `offer` over [from, to) (start-up delays included) with
  // `gpus` GPUs, paying for `rented_seconds`, interrupted `interruptions` times: its tenant is
  // charged the offer's price and the pool owes the provider as much.
  Result<void> charge_burst(const Job& job, std::size_t offer, Seconds from, Seconds to,
                            std::int64_t gpus, Seconds rented_seconds, int interruptions);

  // Posts everything and returns the figures for a run that ended at `end` (its makespan from
  // `start`).
  Result<SimCost> finish(Seconds end);

  [[nodiscard]] const MarketDesk& desk() const { return desk_; }

 private:
  SimMarket(SimMarketSettings settings, MarketDesk desk, Seconds start);
  // Posts at `t` and counts what the budget watch finds.
  Result<void> post(Seconds t, Scheduler& scheduler);

  SimMarketSettings settings_;
  MarketDesk desk_;
  BudgetWatch watch_;
  Seconds start_ = 0;
  Seconds next_post_ = 0;
  std::vector<SimTenantCost> tenants_;  // alerts, exhaustions, anomalies and holds
  std::vector<Seconds> held_since_;
  std::int64_t useful_milli_seconds_ = 0;
  std::int64_t allocated_milli_seconds_ = 0;  // running GPUs x time, accrued by advance()
  int burst_jobs_ = 0;
  std::int64_t burst_milli_seconds_ = 0;
  Micros burst_cost_ = 0;
  int spot_interruptions_ = 0;
  std::vector<std::int64_t> model_gpus_;  // GPUs of each model in the pool
};

}  // namespace tidepool
