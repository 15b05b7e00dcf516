// The contract of store.h, run over every store: each must pass every test here. A new store adds
// its StoreKind to AllStores and to EveryStoreButTheModel (the instantiations below), where random
// batches check it against the memory store, the model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "store/etcd_client.h"
#include "store/etcd_store.h"
#include "store/etcd_test_cluster.h"
#include "store/memory_store.h"
#include "store/sqlite_store.h"
#include "store/store.h"
#include "store/store_test_records.h"

namespace tidepool {
namespace {

using test_support::all_events;
using test_support::appends_batch;
using test_support::event;
using test_support::events_batch;
using test_support::expect_full_batch;
using test_support::full_batch;
using test_support::job;
using test_support::jobs_batch;
using test_support::ledger_entry;
using test_support::load_or_die;
using test_support::TempDir;
using test_support::token;
using test_support::tokens_batch;
using ::testing::HasSubstr;

struct StoreKind {
  std::string_view name;
  // A new, empty store; `dir` is a fresh folder it may keep its files in.
  std::function<std::unique_ptr<Store>(const TempDir& dir)> open;
};

std::unique_ptr<Store> open_sqlite(const TempDir& dir) {
  auto store = open_sqlite_store(dir.file("tidepool.db"));
  EXPECT_TRUE(store.has_value()) << store.error().message();
  return store ? std::move(*store) : nullptr;
}

std::unique_ptr<Store> open_memory(const TempDir& /*dir*/) {
  return std::make_unique<MemoryStore>();
}

// One etcd per test program, started by the first etcd store and killed at exit; each store has a
// prefix of its own, so it starts empty. A fenced store (a leader's) has a guard key of its own,
// written here, which nothing moves.
std::unique_ptr<Store> open_etcd_store_for_test(bool fenced) {
  static const auto cluster = test_support::EtcdTestCluster::start();
  static int stores = 0;
  if (!cluster) {
    ADD_FAILURE() << cluster.error().message();
    return nullptr;
  }
  EtcdStoreOptions options;
  options.endpoints = (*cluster)->endpoints();
  options.prefix = "/tidepool-contract/" + std::to_string(++stores);
  if (fenced) {
    auto client = EtcdClient::connect(options.endpoints, std::nullopt, "/", std::chrono::seconds(5),
                                      std::chrono::seconds(5), nullptr);
    if (!client) {
      ADD_FAILURE() << client.error().message();
      return nullptr;
    }
    etcdserverpb::TxnRequest request;
    etcdserverpb::PutRequest& put = *request.add_success()->mutable_request_put();
    put.set_key("/tidepool-contract-guard/" + std::to_string(stores));
    put.set_value("leader");
    auto written = (*client)->txn(request, true);
    if (!written) {
      ADD_FAILURE() << written.error().message();
      return nullptr;
    }
    options.guard = EtcdGuard{put.key(), written->header().revision()};
  }
  auto store = open_etcd_store(options);
  EXPECT_TRUE(store.has_value()) << store.error().message();
  return store ? std::move(*store) : nullptr;
}

std::unique_ptr<Store> open_etcd(const TempDir& /*dir*/) { return open_etcd_store_for_test(false); }
std::unique_ptr<Store> open_fenced_etcd(const TempDir& /*dir*/) {
  return open_etcd_store_for_test(true);
}

const StoreKind kSqlite{"sqlite", open_sqlite};
const StoreKind kMemory{"memory", open_memory};
const StoreKind kEtcd{"etcd", open_etcd};
// The leader's store: its idempotency-key index is in memory (etcd_store.h). Checked against the
// model below (every rule, on random batches); the contract suite runs on the unfenced one.
const StoreKind kFencedEtcd{"fenced_etcd", open_fenced_etcd};

void PrintTo(const StoreKind& kind, std::ostream* out) { *out << kind.name; }

std::string kind_name(const ::testing::TestParamInfo<StoreKind>& info) {
  return std::string(info.param.name);
}

class EveryStoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    store_ = GetParam().open(dir_);
    ASSERT_NE(store_, nullptr);
  }

  // Commits a batch the test expects to be refused, checks that the reason names `record` and
  // that nothing changed.
  void expect_refused(const Batch& batch, std::string_view record) {
    const Snapshot before = load_or_die(*store_);
    const std::vector<EventRecord> events_before = all_events(*store_);
    auto refused = store_->commit(batch);
    ASSERT_FALSE(refused.has_value()) << "should name " << record;
    EXPECT_FALSE(refused.error().field.empty());
    EXPECT_THAT(refused.error().reason, HasSubstr(record));
    EXPECT_EQ(load_or_die(*store_), before);
    EXPECT_EQ(all_events(*store_), events_before);
  }

