#include "store/sqlite_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// A fresh folder in the temporary directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tidepool_store_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] std::string file(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }

 private:
  std::string path_;
};

// A connection of its own to the file, as another process would have.
class RawDatabase {
 public:
  explicit RawDatabase(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDatabase() { sqlite3_close(db_); }
  RawDatabase(const RawDatabase&) = delete;
  RawDatabase& operator=(const RawDatabase&) = delete;

  void exec(const std::string& sql) {
    char* message = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK)
        << sql << ": " << (message ? message : "");
    sqlite3_free(message);
  }
  // The first column of the first row of `sql`.
  std::string text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    std::string result;
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != nullptr) {
      result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return result;
  }

 private:
  sqlite3* db_ = nullptr;
};

std::unique_ptr<Store> open_or_die(const std::string& path) {
  auto store = open_sqlite_store(path);
  EXPECT_TRUE(store.has_value()) << store.error().message();
  return store ? std::move(*store) : nullptr;
}

JobRecord job(std::int64_t id, std::string tenant, std::string key = "",
              std::string state = "pending") {
  return JobRecord{.id = id,
                   .tenant = std::move(tenant),
                   .queue = "default",
                   .state = std::move(state),
                   .idempotency_key = std::move(key),
                   .document = "{\"id\":" + std::to_string(id) + "}"};
}

EventRecord event(std::int64_t seq, std::string kind = "job.submitted") {
  return EventRecord{.seq = seq,
                     .at_ms = 1'700'000'000'000 + seq,
                     .kind = std::move(kind),
                     .document = "{\"seq\":" + std::to_string(seq) + "}"};
}

TokenRecord token(std::string id, std::string hash, bool revoked = false) {
  return TokenRecord{.id = std::move(id),
                     .hash = std::move(hash),
                     .role = "user",
                     .tenant = "vision",
                     .node = "",
                     .description = "ci token",
                     .created_ms = 1'700'000'000'123,
                     .revoked = revoked};
}

Batch events_batch(std::int64_t first, std::int64_t last) {
  Batch batch;
  for (std::int64_t seq = first; seq <= last; ++seq) batch.events.push_back(event(seq));
  return batch;
}

Batch jobs_batch(std::vector<JobRecord> jobs, std::vector<EventRecord> events = {}) {
  Batch batch;
  batch.jobs = std::move(jobs);
  batch.events = std::move(events);
  return batch;
}

Batch tokens_batch(std::vector<TokenRecord> tokens) {
  Batch batch;
  batch.tokens = std::move(tokens);
  return batch;
}

Snapshot load_or_die(Store& store) {
  auto snapshot = store.load();
  EXPECT_TRUE(snapshot.has_value()) << snapshot.error().message();
  return snapshot ? std::move(*snapshot) : Snapshot{};
}

// Every kind of record, written out of key order.
Batch full_batch() {
  Batch batch;
  batch.jobs = {job(7, "vision", "retry-1"), job(3, "speech")};
  batch.jobs[0].document = "{\"spec\":{\"gpus\":8},\"note\":\"caf\xc3\xa9\"}";
  batch.events = {event(1), event(2, "job.started")};
  batch.tokens = {token("tok-b", "beef"), token("tok-a", "cafe", true)};
  batch.tokens[0].node = "node-17";
  batch.tokens[0].role = "agent";
  batch.nodes = {{"node-2", "{\"gpus\":8}"}, {"node-1", "{}"}};
  batch.settings = {{"tidal", "{\"on\":true}"}, {"quota", ""}};
  return batch;
}

void expect_full_batch(const Snapshot& snapshot) {
  const Batch batch = full_batch();
  EXPECT_EQ(snapshot.jobs, (std::vector{batch.jobs[1], batch.jobs[0]}));
  EXPECT_EQ(snapshot.tokens, (std::vector{batch.tokens[1], batch.tokens[0]}));
  EXPECT_EQ(snapshot.nodes, (std::vector{batch.nodes[1], batch.nodes[0]}));
  EXPECT_EQ(snapshot.settings, (std::vector{batch.settings[1], batch.settings[0]}));
  EXPECT_EQ(snapshot.last_event_seq, 2);
}

