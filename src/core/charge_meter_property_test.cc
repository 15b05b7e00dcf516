// Property test of the internal market's books: every tenant's ledger balance equals the sum of
// its charges and credits recomputed from the jobs, exactly. Random jobs of random tenants run on
// a two-model pool under the full scheduler (quotas with borrowing, reclaim and priority
// preemption); the meter is driven as the simulator drives it. The reference below recomputes
// everything from what the test saw (each job's run segments) and the price history the meter
// published, with its own price integration and its own quota formulas, never from the meter's
// internals. Each seed comes from a tidepool::Rng, so a failure names a reproducible seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/charge_meter.h"
#include "core/cost_ledger.h"
#include "core/pool.h"
#include "core/pricing.h"
#include "core/rng.h"
#include "core/scheduler.h"
#include "core/tenants.h"
#include "core/test_pool.h"
#include "core/test_random.h"

namespace tidepool {
namespace {

using test_support::chance;
using test_support::draw;

constexpr int kMeterSeeds = 200;
// H100 (nodes n0, n2) and A100 (n1, n3); each leaf holds one node of each (leaf-0: n0, n1), so
// that a gang over two nodes of a leaf holds GPUs of both models.
constexpr int kModels = 2;
constexpr int kTenants = 3;
constexpr Seconds kMeterHorizon = 24'000;
constexpr Seconds kDayOffset = 8 * 3600;  // time 0 is 08:00: the 09:00-18:00 band applies
// Odd cost bases, so that hardly any amount is a whole number of micro-credits.
constexpr std::array<Micros, kModels> kCostBase = {3'000'001, 1'234'567};

// The tenants' quotas, as given to the book; the reference derives borrowed and lendable from
// these with its own formulas. One org, so the org-level rules add nothing. The H100 guarantees
// cover the whole model; a quarter of the A100s is nobody's guarantee.
struct Quota {
  std::int64_t guaranteed = 0;
  std::int64_t lending = 0;
};
constexpr std::array<std::array<Quota, kModels>, kTenants> kQuotas = {{
    {{{10000, 10000}, {4000, 2000}}},  // A lends only half of its A100 guarantee
    {{{6000, 6000}, {8000, 8000}}},    // B
    {{{0, 0}, {0, 0}}},                // C guarantees nothing: it only borrows
}};

PriceSchedule schedule() {
  PriceSchedule s;  // the default smoothstep curve: prices follow utilisation
  s.bands = {{9 * 3600, 18 * 3600, 1'200'000}};
  s.period = 300;
  return s;
}

TenantBook quota_book(const GpuModelCatalog& models) {
  TenantsSpec spec;
  OrgSpec org;
  org.name = "org";
  for (int t = 0; t < kTenants; ++t) {
    TenantSpec tenant;
    tenant.name = std::string(1, static_cast<char>('A' + t));
    for (std::uint32_t m = 0; m < kModels; ++m) {
      const Quota& q = kQuotas[t][m];
      if (q.guaranteed == 0) continue;
      tenant.quotas.push_back({GpuModelId{m}, q.guaranteed, std::nullopt, q.lending});
    }
    org.tenants.push_back(std::move(tenant));
  }
  spec.orgs.push_back(std::move(org));
  auto book = TenantBook::create(std::move(spec), models);
  EXPECT_TRUE(book.has_value()) << book.error().message();
  return std::move(book).value();
}

struct TestJob {
  Job job;
  Seconds runtime = 0;  // each run segment restarts it: it finishes `runtime` after a start
};

std::vector<TestJob> random_meter_jobs(Rng& rng) {
  std::vector<TestJob> jobs(static_cast<std::size_t>(draw(rng, 8, 36)));
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Job& job = jobs[i].job;
    job.id = JobId{static_cast<std::uint32_t>(i)};
    job.tenant = TenantId{static_cast<std::uint32_t>(draw(rng, 0, kTenants - 1))};
    job.queue = QueueId{job.tenant.value};
    job.submit_time = draw(rng, 0, 16'000);
    job.preemptible = chance(rng, 70);
    job.priority_class = job.preemptible ? draw(rng, 0, 1) : draw(rng, 0, 2);
    if (chance(rng, 70)) job.checkpoint_interval = 600;
    jobs[i].runtime = draw(rng, 30, 5000);
    if (chance(rng, 80)) job.runtime_estimate = jobs[i].runtime;
    if (chance(rng, 20)) {  // a fraction of one GPU
      job.gang.task_count = 1;
      job.gang.task = *make_task_shape(1, 250 * draw(rng, 1, 3), 1000, 1024);
    } else {
      const int per_task = 1 << draw(rng, 0, 3);
      job.gang.task_count = draw(rng, 1, per_task == 8 ? 3 : 4);
      job.gang.task = *make_task_shape(per_task, 1000, 1000, 1024);
    }
    job.gang.topology = {TopologyLevel::kSpine, TopologyStrength::kPreferred};
  }
  return jobs;
}

// One run of a job: [start, end) holding `milli` of each model.
struct Segment {
  JobId job;
  TenantId tenant;
  Ppm multiplier = kPpmOne;
  std::array<std::int64_t, kModels> milli{};
  Seconds start = 0;
  Seconds end = 0;
};

// What a seed exercised, so that the test cannot pass by doing nothing.
struct Coverage {
  int preemptions = 0;
  int multi_model_runs = 0;
  int credit_entries = 0;
  int restarts = 0;
  int capped_intervals = 0;  // more borrowed than idle guarantee: part of it credits no one
};

// ---- The reference: recomputes the books from segments and the published prices. ----

// Each model's prices in force, in order; checked to cover [0, until) without gap or overlap.
using PriceTable = std::array<std::vector<Price>, kModels>;

// The integral of `model`'s standard price over [from, to), micro-credits per hour x seconds.
ExactAmount price_integral(const PriceTable& prices, int model, Seconds from, Seconds to) {
  ExactAmount sum = 0;
  for (const Price& p : prices[model]) {
    const Seconds overlap = std::min(to, p.until) - std::max(from, p.from);
    if (overlap > 0) sum += ExactAmount{p.standard_per_hour} * overlap;
  }
  return sum;
}

struct Books {
  std::array<Micros, kTenants> charges{};
  std::array<Micros, kTenants> credits{};
  std::map<JobId, Micros> job_charges;
};

// Charges: the meter keeps one accrual per (run segment, model) and forgets a job when it stops,
// so a job preempted and started again is charged floor(exact / unit) for each segment and model
// separately; a segment still running at the end counts up to the end.
void reference_charges(const PriceTable& prices, std::span<const Segment> segments, Books& books) {
  for (const Segment& s : segments) {
    for (int m = 0; m < kModels; ++m) {
      if (s.milli[m] == 0) continue;
      const ExactAmount exact =
          ExactAmount{s.milli[m]} * price_integral(prices, m, s.start, s.end) * s.multiplier;
      const auto amount = static_cast<Micros>(exact / kExactPerMicro);
      books.charges[s.tenant.value] += amount;
      books.job_charges[s.job] += amount;
    }
  }
}

// The lenders' shares of `lent`, pro rata to `lendable`, in whole milli-GPUs: floors, then one
// more each by largest remainder, equal remainders to the lower tenant.
std::array<std::int64_t, kTenants> split(std::int64_t lent,
                                         const std::array<std::int64_t, kTenants>& lendable) {
  const std::int64_t total = std::accumulate(lendable.begin(), lendable.end(), std::int64_t{0});
  std::array<std::int64_t, kTenants> share{};
  std::array<std::int64_t, kTenants> remainder{};
  std::int64_t left = lent;
  for (int t = 0; t < kTenants; ++t) {
    share[t] = lent * lendable[t] / total;
    remainder[t] = lent * lendable[t] % total;
    left -= share[t];
  }
  std::array<int, kTenants> order{};
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return remainder[a] != remainder[b] ? remainder[a] > remainder[b] : a < b;
  });
  for (int i = 0; left > 0; ++i, --left) {
    EXPECT_GT(lendable[order[i]], 0);  // only lenders have a remainder before the others
    ++share[order[i]];
  }
  return share;
}

