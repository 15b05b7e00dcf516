#include "store/store_backup.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace tidepool {
namespace {

// Events read per request: a page stays far below a gRPC message's 4 MiB.
constexpr int kEventPage = 500;
// The lists in the file's order; RestoreCursor::list indexes them.
constexpr std::size_t kJobs = 0;
constexpr std::size_t kTokens = 1;
constexpr std::size_t kNodes = 2;
constexpr std::size_t kSettings = 3;
constexpr std::size_t kLedger = 4;
constexpr std::size_t kEvents = 5;
constexpr std::size_t kLists = 6;
// Bytes of a request that are not its keys and values (the etcd store's own allowance is 1 KiB).
constexpr std::int64_t kRequestSlackBytes = 4096;
// A key's fixed part past the prefix ("/index/token_hash/", 20 digits, ...) and the framing of
// the operation that carries it, rounded up.
constexpr std::int64_t kKeyBytes = 96;

std::size_t list_size(const BackupContents& c, std::size_t list) {
  const Snapshot& s = c.snapshot;
  switch (list) {
    case kJobs:
      return s.jobs.size();
    case kTokens:
      return s.tokens.size();
    case kNodes:
      return s.nodes.size();
    case kSettings:
      return s.settings.size();
    case kLedger:
      return s.ledger.size();
    default:
      return c.events.size();
  }
}

// What one record costs a transaction: keys written, keys compared, and bytes (an upper bound:
// each string counted as often as the store can put it into keys, values and compares).
struct Cost {
  std::int64_t writes = 0;
  std::int64_t compares = 0;
  std::int64_t bytes = 0;
};

std::int64_t size(const std::string& text) { return static_cast<std::int64_t>(text.size()); }

Cost record_cost(const BackupContents& c, RestoreCursor at, std::int64_t key_bytes) {
  const Snapshot& s = c.snapshot;
  switch (at.list) {
    case kJobs: {
      const JobRecord& j = s.jobs[at.index];
      const std::int64_t keys = j.idempotency_key.empty() ? 1 : 2;
      // The index key spells the tenant in hex: twice its bytes.
      return {
          keys, keys,
          size(j.document) +
              4 * (3 * size(j.tenant) + size(j.queue) + size(j.state) + size(j.idempotency_key)) +
              2 * keys * key_bytes};
    }
    case kTokens: {
      const TokenRecord& t = s.tokens[at.index];
      return {2, 2,
              4 * (size(t.id) + size(t.hash) + size(t.role) + size(t.tenant) + size(t.node) +
                   size(t.description)) +
                  4 * key_bytes};
    }
    case kNodes:
    case kSettings: {
      const KeyedRecord& r = at.list == kNodes ? s.nodes[at.index] : s.settings[at.index];
      return {1, 0, size(r.document) + 2 * size(r.key) + key_bytes};
    }
    case kLedger: {
      const LedgerRecord& l = s.ledger[at.index];
      return {1, 0, size(l.document) + 2 * size(l.tenant) + key_bytes};
    }
    default: {
      const EventRecord& e = c.events[at.index];
      return {1, 0, size(e.document) + 2 * size(e.kind) + key_bytes};
    }
  }
}

// The cursor at the first record from `at` on (past empty lists).
RestoreCursor settle(const BackupContents& c, RestoreCursor at) {
  while (at.list < kLists && at.index >= list_size(c, at.list)) {
    ++at.list;
    at.index = 0;
  }
  if (at.list >= kLists) return {kLists, 0};
  return at;
}

RestoreCursor next(const BackupContents& c, RestoreCursor at) {
  ++at.index;
  return settle(c, at);
}

std::int64_t total_records(const BackupCounts& n) {
  return n.jobs + n.tokens + n.nodes + n.settings + n.ledger + n.events;
}

// Records before `at`.
std::int64_t records_before(const BackupContents& c, RestoreCursor at) {
  std::int64_t count = 0;
  for (std::size_t list = 0; list < std::min(at.list, kLists); ++list) {
    count += static_cast<std::int64_t>(list_size(c, list));
  }
  return count + (at.list < kLists ? static_cast<std::int64_t>(at.index) : 0);
}

}  // namespace

