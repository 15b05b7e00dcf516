// The meter of the internal market: it charges running jobs at the price in force
// (core/pricing.h) and credits lenders whose idle guarantee others use, posting entries to a
// CostLedger. The simulator and the server drive the same meter, so they charge alike.
//
// Driving it: the caller keeps the meter's clock in step with the scheduler's state. Before it
// changes anything at time `now` (a job starts or stops, a tenant's usage changes), it calls
// advance(now, pool, book) with the state that held since the previous call; then start() and
// stop() at `now`. post(now) writes what has accrued since the last posting (the server posts on
// a tick; the simulator when it needs balances).
//
// Prices: at every period start crossed (and at creation), each model's price is set from the
// pool's utilisation then (model_utilisation) and held for the period.
//
// Charges. A running job of class c holding `milli` of model m accrues
//   milli x (integral of m's standard price over the time it ran) x class multiplier(c)
// exactly (in 128-bit units of milli-GPU x micro-credits-per-hour x seconds x ppm). Posting writes
// the whole micro-credits accrued since the last posting and carries the rest, so that a job's
// posted charges are always floor(exact total / unit) whatever the posting times: the same
// intervals charged in more or fewer slices post the same total.
//
// Lending credits. Over each interval with constant state, per model m: the borrowed usage
// B = sum over tenants of book.borrowed(t, m) is taken from the tenants with idle lendable
// guarantee l_t = book.lendable(t, m) > 0, pro rata to l_t, at most sum l_t in all (borrowed
// capacity beyond that was nobody's guarantee: unguaranteed capacity credits no one). The shares
// are whole milli-GPUs by largest remainder, ties to the lower tenant id. A lender accrues
// lent_t x (integral of the standard price) x lender_share, exactly, posted like charges (one
// carry per tenant and model).
//
// Determinism: entries are posted in order of job id, then tenant id and model id.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "core/cost_ledger.h"
#include "core/error.h"
#include "core/ids.h"
#include "core/money.h"
#include "core/pool.h"
#include "core/pricing.h"

namespace tidepool {

class Pool;
class TenantBook;

// One model's share of a job's GPUs.
struct ModelMilli {
  GpuModelId model;
  std::int64_t milli = 0;
};

// What a job holds per model when its tasks (`milli_per_task` each) sit on `assignments` of
// `pool`, in model id order; models with nothing are left out (a CPU-only job holds none).
std::vector<ModelMilli> gpus_by_model(const Pool& pool, std::span<const Assignment> assignments,
                                      std::int64_t milli_per_task);

class ChargeMeter {
 public:
  // `cost_base`: per model id of the pool's catalog (every model needs one, > 0). Prices of the
  // period holding `start` are set from `pool`'s utilisation.
  static Result<ChargeMeter> create(PriceSchedule schedule, std::vector<Micros> cost_base,
                                    Seconds day_offset, Seconds start, const Pool& pool);

  // Accrues [last, now) with the state of `pool` and `book` (unchanged since the last call) and
  // moves the clock to `now`. Fails, changing nothing, if now < last.
  Result<void> advance(Seconds now, const Pool& pool, const TenantBook& book);

  // A job starts running now (advance(now) first) with `gpus` (per model) in class `price_class`.
  // Fails for a job already running, an unknown model or a non-positive amount.
  Result<void> start(JobId job, TenantId tenant, std::span<const ModelMilli> gpus,
                     PriceClass price_class, Seconds now);
  // A running job stops now: its accrued charges are posted and it is forgotten.
  Result<void> stop(JobId job, Seconds now, CostLedger& ledger);
  // Posts everything accrued up to now (advance(now) first): running jobs' charges and lending
  // credits.
  Result<void> post(Seconds now, CostLedger& ledger);

  // The price in force for `model` now.
  [[nodiscard]] const Price& price(GpuModelId model) const { return prices_.at(model.value); }
  // The class price per GPU-hour of `model` now.
  [[nodiscard]] Micros price_per_hour(GpuModelId model, PriceClass price_class) const;
  [[nodiscard]] const PriceSchedule& schedule() const { return schedule_; }
  [[nodiscard]] Seconds now() const { return now_; }
  [[nodiscard]] bool running(JobId job) const { return jobs_.contains(job); }
  // What the job has been charged so far, posted or not (whole micro-credits, floored): for caps.
  [[nodiscard]] Micros job_total(JobId job) const;
  // Every price set so far, in order: (model, price). For audits and reconciliation.
  [[nodiscard]] std::span<const std::pair<GpuModelId, Price>> price_history() const {
    return history_;
  }

 private:
  struct Accrual {
    GpuModelId model;
    std::int64_t milli = 0;
    ExactAmount mark = 0;   // the model's price integral when `exact` was last brought up to date
    ExactAmount exact = 0;  // accrued up to `mark`
    Micros posted = 0;
  };
  struct RunningJob {
    TenantId tenant;
    PriceClass price_class = PriceClass::kStandard;
    Ppm multiplier = kPpmOne;
    Seconds posted_until = 0;
    std::vector<Accrual> accruals;
  };
  struct Credit {
    ExactAmount exact = 0;  // accrued, posted or not
    Micros posted = 0;
    Seconds posted_until = 0;
    std::int64_t milli = 0;  // lent over the last interval accrued
  };

  ChargeMeter() = default;
  void set_prices(Seconds t, const Pool& pool);
  // Lending credits for [from, to): `delta[m]` is model m's price integral over it.
  void accrue_credits(std::span<const ExactAmount> delta, const TenantBook& book);
  // Brings the job's accruals up to now and posts their whole micro-credits not yet posted.
  Result<void> post_job(JobId job, RunningJob& run, CostLedger& ledger);

  PriceSchedule schedule_;
  std::vector<Micros> cost_base_;
  Seconds day_offset_ = 0;
  Seconds now_ = 0;
  std::vector<Price> prices_;          // per model, in force now
  std::vector<ExactAmount> integral_;  // per model: standard price per hour x seconds, summed
  std::vector<std::pair<GpuModelId, Price>> history_;
  std::map<JobId, RunningJob> jobs_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, Credit> credits_;  // (tenant, model)
};

}  // namespace tidepool