TEST(SqliteStoreTest, NewStoreIsEmpty) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  const Snapshot snapshot = load_or_die(*store);
  EXPECT_TRUE(snapshot.jobs.empty());
  EXPECT_TRUE(snapshot.tokens.empty());
  EXPECT_TRUE(snapshot.nodes.empty());
  EXPECT_TRUE(snapshot.settings.empty());
  EXPECT_EQ(snapshot.last_event_seq, 0);
  auto events = store->events_after(0, 10);
  ASSERT_TRUE(events.has_value()) << events.error().message();
  EXPECT_TRUE(events->empty());
  EXPECT_TRUE(store->commit(Batch{}).has_value());
}

TEST(SqliteStoreTest, ASecondStoreOnTheSameFileIsRefusedAndTheFilesArePrivate) {
  TempDir dir;
  const std::string path = dir.file("tidepool.db");
  {
    auto store = open_or_die(path);
    ASSERT_NE(store, nullptr);
    auto second = open_sqlite_store(path);
    ASSERT_FALSE(second.has_value());
    EXPECT_THAT(second.error().reason, HasSubstr("locked by process"));
    for (const std::string& file : {path, path + "-wal", path + ".lock"}) {
      EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::mask,
                std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
          << file;
    }
  }
  EXPECT_NE(open_or_die(path), nullptr);  // closed: free again
}