  void commit_or_die(const Batch& batch) {
    auto committed = store_->commit(batch);
    ASSERT_TRUE(committed.has_value()) << committed.error().message();
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
};

// --- what is stored is what was committed ----------------------------------------------------

TEST_P(EveryStoreTest, NewStoreIsEmptyAndAnEmptyBatchChangesNothing) {
  EXPECT_EQ(load_or_die(*store_), Snapshot{});
  EXPECT_TRUE(all_events(*store_).empty());
  EXPECT_TRUE(store_->commit(Batch{}).has_value());
  EXPECT_EQ(load_or_die(*store_), Snapshot{});
}

TEST_P(EveryStoreTest, RoundTripsEveryRecordKindInKeyOrder) {
  commit_or_die(full_batch());
  expect_full_batch(*store_);
}

// Only a job's document must not be empty; every other field is stored as it came, empty too.
TEST_P(EveryStoreTest, StoresEmptyFields) {
  Batch batch;
  batch.jobs = {JobRecord{1, "", "", "", "", "{}"}};
  batch.events = {EventRecord{1, 0, "", ""}};
  batch.tokens = {TokenRecord{}};
  batch.nodes = {KeyedRecord{}};
  batch.settings = {KeyedRecord{}};
  batch.ledger = {LedgerRecord{1, 0, "", ""}};
  commit_or_die(batch);
  const Snapshot snapshot = load_or_die(*store_);
  EXPECT_EQ(snapshot.jobs, batch.jobs);
  EXPECT_EQ(snapshot.tokens, batch.tokens);
  EXPECT_EQ(snapshot.nodes, batch.nodes);
  EXPECT_EQ(snapshot.settings, batch.settings);
  EXPECT_EQ(snapshot.ledger, batch.ledger);
  EXPECT_EQ(all_events(*store_), batch.events);
}

// Extreme values and bytes that are not ASCII come back unchanged.
TEST_P(EveryStoreTest, StoresExtremeValues) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  Batch batch;
  batch.jobs = {job(kMax, "vis\xc3\xafon", "k\xe2\x9c\x93")};
  batch.jobs[0].document = std::string(100'000, 'x');
  batch.events = {EventRecord{1, kMin, "kind", "{\"s\":\"\\u0000\"}"}};
  batch.tokens = {token("tok", "hash")};
  batch.tokens[0].created_ms = kMin;
  batch.ledger = {LedgerRecord{1, kMax, "t", "\t\n\r"}};
  commit_or_die(batch);
  const Snapshot snapshot = load_or_die(*store_);
  EXPECT_EQ(snapshot.jobs, batch.jobs);
  EXPECT_EQ(snapshot.tokens, batch.tokens);
  EXPECT_EQ(snapshot.ledger, batch.ledger);
  EXPECT_EQ(all_events(*store_), batch.events);
}

// Ids in numeric order; keys in byte order (uppercase before lowercase, a prefix first, UTF-8
// after ASCII), whatever the locale.
TEST_P(EveryStoreTest, SnapshotIsInIdAndByteOrder) {
  Batch batch;
  batch.jobs = {job(10, "vision"), job(100, "vision"), job(9, "vision")};
  batch.tokens = {token("tok-\xc3\xa9", "h1"), token("tok-z", "h2"), token("tok", "h3"),
                  token("Tok", "h4")};
  for (const char* key : {"b", "\xc3\xa9", "a-1", "Z", "a"}) {
    batch.nodes.push_back({key, "{}"});
    batch.settings.push_back({key, "{}"});
  }
  commit_or_die(batch);
  const Snapshot snapshot = load_or_die(*store_);
  EXPECT_EQ(snapshot.jobs, (std::vector{batch.jobs[2], batch.jobs[0], batch.jobs[1]}));
  EXPECT_EQ(snapshot.tokens,
            (std::vector{batch.tokens[3], batch.tokens[2], batch.tokens[1], batch.tokens[0]}));
  const std::vector<KeyedRecord> in_order = {
      {"Z", "{}"}, {"a", "{}"}, {"a-1", "{}"}, {"b", "{}"}, {"\xc3\xa9", "{}"}};
  EXPECT_EQ(snapshot.nodes, in_order);
  EXPECT_EQ(snapshot.settings, in_order);
}

TEST_P(EveryStoreTest, UpsertReplacesTheStoredRecord) {
  commit_or_die(full_batch());

  // 3 runs and takes a key; 7 moves to another tenant and queue and gives up its key.
  Batch update;
  update.jobs = {job(3, "speech", "now-with-a-key", "running"), job(7, "search", "", "succeeded")};
  update.jobs[0].document = "{\"placement\":\"node-1\"}";
  update.jobs[1].queue = "detection";
  update.tokens = {token("tok-a", "cafe", false)};
  update.tokens[0].description = "";
  update.nodes = {{"node-2", "{\"gpus\":4}"}};
  update.settings = {{"quota", "{\"vision\":8}"}};
  commit_or_die(update);

  const Snapshot snapshot = load_or_die(*store_);
  EXPECT_EQ(snapshot.jobs, update.jobs);
  ASSERT_EQ(snapshot.tokens.size(), 2U);
  EXPECT_EQ(snapshot.tokens[0], update.tokens[0]);
  EXPECT_EQ(snapshot.tokens[1], full_batch().tokens[0]);
  EXPECT_EQ(snapshot.nodes,
            (std::vector<KeyedRecord>{{"node-1", "{}"}, {"node-2", "{\"gpus\":4}"}}));
  EXPECT_EQ(snapshot.settings,
            (std::vector<KeyedRecord>{{"quota", "{\"vision\":8}"}, {"tidal", "{\"on\":true}"}}));
  // Upserts append nothing.
  EXPECT_EQ(snapshot.last_event_seq, 2);
  EXPECT_EQ(snapshot.ledger, full_batch().ledger);

  // The key 7 gave up is free in its old tenant.
  commit_or_die(jobs_batch({job(8, "vision", "retry-1")}));
}

// Many batches, each touching every kind: the snapshot and the stream hold the last word of each.
TEST_P(EveryStoreTest, ReadsAfterManyBatches) {
  constexpr int kRounds = 50;
  for (int round = 1; round <= kRounds; ++round) {
    Batch batch;
    batch.jobs = {job(round, "vision", "submit-" + std::to_string(round))};
    if (round > 1) batch.jobs.push_back(job(round - 1, "vision", "", "running"));
    batch.events = {event(2 * round - 1), event(2 * round, "job.started")};
    batch.ledger = {ledger_entry(round)};
    batch.nodes = {{"node-" + std::to_string(round % 5), std::to_string(round)}};
    batch.settings = {{"round", std::to_string(round)}};
    if (round % 10 == 0) {
      batch.tokens = {token("tok-" + std::to_string(round / 10), "h" + std::to_string(round))};
    }
    commit_or_die(batch);
  }
  const Snapshot snapshot = load_or_die(*store_);
  ASSERT_EQ(snapshot.jobs.size(), static_cast<std::size_t>(kRounds));
  for (int id = 1; id <= kRounds; ++id) {
    const JobRecord& stored = snapshot.jobs[id - 1];
    EXPECT_EQ(stored, id < kRounds ? job(id, "vision", "", "running")
                                   : job(id, "vision", "submit-" + std::to_string(id)));
  }
  EXPECT_EQ(snapshot.last_event_seq, 2 * kRounds);
  ASSERT_EQ(snapshot.ledger.size(), static_cast<std::size_t>(kRounds));
  for (int seq = 1; seq <= kRounds; ++seq) EXPECT_EQ(snapshot.ledger[seq - 1], ledger_entry(seq));
  EXPECT_EQ(snapshot.nodes, (std::vector<KeyedRecord>{{"node-0", "50"},
                                                      {"node-1", "46"},
                                                      {"node-2", "47"},
                                                      {"node-3", "48"},
                                                      {"node-4", "49"}}));
  EXPECT_EQ(snapshot.settings, (std::vector<KeyedRecord>{{"round", "50"}}));
  ASSERT_EQ(snapshot.tokens.size(), 5U);
  EXPECT_EQ(snapshot.tokens[4], token("tok-5", "h50"));
  auto tail = store_->events_after(95, 100);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(*tail, (std::vector{event(96, "job.started"), event(97), event(98, "job.started"),
                                event(99), event(100, "job.started")}));
}

// --- appends ---------------------------------------------------------------------------------

TEST_P(EveryStoreTest, EventSeqsFollowTheLastStoredOne) {
  expect_refused(events_batch(2, 2), "event seq 2 does not follow the last stored seq 0");
  expect_refused(events_batch(0, 1), "event seq 0");
  expect_refused(appends_batch({event(-1)}), "event seq -1");

  commit_or_die(events_batch(1, 2));
  expect_refused(jobs_batch({job(1, "vision")}, {event(3), event(5)}),
                 "event seq 5 does not follow the last stored seq 3");
  expect_refused(events_batch(2, 3), "event seq 2 does not follow the last stored seq 2");
  expect_refused(appends_batch({event(3), event(3)}), "event seq 3 does not follow");

  commit_or_die(events_batch(3, 4));
  EXPECT_EQ(load_or_die(*store_).last_event_seq, 4);
  EXPECT_EQ(all_events(*store_), events_batch(1, 4).events);
}

// Retention: removed jobs are gone with their idempotency keys, which a new job may take; an
// id not stored removes nothing; a non-positive one is refused.
TEST_P(EveryStoreTest, RemovedJobsAreGoneAndFreeTheirIdempotencyKeys) {
  commit_or_die(jobs_batch({job(1, "vision", "k"), job(2, "vision", "j")}));
  Batch removal;
  removal.jobs_removed = {1, 99};
  commit_or_die(removal);
  Snapshot snapshot = load_or_die(*store_);
  ASSERT_EQ(snapshot.jobs.size(), 1U);
  EXPECT_EQ(snapshot.jobs[0].id, 2);
  commit_or_die(jobs_batch({job(3, "vision", "k")}));
  expect_refused(jobs_batch({job(4, "vision", "j")}), "job 4");

  Batch bad;
  bad.jobs_removed = {2, 0};
  expect_refused(bad, "removed job id 0");
  // Upserted and removed in one batch: removed.
  Batch both = jobs_batch({job(5, "vision", "m")});
  both.jobs_removed = {5};
  commit_or_die(both);
  snapshot = load_or_die(*store_);
  ASSERT_EQ(snapshot.jobs.size(), 2U);
  EXPECT_EQ(snapshot.jobs[1].id, 3);
}

// Retention: the events through a seq are dropped, the last stored one always kept; the stream
// goes on from its last seq. A store may keep more (etcd keeps a commit's events together), never
// fewer, and never a gap.
TEST_P(EveryStoreTest, DroppedEventsGoButTheLastStaysAndTheStreamGoesOn) {
  for (std::int64_t first : {1, 3, 5}) commit_or_die(events_batch(first, first + 1));
  const auto kept = [&] {
    std::vector<std::int64_t> seqs;
    for (const EventRecord& e : all_events(*store_)) seqs.push_back(e.seq);
    return seqs;
  };
  Batch drop;
  drop.events_dropped_through = 4;
  commit_or_die(drop);
  EXPECT_EQ(kept(), (std::vector<std::int64_t>{5, 6}));
  EXPECT_EQ(load_or_die(*store_).last_event_seq, 6);

  drop.events_dropped_through = 6;
  commit_or_die(drop);
  const std::vector<std::int64_t> left = kept();
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left.back(), 6);
  EXPECT_GE(left.front(), 5);
  for (std::size_t i = 1; i < left.size(); ++i) EXPECT_EQ(left[i], left[i - 1] + 1);

