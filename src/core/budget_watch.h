// The budget watch: where each tenant stands against its quarterly budget (core/budget.h) and
// against its own recent spend (core/spend_anomaly.h), read from a MarketDesk after a posting.
// The simulator counts what it returns; the server turns it into its events, its settings records
// and Scheduler::set_budget_exhausted calls. Values in, events out: no clock, no I/O.
//
// Budgets, checked at time `now` of the driver's clock against the quarter holding it
// (MarketDesk::quarter), for each tenant with a budget, in tenant id order:
//   1. A tenant held in an earlier quarter is restored (kBudgetRestored): a hold belongs to its
//      quarter. (Before this watch the server kept such a tenant held, without an event, if the
//      new quarter's spend had already reached the budget; the simulator lifted the hold at the
//      first entry of the new quarter. Both now lift it at the first check in the new quarter.)
//   2. Past the soft alert (alert or exhausted) and not yet alerted in this quarter: kBudgetAlert,
//      once per quarter.
//   3. Exhausted and not held: kBudgetExhausted, and the tenant is held with the reason
//      budget_exhausted_reason gives (its figures refreshed at every check while held).
//      Not exhausted but held (lending credits brought its spend back under the budget):
//      kBudgetRestored.
// So a tenant exhausted again in a new quarter gets restored, alert and exhausted events for it.
//
// Spend anomalies, once per UTC day: check_spend(now) checks every day that ended since the last
// check (from the desk's first day at first), in order: a tenant whose charges on that day are
// more than twice its average of the seven days before (days the market ran only; fewer than
// seven raise nothing) gets kSpendAnomaly. Days count entries as MarketDesk::entry_day does.
// (Before this watch, a server that was down for several days checked only the last one.)
//
// A value type; not synchronised.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/budget.h"
#include "core/error.h"
#include "core/ids.h"
#include "core/market_desk.h"
#include "core/spend_anomaly.h"

namespace tidepool {

class Scheduler;

enum class MarketEventKind : std::uint8_t {
  kBudgetAlert,
  kBudgetExhausted,
  kBudgetRestored,
  kSpendAnomaly
};
// "budget.alert", "budget.exhausted", "budget.restored", "cost.anomaly"
std::string_view market_event_name(MarketEventKind kind);

struct MarketEvent {
  MarketEventKind kind = MarketEventKind::kBudgetAlert;
  TenantId tenant;
  std::string tenant_name;
  // Budget events: the quarter checked ("2026-Q4") and where the tenant stands in it.
  std::string quarter;
  BudgetStatus status;
  // Anomalies: the UTC day (days since 1970-01-01) and its figures.
  std::int64_t day = 0;
  SpendAnomaly anomaly;
  // kBudgetExhausted: the reason its jobs wait with; kSpendAnomaly: describe_spend_anomaly.
  std::string reason;
};

// A tenant held back for budget: the reason its jobs wait with, and the quarter it was spent in.
struct BudgetHold {
  std::string reason;
  std::string quarter;

  friend bool operator==(const BudgetHold&, const BudgetHold&) = default;
};

class BudgetWatch {
 public:
  // The budget rules above at `now`; returns what changed.
  std::vector<MarketEvent> check_budgets(const MarketDesk& desk, Seconds now);
  // The anomaly rule for every UTC day that ended by `now` and was not checked yet, oldest day
  // first, then by tenant id.
  std::vector<MarketEvent> check_spend(const MarketDesk& desk, Seconds now);

  // The tenants held now, by name.
  [[nodiscard]] const std::map<std::string, BudgetHold, std::less<>>& holds() const {
    return holds_;
  }
  // Tells `scheduler` which of its tenants (by name) are held, with their reasons, and lifts the
  // others. Fails on the first call the scheduler refuses.
  Result<void> apply(Scheduler& scheduler) const;

  // State a driver keeps across restarts: the quarter a tenant was last alerted in ("2026-Q4"),
  // and the first UTC day not yet checked for anomalies (unset: the desk's first day).
  void set_alerted(std::string tenant, std::string quarter);
  [[nodiscard]] std::optional<std::int64_t> next_spend_day() const { return next_spend_day_; }
  void set_next_spend_day(std::int64_t day) { next_spend_day_ = day; }

 private:
  std::map<std::string, std::string, std::less<>> alerted_;  // tenant -> quarter alerted in
  std::map<std::string, BudgetHold, std::less<>> holds_;
  std::optional<std::int64_t> next_spend_day_;
};

}  // namespace tidepool
