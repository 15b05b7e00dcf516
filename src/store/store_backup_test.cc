// Backups taken from stores and restored into empty ones (store_backup.h): memory, SQLite and
// etcd (a one-member cluster started by the test), each into the others, with the etcd store's
// limits on a transaction met by several commits; a non-empty target refused; a restore that
// fails midway says how far it went.
#include "store/store_backup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "store/etcd_store.h"
#include "store/etcd_test_cluster.h"
#include "store/memory_store.h"
#include "store/sqlite_store.h"
#include "store/store_test_records.h"

namespace tidepool {
namespace {

using test_support::event;
using test_support::events_batch;
using test_support::job;
using test_support::ledger_entry;
using test_support::TempDir;
using test_support::token;
using ::testing::HasSubstr;

// A state with every kind of record, `jobs` jobs (every other with an idempotency key, some with
// large documents) and three events per job.
BackupContents state(int jobs) {
  BackupContents c;
  for (int i = 1; i <= jobs; ++i) {
    JobRecord j =
        job(i, i % 3 == 0 ? "speech" : "vision", i % 2 == 0 ? "key-" + std::to_string(i) : "",
            i % 4 == 0 ? "running" : "pending");
    if (i % 10 == 0) j.document = "{\"pad\":\"" + std::string(20'000, 'x') + "\"}";
    c.snapshot.jobs.push_back(std::move(j));
  }
  for (int i = 0; i < 6; ++i) {
    c.snapshot.tokens.push_back(
        token("tok-" + std::to_string(i), "hash-" + std::to_string(i), i == 2));
  }
  c.snapshot.nodes = {{"h100-a-01", R"({"drained":true})"}, {"h100-a-02", "{}"}};
  c.snapshot.settings = {{"market", R"({"on":true})"}};
  for (int seq = 1; seq <= 7; ++seq) c.snapshot.ledger.push_back(ledger_entry(seq));
  for (int seq = 1; seq <= 3 * jobs; ++seq) c.events.push_back(event(seq));
  c.snapshot.last_event_seq = 3 * jobs;
  return c;
}

BackupContents backup_of(Store& store) {
  auto contents = take_backup(store);
  EXPECT_TRUE(contents.has_value()) << contents.error().message();
  return contents ? std::move(*contents) : BackupContents{};
}

RestoreReport restored(Store& target, const BackupContents& contents,
                       const RestoreLimits& limits = {}) {
  auto report = restore_backup(target, contents, limits);
  EXPECT_TRUE(report.has_value()) << report.error().message();
  return report ? std::move(*report) : RestoreReport{};
}

// A store that passes everything to another; the tests' stores change one call.
class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(Store& inner) : inner_(inner) {}
  Result<Snapshot> load() override { return inner_.load(); }
  Result<void> commit(const Batch& batch) override { return inner_.commit(batch); }
  Result<std::vector<EventRecord>> events_after(std::int64_t after, int limit) override {
    return inner_.events_after(after, limit);
  }

 protected:
  Store& inner_;
};

// Fails its `fail_at`-th commit (1: the first).
class FailingStore final : public ForwardingStore {
 public:
  FailingStore(Store& inner, int fail_at) : ForwardingStore(inner), fail_at_(fail_at) {}
  Result<void> commit(const Batch& batch) override {
    if (++commits_ == fail_at_) return fail("test store", "the disk is full");
    return inner_.commit(batch);
  }

