// The internal market's desk: everything the simulator and the server keep to charge what runs,
// in one place, so that both drive the same rules. It owns the meter (core/charge_meter.h), the
// ledger (core/cost_ledger.h), its own copy of the tenants' book with every running job's GPUs
// recorded, the running jobs, and the totals the budgets and the anomaly check read (per tenant,
// per UTC day, per quarter). Values in, figures out: no clock, no I/O; the drivers keep their own
// clock (virtual or wall), their reports and their store.
//
// Driving it: before anything changes at time `now` (a job starts or stops, the pool's usage
// changes), advance(now, pool) with the pool as it stood since the last call; then start() and
// stop() at now. post(now) writes what accrued since the last posting (the driver decides when:
// the simulator every hour of its clock, the server every ledger_posting_interval). Times are
// seconds of the driver's clock; one that went back (a wall clock stepped back) is taken as the
// desk's own time, so that nothing is charged twice.
//
// Usage is metered from what runs, whatever the policy: the desk's book records every running
// job's GPUs, so lending credits are the same kind of figure with or without quotas.
//
// Time and calendar: `epoch` is the Unix time of the driver's time 0 (the server counts in Unix
// seconds: 0; a simulation from its trace's first second). Prices follow the time of day of
// epoch + t; budgets the UTC quarter of it. An entry counts on the UTC day holding the last
// second it pays for (entry_day): an interval [from, to) ending at midnight belongs to the day
// before, an instant (from == to) to the day of `to`; a quarter's spend is that of its days.
//
// A value type; not synchronised.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/budget.h"
#include "core/burst.h"
#include "core/charge_meter.h"
#include "core/cost_ledger.h"
#include "core/error.h"
#include "core/ids.h"
#include "core/ledger_books.h"
#include "core/money.h"
#include "core/pool.h"
#include "core/pricing.h"
#include "core/tenants.h"

namespace tidepool {

struct MarketDeskSettings {
  PriceSchedule prices;
  std::vector<Micros> cost_base;  // per model id of the pool's catalog (ChargeMeter::create)
  std::int64_t epoch = 0;         // Unix time of the driver's time 0
  // Quarterly budgets by tenant name (each a tenant of the book; at most one each).
  std::vector<std::pair<std::string, Budget>> budgets;
  // Burst offers (core/burst.h), for burst charges; checked with validate_burst.
  std::vector<BurstOffer> offers;
};

// A tenant's charges (both kinds) and lending credits over some span.
struct MoneyTotals {
  Micros charges = 0;
  Micros credits = 0;

  friend bool operator==(const MoneyTotals&, const MoneyTotals&) = default;
};

// The UTC day (days since 1970-01-01) an entry counts on, with `epoch` the Unix time of the
// entry's time 0: the day of its last second, epoch + to - 1, for an interval; of epoch + to for
// an instant.
std::int64_t entry_day(const LedgerEntry& entry, std::int64_t epoch);

class MarketDesk {
 public:
  // `pool` and `book` with nothing running yet (start() records usage), at time `start`. Fails
  // naming the field for a bad price schedule or cost base, an offer out of range
  // ("offers[i].<field>"), or a budget naming no tenant of `book` ("budgets.<name>").
  static Result<MarketDesk> create(MarketDeskSettings settings, const Pool& pool,
                                   const TenantBook& book, Seconds start);

  // An entry posted before (a server's stored ledger, in seq order), appended again with its seq
  // (0: the next): it counts in the balances and totals, and a job's charges in its cost (its
  // runs are over). Call before anything starts. Fails, changing nothing, for an entry the ledger
  // refuses (CostLedger::restore).
  Result<void> restore(LedgerEntry entry);
  // The next entry posted takes a seq after `seq` (the last of a ledger read back).
  void skip_through(std::uint64_t seq) { ledger_.skip_through(seq); }
  // Closing the books (core/ledger_books.h): applies the next fold due at `now` over the first
  // `foldable` entries, within `most` carried entries (0: any number), and returns it. Totals,
  // budgets and job costs are unchanged.
  std::optional<LedgerFold> close_books(Seconds now, const BookTerms& terms, std::size_t foldable,
                                        std::size_t most, std::function<bool(JobId)> live);

  // Accrues up to `now` with `pool` as it stood since the last call.
  Result<void> advance(Seconds now, const Pool& pool);
  // A job starts running now (advance first) on `assignments` of `pool`, its tasks holding
  // `milli_per_task` each; a job without GPUs is not metered. Fails for a job already running.
  Result<void> start(JobId job, TenantId tenant, std::span<const Assignment> assignments,
                     std::int64_t milli_per_task, const Pool& pool, PriceClass price_class,
                     Seconds now);
  // A running job stops now (advance first): its charges are posted and its usage leaves the
  // book. A job not metered is ignored.
  Result<void> stop(JobId job, Seconds now);
  // Posts everything accrued up to now (advance first): running jobs' charges, lending credits.
  Result<void> post(Seconds now);
  // Job `job` of `tenant` ran `gpus` GPUs of offer `offer` (an index into the offers) over
  // [from, to], paying for `rented_seconds` of them (start-up delays and redone work included):
  // the tenant is charged the offer's price and the pool owes the provider as much. Returns the
  // amount, 0 when it is under a micro-credit (nothing is appended).
  Result<Micros> charge_burst(JobId job, TenantId tenant, std::size_t offer, std::int64_t gpus,
                              Seconds from, Seconds to, Seconds rented_seconds);
  // The tenants changed (quotas): `book` replaces the desk's, with the running jobs' usage
  // recorded again. Budgets follow their tenants by name.
  Result<void> replace_book(const TenantBook& book);