Result<std::vector<EventRecord>> events_through(Store& store, std::int64_t last_seq) {
  std::vector<EventRecord> events;
  events.reserve(static_cast<std::size_t>(std::clamp<std::int64_t>(last_seq, 0, 1 << 20)));
  std::int64_t after = 0;
  while (after < last_seq) {
    const int limit = static_cast<int>(std::min<std::int64_t>(kEventPage, last_seq - after));
    auto page = store.events_after(after, limit);
    if (!page) return std::unexpected(page.error());
    if (page->empty()) {
      return fail("events", fmt::format("the store's events end at seq {}, short of its last "
                                        "seq {}",
                                        after, last_seq));
    }
    for (EventRecord& event : *page) {
      if (event.seq > last_seq) break;
      // The first one stored may be past seq 1: the ones before were dropped (retention), also
      // while they were read: then the store's first event is this one, and the backup starts
      // here (those read so far are no longer the store's).
      if (event.seq != after + 1 && !events.empty()) {
        auto first = store.events_after(0, 1);
        if (!first) return std::unexpected(first.error());
        if (!first->empty() && first->front().seq == event.seq) events.clear();
      }
      if (event.seq != after + 1 && !events.empty()) {
        return fail("events", fmt::format("the store has no event seq {} (the next is {})",
                                          after + 1, event.seq));
      }
      after = event.seq;
      events.push_back(std::move(event));
    }
  }
  return events;
}

Result<BackupContents> take_backup(Store& store) {
  auto snapshot = store.load();
  if (!snapshot) return std::unexpected(snapshot.error());
  auto events = events_through(store, snapshot->last_event_seq);
  if (!events) return std::unexpected(events.error());
  return BackupContents{std::move(*snapshot), std::move(*events)};
}

std::vector<RestoreCursor> plan_restore(const BackupContents& contents,
                                        const RestoreLimits& limits) {
  const std::int64_t key_bytes = static_cast<std::int64_t>(limits.key_prefix_bytes) + kKeyBytes;
  const std::int64_t max_ops =
      limits.max_txn_ops > 0 ? limits.max_txn_ops : std::numeric_limits<std::int64_t>::max();
  const std::int64_t max_bytes = limits.max_request_bytes > 0
                                     ? limits.max_request_bytes - kRequestSlackBytes
                                     : std::numeric_limits<std::int64_t>::max();
  std::vector<RestoreCursor> cuts;
  RestoreCursor at = settle(contents, {});
  cuts.push_back(at);
  Cost batch;
  bool empty = true;
  bool event_seq = false;   // the batch writes the last event seq
  bool ledger_seq = false;  // and the last ledger seq
  while (at.list < kLists) {
    Cost cost = record_cost(contents, at, key_bytes);
    const bool events = at.list == kEvents;
    const bool ledger = at.list == kLedger;
    // The first event (or ledger entry) of a batch writes, and compares, the last seq's key.
    if ((events && !event_seq) || (ledger && !ledger_seq)) {
      cost.writes += 1;
      cost.compares += 1;
      cost.bytes += 2 * key_bytes;
    }
    const Cost with{batch.writes + cost.writes, batch.compares + cost.compares,
                    batch.bytes + cost.bytes};
    if (!empty && (std::max(with.writes, with.compares) > max_ops || with.bytes > max_bytes)) {
      cuts.push_back(at);
      batch = {};
      empty = true;
      event_seq = ledger_seq = false;
      continue;  // the record again, as the first of a new batch
    }
    batch = with;
    empty = false;
    event_seq = event_seq || events;
    ledger_seq = ledger_seq || ledger;
    at = next(contents, at);
  }
  if (cuts.back() != RestoreCursor{kLists, 0}) cuts.push_back({kLists, 0});
  return cuts;
}

