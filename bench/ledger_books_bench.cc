// How big the ledger stays when the books are closed every day (core/ledger_books.h), against
// the entries posted: a pool of `jobs` jobs always running, each for `job_days` days, of `tenants`
// tenants over `models` GPU models, charged every `posting` seconds as the server's meter posts,
// for `days` days; the books are closed once an hour, as the server does. Prints the
// entries posted, the entries kept (at the end and at most), and the time the folds took.
//
//   tidepool_ledger_books_bench [--jobs N] [--days D] [--posting S] [--job-days J]
//                               [--tenants T] [--models M] [--jobs-kept D] [--days-kept D]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <utility>

#include "core/cost_ledger.h"
#include "core/ledger_books.h"

namespace {

using tidepool::Account;
using tidepool::BookTerms;
using tidepool::CostLedger;
using tidepool::EntryKind;
using tidepool::GpuModelId;
using tidepool::JobId;
using tidepool::LedgerEntry;
using tidepool::Seconds;
using tidepool::TenantId;

struct Options {
  std::int64_t jobs = 1000;
  std::int64_t days = 730;
  std::int64_t posting = 600;
  std::int64_t job_days = 3;
  std::int64_t tenants = 20;
  std::int64_t models = 2;
  BookTerms terms;
};

bool parse(int argc, char** argv, Options& o) {
  const std::pair<const char*, std::int64_t*> flags[] = {{"--jobs", &o.jobs},
                                                         {"--days", &o.days},
                                                         {"--posting", &o.posting},
                                                         {"--job-days", &o.job_days},
                                                         {"--tenants", &o.tenants},
                                                         {"--models", &o.models},
                                                         {"--jobs-kept", &o.terms.job_days},
                                                         {"--days-kept", &o.terms.day_days}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::int64_t value = std::strtoll(argv[i + 1], nullptr, 10);
    const auto flag = std::find_if(std::begin(flags), std::end(flags), [&](const auto& f) {
      return std::strcmp(f.first, argv[i]) == 0;
    });
    if (value < 1 || flag == std::end(flags)) return false;
    *flag->second = value;
  }
  return argc % 2 == 1 && tidepool::validate(o.terms).has_value();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: %s [--jobs N] [--days D] [--posting S] [--job-days J] [--tenants T] "
                 "[--models M] [--jobs-kept D] [--days-kept D] (positive integers; "
                 "days-kept >= jobs-kept)\n",
                 argv[0]);
    return 2;
  }
  constexpr Seconds kDay = 86'400;
  constexpr Seconds kStart = 20'000 * kDay;  // a midnight
  const Seconds job_length = o.job_days * kDay;
  CostLedger ledger;
  std::int64_t posted = 0;
  std::size_t most_kept = 0;
  std::int64_t folds = 0;
  std::chrono::nanoseconds folding{0};
  // Job slot s runs job number k from its start; a new job takes the slot when it ends. Slots
  // start staggered, so that jobs end every posting.
  const auto job_at = [&](std::int64_t slot, Seconds t) {
    const Seconds offset = slot * job_length / o.jobs;
    return (t - kStart + offset) / job_length * o.jobs + slot + 1;
  };
  std::int64_t checked_period = -1;  // as the server: the books are looked at once an hour
  for (Seconds t = kStart; t < kStart + o.days * kDay; t += o.posting) {
    for (std::int64_t slot = 0; slot < o.jobs; ++slot) {
      const auto job = static_cast<std::uint32_t>(job_at(slot, t));
      LedgerEntry e;
      e.kind = EntryKind::kCharge;
      e.tenant = TenantId{static_cast<std::uint32_t>(job % o.tenants)};
      e.debit = Account::tenant(e.tenant);
      e.credit = Account::pool();
      e.amount = 1000 + job % 7;
      e.from = t;
      e.to = t + o.posting;
      e.job = JobId{job};
      e.model = GpuModelId{static_cast<std::uint32_t>(job % o.models)};
      e.milli = 1000;
      e.price_per_hour = 3'600'000;
      if (!ledger.append(e)) return 1;
      ++posted;
    }
    most_kept = std::max(most_kept, ledger.entries().size());
    const Seconds now = t + o.posting;
    if ((now - 1) / tidepool::kLedgerSettled == checked_period) continue;
    checked_period = (now - 1) / tidepool::kLedgerSettled;
    const auto start = std::chrono::steady_clock::now();
    std::set<JobId> live;
    for (std::int64_t slot = 0; slot < o.jobs; ++slot) {
      live.insert(JobId{static_cast<std::uint32_t>(job_at(slot, now))});
    }
    const std::function<bool(JobId)> is_live = [&](JobId job) { return live.contains(job); };
    while (auto fold = tidepool::next_fold({.entries = ledger.entries(),
                                            .foldable = ledger.entries().size(),
                                            .now = now,
                                            .epoch = 0,
                                            .most = 0,
                                            .live = is_live},
                                           o.terms)) {
      if (!ledger.apply(*fold)) return 1;
      ++folds;
    }
    folding += std::chrono::steady_clock::now() - start;
  }
  std::printf(
      "ledger books: %lld jobs running (%lld days each), %lld tenants, %lld models, a posting "
      "every %llds, %lld days; jobs kept %lld days, days kept %lld\n",
      static_cast<long long>(o.jobs), static_cast<long long>(o.job_days),
      static_cast<long long>(o.tenants), static_cast<long long>(o.models),
      static_cast<long long>(o.posting), static_cast<long long>(o.days),
      static_cast<long long>(o.terms.job_days), static_cast<long long>(o.terms.day_days));
  std::printf("  posted %lld entries; kept %zu at the end, %zu at most; %lld folds in %.2f s\n",
              static_cast<long long>(posted), ledger.entries().size(), most_kept,
              static_cast<long long>(folds), static_cast<double>(folding.count()) / 1e9);
  return 0;
}
