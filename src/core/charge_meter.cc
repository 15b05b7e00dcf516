#include "core/charge_meter.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/pool.h"
#include "core/tenants.h"
#include "core/tidal_window.h"

namespace tidepool {
namespace {

Result<void> check_clock(Seconds now, Seconds clock) {
  if (now != clock) {
    return fail("now", "the meter's clock is at " + std::to_string(clock) + ", not " +
                           std::to_string(now) + "; advance it first");
  }
  return {};
}

Micros whole_micros(ExactAmount exact) { return static_cast<Micros>(exact / kExactPerMicro); }

}  // namespace

std::vector<ModelMilli> gpus_by_model(const Pool& pool, std::span<const Assignment> assignments,
                                      std::int64_t milli_per_task) {
  std::map<GpuModelId, std::int64_t> by_model;
  for (const Assignment& a : assignments) by_model[pool.spec(a.node).model] += milli_per_task;
  std::vector<ModelMilli> gpus;
  for (const auto& [model, milli] : by_model) {
    if (milli > 0) gpus.push_back({model, milli});
  }
  return gpus;
}

Result<ChargeMeter> ChargeMeter::create(PriceSchedule schedule, std::vector<Micros> cost_base,
                                        Seconds day_offset, Seconds start, const Pool& pool) {
  auto checked = make_price_schedule(std::move(schedule));
  if (!checked) return std::unexpected(checked.error());
  const GpuModelCatalog& models = pool.models();
  if (std::cmp_not_equal(cost_base.size(), models.size())) {
    return fail("cost_base", "needs one per GPU model of the pool (" +
                                 std::to_string(models.size()) + "), got " +
                                 std::to_string(cost_base.size()));
  }
  for (std::size_t m = 0; m < cost_base.size(); ++m) {
    if (cost_base[m] <= 0 || cost_base[m] > kMaxMoney) {
      return fail("cost_base", "the cost base of " +
                                   models.name(GpuModelId{static_cast<std::uint32_t>(m)}) +
                                   " must be positive and at most " + money_text(kMaxMoney));
    }
  }
  if (day_offset < 0 || day_offset >= kSecondsPerDay) {
    return fail("day_offset", "must be 0..86399 seconds after midnight");
  }
  ChargeMeter meter;
  meter.schedule_ = std::move(*checked);
  meter.cost_base_ = std::move(cost_base);
  meter.day_offset_ = day_offset;
  meter.now_ = start;
  meter.integral_.assign(meter.cost_base_.size(), 0);
  meter.set_prices(start, pool);
  return meter;
}

void ChargeMeter::set_prices(Seconds t, const Pool& pool) {
  const std::vector<Ppm> utilisation = model_utilisation(pool);
  prices_.resize(cost_base_.size());
  for (std::size_t m = 0; m < cost_base_.size(); ++m) {
    const Ppm u = m < utilisation.size() ? utilisation[m] : 0;
    prices_[m] = price_in_force(schedule_, cost_base_[m], u, t, day_offset_);
    history_.emplace_back(GpuModelId{static_cast<std::uint32_t>(m)}, prices_[m]);
  }
}

Result<void> ChargeMeter::advance(Seconds now, const Pool& pool, const TenantBook& book) {
  if (now < now_) {
    return fail("now", "the meter's clock is at " + std::to_string(now_) +
                           "; it cannot go back to " + std::to_string(now));
  }
  if (std::cmp_not_equal(pool.models().size(), cost_base_.size())) {
    return fail("pool", "has " + std::to_string(pool.models().size()) +
                            " GPU models; the meter was made for " +
                            std::to_string(cost_base_.size()));
  }
  std::vector<ExactAmount> delta(prices_.size());
  // Every model's price changes at the same period boundaries, so model 0's tells them all.
  while (true) {
    const Seconds boundary = prices_.empty() ? now + 1 : prices_[0].until;
    const Seconds end = std::min(boundary, now);
    if (end > now_) {
      for (std::size_t m = 0; m < prices_.size(); ++m) {
        delta[m] = ExactAmount{prices_[m].standard_per_hour} * (end - now_);
        integral_[m] += delta[m];
      }
      accrue_credits(delta, book);
      now_ = end;
    }
    if (boundary > now) break;
    set_prices(boundary, pool);  // the state held up to `now` holds at the boundary too
  }
  now_ = now;
  return {};
}

void ChargeMeter::accrue_credits(std::span<const ExactAmount> delta, const TenantBook& book) {
  const std::size_t models = std::min(delta.size(), static_cast<std::size_t>(book.model_count()));
  const auto tenants = static_cast<std::uint32_t>(book.tenant_count());
  struct Share {
    std::uint32_t tenant = 0;
    std::int64_t lendable = 0;
    std::int64_t milli = 0;
    ExactAmount remainder = 0;
  };
  std::vector<Share> lenders;
  for (auto& [key, credit] : credits_) credit.milli = 0;
  for (std::size_t mi = 0; mi < models; ++mi) {
    const GpuModelId m{static_cast<std::uint32_t>(mi)};
    if (delta[mi] == 0) continue;
    std::int64_t borrowed = 0;
    std::int64_t lendable = 0;
    lenders.clear();
    for (std::uint32_t t = 0; t < tenants; ++t) {
      borrowed += book.borrowed(TenantId{t}, m);
      const std::int64_t l = book.lendable(TenantId{t}, m);
      if (l > 0) {
        lenders.push_back({t, l, 0, 0});
        lendable += l;
      }
    }
    // Borrowed capacity beyond every idle guarantee was nobody's guarantee: no one is credited.
    const std::int64_t lent = std::min(borrowed, lendable);
    if (lent <= 0) continue;
    std::int64_t given = 0;
    for (Share& s : lenders) {
      const ExactAmount product = ExactAmount{lent} * s.lendable;
      s.milli = static_cast<std::int64_t>(product / lendable);
      s.remainder = product % lendable;
      given += s.milli;
    }
    // Whole milli-GPUs by largest remainder; lenders are in id order and the sort is stable, so
    // equal remainders go to the lower tenant id.
    std::vector<Share*> order;
    order.reserve(lenders.size());
    for (Share& s : lenders) order.push_back(&s);
    std::ranges::stable_sort(
        order, [](const Share* a, const Share* b) { return a->remainder > b->remainder; });
    for (std::size_t i = 0; given < lent; ++i, ++given) ++order[i]->milli;
    for (const Share& s : lenders) {
      if (s.milli == 0) continue;
      auto [it, fresh] = credits_.try_emplace({s.tenant, m.value});
      if (fresh) it->second.posted_until = now_;
      it->second.exact += ExactAmount{s.milli} * delta[mi] * schedule_.lender_share;
      it->second.milli = s.milli;
    }
  }
}

Result<void> ChargeMeter::start(JobId job, TenantId tenant, std::span<const ModelMilli> gpus,
                                PriceClass price_class, Seconds now) {
  if (auto clock = check_clock(now, now_); !clock) return clock;
  if (jobs_.contains(job)) {
    return fail("job", "job " + std::to_string(job.value) + " is already running");
  }
  RunningJob run;
  run.tenant = tenant;
  run.price_class = price_class;
  run.multiplier = class_multiplier(schedule_, price_class);
  run.posted_until = now;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const ModelMilli& g = gpus[i];
    const std::string field = "gpus[" + std::to_string(i) + "]";
    if (g.model.value >= prices_.size()) {
      return fail(field + ".model", "unknown GPU model id " + std::to_string(g.model.value));
    }
    if (g.milli <= 0) {
      return fail(field + ".milli", "must be positive, got " + std::to_string(g.milli));
    }
    for (const Accrual& a : run.accruals) {
      if (a.model == g.model) {
        return fail(field + ".model", "model id " + std::to_string(g.model.value) +
                                          " is listed twice; give each model once");
      }
    }
    run.accruals.push_back({g.model, g.milli, integral_[g.model.value], 0, 0});
  }
  std::ranges::sort(run.accruals, {}, &Accrual::model);  // posted in model order
  jobs_.emplace(job, std::move(run));
  return {};
}

