#include "core/market_desk.h"

#include <fmt/format.h>

#include <set>

#include "core/tidal_window.h"

namespace tidepool {

std::int64_t entry_day(const LedgerEntry& entry, std::int64_t epoch) {
  return utc_day(epoch + entry.to - (entry.to > entry.from ? 1 : 0));
}

Result<MarketDesk> MarketDesk::create(MarketDeskSettings settings, const Pool& pool,
                                      const TenantBook& book, Seconds start) {
  if (auto ok = validate_burst(settings.offers, BurstPolicy{}); !ok)
    return std::unexpected(ok.error());
  std::set<std::string, std::less<>> named;
  for (const auto& [name, budget] : settings.budgets) {
    if (!book.find_tenant(name)) {
      return fail("budgets." + name, fmt::format("no tenant '{}'; budgets name tenants", name));
    }
    if (!named.insert(name).second) {
      return fail("budgets." + name, fmt::format("tenant '{}' has two budgets", name));
    }
    if (auto ok = make_budget(budget); !ok) {
      return fail("budgets." + name + "." + ok.error().field, ok.error().reason);
    }
  }
  // The time of day of time 0, for the prices' time-of-day bands.
  const Seconds day_offset = settings.epoch - utc_day(settings.epoch) * kSecondsPerDay;
  auto meter = ChargeMeter::create(std::move(settings.prices), std::move(settings.cost_base),
                                   day_offset, start, pool);
  if (!meter) return std::unexpected(meter.error());
  MarketDesk desk(std::move(*meter), book);
  desk.epoch_ = settings.epoch;
  desk.offers_ = std::move(settings.offers);
  desk.budgets_by_name_ = std::move(settings.budgets);
  desk.index_budgets(book);
  desk.first_day_ = desk.day(start);
  return desk;
}

void MarketDesk::index_budgets(const TenantBook& book) {
  budgets_.assign(static_cast<std::size_t>(book.tenant_count()), std::nullopt);
  for (const auto& [name, budget] : budgets_by_name_) {
    if (const auto tenant = book.find_tenant(name)) budgets_[tenant->value] = budget;
  }
}

Result<void> MarketDesk::restore(LedgerEntry entry) {
  const bool charge = entry.kind == EntryKind::kCharge || entry.kind == EntryKind::kBurstCharge;
  const std::optional<JobId> job = entry.job;
  const Micros amount = entry.amount;
  const std::int64_t day = utc_day(epoch_ + entry.from);
  auto ok = entry.seq == 0 ? ledger_.append(std::move(entry)) : ledger_.restore(std::move(entry));
  if (!ok) return std::unexpected(ok.error());
  if (job && charge) ended_runs_[*job] += amount;
  first_day_ = std::min(first_day_, day);
  absorb();
  return {};
}

std::optional<LedgerFold> MarketDesk::close_books(Seconds now, const BookTerms& terms,
                                                  std::size_t foldable, std::size_t most,
                                                  std::function<bool(JobId)> live) {
  absorb();
  auto fold = next_fold({.entries = ledger_.entries(),
                         .foldable = foldable,
                         .now = now,
                         .epoch = epoch_,
                         .most = most,
                         .live = std::move(live)},
                        terms);
  if (!fold) return std::nullopt;
  const std::size_t before = ledger_.entries().size();
  // A fold next_fold made keeps every balance: a refusal is a bug, and changes nothing.
  if (!ledger_.apply(*fold)) return std::nullopt;
  absorbed_ -= before - ledger_.entries().size();  // the totals already hold the run
  return fold;
}

Result<void> MarketDesk::advance(Seconds now, const Pool& pool) {
  return meter_.advance(clamp(now), pool, book_);
}

Result<void> MarketDesk::start(JobId job, TenantId tenant, std::span<const Assignment> assignments,
                               std::int64_t milli_per_task, const Pool& pool,
                               PriceClass price_class, Seconds now) {
  std::vector<ModelMilli> gpus = gpus_by_model(pool, assignments, milli_per_task);
  if (gpus.empty()) return {};  // a CPU-only job costs nothing
  if (auto ok = meter_.start(job, tenant, gpus, price_class, clamp(now)); !ok) return ok;
  for (const ModelMilli& g : gpus) {
    if (auto ok = book_.record_usage(tenant, g.model, g.milli); !ok) return ok;
    running_milli_ += g.milli;
  }
  running_.emplace(job, Run{tenant, std::move(gpus)});
  return {};
}

Result<void> MarketDesk::stop(JobId job, Seconds now) {
  const auto it = running_.find(job);
  if (it == running_.end()) return {};
  const Micros run_total = meter_.job_total(job);
  if (auto ok = meter_.stop(job, clamp(now), ledger_); !ok) return ok;
  ended_runs_[job] += run_total;
  for (const ModelMilli& g : it->second.gpus) {
    if (auto ok = book_.refund(it->second.tenant, g.model, g.milli); !ok) return ok;
    running_milli_ -= g.milli;
  }
  running_.erase(it);
  absorb();
  return {};
}

Result<void> MarketDesk::post(Seconds now) {
  if (auto ok = meter_.post(clamp(now), ledger_); !ok) return ok;
  absorb();
  return {};
}

Result<Micros> MarketDesk::charge_burst(JobId job, TenantId tenant, std::size_t offer,
                                        std::int64_t gpus, Seconds from, Seconds to,
                                        Seconds rented_seconds) {
  if (offer >= offers_.size()) return fail("offer", fmt::format("no burst offer {}", offer));
  const BurstOffer& o = offers_[offer];
  const Micros amount =
      rented_cost(gpus, std::max<Seconds>(0, rented_seconds), o.price_per_gpu_hour);
  if (amount <= 0) return Micros{0};
  const auto entries =
      burst_entries(job, tenant, static_cast<std::uint32_t>(offer), o, gpus, from, to, amount);
  // Both entries or neither: the charge is checked by a scratch ledger first.
  CostLedger scratch;
  for (const LedgerEntry& entry : entries) {
    if (auto ok = scratch.append(entry); !ok) return std::unexpected(ok.error());
  }
  for (const LedgerEntry& entry : entries) (void)ledger_.append(entry);
  ended_runs_[job] += amount;
  absorb();
  return amount;
}

Result<void> MarketDesk::replace_book(const TenantBook& book) {
  TenantBook fresh = book;
  for (const auto& [job, run] : running_) {
    for (const ModelMilli& g : run.gpus) {
      if (auto ok = fresh.record_usage(run.tenant, g.model, g.milli); !ok) return ok;
    }
  }
  book_ = std::move(fresh);
  index_budgets(book_);
  return {};
}

Micros MarketDesk::job_cost(JobId job) const {
  const auto it = ended_runs_.find(job);
  return (it == ended_runs_.end() ? 0 : it->second) + meter_.job_total(job);
}

MoneyTotals MarketDesk::tenant_totals(TenantId tenant) const {
  const auto it = totals_.find(tenant.value);
  return it == totals_.end() ? MoneyTotals{} : it->second;
}

MoneyTotals MarketDesk::quarter_totals(TenantId tenant, const Quarter& quarter) const {
  const auto it = quarters_.find({tenant.value, quarter.start});
  return it == quarters_.end() ? MoneyTotals{} : it->second;
}

std::optional<Budget> MarketDesk::budget(TenantId tenant) const {
  if (tenant.value >= budgets_.size()) return std::nullopt;
  return budgets_[tenant.value];
}

std::optional<BudgetStatus> MarketDesk::budget_status(TenantId tenant, Seconds now) const {
  const auto limit = budget(tenant);
  if (!limit) return std::nullopt;
  const MoneyTotals totals = quarter_totals(tenant, quarter(now));
  return tidepool::budget_status(*limit, totals.charges, totals.credits);
}

std::vector<std::optional<Micros>> MarketDesk::remaining_budgets(Seconds now) const {
  std::vector<std::optional<Micros>> out(budgets_.size());
  for (std::size_t t = 0; t < out.size(); ++t) {
    if (const auto status = budget_status(TenantId{static_cast<std::uint32_t>(t)}, now)) {
      out[t] = status->remaining;
    }
  }
  return out;
}

std::vector<Micros> MarketDesk::daily_charges(TenantId tenant, std::int64_t first,
                                              int count) const {
  std::vector<Micros> out(static_cast<std::size_t>(std::max(count, 0)), 0);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto it = days_.find({tenant.value, first + static_cast<std::int64_t>(i)});
    if (it != days_.end()) out[i] = it->second.charges;
  }
  return out;
}

