// The internal market inside the server (`market: PATH` in the server's configuration): the same
// meter and ledger the simulator drives (core/charge_meter.h, core/cost_ledger.h, sim/sim_market.h)
// charge every running job at the price in force and credit lenders; the control plane stores each
// ledger entry (store.h: LedgerRecord) and holds back tenants whose quarterly budget is spent.
//
// Time is Unix seconds (day_offset 0: time 0 is midnight UTC). The caller keeps the meter in step:
// advance(now) before any change of what runs, then start()/stop() at now; post(now) every
// posting interval. Entries appended since the last take_unstored() are handed out as store
// records, numbered after those already stored.
//
// Usage is metered from what runs, whatever the policy: the market keeps its own copy of the
// tenants' book with every running job's GPUs recorded, so lending credits are the same kind of
// figure with or without quotas.
//
// Stored entries name tenants and models (their ids may change when the files do): on restart they
// are appended again in seq order, which rebuilds every balance; an entry whose tenant or model the
// files no longer have stays in the store but out of the balances (counted in skipped()).
//
// A value type owned by the control plane; not synchronised.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "config/market_file.h"
#include "core/budget.h"
#include "core/burst.h"
#include "core/charge_meter.h"
#include "core/cost_ledger.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/tenants.h"
#include "core/tidal_window.h"  // kSecondsPerDay
#include "store/store.h"

namespace tidepool {

inline constexpr Seconds kDefaultLedgerPostingInterval = 60;

// The entry as stored: {"kind", "tenant", "model", "job" (or null), "milli", "amount"
// (micro-credits), "from", "to", "price_per_hour" (micro-credits), "provider" (burst cost only)}.
nlohmann::json ledger_entry_json(const LedgerEntry& entry, const TenantBook& book,
                                 const GpuModelCatalog& models);
// Reads a stored entry back with the current ids; fails naming the field (an unknown tenant or
// model included).
Result<LedgerEntry> ledger_entry_from_json(const nlohmann::json& document, const TenantBook& book,
                                           const GpuModelCatalog& models);

// A tenant's charges and lending credits over some span.
struct MoneyTotals {
  Micros charges = 0;
  Micros credits = 0;
};

class ServerMarket {
 public:
  // `pool` and `book` with nothing running yet (usage is recorded by start()); `stored`: the
  // ledger as stored, in seq order.
  static Result<ServerMarket> create(MarketSpec spec, Seconds posting_interval, const Pool& pool,
                                     const TenantBook& book, std::span<const LedgerRecord> stored,
                                     Seconds now);

  // Accrues up to `now` (a clock that went back is held where it was).
  Result<void> advance(Seconds now, const Pool& pool);
  // A job starts running now (advance first) on `assignments` of `pool`, its tasks holding
  // `milli_per_task` (all models) each; a job without GPUs is not metered.
  Result<void> start(JobId job, TenantId tenant, std::span<const Assignment> assignments,
                     std::int64_t milli_per_task, const Pool& pool, PriceClass price_class,
                     Seconds now);
  // A running job stops now (advance first): its charges are posted. Unknown jobs are ignored.
  Result<void> stop(JobId job, Seconds now);
  [[nodiscard]] bool posting_due(Seconds now) const { return now >= next_post_; }
  // Posts everything accrued up to now (advance first) and sets the next posting time.
  Result<void> post(Seconds now);
  // The tenants changed (quotas): `book` replaces the market's, with the running jobs' usage
  // recorded again.
  Result<void> replace_book(const TenantBook& book);

  // Bursting (core/burst.h): the offers of the market file (models interned like the pool's), and
  // the policy when the file sets a threshold.
  [[nodiscard]] const std::vector<BurstOffer>& burst_offers() const { return offers_; }
  [[nodiscard]] std::optional<BurstPolicy> burst_policy() const;
  // Charges job `job` of `tenant` for `gpus` GPUs of offer `offer` over [from, to) at the offer's
  // price (a burst charge to the tenant and a burst cost owed to the provider); returns the amount
  // (0 for an interval too short to cost a micro-credit: nothing is appended).
  Result<Micros> charge_burst(JobId job, TenantId tenant, std::size_t offer, std::int64_t gpus,
                              Seconds from, Seconds to);
  // What each tenant may still spend this quarter (by tenant id; nullopt: no budget), for
  // choose_bursts.
  [[nodiscard]] std::vector<std::optional<Micros>> remaining_budgets(Seconds now) const;

  // The entries appended since the last call, as store records (tenants and models by name).
  std::vector<LedgerRecord> take_unstored(const GpuModelCatalog& models);

  [[nodiscard]] const MarketSpec& spec() const { return spec_; }
  [[nodiscard]] const ChargeMeter& meter() const { return meter_; }
  [[nodiscard]] const CostLedger& ledger() const { return ledger_; }
  [[nodiscard]] std::size_t skipped() const { return skipped_; }
  [[nodiscard]] Seconds posting_interval() const { return posting_interval_; }
  [[nodiscard]] Seconds next_post() const { return next_post_; }
  // The quarterly budget of a tenant, if the market file gives one.
  [[nodiscard]] std::optional<Budget> budget(TenantId tenant) const;
  // What a job has been charged over all its runs, posted or not (whole micro-credits): for
  // max_cost.
  [[nodiscard]] Micros job_cost(JobId job) const;
  // All-time totals of a tenant (entries in the balances).
  [[nodiscard]] MoneyTotals tenant_totals(TenantId tenant) const;
  // Totals of the tenant's entries whose interval ends in [from, to) (whole UTC days: from and to
  // are rounded down to midnight).
  [[nodiscard]] MoneyTotals days_totals(TenantId tenant, Seconds from, Seconds to) const;
  // The first UTC day the market ran (days since 1970-01-01): of its first stored entry, else of
  // its creation. Days before it have no history.
  [[nodiscard]] std::int64_t first_day() const { return first_day_; }
  // The tenant's charges of each UTC day from `first_day` (days since 1970-01-01) for `count`
  // days, oldest first.
  [[nodiscard]] std::vector<Micros> daily_charges(TenantId tenant, std::int64_t first_day,
                                                  int count) const;

 private:
  ServerMarket(MarketSpec spec, Seconds posting_interval, ChargeMeter meter, TenantBook book,
               Seconds now);
  // Adds the entries appended since the last call to the tenants' totals.
  void absorb();

  MarketSpec spec_;
  std::vector<BurstOffer> offers_;
  Seconds posting_interval_ = kDefaultLedgerPostingInterval;
  ChargeMeter meter_;
  CostLedger ledger_;
  TenantBook book_;  // usage as it runs
  Seconds next_post_ = 0;
  std::map<JobId, std::pair<TenantId, std::vector<ModelMilli>>> running_;
  std::map<JobId, Micros> ended_runs_;  // charges of each job's runs that ended
  std::map<std::string, Budget, std::less<>> budgets_;
  std::size_t absorbed_ = 0;  // entries summed into the totals
  std::size_t stored_ = 0;    // entries already in the store (or read from it)
  std::int64_t next_seq_ = 1;
  std::size_t skipped_ = 0;
  std::int64_t first_day_ = 0;
  std::map<std::uint32_t, MoneyTotals> totals_;                         // by tenant id
  std::map<std::pair<std::uint32_t, std::int64_t>, MoneyTotals> days_;  // (tenant, day)
};

}  // namespace tidepool