Batch restore_batch(const BackupContents& contents, RestoreCursor from, RestoreCursor to) {
  Batch batch;
  const Snapshot& s = contents.snapshot;
  for (RestoreCursor at = settle(contents, from); at.list < kLists && !(at == to);
       at = next(contents, at)) {
    switch (at.list) {
      case kJobs:
        batch.jobs.push_back(s.jobs[at.index]);
        break;
      case kTokens:
        batch.tokens.push_back(s.tokens[at.index]);
        break;
      case kNodes:
        batch.nodes.push_back(s.nodes[at.index]);
        break;
      case kSettings:
        batch.settings.push_back(s.settings[at.index]);
        break;
      case kLedger:
        batch.ledger.push_back(s.ledger[at.index]);
        break;
      default:
        // A stream whose start was dropped says where it starts (store.h).
        if (at.index == 0) batch.events_dropped_through = contents.events[0].seq - 1;
        batch.events.push_back(contents.events[at.index]);
        break;
    }
  }
  return batch;
}

std::string describe_snapshot(const Snapshot& snapshot) {
  BackupCounts counts = count_records(BackupContents{snapshot, {}});
  counts.events = snapshot.last_event_seq;
  return describe_counts(counts);
}

Result<RestoreReport> restore_backup(Store& target, const BackupContents& contents,
                                     const RestoreLimits& limits) {
  constexpr const char* kField = "restore";
  if (auto ok = check_backup_contents(contents); !ok) {
    return fail(kField, fmt::format("the backup is not whole ({}); nothing was written",
                                    ok.error().message()));
  }
  auto expected = backup_digest(contents);
  if (!expected) return std::unexpected(expected.error());
  auto before = target.load();
  if (!before) {
    return fail(kField, fmt::format("cannot read the target store ({}); nothing was written",
                                    before.error().message()));
  }
  if (*before != Snapshot{}) {
    return fail(kField,
                fmt::format("the target store is not empty: it holds {}. A backup is restored "
                            "only into an empty store (a new SQLite file, or an etcd prefix "
                            "with no keys); nothing was written",
                            describe_snapshot(*before)));
  }

  const std::vector<RestoreCursor> cuts = plan_restore(contents, limits);
  const BackupCounts counts = count_records(contents);
  RestoreReport report{counts, 0, *expected};
  const int commits = static_cast<int>(cuts.size()) - 1;
  for (int i = 0; i < commits; ++i) {
    const auto from = cuts[static_cast<std::size_t>(i)];
    if (auto ok =
            target.commit(restore_batch(contents, from, cuts[static_cast<std::size_t>(i) + 1]));
        !ok) {
      const std::string done =
          i == 0 ? std::string("nothing was written")
                 : fmt::format(
                       "the {} commits before it went through, so the target holds {} of "
                       "the backup's {} records: empty it before restoring again",
                       i, records_before(contents, from), total_records(counts));
      return fail(kField, fmt::format("commit {} of {} failed: {}; {}", i + 1, commits,
                                      ok.error().message(), done));
    }
    ++report.commits;
  }

  // Read back and compared: what the store now holds is the backup, record for record.
  const std::string written = fmt::format(
      "the {} commits went through, so the target holds the backup's records but may differ "
      "from it: empty it before restoring again",
      commits);
  auto back = take_backup(target);
  if (!back) {
    return fail(kField, fmt::format("cannot read the restored store back ({}); {}",
                                    back.error().message(), written));
  }
  const BackupCounts found = count_records(*back);
  if (found != counts) {
    return fail(kField, fmt::format("the restored store reads back {}, the backup holds {}; {}",
                                    describe_counts(found), describe_counts(counts), written));
  }
  auto digest = backup_digest(*back);
  if (!digest) return std::unexpected(digest.error());
  if (*digest != *expected) {
    return fail(kField, fmt::format("the restored store reads back with SHA-256 {}, the backup "
                                    "has {}; {}",
                                    *digest, *expected, written));
  }
  return report;
}

}  // namespace tidepool