// A database the server cannot write (here: immutable, which root cannot write either) is refused
// at start rather than failing every commit later.
TEST(SqliteStoreTest, AReadOnlyDatabaseIsRefusedAtOpen) {
  TempDir dir;
  const std::string path = dir.file("tidepool.db");
  ASSERT_NE(open_or_die(path), nullptr);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  int flags = 0;
  const bool immutable = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
                         (flags |= FS_IMMUTABLE_FL, ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
  if (!immutable) {
    ::close(fd);
    GTEST_SKIP() << "cannot make a file immutable here (needs CAP_LINUX_IMMUTABLE and ext4)";
  }
  auto store = open_sqlite_store(path);
  flags &= ~FS_IMMUTABLE_FL;
  EXPECT_EQ(::ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
  ::close(fd);
  ASSERT_FALSE(store.has_value());
  EXPECT_THAT(store.error().reason, HasSubstr("read-only"));
}

TEST(SqliteStoreTest, RoundTripsEveryRecordKindInKeyOrder) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  auto committed = store->commit(full_batch());
  ASSERT_TRUE(committed.has_value()) << committed.error().message();
  expect_full_batch(load_or_die(*store));
  auto events = store->events_after(0, 10);
  ASSERT_TRUE(events.has_value()) << events.error().message();
  EXPECT_EQ(*events, full_batch().events);
}

TEST(SqliteStoreTest, LedgerIsAppendedInSeqOrderAndReadBack) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  Batch first;
  first.ledger = {LedgerRecord{1, 1'764'547'200, "vision", R"({"kind":"charge"})"},
                  LedgerRecord{2, 1'764'547'260, "speech", R"({"kind":"lending-credit"})"}};
  ASSERT_TRUE(store->commit(first).has_value());
  // A gap in the seq numbers is refused, and nothing of the batch is applied.
  Batch gap;
  gap.jobs = {job(9, "vision")};
  gap.ledger = {LedgerRecord{4, 1'764'547'300, "vision", "{}"}};
  auto refused = store->commit(gap);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().reason,
              HasSubstr("ledger seq 4 does not follow the last stored seq 2"));
  Batch next;
  next.ledger = {LedgerRecord{3, 1'764'547'300, "vision", "{}"}};
  ASSERT_TRUE(store->commit(next).has_value());
  const Snapshot snapshot = load_or_die(*store);
  EXPECT_TRUE(snapshot.jobs.empty());
  ASSERT_EQ(snapshot.ledger.size(), 3U);
  EXPECT_EQ(snapshot.ledger[0], first.ledger[0]);
  EXPECT_EQ(snapshot.ledger[1], first.ledger[1]);
  EXPECT_EQ(snapshot.ledger[2], next.ledger[0]);
}

TEST(SqliteStoreTest, EmptyIdempotencyKeyIsStoredAsNull) {
  TempDir dir;
  const std::string path = dir.file("tidepool.db");
  auto store = open_or_die(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->commit(jobs_batch({job(1, "vision"), job(2, "vision")})).has_value());
  RawDatabase raw(path);
  EXPECT_EQ(raw.text("SELECT count(*) FROM jobs WHERE idempotency_key IS NULL"), "2");
}

TEST(SqliteStoreTest, UpsertReplacesTheStoredRecord) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->commit(full_batch()).has_value());

  Batch update;
  update.jobs = {job(3, "speech", "", "running")};
  update.jobs[0].document = "{\"placement\":\"node-1\"}";
  update.tokens = {token("tok-a", "cafe", false)};
  update.nodes = {{"node-2", "{\"gpus\":4}"}};
  update.settings = {{"quota", "{\"vision\":8}"}};
  auto committed = store->commit(update);
  ASSERT_TRUE(committed.has_value()) << committed.error().message();

  const Snapshot snapshot = load_or_die(*store);
  ASSERT_EQ(snapshot.jobs.size(), 2U);
  EXPECT_EQ(snapshot.jobs[0], update.jobs[0]);
  ASSERT_EQ(snapshot.tokens.size(), 2U);
  EXPECT_EQ(snapshot.tokens[0], update.tokens[0]);
  ASSERT_EQ(snapshot.nodes.size(), 2U);
  EXPECT_EQ(snapshot.nodes[1], update.nodes[0]);
  ASSERT_EQ(snapshot.settings.size(), 2U);
  EXPECT_EQ(snapshot.settings[0], update.settings[0]);
}

TEST(SqliteStoreTest, IdempotencyKeyIsUniquePerTenant) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  // The same key in two tenants, and many jobs without a key.
  auto committed = store->commit(
      jobs_batch({job(1, "vision", "k"), job(2, "speech", "k"), job(3, "vision"), job(4, "vision")},
                 {event(1)}));
  ASSERT_TRUE(committed.has_value()) << committed.error().message();
  // Upserting a job keeps its own key.
  ASSERT_TRUE(store->commit(jobs_batch({job(1, "vision", "k", "running")})).has_value());

  // Another job with the key in the same tenant: the whole batch is refused.
  Batch conflicting{.jobs = {job(5, "vision"), job(6, "vision", "k")},
                    .events = {event(2)},
                    .tokens = {token("tok", "00")},
                    .nodes = {{"node-1", "{}"}},
                    .settings = {{"quota", "{}"}},
                    .ledger = {LedgerRecord{1, 1, "vision", "{}"}}};
  auto refused = store->commit(conflicting);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, dir.file("tidepool.db"));
  EXPECT_THAT(refused.error().reason, HasSubstr("job 6"));
  EXPECT_THAT(refused.error().reason, HasSubstr("UNIQUE constraint failed"));

  const Snapshot snapshot = load_or_die(*store);
  ASSERT_EQ(snapshot.jobs.size(), 4U);
  EXPECT_EQ(snapshot.jobs[0].state, "running");
  EXPECT_EQ(snapshot.jobs[3].id, 4);
  EXPECT_TRUE(snapshot.tokens.empty());
  EXPECT_TRUE(snapshot.nodes.empty());
  EXPECT_TRUE(snapshot.settings.empty());
  EXPECT_TRUE(snapshot.ledger.empty());
  EXPECT_EQ(snapshot.last_event_seq, 1);

  // The store is usable after the failure.
  EXPECT_TRUE(store->commit(jobs_batch({job(6, "vision", "k2")})).has_value());
}

TEST(SqliteStoreTest, TokenHashIsUnique) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->commit(tokens_batch({token("tok-a", "cafe")})).has_value());
  auto refused = store->commit(tokens_batch({token("tok-b", "cafe")}));
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().reason, HasSubstr("token tok-b"));
  EXPECT_EQ(load_or_die(*store).tokens.size(), 1U);
}

TEST(SqliteStoreTest, EventSeqGapIsRefusedAtomically) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);

  auto not_first = store->commit(events_batch(2, 2));
  ASSERT_FALSE(not_first.has_value());
  EXPECT_THAT(not_first.error().reason,
              HasSubstr("event seq 2 does not follow the last stored seq 0"));

  ASSERT_TRUE(store->commit(events_batch(1, 2)).has_value());

  const Batch gap = jobs_batch({job(1, "vision")}, {event(3), event(5)});
  auto refused = store->commit(gap);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().reason,
              HasSubstr("event seq 5 does not follow the last stored seq 3"));
  auto repeated = store->commit(events_batch(2, 3));
  ASSERT_FALSE(repeated.has_value());

  Snapshot snapshot = load_or_die(*store);
  EXPECT_TRUE(snapshot.jobs.empty());
  EXPECT_EQ(snapshot.last_event_seq, 2);
  auto events = store->events_after(0, 10);
  ASSERT_TRUE(events.has_value());
  EXPECT_EQ(events->size(), 2U);

  ASSERT_TRUE(store->commit(events_batch(3, 4)).has_value());
  EXPECT_EQ(load_or_die(*store).last_event_seq, 4);
}