  drop.events_dropped_through = 7;
  expect_refused(drop, "events dropped through seq 7: past the last stored seq 6");
  drop.events_dropped_through = -1;
  expect_refused(drop, "events dropped through seq -1");
  expect_refused(events_batch(8, 8), "event seq 8 does not follow the last stored seq 6");
  commit_or_die(events_batch(7, 8));
  EXPECT_EQ(kept().back(), 8);
  EXPECT_EQ(load_or_die(*store_).last_event_seq, 8);
}

// A stream whose start was dropped, restored into a new store: its first batch says where it
// starts, the events from there on follow as usual.
TEST_P(EveryStoreTest, AStreamRestoredStartsAfterItsDroppedEvents) {
  Batch start = events_batch(10, 11);
  start.events_dropped_through = 9;
  commit_or_die(start);
  commit_or_die(events_batch(12, 12));
  EXPECT_EQ(all_events(*store_), events_batch(10, 12).events);
  EXPECT_EQ(load_or_die(*store_).last_event_seq, 12);
}

TEST_P(EveryStoreTest, LedgerSeqsIncreaseWithTheGapsOfFoldedLedgers) {
  expect_refused(appends_batch({}, {ledger_entry(0)}), "ledger seq 0");
  Batch first;
  first.ledger = {ledger_entry(1, "vision"), ledger_entry(2, "speech")};
  commit_or_die(first);

  Batch repeat;
  repeat.jobs = {job(9, "vision")};
  repeat.ledger = {ledger_entry(2)};
  expect_refused(repeat, "ledger seq 2 does not follow the last stored seq 2");
  expect_refused(appends_batch({}, {ledger_entry(4), ledger_entry(4)}), "ledger seq 4");
  expect_refused(appends_batch({}, {ledger_entry(5), ledger_entry(3)}), "ledger seq 3");

  // A restored ledger that was folded has gaps.
  commit_or_die(appends_batch({}, {ledger_entry(4)}));
  EXPECT_EQ(load_or_die(*store_).ledger,
            (std::vector{ledger_entry(1, "vision"), ledger_entry(2, "speech"), ledger_entry(4)}));
}

