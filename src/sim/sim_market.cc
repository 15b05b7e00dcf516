#include "sim/sim_market.h"

#include <fmt/format.h>

#include <algorithm>

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

SimMarket::SimMarket(SimMarketSettings settings, MarketDesk desk, Seconds start)
    : settings_(std::move(settings)),
      desk_(std::move(desk)),
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
  MarketDeskSettings desk{.prices = settings.prices,
                          .cost_base = settings.cost_base,
                          .epoch = settings.epoch,
                          .budgets = {},
                          .offers = settings.offers};
  for (std::size_t t = 0; t < settings.budgets.size(); ++t) {
    if (!settings.budgets[t] || t >= static_cast<std::size_t>(book.tenant_count())) continue;
    desk.budgets.emplace_back(book.tenant_name(TenantId{static_cast<std::uint32_t>(t)}),
                              *settings.budgets[t]);
  }
  auto created = MarketDesk::create(std::move(desk), pool, book, start);
  if (!created) return std::unexpected(created.error());
  SimMarket market(std::move(settings), std::move(*created), start);
  const auto tenants = static_cast<std::size_t>(book.tenant_count());
  market.tenants_.assign(tenants, SimTenantCost{});
  market.held_since_.assign(tenants, 0);
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
    allocated_milli_seconds_ += desk_.running_milli() * (t - desk_.now());
    if (auto ok = desk_.advance(t, pool); !ok) return ok;
    if (auto ok = post(t, scheduler); !ok) return ok;
    next_post_ += settings_.posting_interval;
  }
  allocated_milli_seconds_ += desk_.running_milli() * (now - desk_.now());
  return desk_.advance(now, pool);
}

Result<void> SimMarket::post(Seconds t, Scheduler& scheduler) {
  if (auto ok = desk_.post(t); !ok) return ok;
  for (const MarketEvent& e : watch_.check_budgets(desk_, t)) {
    SimTenantCost& tenant = tenants_[e.tenant.value];
    switch (e.kind) {
      case MarketEventKind::kBudgetAlert:
        ++tenant.budget_alerts;
        break;
      case MarketEventKind::kBudgetExhausted:
        ++tenant.budget_exhaustions;
        held_since_[e.tenant.value] = t;
        break;
      case MarketEventKind::kBudgetRestored:
        tenant.budget_held_s += t - held_since_[e.tenant.value];
        break;
      case MarketEventKind::kSpendAnomaly:
        break;
    }
  }
  for (const MarketEvent& e : watch_.check_spend(desk_, t)) {
    ++tenants_[e.tenant.value].spend_anomalies;
  }
  return watch_.apply(scheduler);
}

Result<void> SimMarket::start(const Job& job, std::span<const Assignment> assignments,
                              const Pool& pool, PriceClass price_class, Seconds now) {
  return desk_.start(job.id, job.tenant, assignments, job.gang.task.total_milli_gpu(), pool,
                     price_class, now);
}

Result<void> SimMarket::stop(JobId job, Seconds now) { return desk_.stop(job, now); }

void SimMarket::add_useful(std::int64_t milli, Seconds ideal_seconds) {
  useful_milli_seconds_ += milli * ideal_seconds;
}

Result<void> SimMarket::charge_burst(const Job& job, std::size_t offer, Seconds from, Seconds to,
                                     std::int64_t gpus, Seconds rented_seconds, int interruptions) {
  if (offer >= settings_.offers.size()) return fail("offer", "unknown burst offer");
  ++burst_jobs_;
  burst_milli_seconds_ += gpus * kMilliPerGpu * rented_seconds;
  spot_interruptions_ += interruptions;
  auto amount = desk_.charge_burst(job.id, job.tenant, offer, gpus, from, to, rented_seconds);
  if (!amount) return std::unexpected(amount.error());
  burst_cost_ += *amount;
  return {};
}

Result<SimCost> SimMarket::finish(Seconds end) {
  if (auto ok = desk_.post(end); !ok) return std::unexpected(ok.error());
  for (const MarketEvent& e : watch_.check_spend(desk_, end)) {
    ++tenants_[e.tenant.value].spend_anomalies;
  }
  SimCost cost;
  for (std::size_t t = 0; t < tenants_.size(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    const MoneyTotals totals = desk_.tenant_totals(tenant);
    tenants_[t].charges = totals.charges;
    tenants_[t].credits = totals.credits;
    if (watch_.holds().contains(desk_.book().tenant_name(tenant))) {
      tenants_[t].budget_held_s += end - held_since_[t];
    }
    cost.charged += totals.charges;
    cost.credited += totals.credits;
  }
  cost.tenants = tenants_;
  for (std::size_t m = 0; m < model_gpus_.size(); ++m) {
    cost.owned_cost += mul_div_round(model_gpus_[m] * settings_.owned_per_hour[m],
                                     std::max<Seconds>(0, end - start_), 3600);
  }
  const CostLedger& ledger = desk_.ledger();
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
  cost.ledger_entries = ledger.entries().size();
  Micros sum = 0;
  for (const auto& [account, balance] : ledger.balances()) sum += balance;
  cost.ledger_balanced =
      sum == 0 && CostLedger::rebuild_balances(ledger.entries()) == ledger.balances();
  return cost;
}

}  // namespace tidepool