// Credits: usage per tenant and model rebuilt from the segments between consecutive segment
// ends, then b_t = max(0, U_t - G_t), l_t = min(L_t, max(0, G_t - U_t)) (one org), the lent
// capacity min(sum b, sum l) split among lenders, integrated, floored per (tenant, model).
void reference_credits(const PriceTable& prices, std::span<const Segment> segments, Seconds end,
                       Ppm lender_share, Books& books, Coverage& coverage) {
  std::set<Seconds> cuts = {0, end};
  for (const Segment& s : segments) {
    cuts.insert(s.start);
    cuts.insert(s.end);
  }
  std::array<std::array<ExactAmount, kModels>, kTenants> exact{};
  for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
    const Seconds from = *it;
    const Seconds to = *std::next(it);
    std::array<std::array<std::int64_t, kModels>, kTenants> usage{};
    for (const Segment& s : segments) {
      if (s.start > from || s.end < to) continue;
      for (int m = 0; m < kModels; ++m) usage[s.tenant.value][m] += s.milli[m];
    }
    for (int m = 0; m < kModels; ++m) {
      std::int64_t borrowed = 0;
      std::array<std::int64_t, kTenants> lendable{};
      for (int t = 0; t < kTenants; ++t) {
        const Quota& q = kQuotas[t][m];
        borrowed += std::max<std::int64_t>(0, usage[t][m] - q.guaranteed);
        lendable[t] = std::min(q.lending, std::max<std::int64_t>(0, q.guaranteed - usage[t][m]));
      }
      const std::int64_t lent =
          std::min(borrowed, std::accumulate(lendable.begin(), lendable.end(), std::int64_t{0}));
      coverage.capped_intervals += borrowed > lent ? 1 : 0;
      if (lent == 0) continue;
      const std::array<std::int64_t, kTenants> share = split(lent, lendable);
      const ExactAmount integral = price_integral(prices, m, from, to);
      for (int t = 0; t < kTenants; ++t) exact[t][m] += share[t] * integral * lender_share;
    }
  }
  for (int t = 0; t < kTenants; ++t) {
    for (int m = 0; m < kModels; ++m) {
      books.credits[t] += static_cast<Micros>(exact[t][m] / kExactPerMicro);
    }
  }
}