LedgerRecord carried(std::int64_t seq, std::string tenant) {
  LedgerRecord entry = ledger_entry(seq, std::move(tenant));
  entry.document = "{\"carried\":" + std::to_string(seq) + "}";
  return entry;
}

Batch fold_batch(std::int64_t first, std::int64_t last, std::vector<LedgerRecord> entries) {
  Batch batch;
  batch.ledger_folds = {
      LedgerFoldRecord{.first_seq = first, .last_seq = last, .carried = std::move(entries)}};
  return batch;
}

TEST_P(EveryStoreTest, ALedgerFoldReplacesItsRunByItsCarriedEntries) {
  Batch six;
  for (int seq = 1; seq <= 6; ++seq) six.ledger.push_back(ledger_entry(seq));
  commit_or_die(six);

  commit_or_die(fold_batch(2, 5, {carried(4, "vision"), carried(5, "speech")}));
  EXPECT_EQ(load_or_die(*store_).ledger, (std::vector{ledger_entry(1), carried(4, "vision"),
                                                      carried(5, "speech"), ledger_entry(6)}));
  // Appends go on after the last seq; a run may span gaps and end at the last entry.
  commit_or_die(appends_batch({}, {ledger_entry(7)}));
  commit_or_die(fold_batch(1, 7, {carried(7, "vision")}));
  EXPECT_EQ(load_or_die(*store_).ledger, std::vector{carried(7, "vision")});
  expect_refused(appends_batch({}, {ledger_entry(7)}), "ledger seq 7 does not follow");

  // An entry appended and folded in one batch.
  Batch both = fold_batch(7, 8, {carried(8, "speech")});
  both.ledger = {ledger_entry(8)};
  commit_or_die(both);
  EXPECT_EQ(load_or_die(*store_).ledger, std::vector{carried(8, "speech")});
}

TEST_P(EveryStoreTest, ALedgerFoldOutsideTheLedgerOrWithMisplacedEntriesIsRefused) {
  Batch four;
  for (int seq = 1; seq <= 4; ++seq) four.ledger.push_back(ledger_entry(seq));
  commit_or_die(four);
  expect_refused(fold_batch(0, 3, {carried(3, "a")}), "ledger fold 0..3: not a run");
  expect_refused(fold_batch(3, 2, {carried(2, "a")}), "ledger fold 3..2: not a run");
  expect_refused(fold_batch(2, 5, {carried(5, "a")}), "ledger fold 2..5: not a run");
  expect_refused(fold_batch(2, 4, {}), "ledger fold 2..4: 0 carried entries");
  expect_refused(fold_batch(3, 4, {carried(2, "a"), carried(3, "a"), carried(4, "a")}),
                 "ledger fold 3..4: 3 carried entries");
  expect_refused(fold_batch(1, 4, {carried(2, "a"), carried(3, "a")}),
                 "ledger fold 1..4: carried entry 0 has seq 2, not 3");
  // With the rest of a batch: nothing of it is applied.
  Batch mixed = fold_batch(1, 5, {carried(3, "a"), carried(5, "a")});
  mixed.jobs = {job(1, "vision")};
  mixed.ledger = {ledger_entry(5)};
  expect_refused(mixed, "ledger fold 1..5: carried entry 0 has seq 3, not 4");
  mixed.ledger_folds[0].carried = {carried(4, "a"), carried(5, "a")};
  commit_or_die(mixed);
  EXPECT_EQ(load_or_die(*store_).ledger, (std::vector{carried(4, "a"), carried(5, "a")}));
}