 private:
  int fail_at_;
  int commits_ = 0;
};

TEST(StoreBackup, RestoresIntoAnEmptyStoreAndReadsBackTheSame) {
  const BackupContents contents = state(20);
  MemoryStore store;
  const RestoreReport report = restored(store, contents);
  EXPECT_EQ(report.commits, 1);  // no limits: one commit
  EXPECT_EQ(report.counts, count_records(contents));
  EXPECT_EQ(report.digest, *backup_digest(contents));
  EXPECT_EQ(backup_of(store), contents);
}

TEST(StoreBackup, AnEmptyBackupRestoresToAnEmptyStore) {
  MemoryStore store;
  EXPECT_EQ(restored(store, BackupContents{}).commits, 0);
  EXPECT_EQ(backup_of(store), BackupContents{});
}

TEST(StoreBackup, RefusesATargetThatHoldsAnything) {
  MemoryStore store;
  ASSERT_TRUE(store.commit(test_support::tokens_batch({token("admin", "h")})).has_value());
  auto report = restore_backup(store, state(2), {});
  ASSERT_FALSE(report.has_value());
  EXPECT_EQ(report.error().field, "restore");
  EXPECT_THAT(report.error().reason, HasSubstr("not empty: it holds 0 jobs, 1 token, 0 nodes"));
  EXPECT_THAT(report.error().reason, HasSubstr("nothing was written"));
  EXPECT_EQ(backup_of(store).snapshot.tokens.size(), 1U);
}

TEST(StoreBackup, PlansBatchesWithinTheLimitsThatCoverEveryRecordOnce) {
  const BackupContents contents = state(40);
  const RestoreLimits limits{
      .max_txn_ops = 16, .max_request_bytes = 64 * 1024, .key_prefix_bytes = 9};
  const std::vector<RestoreCursor> cuts = plan_restore(contents, limits);
  ASSERT_GE(cuts.size(), 3U);
  EXPECT_EQ(cuts.back(), (RestoreCursor{6, 0}));
  MemoryStore store;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const Batch batch = restore_batch(contents, cuts[i], cuts[i + 1]);
    EXPECT_FALSE(batch.empty());
    std::size_t keys = batch.nodes.size() + batch.settings.size() + batch.events.size() +
                       batch.ledger.size() + 2 * batch.tokens.size() +
                       (batch.events.empty() ? 0 : 1) + (batch.ledger.empty() ? 0 : 1);
    for (const JobRecord& j : batch.jobs) keys += j.idempotency_key.empty() ? 1 : 2;
    EXPECT_LE(keys, 16U) << "batch " << i;
    ASSERT_TRUE(store.commit(batch).has_value());
  }
  EXPECT_EQ(backup_of(store), contents);
  // Without limits, one batch.
  EXPECT_EQ(plan_restore(contents, {}).size(), 2U);
}

TEST(StoreBackup, AFailedFirstCommitWritesNothing) {
  MemoryStore memory;
  FailingStore store(memory, 1);
  auto report = restore_backup(store, state(5), {});
  ASSERT_FALSE(report.has_value());
  EXPECT_THAT(report.error().reason,
              HasSubstr("commit 1 of 1 failed: test store: the disk is full"));
  EXPECT_THAT(report.error().reason, HasSubstr("nothing was written"));
}

TEST(StoreBackup, ARestoreThatFailsMidwaySaysSoAndThatTheTargetMustBeEmptied) {
  const BackupContents contents = state(40);
  MemoryStore memory;
  FailingStore store(memory, 3);
  auto report = restore_backup(store, contents, {.max_txn_ops = 16});
  ASSERT_FALSE(report.has_value());
  EXPECT_THAT(report.error().reason, HasSubstr("commit 3 of "));
  EXPECT_THAT(report.error().reason, HasSubstr("the 2 commits before it went through"));
  EXPECT_THAT(report.error().reason, HasSubstr("empty it before restoring again"));
  // What it wrote is there; a second restore is refused until the target is emptied.
  EXPECT_FALSE(backup_of(memory).snapshot.jobs.empty());
  auto again = restore_backup(memory, contents, {});
  ASSERT_FALSE(again.has_value());
  EXPECT_THAT(again.error().reason, HasSubstr("not empty"));
}

TEST(StoreBackup, ABackupMissingAnEventIsRefusedBeforeAnythingIsWritten) {
  BackupContents contents = state(3);
  contents.events.pop_back();
  MemoryStore store;
  auto report = restore_backup(store, contents, {});
  ASSERT_FALSE(report.has_value());
  EXPECT_THAT(report.error().reason, HasSubstr("not whole"));
  EXPECT_EQ(backup_of(store), BackupContents{});
}

// Retention dropped the first events of the source: the backup holds those kept, and the
// restored stream starts where the source's did and goes on from its last seq.
TEST(StoreBackup, AStreamWhoseStartWasDroppedRestoresAsItIs) {
  const BackupContents contents = state(12);
  ASSERT_GE(contents.events.size(), 4U);
  MemoryStore source;
  restored(source, contents);
  Batch drop;
  drop.events_dropped_through = 2;
  ASSERT_TRUE(source.commit(drop).has_value());
  const BackupContents kept = backup_of(source);
  ASSERT_EQ(kept.events.front().seq, 3);
  EXPECT_EQ(kept.events.size(), contents.events.size() - 2);

  const TempDir dir;
  auto sqlite = open_sqlite_store(dir.file("restored.db"));
  ASSERT_TRUE(sqlite.has_value()) << sqlite.error().message();
  restored(**sqlite, kept);
  EXPECT_EQ(backup_of(**sqlite), kept);
  const std::int64_t next = kept.snapshot.last_event_seq + 1;
  Batch more;
  more.events = {EventRecord{next, 1, "job.submitted", "{}"}};
  EXPECT_TRUE((*sqlite)->commit(more).has_value());
}

// Retention drops the stream's start while a backup reads it, page by page: the backup holds the
// events kept, from the store's new first one, with no gap.
TEST(StoreBackup, EventsDroppedWhileTheyAreReadLeaveNoGap) {
  MemoryStore inner;
  for (std::int64_t first = 1; first <= 1200; first += 400) {
    Batch batch;
    for (std::int64_t seq = first; seq < first + 400; ++seq) {
      batch.events.push_back(EventRecord{seq, seq, "job.submitted", "{}"});
    }
    ASSERT_TRUE(inner.commit(batch).has_value());
  }
  // Drops the events through 700 before its second read.
  class DroppingStore final : public ForwardingStore {
   public:
    using ForwardingStore::ForwardingStore;
    Result<std::vector<EventRecord>> events_after(std::int64_t after, int limit) override {
      if (++reads_ == 2) {
        Batch drop;
        drop.events_dropped_through = 700;
        EXPECT_TRUE(inner_.commit(drop).has_value());
      }
      return inner_.events_after(after, limit);
    }

   private:
    int reads_ = 0;
  } store(inner);
  auto events = events_through(store, 1200);
  ASSERT_TRUE(events.has_value()) << events.error().message();
  ASSERT_EQ(events->size(), 500U);
  EXPECT_EQ(events->front().seq, 701);
  EXPECT_EQ(events->back().seq, 1200);
  // A gap inside what the store keeps is still an error.
  MemoryStore gapped;
  ASSERT_TRUE(gapped.commit(events_batch(1, 3)).has_value());
  class GapStore final : public ForwardingStore {
   public:
    using ForwardingStore::ForwardingStore;
    Result<std::vector<EventRecord>> events_after(std::int64_t after, int limit) override {
      auto events = inner_.events_after(after, limit);
      if (events && events->size() == 3) events->erase(events->begin() + 1);  // seq 2 missing
      return events;
    }
  } gap(gapped);
  auto refused = events_through(gap, 3);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().reason, HasSubstr("no event seq 2"));
}

