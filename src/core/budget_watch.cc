#include "core/budget_watch.h"

#include <algorithm>

#include "core/scheduler.h"
#include "core/tidal_window.h"

namespace tidepool {

std::string_view market_event_name(MarketEventKind kind) {
  switch (kind) {
    case MarketEventKind::kBudgetAlert:
      return "budget.alert";
    case MarketEventKind::kBudgetExhausted:
      return "budget.exhausted";
    case MarketEventKind::kBudgetRestored:
      return "budget.restored";
    case MarketEventKind::kSpendAnomaly:
      return "cost.anomaly";
  }
  return "?";
}

std::vector<MarketEvent> BudgetWatch::check_budgets(const MarketDesk& desk, Seconds now) {
  std::vector<MarketEvent> events;
  const std::string quarter = quarter_name(desk.quarter(now));
  const TenantBook& book = desk.book();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    const auto status = desk.budget_status(tenant, now);
    if (!status) continue;
    const std::string& name = book.tenant_name(tenant);
    const auto event = [&](MarketEventKind kind, std::string reason = {}) {
      MarketEvent e;
      e.kind = kind;
      e.tenant = tenant;
      e.tenant_name = name;
      e.quarter = quarter;
      e.status = *status;
      e.reason = std::move(reason);
      events.push_back(std::move(e));
    };
    auto held = holds_.find(name);
    if (held != holds_.end() && held->second.quarter != quarter) {
      holds_.erase(held);
      held = holds_.end();
      event(MarketEventKind::kBudgetRestored);
    }
    if (status->state != BudgetState::kWithin) {
      auto [alerted, inserted] = alerted_.try_emplace(name, quarter);
      if (inserted || alerted->second != quarter) {
        alerted->second = quarter;
        event(MarketEventKind::kBudgetAlert);
      }
    }
    if (status->state == BudgetState::kExhausted) {
      std::string reason = budget_exhausted_reason(name, *status, quarter);
      if (held == holds_.end()) {
        holds_.emplace(name, BudgetHold{reason, quarter});
        event(MarketEventKind::kBudgetExhausted, std::move(reason));
      } else {
        held->second.reason = std::move(reason);
      }
    } else if (held != holds_.end()) {
      holds_.erase(held);
      event(MarketEventKind::kBudgetRestored);
    }
  }
  return events;
}

std::vector<MarketEvent> BudgetWatch::check_spend(const MarketDesk& desk, Seconds now) {
  std::vector<MarketEvent> events;
  const std::int64_t today = desk.day(now);
  const std::int64_t from = next_spend_day_.value_or(desk.first_day());
  if (today <= from) return events;
  const TenantBook& book = desk.book();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    // A day without charges is never an anomaly: only days charged are looked at.
    for (const auto& [day, spent] : desk.charged_days(tenant, from, today)) {
      const std::int64_t first = std::max(day - kAnomalyTrailingDays, desk.first_day());
      const auto previous = desk.daily_charges(tenant, first, static_cast<int>(day - first));
      const auto anomaly = spend_anomaly(previous, spent);
      if (!anomaly) continue;
      const std::string& name = book.tenant_name(tenant);
      MarketEvent e;
      e.kind = MarketEventKind::kSpendAnomaly;
      e.tenant = tenant;
      e.tenant_name = name;
      e.day = day;
      e.anomaly = *anomaly;
      e.reason = describe_spend_anomaly(name, utc_date_text(day * kSecondsPerDay), *anomaly);
      events.push_back(std::move(e));
    }
  }
  std::ranges::stable_sort(events, {}, &MarketEvent::day);
  next_spend_day_ = today;
  return events;
}

Result<void> BudgetWatch::apply(Scheduler& scheduler) const {
  const TenantBook& book = scheduler.book();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    const auto held = holds_.find(book.tenant_name(tenant));
    std::optional<std::string> reason;
    if (held != holds_.end()) reason = held->second.reason;
    if (auto ok = scheduler.set_budget_exhausted(tenant, std::move(reason)); !ok) return ok;
  }
  return {};
}

void BudgetWatch::set_alerted(std::string tenant, std::string quarter) {
  alerted_[std::move(tenant)] = std::move(quarter);
}

}  // namespace tidepool