// Events and the ledger count separately.
TEST_P(EveryStoreTest, EventAndLedgerSeqsAreIndependent) {
  commit_or_die(events_batch(1, 3));
  commit_or_die(appends_batch({event(4)}, {ledger_entry(1)}));
  const Snapshot snapshot = load_or_die(*store_);
  EXPECT_EQ(snapshot.last_event_seq, 4);
  EXPECT_EQ(snapshot.ledger, std::vector{ledger_entry(1)});
}

// --- uniqueness ------------------------------------------------------------------------------

TEST_P(EveryStoreTest, IdempotencyKeyIsUniquePerTenant) {
  // The same key in two tenants, and many jobs without a key.
  commit_or_die(
      jobs_batch({job(1, "vision", "k"), job(2, "speech", "k"), job(3, "vision"), job(4, "vision")},
                 {event(1)}));
  // Upserting a job keeps its own key.
  commit_or_die(jobs_batch({job(1, "vision", "k", "running")}));

  // Another job with the key in the same tenant: the whole batch is refused, every kind in it.
  expect_refused(Batch{.jobs = {job(5, "vision"), job(6, "vision", "k")},
                       .events = {event(2)},
                       .tokens = {token("tok", "00")},
                       .nodes = {{"node-1", "{}"}},
                       .settings = {{"quota", "{}"}},
                       .ledger = {ledger_entry(1)}},
                 "job 6");
  // Also when the job exists and takes the key.
  expect_refused(jobs_batch({job(3, "vision", "k")}), "job 3");
  // Also when a job moves to the tenant with its key.
  expect_refused(jobs_batch({job(2, "vision", "k")}), "job 2");

  const Snapshot snapshot = load_or_die(*store_);
  ASSERT_EQ(snapshot.jobs.size(), 4U);
  EXPECT_EQ(snapshot.jobs[0], job(1, "vision", "k", "running"));
  EXPECT_EQ(snapshot.last_event_seq, 1);

  // The store is usable after the failures.
  commit_or_die(jobs_batch({job(6, "vision", "k2")}));
}

// Records are checked one after another: a key given up earlier in a batch may be taken later in
// it, and of two records with one id the later wins; a swap of keys takes one still held.
TEST_P(EveryStoreTest, RecordsOfABatchAreCheckedInOrder) {
  commit_or_die(jobs_batch({job(1, "vision", "k1"), job(2, "vision", "k2")}));
  commit_or_die(jobs_batch({job(1, "vision"), job(3, "vision", "k1")}));
  expect_refused(jobs_batch({job(2, "vision", "k1"), job(3, "vision", "k2")}), "job 2");
  // Through a third key, the swap works.
  commit_or_die(
      jobs_batch({job(3, "vision", "k3"), job(2, "vision", "k1"), job(3, "vision", "k2")}));
  EXPECT_EQ(load_or_die(*store_).jobs,
            (std::vector{job(1, "vision"), job(2, "vision", "k1"), job(3, "vision", "k2")}));
  // A key taken, then given up, in one batch, by jobs of the batch.
  commit_or_die(jobs_batch({job(4, "speech", "s"), job(4, "speech"), job(5, "speech", "s")}));
  expect_refused(jobs_batch({job(6, "speech", "t"), job(7, "speech", "t"), job(6, "speech")}),
                 "job 7");

  commit_or_die(tokens_batch({token("a", "h1"), token("b", "h2")}));
  commit_or_die(tokens_batch({token("a", "h3"), token("c", "h1")}));
  expect_refused(tokens_batch({token("b", "h3"), token("a", "h2")}), "token b");
  commit_or_die(tokens_batch({token("d", "h4"), token("d", "h5"), token("e", "h4")}));
  EXPECT_EQ(load_or_die(*store_).tokens,
            (std::vector{token("a", "h3"), token("b", "h2"), token("c", "h1"), token("d", "h5"),
                         token("e", "h4")}));

  Batch keyed;
  keyed.nodes = {{"n", "1"}, {"n", "2"}};
  keyed.settings = {{"s", "1"}, {"s", "2"}};
  commit_or_die(keyed);
  const Snapshot snapshot = load_or_die(*store_);
  EXPECT_EQ(snapshot.nodes, (std::vector<KeyedRecord>{{"n", "2"}}));
  EXPECT_EQ(snapshot.settings, (std::vector<KeyedRecord>{{"s", "2"}}));
}

TEST_P(EveryStoreTest, TokenHashIsUnique) {
  commit_or_die(tokens_batch({token("tok-a", "cafe"), token("tok-c", "")}));
  expect_refused(tokens_batch({token("tok-b", "cafe")}), "token tok-b");
  // An existing token may not take another's hash, the empty one included.
  expect_refused(tokens_batch({token("tok-a", "")}), "token tok-a");
  expect_refused(tokens_batch({token("tok-d", "beef"), token("tok-e", "beef")}), "token tok-e");
  // A token keeps its own hash.
  commit_or_die(tokens_batch({token("tok-a", "cafe", true)}));
  EXPECT_EQ(load_or_die(*store_).tokens,
            (std::vector{token("tok-a", "cafe", true), token("tok-c", "")}));
}

// --- refusals --------------------------------------------------------------------------------

