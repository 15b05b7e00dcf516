// The server's durable state behind one interface, so that the control plane does not care where
// it lives: SQLite on one server (sqlite_store.h), etcd for several servers (etcd_store.h).
//
// The store keeps documents, not the server's types: a job is its id, the few fields that are
// queried or must be unique (tenant, queue, state, idempotency key) and a JSON document that the
// server owns (spec, transitions, placement). Every change arrives as one Batch that is applied
// atomically and durably: when commit() returns success the batch survives a crash of the process
// or the machine; when it fails nothing of it was applied.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tidepool {

struct JobRecord {
  std::int64_t id = 0;  // > 0, chosen by the server, unique
  std::string tenant;
  std::string queue;
  std::string state;            // "pending", "running", "succeeded", ...
  std::string idempotency_key;  // empty: none; otherwise unique per tenant
  std::string document;         // JSON, owned by the server; never empty (commit refuses it)

  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

// One entry of the event stream; seq numbers are assigned by the server, 1, 2, 3, ... without gaps.
struct EventRecord {
  std::int64_t seq = 0;
  std::int64_t at_ms = 0;  // Unix time, milliseconds
  std::string kind;        // e.g. "job.submitted"
  std::string document;    // JSON

  friend bool operator==(const EventRecord&, const EventRecord&) = default;
};

struct TokenRecord {
  std::string id;    // public identifier, unique
  std::string hash;  // hex SHA-256 of the secret, unique
  std::string role;  // "admin", "user", "agent"
  std::string tenant;
  std::string node;
  std::string description;
  std::int64_t created_ms = 0;
  bool revoked = false;

  friend bool operator==(const TokenRecord&, const TokenRecord&) = default;
};

// One entry of the internal market's ledger (core/cost_ledger.h); seq numbers are assigned by the
// server, 1, 2, 3, ... Closing the books (core/ledger_books.h) folds runs of old entries into
// fewer (LedgerFoldRecord), so a long-lived ledger's seqs increase with gaps.
struct LedgerRecord {
  std::int64_t seq = 0;
  std::int64_t at = 0;   // Unix time (seconds) the entry's interval ends
  std::string tenant;    // the tenant charged or credited
  std::string document;  // JSON, owned by the server

  friend bool operator==(const LedgerRecord&, const LedgerRecord&) = default;
};

// Closing the books: the stored ledger entries with seq in [first_seq, last_seq] are replaced by
// `carried`, whose seqs are the last of that span, one after another: last_seq - n + 1 ..
// last_seq for n carried entries (at least one, at most the span's length).
struct LedgerFoldRecord {
  std::int64_t first_seq = 0;
  std::int64_t last_seq = 0;
  std::vector<LedgerRecord> carried;

  friend bool operator==(const LedgerFoldRecord&, const LedgerFoldRecord&) = default;
};

// A changed item of a small keyed collection (nodes, tenants, settings): its document replaces the
// stored one.
struct KeyedRecord {
  std::string key;
  std::string document;