TEST(SqliteStoreTest, RefusesANonPositiveJobIdWithoutApplyingTheBatch) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  auto refused = store->commit(jobs_batch({job(1, "vision"), job(0, "vision")}));
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().reason, HasSubstr("job id 0 is not positive"));
  EXPECT_TRUE(load_or_die(*store).jobs.empty());
}

TEST(SqliteStoreTest, RefusesAJobWithoutADocumentWithoutApplyingTheBatch) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  JobRecord unsealed = job(2, "vision");
  unsealed.document.clear();
  auto refused = store->commit(jobs_batch({job(1, "vision"), unsealed}));
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().reason, HasSubstr("job 2 has no document"));
  EXPECT_TRUE(load_or_die(*store).jobs.empty());
}

TEST(SqliteStoreTest, ReopenSeesEverything) {
  TempDir dir;
  const std::string path = dir.file("tidepool.db");
  {
    auto store = open_or_die(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->commit(full_batch()).has_value());
  }
  auto store = open_or_die(path);
  ASSERT_NE(store, nullptr);
  expect_full_batch(load_or_die(*store));
  auto events = store->events_after(0, 10);
  ASSERT_TRUE(events.has_value());
  EXPECT_EQ(*events, full_batch().events);
  ASSERT_TRUE(store->commit(events_batch(3, 3)).has_value());
}

TEST(SqliteStoreTest, CommitIsInTheFileWhenItReturns) {
  TempDir dir;
  const std::string path = dir.file("tidepool.db");
  auto store = open_or_die(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->commit(full_batch()).has_value());

  // Another connection (as after a crash of this process) sees the batch while the store is open.
  RawDatabase raw(path);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.text("SELECT count(*) FROM jobs"), "2");
  EXPECT_EQ(raw.text("SELECT max(seq) FROM events"), "2");
  EXPECT_EQ(raw.text("PRAGMA user_version"), std::to_string(kSqliteSchemaVersion));
}

TEST(SqliteStoreTest, ClosingCheckpointsTheLog) {
  TempDir dir;
  const std::string path = dir.file("tidepool.db");
  {
    auto store = open_or_die(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->commit(full_batch()).has_value());
    ASSERT_TRUE(store->events_after(0, 1).has_value());  // the reader connection was used too
    EXPECT_TRUE(std::filesystem::exists(path + "-wal"));
  }
  // The last connection to close folds the log into the file and removes it.
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(SqliteStoreTest, MigratesAnEmptyFile) {
  TempDir dir;
  const std::string path = dir.file("empty.db");
  std::ofstream(path).close();
  ASSERT_EQ(std::filesystem::file_size(path), 0U);
  auto store = open_or_die(path);
  ASSERT_NE(store, nullptr);
  RawDatabase raw(path);
  EXPECT_EQ(raw.text("PRAGMA user_version"), std::to_string(kSqliteSchemaVersion));
  EXPECT_EQ(raw.text("SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema "
                     "WHERE type = 'table' ORDER BY name)"),
            "events,jobs,ledger,nodes,settings,tokens");
  EXPECT_EQ(raw.text("SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema "
                     "WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name)"),
            "jobs_state,jobs_tenant_idempotency_key");
}

TEST(SqliteStoreTest, MigratesAVersionOneFileKeepingItsJobs) {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  {
    auto store = open_or_die(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->commit(jobs_batch({job(1, "vision")})).has_value());
  }
  {
    RawDatabase raw(path);
    raw.exec("DROP TABLE ledger; PRAGMA user_version = 1");
  }
  auto store = open_or_die(path);
  ASSERT_NE(store, nullptr);
  RawDatabase raw(path);
  EXPECT_EQ(raw.text("PRAGMA user_version"), "2");
  const Snapshot snapshot = load_or_die(*store);
  EXPECT_EQ(snapshot.jobs.size(), 1U);
  EXPECT_TRUE(snapshot.ledger.empty());
}

TEST(SqliteStoreTest, RefusesANewerSchemaVersion) {
  TempDir dir;
  const std::string path = dir.file("future.db");
  {
    RawDatabase raw(path);
    raw.exec("CREATE TABLE jobs (id INTEGER PRIMARY KEY); PRAGMA user_version = 7");
  }
  auto store = open_sqlite_store(path);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().field, path);
  EXPECT_EQ(store.error().reason, "database schema version 7 is newer than this tidepool (" +
                                      std::to_string(kSqliteSchemaVersion) + "); upgrade tidepool");
  RawDatabase raw(path);
  EXPECT_EQ(raw.text("PRAGMA user_version"), "7");
}