TEST_P(EveryStoreTest, RefusesANonPositiveJobId) {
  expect_refused(jobs_batch({job(1, "vision"), job(0, "vision")}), "job id 0 is not positive");
  expect_refused(jobs_batch({job(-5, "vision")}), "job id -5 is not positive");
}

TEST_P(EveryStoreTest, RefusesAJobWithoutADocument) {
  JobRecord unsealed = job(2, "vision");
  unsealed.document.clear();
  expect_refused(jobs_batch({job(1, "vision"), unsealed}), "job 2 has no document");
}

// One broken rule anywhere in a batch of every kind, at its start, middle or end: nothing of the
// batch is applied; mended, the same batch commits whole.
TEST_P(EveryStoreTest, ABatchBrokenAnywhereLeavesNothing) {
  commit_or_die(Batch{.jobs = {job(1, "vision", "taken")},
                      .events = {event(1)},
                      .tokens = {token("tok-stored", "stored-hash")},
                      .nodes = {},
                      .settings = {},
                      .ledger = {ledger_entry(1)}});
  const auto valid = [] {
    return Batch{.jobs = {job(2, "vision", "a"), job(1, "vision", "taken", "running"),
                          job(3, "speech", "taken")},
                 .events = {event(2), event(3), event(4)},
                 .tokens = {token("tok-1", "h1"), token("tok-2", "h2"), token("tok-3", "h3")},
                 .nodes = {{"node-1", "{}"}, {"node-2", "{}"}},
                 .settings = {{"quota", "{}"}},
                 .ledger = {ledger_entry(2), ledger_entry(3), ledger_entry(4)}};
  };
  struct Break {
    const char* record;
    std::function<void(Batch&)> apply;
  };
  const Break breaks[] = {
      {"job id 0", [](Batch& b) { b.jobs[0].id = 0; }},
      {"job 1 has no document", [](Batch& b) { b.jobs[1].document.clear(); }},
      {"job 3", [](Batch& b) { b.jobs[2].tenant = "vision"; }},  // the stored job's key
      {"job 3",
       [](Batch& b) {
         b.jobs[2].idempotency_key = "a";
         b.jobs[2].tenant = "vision";
       }},
      {"event seq 1 ", [](Batch& b) { b.events[0].seq = 1; }},
      {"event seq 5 ", [](Batch& b) { b.events[1].seq = 5; }},
      {"event seq 6 ", [](Batch& b) { b.events[2].seq = 6; }},
      {"ledger seq 1 ", [](Batch& b) { b.ledger[0].seq = 1; }},
      {"ledger seq 3 ", [](Batch& b) { b.ledger[2].seq = 3; }},
      {"token tok-1", [](Batch& b) { b.tokens[0].hash = "stored-hash"; }},
      {"token tok-3", [](Batch& b) { b.tokens[2].hash = "h2"; }},
  };
  for (const Break& broken : breaks) {
    SCOPED_TRACE(broken.record);
    Batch batch = valid();
    broken.apply(batch);
    expect_refused(batch, broken.record);
  }
  const Batch mended = valid();
  commit_or_die(mended);
  const Snapshot snapshot = load_or_die(*store_);
  EXPECT_EQ(snapshot.jobs, (std::vector{mended.jobs[1], mended.jobs[0], mended.jobs[2]}));
  EXPECT_EQ(snapshot.tokens.size(), 4U);
  EXPECT_EQ(snapshot.nodes, mended.nodes);
  EXPECT_EQ(snapshot.last_event_seq, 4);
  EXPECT_EQ(snapshot.ledger.size(), 4U);
}

// The lists are checked in store.h's order, so every store names the same first broken record.
TEST_P(EveryStoreTest, NamesTheFirstBrokenRecordInTheOrderOfTheLists) {
  const Batch broken_everywhere{.jobs = {job(0, "vision")},
                                .events = {event(7)},
                                .tokens = {token("a", "h"), token("b", "h")},
                                .nodes = {},
                                .settings = {},
                                .ledger = {ledger_entry(0)}};
  expect_refused(broken_everywhere, "job id 0");
  Batch without_jobs = broken_everywhere;
  without_jobs.jobs.clear();
  expect_refused(without_jobs, "event seq 7");
  without_jobs.events.clear();
  expect_refused(without_jobs, "ledger seq 0");
  without_jobs.ledger.clear();
  expect_refused(without_jobs, "token b");
}

// --- the event stream ------------------------------------------------------------------------

TEST_P(EveryStoreTest, EventsAfterPages) {
  commit_or_die(events_batch(1, 20));
  commit_or_die(events_batch(21, 25));

  std::vector<std::int64_t> page_sizes;
  std::vector<EventRecord> all;
  std::int64_t after = 0;
  for (;;) {
    auto page = store_->events_after(after, 10);
    ASSERT_TRUE(page.has_value()) << page.error().message();
    if (page->empty()) break;
    page_sizes.push_back(static_cast<std::int64_t>(page->size()));
    all.insert(all.end(), page->begin(), page->end());
    after = page->back().seq;
  }
  EXPECT_EQ(page_sizes, (std::vector<std::int64_t>{10, 10, 5}));
  EXPECT_EQ(all, events_batch(1, 25).events);

  auto middle = store_->events_after(22, 2);
  ASSERT_TRUE(middle.has_value());
  EXPECT_EQ(*middle, (std::vector{event(23), event(24)}));
  auto none = store_->events_after(0, 0);
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  auto past_the_end = store_->events_after(100, 10);
  ASSERT_TRUE(past_the_end.has_value());
  EXPECT_TRUE(past_the_end->empty());
  auto from_before_the_start = store_->events_after(-100, 2);
  ASSERT_TRUE(from_before_the_start.has_value());
  EXPECT_EQ(*from_before_the_start, (std::vector{event(1), event(2)}));
  auto huge = store_->events_after(std::numeric_limits<std::int64_t>::min(),
                                   std::numeric_limits<int>::max());
  ASSERT_TRUE(huge.has_value());
  EXPECT_EQ(huge->size(), 25U);
  auto negative = store_->events_after(0, -1);
  ASSERT_FALSE(negative.has_value());
  EXPECT_EQ(negative.error().field, "limit");
}

