#include "core/ledger_books.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/budget.h"
#include "core/market_desk.h"
#include "core/tidal_window.h"

namespace tidepool {
namespace {

constexpr std::int64_t kOpening = std::numeric_limits<std::int64_t>::min();  // level 3's "day"

// What the entries folded into one carried entry share.
struct GroupKey {
  std::int64_t day = kOpening;
  bool ends_at_midnight = false;  // an interval ending at the end of its day (see group_key)
  EntryKind kind = EntryKind::kCharge;
  Account debit;
  Account credit;
  TenantId tenant;
  GpuModelId model;
  std::optional<JobId> job;

  friend auto operator<=>(const GroupKey&, const GroupKey&) = default;
};

// Bills select entries by `to` in [from, to), days by entry_day: an interval ending at midnight
// counts on the day before, but a bill up to that midnight leaves it out. Such entries are
// carried apart, so that a carried entry's `to` falls on the same side of every midnight as its
// entries' and its entry_day is theirs.
// At level 3, the entries are those of the days before `opening_end` (Unix seconds, a midnight):
// intervals ending there are carried apart likewise.
GroupKey group_key(const LedgerEntry& e, int level, std::int64_t epoch, std::int64_t opening_end,
                   const std::function<bool(JobId)>& live) {
  GroupKey key{.kind = e.kind,
               .debit = e.debit,
               .credit = e.credit,
               .tenant = e.tenant,
               .model = e.model,
               .job = e.job};
  if (level >= 2 && key.job && !(live && live(*key.job))) key.job.reset();
  if (level < 3) {
    key.day = entry_day(e, epoch);
    key.ends_at_midnight = e.to > e.from && utc_day(epoch + e.to) * kSecondsPerDay == epoch + e.to;
  } else {
    key.ends_at_midnight = e.to > e.from && epoch + e.to >= opening_end;
  }
  return key;
}

struct Carried {
  LedgerEntry entry;
  bool same_milli = true;
  bool same_price = true;
};

void fold_into(Carried& c, const LedgerEntry& e) {
  LedgerEntry& out = c.entry;
  if (out.folded == 0) {
    out = e;
    out.seq = 0;
    out.folded = std::max<std::int64_t>(1, e.folded);
    out.milli_seconds = paid_milli_seconds(e);
    return;
  }
  out.amount += e.amount;
  out.from = std::min(out.from, e.from);
  out.to = std::max(out.to, e.to);
  out.folded += std::max<std::int64_t>(1, e.folded);
  out.milli_seconds += paid_milli_seconds(e);
  c.same_milli = c.same_milli && out.milli == e.milli;
  c.same_price = c.same_price && out.price_per_hour == e.price_per_hour;
}

using Groups = std::map<GroupKey, Carried>;

Groups group(std::span<const LedgerEntry> run, int level, std::int64_t opening_end,
             const FoldRequest& request) {
  Groups groups;
  for (const LedgerEntry& e : run) {
    GroupKey key = group_key(e, level, request.epoch, opening_end, request.live);
    Carried& c = groups[key];
    fold_into(c, e);
    c.entry.job = key.job;
  }
  return groups;
}

// `run` replaced by `groups`, which take the last seqs of the run, one after another (there are
// fewer groups than entries in the run, and so than seqs).
LedgerFold fold_of(std::span<const LedgerEntry> run, Groups& groups) {
  LedgerFold fold{.first_seq = run.front().seq, .last_seq = run.back().seq, .carried = {}};
  std::uint64_t seq = fold.last_seq + 1 - groups.size();
  for (auto& [key, c] : groups) {
    if (!c.same_milli) c.entry.milli = 0;
    if (!c.same_price) c.entry.price_per_hour = 0;
    c.entry.seq = seq++;
    fold.carried.push_back(std::move(c.entry));
  }
  return fold;
}

}  // namespace

Result<void> validate(const BookTerms& terms) {
  if (terms.job_days < 1) {
    return fail("job_days", "must be at least 1 day, got " + std::to_string(terms.job_days));
  }
  if (terms.day_days < terms.job_days) {
    return fail("day_days", "must be at least job_days (" + std::to_string(terms.job_days) +
                                "), got " + std::to_string(terms.day_days));
  }
  return {};
}

std::optional<LedgerFold> next_fold(const FoldRequest& request, const BookTerms& terms) {
  const std::size_t end = std::min(request.foldable, request.entries.size());
  // Entries still to be posted end after now: the day holding now's last second is open.
  const std::int64_t today = utc_day(request.epoch + request.now - 1);
  const std::int64_t opening_end = (today - terms.day_days) * kSecondsPerDay;
  const auto level_of = [&](std::int64_t day) {
    if (day >= today) return 0;
    if (day < today - terms.day_days) return 3;
    if (day < today - terms.job_days) return 2;
    return 1;
  };
  const auto entries = request.entries;
  std::size_t i = 0;
  while (i < end) {
    const std::int64_t day = entry_day(entries[i], request.epoch);
    const int level = level_of(day);
    std::size_t j = i;
    if (level == 0) {
      // The open day: its entries settled an hour ago, as level 1 (folded again with the rest).
      while (j < end && entries[j].to <= request.now - kLedgerSettled) ++j;
      if (j == i) break;
    } else {
      ++j;
      while (j < end) {
        const std::int64_t next = entry_day(entries[j], request.epoch);
        if (level == 3 ? level_of(next) != 3 : next != day) break;
        ++j;
      }
    }
    const auto run = entries.subspan(i, j - i);
    // A closed day folded already has one entry per level 1 group (or coarser): nothing to do.
    const auto carried = [](const LedgerEntry& e) { return e.folded > 0; };
    if (level == 1 && std::all_of(run.begin(), run.end(), carried)) {
      i = j;
      continue;
    }
    Groups groups = group(run, std::max(level, 1), opening_end, request);
    const auto within = [&](const Groups& g) {
      return g.size() < run.size() && (request.most == 0 || g.size() <= request.most);
    };
    if (level <= 1 && groups.size() < run.size() && !within(groups)) {
      groups =
          group(run, 2, opening_end, request);  // too many jobs for one commit: by tenant and model
    }
    if (within(groups)) return fold_of(run, groups);
    i = j;
  }
  return std::nullopt;
}

}  // namespace tidepool
