// Closing the books: the ledger's keeping, so that it does not grow with time without bound.
//
// The meter posts one entry per running job and model every posting interval (the server: every
// minute), so a busy pool's ledger grows by millions of entries a month. Entries an hour old are
// folded, in the ledger and in the store, into carried entries (LedgerEntry's `folded`) that keep
// what every report reads:
//   - level 1, the day's entries an hour old, and again once the UTC day is over: one entry per
//     day, job and model (kind, accounts and tenant too);
//   - level 2, a day older than `job_days`: one per day, tenant and model (a live job, one that
//     may run again, keeps its own entries: its cost counts toward its max_cost after a restart);
//   - level 3, a day older than `day_days`: one per tenant, model and account pair over all such
//     days (the opening balance), so that the ledger's size is bounded by the jobs of the last
//     `job_days` days (and the open day's last hour) and the tenants and models of the last
//     `day_days`, not by the pool's age.
// What stays exact: every balance, every tenant's totals of each UTC day (entry_day) and quarter,
// each job's cost (level 1, and live jobs at every level), and bills over whole UTC days. What
// goes: a bill over part of a day, and by job, team or label past `job_days`.
//
// A fold replaces a run of consecutive entries (a day's, or every level 3 day's) by its carried
// entries, which take the last seqs of the run's span, one after another (LedgerFold), so that a
// store deletes one range of seqs and writes a few entries. Entries count on the day of their last
// second (entry_day), which follows the posting order, so a day's entries are consecutive.
//
// Pure: values in, a fold out; the same ledger, time and terms give the same fold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "core/cost_ledger.h"
#include "core/error.h"
#include "core/ids.h"
#include "core/money.h"

namespace tidepool {

// The open day's entries fold once this old: a driver that closes the books looks again when a
// period this long has passed (the server once an hour).
inline constexpr Seconds kLedgerSettled = 3600;

struct BookTerms {
  std::int64_t job_days = 92;   // >= 1: days a closed day keeps its entries by job
  std::int64_t day_days = 400;  // >= job_days: days a closed day keeps entries of its own

  friend bool operator==(const BookTerms&, const BookTerms&) = default;
};

// Fails naming the field ("job_days", "day_days") for terms out of range.
Result<void> validate(const BookTerms& terms);

struct FoldRequest {
  std::span<const LedgerEntry> entries;  // the ledger, in seq order
  std::size_t foldable = 0;  // only the first `foldable` entries may be folded (those stored)
  Seconds now = 0;           // the driver's clock
  std::int64_t epoch = 0;    // Unix time of its time 0
  std::size_t most = 0;      // the most carried entries one fold may hold (0: any number)
  // Jobs that may run again (pending or running), whose entries keep their job at every level.
  std::function<bool(JobId)> live;
};

// The first fold due: the oldest run of entries whose level (above) folds it into fewer entries,
// within `most` carried entries (a level 1 day over it is folded as level 2; a run still over it
// is left as it is). nullopt when nothing is due.
[[nodiscard]] std::optional<LedgerFold> next_fold(const FoldRequest& request,
                                                  const BookTerms& terms);

}  // namespace tidepool