TEST(SqliteStoreTest, FailedMigrationStepLeavesTheFileUnchanged) {
  TempDir dir;
  const std::string path = dir.file("clash.db");
  {
    RawDatabase raw(path);
    raw.exec("CREATE TABLE events (x TEXT)");  // version 0, but step 1 cannot create `events`
  }
  auto store = open_sqlite_store(path);
  ASSERT_FALSE(store.has_value());
  EXPECT_THAT(store.error().reason, HasSubstr("migrating to schema version 1"));
  EXPECT_THAT(store.error().reason, HasSubstr("already exists"));
  RawDatabase raw(path);
  EXPECT_EQ(raw.text("PRAGMA user_version"), "0");
  EXPECT_EQ(raw.text("SELECT count(*) FROM sqlite_schema WHERE name = 'jobs'"), "0");
}

TEST(SqliteStoreTest, ReportsFilesItCannotUse) {
  TempDir dir;
  auto missing_dir = open_sqlite_store(dir.file("no/such/dir/tidepool.db"));
  ASSERT_FALSE(missing_dir.has_value());
  EXPECT_EQ(missing_dir.error().field, dir.file("no/such/dir/tidepool.db"));
  EXPECT_THAT(missing_dir.error().reason, HasSubstr("unable to open database file"));

  const std::string text = dir.file("notes.txt");
  std::ofstream(text) << "this is not a database, just some text that is long enough to matter\n";
  auto not_database = open_sqlite_store(text);
  ASSERT_FALSE(not_database.has_value());
  EXPECT_THAT(not_database.error().reason, HasSubstr("file is not a database"));

  auto memory = open_sqlite_store(":memory:");
  ASSERT_FALSE(memory.has_value());
  EXPECT_EQ(memory.error().field, "database path");
}

TEST(SqliteStoreTest, EventsAfterPages) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->commit(events_batch(1, 20)).has_value());
  ASSERT_TRUE(store->commit(events_batch(21, 25)).has_value());

  std::vector<std::int64_t> page_sizes;
  std::vector<EventRecord> all;
  std::int64_t after = 0;
  for (;;) {
    auto page = store->events_after(after, 10);
    ASSERT_TRUE(page.has_value()) << page.error().message();
    if (page->empty()) break;
    page_sizes.push_back(static_cast<std::int64_t>(page->size()));
    all.insert(all.end(), page->begin(), page->end());
    after = page->back().seq;
  }
  EXPECT_EQ(page_sizes, (std::vector<std::int64_t>{10, 10, 5}));
  EXPECT_EQ(all, events_batch(1, 25).events);

  auto middle = store->events_after(22, 2);
  ASSERT_TRUE(middle.has_value());
  EXPECT_EQ(*middle, (std::vector{event(23), event(24)}));
  auto none = store->events_after(0, 0);
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  auto past_the_end = store->events_after(100, 10);
  ASSERT_TRUE(past_the_end.has_value());
  EXPECT_TRUE(past_the_end->empty());
  auto negative = store->events_after(0, -1);
  ASSERT_FALSE(negative.has_value());
  EXPECT_EQ(negative.error().field, "limit");
}

// An HTTP thread follows the event stream while the loop thread commits: it must see every event
// once, in order, and only whole batches.
TEST(SqliteStoreTest, ReaderThreadFollowsTheStreamWhileCommitsHappen) {
  TempDir dir;
  auto store = open_or_die(dir.file("tidepool.db"));
  ASSERT_NE(store, nullptr);
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
      auto page = store->events_after(after, 7);
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
    if (auto committed = store->commit(changes); !committed) {
      writer_error = committed.error().message();
    }
  }
  writer_done = true;
  reader.join();

  ASSERT_EQ(writer_error, "");
  EXPECT_THAT(reader_errors, ::testing::IsEmpty());
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kLast));
  for (std::size_t i = 0; i < seen.size(); ++i)
    EXPECT_EQ(seen[i], static_cast<std::int64_t>(i + 1));
}

}  // namespace
}  // namespace tidepool