std::vector<std::pair<std::int64_t, Micros>> MarketDesk::charged_days(TenantId tenant,
                                                                      std::int64_t from,
                                                                      std::int64_t to) const {
  std::vector<std::pair<std::int64_t, Micros>> out;
  for (auto it = days_.lower_bound({tenant.value, from});
       it != days_.end() && it->first.first == tenant.value && it->first.second < to; ++it) {
    if (it->second.charges != 0) out.emplace_back(it->first.second, it->second.charges);
  }
  return out;
}

void MarketDesk::absorb() {
  const auto entries = ledger_.entries();
  for (std::size_t i = absorbed_; i < entries.size(); ++i) {
    const LedgerEntry& e = entries[i];
    if (e.kind == EntryKind::kBurstCost) continue;  // the pool's, not a tenant's
    const bool credit = e.kind == EntryKind::kLendingCredit;
    const std::int64_t day = entry_day(e, epoch_);
    for (MoneyTotals* sum :
         {&totals_[e.tenant.value], &days_[{e.tenant.value, day}],
          &quarters_[{e.tenant.value, quarter_of(day * kSecondsPerDay).start}]}) {
      (credit ? sum->credits : sum->charges) += e.amount;
    }
  }
  absorbed_ = entries.size();
}

}  // namespace tidepool