// An HTTP thread follows the event stream while the loop thread commits: it must see every event
// once, in order, and only whole batches.
TEST_P(EveryStoreTest, ReaderThreadFollowsTheStreamWhileCommitsHappen) {
  constexpr int kBatches = 100;
  constexpr int kEventsPerBatch = 3;
  constexpr std::int64_t kLast = std::int64_t{kBatches} * kEventsPerBatch;

  std::atomic<bool> writer_done = false;
  std::vector<std::int64_t> seen;
  std::vector<std::string> reader_errors;
  std::thread reader([&] {
    std::int64_t after = 0;
    while (after < kLast) {
      const bool all_committed = writer_done.load();  // before the read: then it sees them all
      auto page = store_->events_after(after, 7);
      if (!page) {
        reader_errors.push_back(page.error().message());
        return;
      }
      for (const EventRecord& record : *page) seen.push_back(record.seq);
      if (!page->empty()) after = page->back().seq;
      // A page that is not full ends at the last committed event, so at a batch boundary.
      if (page->size() < 7 && after % kEventsPerBatch != 0) {
        reader_errors.push_back("saw part of a batch, up to seq " + std::to_string(after));
      }
      if (page->empty() && all_committed) {
        if (after < kLast) reader_errors.push_back("missed events after " + std::to_string(after));
        return;
      }
    }
  });
  std::string writer_error;
  for (int batch = 0; batch < kBatches && writer_error.empty(); ++batch) {
    const std::int64_t first = std::int64_t{batch} * kEventsPerBatch + 1;
    Batch changes = events_batch(first, first + kEventsPerBatch - 1);
    changes.jobs = {job(batch + 1, "vision")};
    if (auto committed = store_->commit(changes); !committed) {
      writer_error = committed.error().message();
    }
  }
  writer_done = true;
  reader.join();

  ASSERT_EQ(writer_error, "");
  EXPECT_THAT(reader_errors, ::testing::IsEmpty());
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kLast));
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i], static_cast<std::int64_t>(i + 1));
  }
}

INSTANTIATE_TEST_SUITE_P(AllStores, EveryStoreTest, ::testing::Values(kSqlite, kMemory, kEtcd),
                         kind_name);

// --- the memory store as the model of every other store --------------------------------------

// Random batches over small sets of ids, keys and hashes, so that they collide often; each rule of
// store.h is broken now and then.
class BatchMaker {
 public:
  explicit BatchMaker(std::uint64_t seed) : rng_(seed) {}