Result<void> ChargeMeter::stop(JobId job, Seconds now, CostLedger& ledger) {
  if (auto clock = check_clock(now, now_); !clock) return clock;
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    return fail("job", "job " + std::to_string(job.value) + " is not running");
  }
  if (auto posted = post_job(it->first, it->second, ledger); !posted) return posted;
  jobs_.erase(it);
  return {};
}

Result<void> ChargeMeter::post_job(JobId job, RunningJob& run, CostLedger& ledger) {
  for (Accrual& a : run.accruals) {
    const ExactAmount integral = integral_[a.model.value];
    a.exact += ExactAmount{a.milli} * (integral - a.mark) * run.multiplier;
    a.mark = integral;
    const Micros amount = whole_micros(a.exact) - a.posted;
    if (amount <= 0) continue;
    LedgerEntry entry;
    entry.kind = EntryKind::kCharge;
    entry.debit = Account::tenant(run.tenant);
    entry.credit = Account::pool();
    entry.amount = amount;
    entry.from = run.posted_until;
    entry.to = now_;
    entry.job = job;
    entry.tenant = run.tenant;
    entry.model = a.model;
    entry.milli = a.milli;
    entry.price_per_hour = class_price(schedule_, prices_[a.model.value], run.price_class);
    if (auto appended = ledger.append(std::move(entry)); !appended) {
      return std::unexpected(appended.error());
    }
    a.posted += amount;
  }
  run.posted_until = now_;
  return {};
}

Result<void> ChargeMeter::post(Seconds now, CostLedger& ledger) {
  if (auto clock = check_clock(now, now_); !clock) return clock;
  for (auto& [job, run] : jobs_) {
    if (auto posted = post_job(job, run, ledger); !posted) return posted;
  }
  for (auto& [key, credit] : credits_) {
    const Micros amount = whole_micros(credit.exact) - credit.posted;
    if (amount > 0) {
      const GpuModelId model{key.second};
      LedgerEntry entry;
      entry.kind = EntryKind::kLendingCredit;
      entry.debit = Account::pool();
      entry.credit = Account::tenant(TenantId{key.first});
      entry.amount = amount;
      entry.from = credit.posted_until;
      entry.to = now;
      entry.tenant = TenantId{key.first};
      entry.model = model;
      entry.milli = credit.milli;
      entry.price_per_hour =
          mul_div_round(prices_[model.value].standard_per_hour, schedule_.lender_share, kPpmOne);
      if (auto appended = ledger.append(std::move(entry)); !appended) {
        return std::unexpected(appended.error());
      }
      credit.posted += amount;
    }
    credit.posted_until = now;
  }
  return {};
}

Micros ChargeMeter::price_per_hour(GpuModelId model, PriceClass price_class) const {
  return class_price(schedule_, prices_.at(model.value), price_class);
}

Micros ChargeMeter::job_total(JobId job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  const RunningJob& run = it->second;
  Micros total = 0;
  for (const Accrual& a : run.accruals) {
    const ExactAmount pending =
        ExactAmount{a.milli} * (integral_[a.model.value] - a.mark) * run.multiplier;
    total += whole_micros(a.exact + pending);
  }
  return total;
}

}  // namespace tidepool