  friend bool operator==(const KeyedRecord&, const KeyedRecord&) = default;
};

// Changes applied together or not at all. Jobs and tokens are upserted by id, nodes and settings
// by key; events and ledger entries are appended (their seq must follow the last stored one);
// ledger folds replace stored entries. Retention deletes: jobs by id (jobs_removed), and the
// events up to a seq (events_dropped_through).
//
// The lists are applied in this order: jobs, jobs removed, events dropped, events, ledger,
// ledger folds, tokens, nodes, settings; each record by record in its order, and each record is
// checked against the state that the records before it left:
//  - a job's id is > 0 and its document is not empty;
//  - a job's non-empty idempotency key is held by no other job of its tenant;
//  - a removed job's id is > 0; its idempotency key is free again (an id not stored: nothing);
//  - events_dropped_through (0: none) is at most the last stored event seq: the events with seq
//    up to it are deleted, but for the last stored one, which is always kept (a store may keep
//    more of them: etcd keeps a commit's events under one key). In a store that holds no event,
//    it says where the stream starts instead (a restore of a stream whose start was dropped): the
//    batch's first event is then events_dropped_through + 1;
//  - an event's seq is the last stored one + 1 (the first is 1, or as above); a ledger entry's is
//    greater than the last stored one (gaps are those of folded ledgers, restored);
//  - a ledger fold has 1 <= first_seq <= last_seq <= the last stored ledger seq, and its carried
//    seqs are last_seq - n + 1 .. last_seq, n >= 1, none below first_seq;
//  - a token's hash, the empty one too, is held by no other token.
// Nothing else is checked: other fields may hold anything, the empty string too. So a record may
// take an idempotency key or a hash that an earlier record of the batch gave up, of two records
// with the same id (or node or setting key) the later wins, and two jobs that swap their keys in
// one batch are refused (the first takes a key still held). If a record breaks a rule the batch
// is refused: nothing of it is applied, the store is as before and usable, and the error's reason
// names the first such record ("job 6", "token tok-b", "event seq 5", "ledger seq 4", "ledger fold
// 3..9"). An empty batch succeeds and changes nothing.
struct Batch {
  std::vector<JobRecord> jobs;
  std::vector<EventRecord> events;
  std::vector<TokenRecord> tokens;
  std::vector<KeyedRecord> nodes;
  std::vector<KeyedRecord> settings;
  std::vector<LedgerRecord> ledger;
  std::vector<LedgerFoldRecord> ledger_folds = {};
  std::vector<std::int64_t> jobs_removed = {};  // job ids, deleted (retention)
  std::int64_t events_dropped_through = 0;      // retention: see above; 0 deletes nothing

  [[nodiscard]] bool empty() const {
    return jobs.empty() && events.empty() && ledger.empty() && ledger_folds.empty() &&
           tokens.empty() && nodes.empty() && settings.empty() && jobs_removed.empty() &&
           events_dropped_through == 0;
  }
};

// Everything the server needs to rebuild its state at start, in id/key order: jobs by id, tokens,
// nodes and settings by key in byte order (as memcmp compares, shorter first on a tie), whatever
// the locale.
struct Snapshot {
  std::vector<JobRecord> jobs;
  std::vector<TokenRecord> tokens;
  std::vector<KeyedRecord> nodes;
  std::vector<KeyedRecord> settings;
  std::int64_t last_event_seq = 0;   // 0: no events yet
  std::vector<LedgerRecord> ledger;  // in seq order (increasing, with the gaps of folds)

  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

// The field of the error with which a fenced store (etcd_store.h with a guard) refuses a commit
// once this server no longer leads: nothing of the batch was written, and no later commit of the
// store will be. The server stops serving then; its reason says who took over.
inline constexpr const char* kLeadershipLostField = "leadership";

// The most one commit may hold, where the store has limits (etcd's transaction limits); 0: none.
// A batch over them is refused whole (kBatchTooLargeField), so the server keeps its rounds within.
struct CommitLimits {
  std::int64_t writes = 0;  // keys written: one per record (the events of a batch may share one),
                            // two for a job with an idempotency key or a token (its index entry),
                            // one more per seq kept (events, ledger), one per ledger fold and its
                            // carried entries, two per removed job (itself and its index entry),
                            // one for the events dropped
  std::int64_t bytes = 0;   // the encoded batch
};

// The field of the error with which a store refuses a batch over its CommitLimits.
inline constexpr const char* kBatchTooLargeField = "batch size";

// Thread safety: every method may be called from any thread. load() and commit() are serialized
// (the server calls them from its loop thread); events_after() may run concurrently with a commit()
// and then sees the stream as of some committed batch, never part of one.
class Store {
 public:
  virtual ~Store() = default;
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  [[nodiscard]] virtual Result<Snapshot> load() = 0;
  [[nodiscard]] virtual Result<void> commit(const Batch& batch) = 0;
  [[nodiscard]] virtual CommitLimits commit_limits() const { return {}; }
  // Up to `limit` (>= 0) events with seq > `after` (any value, negative too), in seq order; empty
  // when there are none yet. A negative limit is refused with the field "limit".
  [[nodiscard]] virtual Result<std::vector<EventRecord>> events_after(std::int64_t after,
                                                                      int limit) = 0;
};

}  // namespace tidepool