  Batch next(const Snapshot& stored) {
    Batch batch;
    if (chance(5)) return batch;
    for (int i = pick(4); i > 0; --i) {
      JobRecord record{.id = chance(2) ? -pick(2) : 1 + pick(8),
                       .tenant = one_of({"vision", "speech", "search"}),
                       .queue = one_of({"default", "detection", ""}),
                       .state = one_of({"pending", "running", "succeeded"}),
                       .idempotency_key = one_of({"", "", "", "", "k1", "k2", "k\u00e9"}),
                       .document = chance(3) ? std::string() : "job " + text()};
      batch.jobs.push_back(std::move(record));
    }
    if (chance(50)) {
      std::int64_t seq = next_seq(stored.last_event_seq);
      for (int i = 1 + pick(3); i > 0; --i) {
        batch.events.push_back(EventRecord{seq, 1'700'000'000'000 + pick(1000),
                                           one_of({"job.submitted", "job.started", ""}), text()});
        seq = chance(3) ? seq + pick(3) : seq + 1;
      }
    }
    std::int64_t last_ledger = stored.ledger.empty() ? 0 : stored.ledger.back().seq;
    if (chance(30)) {
      std::int64_t seq = next_seq(last_ledger);
      for (int i = 1 + pick(2); i > 0; --i) {
        batch.ledger.push_back(
            LedgerRecord{seq, pick(100'000), one_of({"vision", "speech"}), text()});
        last_ledger = std::max(last_ledger, seq);
        seq = chance(3) ? seq + pick(3) : seq + 1;
      }
    }
    if (last_ledger > 0 && chance(20)) {
      // Mostly a run of the ledger with its carried entries in place; now and then not.
      const std::int64_t first = 1 + pick(static_cast<int>(last_ledger)) - (chance(5) ? 1 : 0);
      const std::int64_t last = first + pick(static_cast<int>(last_ledger - first + 1) + 1);
      const std::int64_t span = std::max<std::int64_t>(1, last - first + 1);
      LedgerFoldRecord fold{.first_seq = first, .last_seq = last, .carried = {}};
      const std::int64_t n =
          chance(5) ? 0 : 1 + pick(static_cast<int>(std::min<std::int64_t>(span, 3)));
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t seq = last - n + 1 + i + (chance(5) ? 1 : 0);
        fold.carried.push_back(LedgerRecord{seq, pick(100'000), "vision", "carried " + text()});
      }
      batch.ledger_folds.push_back(std::move(fold));
    }
    for (int i = pick(3); i > 0; --i) {
      // Mostly a hash of the token's own, now and then one that others take too.
      std::string id = one_of({"tok-a", "tok-b", "Tok", "tok-\u00e9", ""});
      std::string hash = chance(80) ? "hash of " + id : one_of({"h1", "h2", ""});
      batch.tokens.push_back(TokenRecord{.id = std::move(id),
                                         .hash = std::move(hash),
                                         .role = one_of({"admin", "user", "agent"}),
                                         .tenant = one_of({"vision", ""}),
                                         .node = one_of({"", "node-1"}),
                                         .description = text(),
                                         .created_ms = pick(1'000'000),
                                         .revoked = chance(30)});
    }
    for (int i = pick(3); i > 0; --i) {
      batch.nodes.push_back({one_of({"node-1", "node-2", "node-10", "n\u00f6de", ""}), text()});
    }
    for (int i = pick(2); i > 0; --i) {
      batch.settings.push_back({one_of({"quota", "Quota", "tidal"}), text()});
    }
    return batch;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(int percent) { return pick(100) < percent; }
  std::string one_of(std::initializer_list<const char*> choices) {
    return *(choices.begin() + pick(static_cast<int>(choices.size())));
  }
  std::string text() {
    if (chance(10)) return "";
    std::string prefix = one_of({"{}", "{\"n\":", "caf\xc3\xa9 ", "\"\\\t"});
    return prefix + std::to_string(pick(1000));
  }
  // Mostly the right one; now and then a repeat, a gap or 0.
  std::int64_t next_seq(std::int64_t last) {
    if (!chance(8)) return last + 1;
    return std::vector<std::int64_t>{0, last, last + 2}[static_cast<std::size_t>(pick(3))];
  }

  std::mt19937_64 rng_;
};

// What every store keeps true, whatever it was given.
void expect_invariants(const Snapshot& snapshot, const std::vector<EventRecord>& events) {
  std::set<std::pair<std::string, std::string>> keys;
  for (std::size_t i = 0; i < snapshot.jobs.size(); ++i) {
    const JobRecord& stored = snapshot.jobs[i];
    EXPECT_GT(stored.id, 0);
    if (i > 0) {
      EXPECT_LT(snapshot.jobs[i - 1].id, stored.id);
    }
    EXPECT_FALSE(stored.document.empty());
    if (!stored.idempotency_key.empty()) {
      EXPECT_TRUE(keys.insert({stored.tenant, stored.idempotency_key}).second);
    }
  }
  std::set<std::string> hashes;
  for (const TokenRecord& stored : snapshot.tokens) EXPECT_TRUE(hashes.insert(stored.hash).second);
  ASSERT_EQ(static_cast<std::int64_t>(events.size()), snapshot.last_event_seq);
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq, static_cast<std::int64_t>(i + 1));
  }
  for (std::size_t i = 0; i < snapshot.ledger.size(); ++i) {
    EXPECT_GT(snapshot.ledger[i].seq, i == 0 ? 0 : snapshot.ledger[i - 1].seq);
  }
}

class AgreesWithTheModelTest : public ::testing::TestWithParam<StoreKind> {};

// Random sequences of valid and invalid batches: after every commit the store under test and the
// model agree on whether it was refused, on the record a refusal names, and on everything stored.
TEST_P(AgreesWithTheModelTest, SameAnswersAndSameStateAfterEveryBatch) {
  constexpr int kSeeds = 10;
  constexpr int kSteps = 60;
  int committed = 0;
  int refused = 0;
  for (int seed = 1; seed <= kSeeds && !HasFailure(); ++seed) {
    TempDir dir;
    const std::unique_ptr<Store> store = GetParam().open(dir);
    ASSERT_NE(store, nullptr);
    MemoryStore model;
    BatchMaker maker(static_cast<std::uint64_t>(seed));
    for (int step = 1; step <= kSteps && !HasFailure(); ++step) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << ", step " << step);
      const Batch batch = maker.next(load_or_die(model));
      auto expected = model.commit(batch);
      auto got = store->commit(batch);
      ASSERT_EQ(got.has_value(), expected.has_value())
          << (expected ? got.error().message() : expected.error().message());
      if (!expected) {
        ++refused;
        // The record: what comes before the colon of the model's reason ("writing job 6").
        const std::string& reason = expected.error().reason;
        EXPECT_THAT(got.error().reason, HasSubstr(reason.substr(0, reason.find(':'))));
      } else if (!batch.empty()) {
        ++committed;
      }
      const Snapshot want = load_or_die(model);
      ASSERT_EQ(load_or_die(*store), want);
      const std::vector<EventRecord> events = all_events(model);
      ASSERT_EQ(all_events(*store), events);
      expect_invariants(want, events);
      // A page from somewhere in the stream.
      const std::int64_t after = want.last_event_seq - step % 4;
      auto page = store->events_after(after, 2);
      ASSERT_TRUE(page.has_value()) << page.error().message();
      EXPECT_EQ(*page, *model.events_after(after, 2));
    }
  }
  // Both kinds of answer were tried often.
  EXPECT_GT(committed, kSeeds * kSteps / 3);
  EXPECT_GT(refused, kSeeds * kSteps / 8);
}

INSTANTIATE_TEST_SUITE_P(EveryStoreButTheModel, AgreesWithTheModelTest,
                         ::testing::Values(kSqlite, kEtcd, kFencedEtcd), kind_name);

}  // namespace
}  // namespace tidepool
