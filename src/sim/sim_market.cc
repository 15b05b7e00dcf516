#include "sim/sim_market.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/spend_anomaly.h"

namespace tidepool {
namespace {

__extension__ using Int128 = __int128;

// Micro-credits per GPU-hour from an amount and milli-GPU-seconds.
Micros per_gpu_hour(Micros amount, std::int64_t milli_seconds) {
  if (milli_seconds <= 0) return 0;
  return static_cast<Micros>(Int128{amount} * 3600 * kMilliPerGpu / milli_seconds);
}

}  // namespace

Result<SimMarketSettings> sim_market_settings(const MarketSpec& market,
                                              const GpuModelCatalog& catalog,
                                              const TenantBook& book, std::int64_t epoch,
                                              std::vector<std::string>& skipped) {
  auto costs = gpu_costs_for(market, catalog);
  if (!costs) return std::unexpected(costs.error());
  SimMarketSettings settings;
  settings.prices = market.prices;
  settings.epoch = epoch;
  for (const GpuCost& cost : *costs) {
    settings.cost_base.push_back(cost.cost_base);
    settings.owned_per_hour.push_back(cost.owned_per_hour);
  }
  settings.budgets.resize(static_cast<std::size_t>(book.tenant_count()));
  for (const auto& [name, budget] : market.budgets) {
    const auto tenant = book.find_tenant(name);
    if (!tenant) {
      skipped.push_back(name);
      continue;
    }
    settings.budgets[tenant->value] = budget;
  }
  return settings;
}

SimMarket::SimMarket(SimMarketSettings settings, ChargeMeter meter, TenantBook book, Seconds start)
    : settings_(std::move(settings)),
      meter_(std::move(meter)),
      book_(std::move(book)),
      start_(start),
      next_post_(start + settings_.posting_interval) {}

Result<SimMarket> SimMarket::create(SimMarketSettings settings, const Pool& pool,
                                    const TenantBook& book, Seconds start) {
  if (settings.posting_interval <= 0) return fail("posting_interval", "must be positive");
  if (auto ok = validate_burst(settings.offers, settings.burst.value_or(BurstPolicy{})); !ok) {
    return fail("burst." + ok.error().field, ok.error().reason);
  }
  const auto models = static_cast<std::size_t>(pool.models().size());
  if (settings.owned_per_hour.size() != models) {
    return fail("owned_per_hour",
                fmt::format("needs one figure per GPU model of the pool ({})", models));
  }
  settings.budgets.resize(static_cast<std::size_t>(book.tenant_count()));
  const Seconds day_offset = settings.epoch - utc_day(settings.epoch) * kSecondsPerDay;
  auto meter = ChargeMeter::create(settings.prices, settings.cost_base, day_offset, start, pool);
  if (!meter) return std::unexpected(meter.error());
  SimMarket market(std::move(settings), std::move(*meter), book, start);
  const auto tenants = static_cast<std::size_t>(book.tenant_count());
  market.tenants_.assign(tenants, SimTenantCost{});
  market.quarter_ = quarter_of(market.settings_.epoch + start);
  market.quarter_totals_.assign(tenants, CostLedger::TenantTotals{});
  market.alerted_.assign(tenants, false);
  market.exhausted_.assign(tenants, false);
  market.held_since_.assign(tenants, 0);
  market.day_ = utc_day(market.settings_.epoch + start);
  market.today_.assign(tenants, 0);
  market.days_.assign(tenants, {});
  market.model_gpus_.assign(models, 0);
  for (int n = 0; n < pool.node_count(); ++n) {
    const NodeSpec& spec = pool.spec(NodeId{static_cast<std::uint32_t>(n)});
    market.model_gpus_[spec.model.value] += spec.gpu_count;
  }
  return market;
}

Result<void> SimMarket::advance(Seconds now, const Pool& pool, Scheduler& scheduler) {
  while (next_post_ <= now) {
    const Seconds t = next_post_;
    allocated_milli_seconds_ += running_milli_ * (t - meter_.now());
    if (auto ok = meter_.advance(t, pool, book_); !ok) return ok;
    if (auto ok = meter_.post(t, ledger_); !ok) return ok;
    absorb(scheduler);
    if (auto ok = check_budgets(t, scheduler); !ok) return ok;
    next_post_ += settings_.posting_interval;
  }
  allocated_milli_seconds_ += running_milli_ * (now - meter_.now());
  return meter_.advance(now, pool, book_);
}

Result<void> SimMarket::start(const Job& job, std::span<const Assignment> assignments,
                              const Pool& pool, PriceClass price_class, Seconds now) {
  std::vector<ModelMilli> gpus = gpus_by_model(pool, assignments, job.gang.task.total_milli_gpu());
  if (gpus.empty()) return {};  // a CPU-only job costs nothing here
  if (auto ok = meter_.start(job.id, job.tenant, gpus, price_class, now); !ok) return ok;
  for (const ModelMilli& g : gpus) {
    if (auto ok = book_.record_usage(job.tenant, g.model, g.milli); !ok) return ok;
    running_milli_ += g.milli;
  }
  running_.emplace(job.id, std::make_pair(job.tenant, std::move(gpus)));
  return {};
}

Result<void> SimMarket::stop(JobId job, Seconds now, Scheduler& scheduler) {
  const auto it = running_.find(job);
  if (it == running_.end()) return {};
  if (auto ok = meter_.stop(job, now, ledger_); !ok) return ok;
  const auto& [tenant, gpus] = it->second;
  for (const ModelMilli& g : gpus) {
    if (auto ok = book_.refund(tenant, g.model, g.milli); !ok) return ok;
    running_milli_ -= g.milli;
  }
  running_.erase(it);
  absorb(scheduler);
  return {};
}

void SimMarket::add_useful(std::int64_t milli, Seconds ideal_seconds) {
  useful_milli_seconds_ += milli * ideal_seconds;
}

std::vector<std::optional<Micros>> SimMarket::remaining_budgets() const {
  std::vector<std::optional<Micros>> out(tenants_.size());
  for (std::size_t t = 0; t < tenants_.size(); ++t) {
    if (!settings_.budgets[t]) continue;
    out[t] =
        budget_status(*settings_.budgets[t], quarter_totals_[t].charges, quarter_totals_[t].credits)
            .remaining;
  }
  return out;
}

Result<void> SimMarket::charge_burst(const Job& job, std::size_t offer, Seconds from, Seconds to,
                                     std::int64_t gpus, Seconds rented_seconds, int interruptions,
                                     Scheduler& scheduler) {
  if (offer >= settings_.offers.size()) return fail("offer", "unknown burst offer");
  const BurstOffer& o = settings_.offers[offer];
  const Micros amount = rented_cost(gpus, rented_seconds, o.price_per_gpu_hour);
  ++burst_jobs_;
  burst_milli_seconds_ += gpus * kMilliPerGpu * rented_seconds;
  spot_interruptions_ += interruptions;
  if (amount <= 0) return {};
  burst_cost_ += amount;
  const auto [charge, cost] = burst_entries(job.id, job.tenant, static_cast<std::uint32_t>(offer),
                                            o, gpus, from, to, amount);
  if (auto ok = ledger_.append(charge); !ok) return std::unexpected(ok.error());
  if (auto ok = ledger_.append(cost); !ok) return std::unexpected(ok.error());
  absorb(scheduler);
  return {};
}

void SimMarket::absorb(Scheduler& scheduler) {
  const auto entries = ledger_.entries();
  for (std::size_t i = posted_entries_; i < entries.size(); ++i) {
    const LedgerEntry& e = entries[i];
    const std::size_t t = e.tenant.value;
    if (settings_.epoch + e.to > quarter_.end) start_quarter(e.to, scheduler);
    // The day an entry's interval ends in (an entry ending at midnight belongs to the day before).
    close_days_until(utc_day(settings_.epoch + e.to - (e.to > e.from ? 1 : 0)));
    switch (e.kind) {
      case EntryKind::kCharge:
      case EntryKind::kBurstCharge:
        tenants_[t].charges += e.amount;
        quarter_totals_[t].charges += e.amount;
        today_[t] += e.amount;
        break;
      case EntryKind::kLendingCredit:
        tenants_[t].credits += e.amount;
        quarter_totals_[t].credits += e.amount;
        break;
      case EntryKind::kBurstCost:
        break;
    }
  }
  posted_entries_ = entries.size();
}

void SimMarket::close_days_until(std::int64_t day) {
  while (day_ < day) {
    for (std::size_t t = 0; t < tenants_.size(); ++t) {
      if (spend_anomaly(days_[t], today_[t])) ++tenants_[t].spend_anomalies;
      days_[t].push_back(today_[t]);
      if (days_[t].size() > kAnomalyTrailingDays) days_[t].erase(days_[t].begin());
      today_[t] = 0;
    }
    ++day_;
  }
}

void SimMarket::start_quarter(Seconds now, Scheduler& scheduler) {
  quarter_ = quarter_of(settings_.epoch + now);
  for (std::size_t t = 0; t < tenants_.size(); ++t) {
    quarter_totals_[t] = {};
    alerted_[t] = false;
    if (exhausted_[t]) {
      tenants_[t].budget_held_s += now - held_since_[t];
      (void)scheduler.set_budget_exhausted(TenantId{static_cast<std::uint32_t>(t)}, std::nullopt);
    }
    exhausted_[t] = false;
  }
}

Result<void> SimMarket::check_budgets(Seconds now, Scheduler& scheduler) {
  for (std::size_t t = 0; t < tenants_.size(); ++t) {
    const auto& budget = settings_.budgets[t];
    if (!budget) continue;
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    const BudgetStatus status =
        budget_status(*budget, quarter_totals_[t].charges, quarter_totals_[t].credits);
    if (status.state != BudgetState::kWithin && !alerted_[t]) {
      alerted_[t] = true;
      ++tenants_[t].budget_alerts;
    }
    const bool exhausted = status.state == BudgetState::kExhausted;
    if (exhausted && !exhausted_[t]) {
      ++tenants_[t].budget_exhaustions;
      held_since_[t] = now;
    } else if (!exhausted && exhausted_[t]) {
      tenants_[t].budget_held_s += now - held_since_[t];
    }
    exhausted_[t] = exhausted;
    std::optional<std::string> reason;
    if (exhausted) {
      reason = budget_exhausted_reason(scheduler.book().tenant_name(tenant), status,
                                       quarter_name(quarter_));
    }
    if (auto ok = scheduler.set_budget_exhausted(tenant, std::move(reason)); !ok) return ok;
  }
  return {};
}

Result<SimCost> SimMarket::finish(Seconds end, Scheduler& scheduler) {
  if (auto ok = meter_.post(end, ledger_); !ok) return std::unexpected(ok.error());
  absorb(scheduler);
  SimCost cost;
  for (std::size_t t = 0; t < tenants_.size(); ++t) {
    if (exhausted_[t]) tenants_[t].budget_held_s += end - held_since_[t];
    cost.charged += tenants_[t].charges;
    cost.credited += tenants_[t].credits;
  }
  cost.tenants = tenants_;
  for (std::size_t m = 0; m < model_gpus_.size(); ++m) {
    cost.owned_cost += mul_div_round(model_gpus_[m] * settings_.owned_per_hour[m],
                                     std::max<Seconds>(0, end - start_), 3600);
  }
  cost.useful_milli_seconds = useful_milli_seconds_;
  cost.allocated_milli_seconds = allocated_milli_seconds_;
  cost.charged_per_useful_gpu_hour = per_gpu_hour(cost.charged, useful_milli_seconds_);
  cost.owned_per_useful_gpu_hour = per_gpu_hour(cost.owned_cost, useful_milli_seconds_);
  cost.burst_jobs = burst_jobs_;
  cost.burst_milli_seconds = burst_milli_seconds_;
  cost.burst_cost = burst_cost_;
  cost.spot_interruptions = spot_interruptions_;
  cost.total_cost = cost.owned_cost + burst_cost_;
  cost.total_per_useful_gpu_hour = per_gpu_hour(cost.total_cost, useful_milli_seconds_);
  cost.ledger_entries = ledger_.entries().size();
  Micros sum = 0;
  for (const auto& [account, balance] : ledger_.balances()) sum += balance;
  cost.ledger_balanced =
      sum == 0 && CostLedger::rebuild_balances(ledger_.entries()) == ledger_.balances();
  return cost;
}

}  // namespace tidepool