TEST(StoreBackup, SqliteToMemoryAndBack) {
  const TempDir dir;
  const BackupContents contents = state(30);
  {
    auto sqlite = open_sqlite_store(dir.file("a.db"));
    ASSERT_TRUE(sqlite.has_value()) << sqlite.error().message();
    EXPECT_EQ(restored(**sqlite, contents).commits, 1);
    EXPECT_EQ(backup_of(**sqlite), contents);
  }
  // Across a reopen, into memory, and from there into a second file.
  auto sqlite = open_sqlite_store(dir.file("a.db"));
  ASSERT_TRUE(sqlite.has_value());
  MemoryStore memory;
  restored(memory, backup_of(**sqlite));
  auto second = open_sqlite_store(dir.file("b.db"));
  ASSERT_TRUE(second.has_value());
  restored(**second, backup_of(memory));
  EXPECT_EQ(backup_of(**second), contents);
}

TEST(StoreBackup, SqliteToEtcdInSeveralTransactionsAndBack) {
  auto cluster = test_support::EtcdTestCluster::start();
  ASSERT_TRUE(cluster.has_value()) << cluster.error().message();
  const TempDir dir;
  const BackupContents contents = state(60);

  auto sqlite = open_sqlite_store(dir.file("source.db"));
  ASSERT_TRUE(sqlite.has_value());
  restored(**sqlite, contents);

  // The etcd store refuses a batch over its limits; small ones make the restore take several.
  EtcdStoreOptions options;
  options.endpoints = (*cluster)->endpoints();
  options.prefix = "/restored";
  options.max_txn_ops = 16;
  options.max_request_bytes = 48 * 1024;
  auto etcd = open_etcd_store(options);
  ASSERT_TRUE(etcd.has_value()) << etcd.error().message();
  const RestoreReport report =
      restored(**etcd, backup_of(**sqlite),
               RestoreLimits{.max_txn_ops = options.max_txn_ops,
                             .max_request_bytes = options.max_request_bytes,
                             .key_prefix_bytes = options.prefix.size()});
  EXPECT_GT(report.commits, 10);
  EXPECT_EQ(backup_of(**etcd), contents);

  // The other way, and a second restore into the now full prefix refused.
  auto back = open_sqlite_store(dir.file("back.db"));
  ASSERT_TRUE(back.has_value());
  restored(**back, backup_of(**etcd));
  EXPECT_EQ(backup_of(**back), contents);
  auto again = restore_backup(**etcd, contents, {});
  ASSERT_FALSE(again.has_value());
  EXPECT_THAT(again.error().reason, HasSubstr("not empty: it holds 60 jobs, 6 tokens"));
}

}  // namespace
}  // namespace tidepool
