#include "store/sqlite_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sqlite3.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "store/store_test_records.h"

// What is SQLite's own: the file, its lock and mode, durability across a reopen, migrations, the
// files it refuses, and its reasons. What every store promises is in store_contract_test.cc.
namespace tidepool {
namespace {

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

TEST(SqliteStoreTest, EmptyIdempotencyKeyIsStoredAsNull) {
  TempDir dir;
  const std::string path = dir.file("tidepool.db");
  auto store = open_or_die(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->commit(jobs_batch({job(1, "vision"), job(2, "vision")})).has_value());
  RawDatabase raw(path);
  EXPECT_EQ(raw.text("SELECT count(*) FROM jobs WHERE idempotency_key IS NULL"), "2");
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
  expect_full_batch(*store);
  // The seqs go on from the file's.
  EXPECT_FALSE(store->commit(events_batch(1, 1)).has_value());
  EXPECT_TRUE(store->commit(appends_batch({event(3)}, {ledger_entry(3)})).has_value());
}

// A refusal names the file and gives sqlite's reason; a commit after it works.
TEST(SqliteStoreTest, RefusalsNameTheFileAndSqlitesReason) {
  TempDir dir;
  const std::string path = dir.file("tidepool.db");
  auto store = open_or_die(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->commit(jobs_batch({job(1, "vision", "k")})).has_value());
  auto job_refused = store->commit(jobs_batch({job(6, "vision", "k")}));
  ASSERT_FALSE(job_refused.has_value());
  EXPECT_EQ(job_refused.error().field, path);
  EXPECT_EQ(job_refused.error().reason,
            "writing job 6: UNIQUE constraint failed: jobs.tenant, jobs.idempotency_key");

  ASSERT_TRUE(store->commit(tokens_batch({token("tok-a", "cafe")})).has_value());
  auto token_refused = store->commit(tokens_batch({token("tok-b", "cafe")}));
  ASSERT_FALSE(token_refused.has_value());
  EXPECT_EQ(token_refused.error().field, path);
  EXPECT_EQ(token_refused.error().reason,
            "writing token tok-b: UNIQUE constraint failed: tokens.hash");

  auto seq_refused = store->commit(events_batch(2, 2));
  ASSERT_FALSE(seq_refused.has_value());
  EXPECT_EQ(seq_refused.error().field, path);
  EXPECT_TRUE(store->commit(jobs_batch({job(6, "vision", "k2")}, {event(1)})).has_value());
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

}  // namespace
}  // namespace tidepool
