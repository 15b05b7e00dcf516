#include "core/burst.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/job.h"
#include "core/scheduler.h"

namespace tidepool {

Result<void> validate_burst(std::span<const BurstOffer> offers, const BurstPolicy& policy) {
  if (policy.threshold <= 0) return fail("threshold", "must be positive");
  std::set<std::string> names;
  for (std::size_t i = 0; i < offers.size(); ++i) {
    const BurstOffer& o = offers[i];
    const std::string at = fmt::format("offers[{}].", i);
    if (o.name.empty()) return fail(at + "name", "must not be empty");
    if (!names.insert(o.name).second) {
      return fail(at + "name", fmt::format("offer '{}' is named twice", o.name));
    }
    if (o.provider.empty()) return fail(at + "provider", "must not be empty");
    if (o.price_per_gpu_hour <= 0 || o.price_per_gpu_hour > kMaxMoney) {
      return fail(at + "price_per_gpu_hour", "must be positive and at most 1e12");
    }
    if (o.startup_delay < 0 || o.startup_delay > 7 * 86400) {
      return fail(at + "startup_delay", "must be 0..7 days");
    }
    if (o.max_gpus <= 0 || o.max_gpus > 10'000'000) {
      return fail(at + "max_gpus", "must be 1..10000000");
    }
    if (o.interruption_per_hour < 0 || o.interruption_per_hour >= kPpmOne) {
      return fail(at + "interruption_per_hour", "must be in [0, 1)");
    }
    if (!o.spot && o.interruption_per_hour != 0) {
      return fail(at + "interruption_per_hour", "only spot offers are interrupted");
    }
  }
  return {};
}

Micros rented_cost(std::int64_t gpus, Seconds seconds, Micros price_per_gpu_hour) {
  return mul_div_round(gpus * seconds, price_per_gpu_hour, 3600);
}

std::int64_t rented_gpus(const Job& job) {
  return std::int64_t{job.gang.task_count} * job.gang.task.gpu_count;
}

std::vector<BurstCandidate> burst_candidates(std::span<const WaitingJob> waiting,
                                             const Scheduler& scheduler,
                                             const BurstPolicy& policy) {
  std::vector<const WaitingJob*> due;
  for (const WaitingJob& w : waiting) {
    if (w.waited >= policy.threshold && w.job->gang.task.needs_gpu()) due.push_back(&w);
  }
  std::ranges::sort(due, [](const WaitingJob* a, const WaitingJob* b) {
    return a->waited != b->waited ? a->waited > b->waited : a->job->id < b->job->id;
  });
  if (due.size() > kMaxBurstCandidates) due.resize(kMaxBurstCandidates);
  std::vector<BurstCandidate> out;
  out.reserve(due.size());
  for (const WaitingJob* w : due) {
    const Job& job = *w->job;
    const auto prediction = scheduler.prediction(job.id);
    const Seconds runtime =
        prediction ? prediction->runtime
                   : job.runtime_estimate.value_or(scheduler.config().predictor.default_runtime);
    out.push_back({.job = job.id,
                   .tenant = job.tenant,
                   .models = job.gang.task.models,
                   .gpus = rented_gpus(job),
                   .waited = w->waited,
                   .predicted_runtime = runtime,
                   .preemptible = job.preemptible,
                   .checkpoints = job.checkpoint_interval.has_value()});
  }
  return out;
}

BurstChoice choose_bursts(std::span<const BurstCandidate> candidates,
                          std::span<const BurstOffer> offers,
                          std::span<const std::int64_t> rented_gpus,
                          std::span<const std::optional<Micros>> remaining_budget,
                          const BurstPolicy& policy) {
  BurstChoice out;
  std::vector<const BurstCandidate*> due;
  for (const BurstCandidate& c : candidates) {
    if (c.waited >= policy.threshold && c.gpus > 0) due.push_back(&c);
  }
  std::sort(due.begin(), due.end(), [](const BurstCandidate* a, const BurstCandidate* b) {
    return a->waited != b->waited ? a->waited > b->waited : a->job < b->job;
  });
  std::vector<std::int64_t> room(offers.size(), 0);
  for (std::size_t i = 0; i < offers.size(); ++i) {
    room[i] = offers[i].max_gpus - (i < rented_gpus.size() ? rented_gpus[i] : 0);
  }
  std::map<TenantId, Micros> committed;
  for (const BurstCandidate* c : due) {
    std::optional<std::size_t> best;
    Micros best_cost = 0;
    // Why no offer fits, the most telling reason kept: no room beats spot-only beats no model.
    std::string why = "no offer rents a GPU model the job accepts";
    int why_rank = 0;
    const auto refuse = [&](int rank, std::string reason) {
      if (rank > why_rank) {
        why_rank = rank;
        why = std::move(reason);
      }
    };
    for (std::size_t i = 0; i < offers.size(); ++i) {
      const BurstOffer& o = offers[i];
      if (!c->models.accepts(o.model)) continue;
      if (o.spot && !(c->preemptible && c->checkpoints)) {
        refuse(1,
               fmt::format("offer {} is spot: only for preemptible jobs that checkpoint", o.name));
        continue;
      }
      if (room[i] < c->gpus) {
        refuse(2, fmt::format("offer {} has {} GPUs free, the job needs {}", o.name,
                              std::max<std::int64_t>(0, room[i]), c->gpus));
        continue;
      }
      const Micros cost =
          rented_cost(c->gpus, c->predicted_runtime + o.startup_delay, o.price_per_gpu_hour);
      if (!best || cost < best_cost) {
        best = i;
        best_cost = cost;
      }
    }
    if (!best) {
      out.refusals.push_back({c->job, std::move(why)});
      continue;
    }
    const std::size_t t = c->tenant.value;
    if (t < remaining_budget.size() && remaining_budget[t]) {
      const Micros left = *remaining_budget[t] - committed[c->tenant];
      if (left < best_cost) {
        out.refusals.push_back(
            {c->job, fmt::format("budget: the tenant has {} left, the cheapest offer needs {}",
                                 money_text(std::max<Micros>(0, left)), money_text(best_cost))});
        continue;
      }
    }
    committed[c->tenant] += best_cost;
    room[*best] -= c->gpus;
    out.decisions.push_back({c->job, *best, best_cost});
  }
  return out;
}

std::array<LedgerEntry, 2> burst_entries(JobId job, TenantId tenant, std::uint32_t offer_index,
                                         const BurstOffer& offer, std::int64_t gpus, Seconds from,
                                         Seconds to, Micros amount) {
  LedgerEntry charge;
  charge.kind = EntryKind::kBurstCharge;
  charge.debit = Account::tenant(tenant);
  charge.credit = Account::pool();
  charge.amount = amount;
  charge.from = from;
  charge.to = to;
  charge.job = job;
  charge.tenant = tenant;
  charge.model = offer.model;
  charge.milli = gpus * kMilliPerGpu;
  charge.price_per_hour = offer.price_per_gpu_hour;
  LedgerEntry cost = charge;
  cost.kind = EntryKind::kBurstCost;
  cost.debit = Account::pool();
  cost.credit = Account::provider(offer_index);
  return {charge, cost};
}

}  // namespace tidepool