  [[nodiscard]] std::int64_t epoch() const { return epoch_; }
  // The desk's clock: the time of the last advance.
  [[nodiscard]] Seconds now() const { return meter_.now(); }
  [[nodiscard]] const ChargeMeter& meter() const { return meter_; }
  [[nodiscard]] const CostLedger& ledger() const { return ledger_; }
  [[nodiscard]] const TenantBook& book() const { return book_; }
  [[nodiscard]] const std::vector<BurstOffer>& offers() const { return offers_; }
  [[nodiscard]] bool running(JobId job) const { return running_.contains(job); }
  // Milli-GPUs held by the running jobs metered, all tenants and models.
  [[nodiscard]] std::int64_t running_milli() const { return running_milli_; }
  // What a job has been charged over all its runs and rentals, posted or not (whole
  // micro-credits): for caps.
  [[nodiscard]] Micros job_cost(JobId job) const;

  // All-time totals of a tenant.
  [[nodiscard]] MoneyTotals tenant_totals(TenantId tenant) const;
  // The UTC quarter holding time `now` of the driver's clock.
  [[nodiscard]] Quarter quarter(Seconds now) const { return quarter_of(epoch_ + now); }
  // The UTC day holding time `now` (days since 1970-01-01).
  [[nodiscard]] std::int64_t day(Seconds now) const { return utc_day(epoch_ + now); }
  // Totals of the tenant's entries that count in `quarter`.
  [[nodiscard]] MoneyTotals quarter_totals(TenantId tenant, const Quarter& quarter) const;
  // The tenant's quarterly budget, if it has one.
  [[nodiscard]] std::optional<Budget> budget(TenantId tenant) const;
  // Where a tenant with a budget stands in the quarter holding `now`; nullopt without a budget.
  [[nodiscard]] std::optional<BudgetStatus> budget_status(TenantId tenant, Seconds now) const;
  // What each tenant may still spend in the quarter holding `now`, by tenant id (nullopt: no
  // budget), for choose_bursts.
  [[nodiscard]] std::vector<std::optional<Micros>> remaining_budgets(Seconds now) const;

  // The first UTC day the market ran: of its creation, or of the first entry restored if earlier.
  // Days before it have no history.
  [[nodiscard]] std::int64_t first_day() const { return first_day_; }
  // The tenant's charges of each UTC day from `first` for `count` days, oldest first.
  [[nodiscard]] std::vector<Micros> daily_charges(TenantId tenant, std::int64_t first,
                                                  int count) const;
  // The UTC days in [from, to) on which the tenant was charged, with the charges, oldest first.
  [[nodiscard]] std::vector<std::pair<std::int64_t, Micros>> charged_days(TenantId tenant,
                                                                          std::int64_t from,
                                                                          std::int64_t to) const;

 private:
  struct Run {
    TenantId tenant;
    std::vector<ModelMilli> gpus;
  };

  MarketDesk(ChargeMeter meter, TenantBook book)
      : meter_(std::move(meter)), book_(std::move(book)) {}
  // Resolves the budgets by name against the book.
  void index_budgets(const TenantBook& book);
  // Adds the entries appended since the last call to the totals.
  void absorb();
  [[nodiscard]] Seconds clamp(Seconds now) const { return std::max(now, meter_.now()); }

  std::int64_t epoch_ = 0;
  ChargeMeter meter_;
  CostLedger ledger_;
  TenantBook book_;  // usage as it runs
  std::vector<BurstOffer> offers_;
  std::vector<std::pair<std::string, Budget>> budgets_by_name_;
  std::vector<std::optional<Budget>> budgets_;  // by tenant id of the book
  std::map<JobId, Run> running_;
  std::int64_t running_milli_ = 0;
  std::map<JobId, Micros> ended_runs_;  // charges of each job's runs and rentals that ended
  std::size_t absorbed_ = 0;            // entries summed into the totals
  std::int64_t first_day_ = 0;
  std::map<std::uint32_t, MoneyTotals> totals_;                             // by tenant id
  std::map<std::pair<std::uint32_t, std::int64_t>, MoneyTotals> days_;      // (tenant, day)
  std::map<std::pair<std::uint32_t, std::int64_t>, MoneyTotals> quarters_;  // (tenant, start)
};

}  // namespace tidepool