void run_seed(std::uint64_t seed, Coverage& coverage) {
  Rng rng(seed);
  const PriceSchedule prices_schedule = schedule();
  std::vector<TestJob> jobs = random_meter_jobs(rng);

  SchedulerConfig config;
  config.order = OrderRule::kFairShare;
  config.placement = PlacementRule::kTopology;
  config.quotas = true;
  config.reclaim = true;
  config.priority_preemption = true;
  config.backfill = true;
  config.day_offset = kDayOffset;
  Pool initial_pool = test_support::make_two_model_pool();
  TenantBook initial_book = quota_book(initial_pool.models());
  auto created = Scheduler::create(std::move(initial_pool), std::move(initial_book), config);
  ASSERT_TRUE(created.has_value()) << created.error().message();
  Scheduler sched = std::move(*created);
  auto meter_or = ChargeMeter::create(prices_schedule, {kCostBase.begin(), kCostBase.end()},
                                      kDayOffset, 0, sched.pool());
  ASSERT_TRUE(meter_or.has_value()) << meter_or.error().message();
  ChargeMeter meter = std::move(*meter_or);
  CostLedger ledger;

  std::vector<Segment> segments;
  std::map<JobId, std::size_t> open;  // running job -> its segment
  std::map<JobId, Seconds> ends;      // running job -> when it finishes
  std::map<JobId, int> starts;
  std::size_t next_submit = 0;
  std::vector<std::size_t> by_submit(jobs.size());
  std::iota(by_submit.begin(), by_submit.end(), std::size_t{0});
  std::stable_sort(by_submit.begin(), by_submit.end(), [&](std::size_t a, std::size_t b) {
    return jobs[a].job.submit_time < jobs[b].job.submit_time;
  });

  const auto close = [&](JobId id, Seconds t) {
    segments[open.at(id)].end = t;
    open.erase(id);
    ends.erase(id);
  };

  Seconds t = 0;
  Seconds prev = 0;
  while (true) {
    // The state that held over [prev, t): the prices set at boundaries in (prev, t] come from it.
    const std::vector<Ppm> utilisation = model_utilisation(sched.pool());
    const std::size_t known_prices = meter.price_history().size();
    ASSERT_TRUE(meter.advance(t, sched.pool(), sched.book()).has_value());
    for (std::size_t i = known_prices; i < meter.price_history().size(); ++i) {
      const auto& [model, price] = meter.price_history()[i];
      ASSERT_GT(price.from, prev);
      ASSERT_LE(price.from, t);
      ASSERT_EQ(price.utilisation, utilisation.at(model.value)) << "seed " << seed;
    }
    if (t >= kMeterHorizon) break;

    for (auto it = ends.begin(); it != ends.end();) {
      const auto [id, end] = *it++;
      if (end > t) continue;
      ASSERT_TRUE(sched.finish(id, t, std::nullopt).has_value());
      ASSERT_TRUE(meter.stop(id, t, ledger).has_value());
      close(id, t);
    }
    for (; next_submit < by_submit.size(); ++next_submit) {
      const Job& job = jobs[by_submit[next_submit]].job;
      if (job.submit_time > t) break;
      ASSERT_TRUE(sched.submit(job, t).has_value()) << "seed " << seed;
    }

    const PassResult pass = sched.pass(t);
    for (const PreemptedJob& p : pass.preempted) {
      ASSERT_TRUE(meter.stop(p.job, t, ledger).has_value());
      close(p.job, t);
      ++coverage.preemptions;
    }
    for (const StartedJob& s : pass.started) {
      const TestJob& tj = jobs.at(s.job.value);
      Segment segment{s.job,
                      tj.job.tenant,
                      tj.job.preemptible ? prices_schedule.preemptible : prices_schedule.standard,
                      {},
                      t,
                      kMeterHorizon};
      for (const Assignment& a : s.assignments) {
        segment.milli[sched.pool().spec(a.node).model.value] += tj.job.gang.task.total_milli_gpu();
      }
      std::vector<ModelMilli> gpus;
      for (std::uint32_t m = 0; m < kModels; ++m) {
        if (segment.milli[m] > 0) gpus.push_back({GpuModelId{m}, segment.milli[m]});
      }
      coverage.multi_model_runs += gpus.size() > 1 ? 1 : 0;
      coverage.restarts += starts[s.job]++ > 0 ? 1 : 0;
      ASSERT_TRUE(meter.start(s.job, tj.job.tenant, gpus, price_class_of(tj.job), t).has_value());
      open[s.job] = segments.size();
      segments.push_back(segment);
      ends[s.job] = t + tj.runtime;
    }

    // Guard: the usage rebuilt from the open segments is the book's, so the reference's quota
    // figures start from the right usage.
    for (std::uint32_t tenant = 0; tenant < kTenants; ++tenant) {
      for (std::uint32_t m = 0; m < kModels; ++m) {
        std::int64_t usage = 0;
        for (const auto& [id, index] : open) {
          if (segments[index].tenant.value == tenant) usage += segments[index].milli[m];
        }
        ASSERT_EQ(usage, sched.book().usage(TenantId{tenant}, GpuModelId{m}))
            << "seed " << seed << " t " << t;
      }
    }
    for (const TestJob& tj : jobs) ASSERT_EQ(meter.running(tj.job.id), open.contains(tj.job.id));

    if (chance(rng, 30)) {
      ASSERT_TRUE(meter.post(t, ledger).has_value());
    }

    // The next step: a random gap, often cut short at a job's end or a period boundary.
    prev = t;
    Seconds next = t + draw(rng, 1, 700);
    if (!ends.empty() && chance(rng, 60)) {
      for (const auto& [id, end] : ends) next = std::min(next, std::max(end, t + 1));
    }
    if (chance(rng, 20)) next = (next / prices_schedule.period) * prices_schedule.period;
    t = std::min(std::max(next, t + 1), kMeterHorizon);
  }
  ASSERT_TRUE(meter.post(kMeterHorizon, ledger).has_value());

  // The prices the meter published: per model, contiguous from the start to past the horizon,
  // and each the price pricing.h gives for its utilisation and period.
  PriceTable prices;
  for (const auto& [model, price] : meter.price_history()) {
    std::vector<Price>& list = prices.at(model.value);
    if (list.empty()) {
      ASSERT_LE(price.from, 0);
    } else {
      ASSERT_EQ(price.from, list.back().until);
    }
    ASSERT_EQ(price, price_in_force(prices_schedule, kCostBase[model.value], price.utilisation,
                                    price.from, kDayOffset));
    list.push_back(price);
  }
  for (const auto& list : prices) ASSERT_GT(list.back().until, kMeterHorizon);

  Books books;
  reference_charges(prices, segments, books);
  reference_credits(prices, segments, kMeterHorizon, prices_schedule.lender_share, books, coverage);

  Books posted;
  for (const LedgerEntry& e : ledger.entries()) {
    if (e.kind == EntryKind::kCharge) {
      posted.charges.at(e.tenant.value) += e.amount;
      posted.job_charges[*e.job] += e.amount;
    } else if (e.kind == EntryKind::kLendingCredit) {
      posted.credits.at(e.tenant.value) += e.amount;
      ++coverage.credit_entries;
    } else {
      ADD_FAILURE() << "unexpected entry kind " << entry_kind_name(e.kind);
    }
  }
  for (auto& [job, amount] : books.job_charges) {
    if (amount == 0) continue;
    EXPECT_EQ(posted.job_charges[job], amount) << "seed " << seed << " job " << job.value;
  }
  for (int tenant = 0; tenant < kTenants; ++tenant) {
    EXPECT_EQ(posted.charges[tenant], books.charges[tenant]) << "seed " << seed << " t" << tenant;
    EXPECT_EQ(posted.credits[tenant], books.credits[tenant]) << "seed " << seed << " t" << tenant;
    EXPECT_EQ(ledger.balance(Account::tenant(TenantId{static_cast<std::uint32_t>(tenant)})),
              books.credits[tenant] - books.charges[tenant])
        << "seed " << seed << " tenant " << tenant;
  }
  Micros sum = 0;
  for (const auto& [account, balance] : ledger.balances()) sum += balance;
  EXPECT_EQ(sum, 0) << "seed " << seed;
  EXPECT_EQ(CostLedger::rebuild_balances(ledger.entries()), ledger.balances()) << "seed " << seed;
}

TEST(ChargeMeterProperty, BalancesEqualChargesAndCreditsRecomputedFromTheJobs) {
  Coverage coverage;
  for (int seed = 1; seed <= kMeterSeeds; ++seed) {
    run_seed(static_cast<std::uint64_t>(seed), coverage);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "stopped at seed " << seed;
      return;
    }
  }
  // The runs did exercise what the books must get right (loose bounds: the seeds are fixed, but
  // the scheduler's choices may change).
  EXPECT_GT(coverage.preemptions, kMeterSeeds / 2);
  EXPECT_GT(coverage.restarts, kMeterSeeds / 2);
  EXPECT_GT(coverage.multi_model_runs, 0);
  EXPECT_GT(coverage.credit_entries, kMeterSeeds);
  EXPECT_GT(coverage.capped_intervals, kMeterSeeds / 2);
}

}  // namespace
}  // namespace tidepool
