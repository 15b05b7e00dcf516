#include "store/sqlite_store.h"

#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/file_lock.h"
#include "store/ledger_rules.h"

namespace tidepool {
namespace {

constexpr int kBusyTimeoutMs = 5000;

// One step of the schema, applied in its own transaction together with `PRAGMA user_version`.
// Steps are never edited once released; a change of schema is a new step.
struct Migration {
  int version;
  const char* sql;
};

// STRICT tables (SQLite >= 3.37) reject values of the wrong type instead of storing them.
constexpr std::array kMigrations = {
    Migration{1, R"sql(
      CREATE TABLE jobs (
        id INTEGER PRIMARY KEY CHECK (id > 0),
        tenant TEXT NOT NULL,
        queue TEXT NOT NULL,
        state TEXT NOT NULL,
        idempotency_key TEXT,
        document TEXT NOT NULL
      ) STRICT;
      CREATE UNIQUE INDEX jobs_tenant_idempotency_key ON jobs (tenant, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
      CREATE INDEX jobs_state ON jobs (state);
      CREATE TABLE events (
        seq INTEGER PRIMARY KEY CHECK (seq > 0),
        at_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        document TEXT NOT NULL
      ) STRICT;
      CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL,
        tenant TEXT NOT NULL,
        node TEXT NOT NULL,
        description TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        revoked INTEGER NOT NULL CHECK (revoked IN (0, 1))
      ) STRICT;
      CREATE TABLE nodes (key TEXT PRIMARY KEY, document TEXT NOT NULL) STRICT;
      CREATE TABLE settings (key TEXT PRIMARY KEY, document TEXT NOT NULL) STRICT;
    )sql"},
    // The internal market's ledger: appended to; closing the books folds runs of it.
    Migration{2, R"sql(
      CREATE TABLE ledger (
        seq INTEGER PRIMARY KEY CHECK (seq > 0),
        at INTEGER NOT NULL,
        tenant TEXT NOT NULL,
        document TEXT NOT NULL
      ) STRICT;
    )sql"},
};
static_assert(kMigrations.back().version == kSqliteSchemaVersion);

struct CloseDatabase {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Database = std::unique_ptr<sqlite3, CloseDatabase>;

struct FinalizeStatement {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Statement = std::unique_ptr<sqlite3_stmt, FinalizeStatement>;

// Resets a statement when the scope ends, so that no read transaction outlives a query.
class ResetOnExit {
 public:
  explicit ResetOnExit(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~ResetOnExit() { sqlite3_reset(stmt_); }
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

std::string with_reason(std::string_view what, sqlite3* db) {
  return fmt::format("{}: {}", what, sqlite3_errmsg(db));
}

Result<Statement> prepare(sqlite3* db, const std::string& path, std::string_view sql,
                          unsigned flags = SQLITE_PREPARE_PERSISTENT) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), flags, &raw, nullptr) !=
      SQLITE_OK) {
    return fail(path, with_reason(fmt::format("preparing \"{}\"", sql), db));
  }
  return Statement(raw);
}

// Steps a statement that returns no rows and resets it for its next use. The error's reason is
// sqlite's message; callers add what they were doing.
Result<void> run(sqlite3* db, sqlite3_stmt* stmt) {
  if (sqlite3_step(stmt) == SQLITE_DONE) {
    sqlite3_reset(stmt);
    return {};
  }
  std::string reason = sqlite3_errmsg(db);  // before the reset, which may replace it
  sqlite3_reset(stmt);
  return fail("", std::move(reason));
}

Result<void> execute(sqlite3* db, const std::string& path, const char* sql, std::string_view what) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) == SQLITE_OK) return {};
  std::string reason = fmt::format("{}: {}", what, message ? message : sqlite3_errmsg(db));
  sqlite3_free(message);
  return fail(path, std::move(reason));
}

// The first column of the first row of `sql`, as text (empty when NULL or no row).
Result<std::string> query_text(sqlite3* db, const std::string& path, std::string_view sql,
                               std::string_view what) {
  auto stmt = prepare(db, path, sql, 0);
  if (!stmt) return std::unexpected(stmt.error());
  const int rc = sqlite3_step(stmt->get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(path, with_reason(what, db));
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt->get(), 0));
  return std::string(text ? text : "");
}

Result<std::int64_t> query_int(sqlite3* db, const std::string& path, std::string_view sql,
                               std::string_view what) {
  auto stmt = prepare(db, path, sql, 0);
  if (!stmt) return std::unexpected(stmt.error());
  const int rc = sqlite3_step(stmt->get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(path, with_reason(what, db));
  return rc == SQLITE_ROW ? sqlite3_column_int64(stmt->get(), 0) : 0;
}

void rollback(sqlite3* db) {
  // Some errors (I/O, out of memory) end the transaction by themselves.
  if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
}

Result<Database> open_connection(const std::string& path) {
  sqlite3* raw = nullptr;
  // NOMUTEX: each connection is used under the store's own mutex, one thread at a time.
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  Database db(raw);
  if (rc != SQLITE_OK) {
    return fail(path, fmt::format("cannot open the database: {}",
                                  raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  if (auto set = execute(db.get(), path, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON",
                         "setting the connection options");
      !set) {
    return std::unexpected(set.error());
  }
  return db;
}

// Applies the steps after the file's version, each in one transaction. The version is read inside
// the transaction, so two processes opening a new file at once do not both apply a step.
Result<void> migrate(sqlite3* db, const std::string& path) {
  for (;;) {
    if (auto begun = execute(db, path, "BEGIN IMMEDIATE", "starting the schema migration");
        !begun) {
      return begun;
    }
    auto version = query_int(db, path, "PRAGMA user_version", "reading the schema version");
    if (!version) {
      rollback(db);
      return std::unexpected(version.error());
    }
    if (*version > kSqliteSchemaVersion || *version < 0) {
      rollback(db);
      if (*version < 0) return fail(path, fmt::format("invalid schema version {}", *version));
      return fail(path, fmt::format("database schema version {} is newer than this tidepool ({}); "
                                    "upgrade tidepool",
                                    *version, kSqliteSchemaVersion));
    }
    const auto step = std::ranges::find_if(
        kMigrations, [&](const Migration& migration) { return migration.version > *version; });
    if (step == kMigrations.end()) {
      return execute(db, path, "COMMIT", "finishing the schema check");
    }
    const std::string what = fmt::format("migrating to schema version {}", step->version);
    auto applied = execute(db, path, step->sql, what);
    if (applied) {
      applied =
          execute(db, path, fmt::format("PRAGMA user_version = {}", step->version).c_str(), what);
    }
    if (applied) applied = execute(db, path, "COMMIT", what);
    if (!applied) {
      rollback(db);
      return applied;
    }
  }
}

bool bind_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  return sqlite3_bind_text64(stmt, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8) ==
         SQLITE_OK;
}

bool bind_int(sqlite3_stmt* stmt, int index, std::int64_t value) {
  return sqlite3_bind_int64(stmt, index, value) == SQLITE_OK;
}

std::string column_text(sqlite3_stmt* stmt, int column) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, column));
  if (text == nullptr) return {};
  return {text, static_cast<std::size_t>(sqlite3_column_bytes(stmt, column))};
}

// Calls `row(stmt)` for every row of `sql`.
template <class Row>
Result<void> for_each_row(sqlite3* db, const std::string& path, std::string_view sql,
                          std::string_view what, Row&& row) {
  auto stmt = prepare(db, path, sql, 0);
  if (!stmt) return std::unexpected(stmt.error());
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) row(stmt->get());
  if (rc != SQLITE_DONE) return fail(path, with_reason(what, db));
  return {};
}

class SqliteStore final : public Store {
 public:
  // The statements the writer connection reuses for every commit.
  struct WriterStatements {
    Statement begin, commit, upsert_job, last_event_seq, insert_event, last_ledger_seq,
        insert_ledger, delete_ledger_run, upsert_token, upsert_node, upsert_setting, delete_job,
        delete_events_through;
  };

  SqliteStore(FileLock lock, std::string path, Database writer, WriterStatements statements,
              Database reader, Statement events_after)
      : lock_(std::move(lock)),
        path_(std::move(path)),
        writer_(std::move(writer)),
        statements_(std::move(statements)),
        reader_(std::move(reader)),
        events_after_(std::move(events_after)) {}

  ~SqliteStore() override {
    // Statements before their connections; closing the last connection checkpoints the WAL.
    events_after_.reset();
    reader_.reset();
    statements_ = {};
    writer_.reset();
  }

  Result<Snapshot> load() override;
  Result<void> commit(const Batch& batch) override;
  Result<std::vector<EventRecord>> events_after(std::int64_t after, int limit) override;

 private:
  Result<void> apply(const Batch& batch);
  std::unexpected<Error> write_failed(std::string_view what) const;

  FileLock lock_;  // held while the store is open: released last
  std::string path_;
  std::mutex writer_mutex_;  // guards writer_ and statements_
  Database writer_;
  WriterStatements statements_;
  std::mutex reader_mutex_;  // guards reader_ and events_after_
  Database reader_;
  Statement events_after_;
};

std::unexpected<Error> SqliteStore::write_failed(std::string_view what) const {
  return fail(path_, with_reason(what, writer_.get()));
}

Result<void> SqliteStore::commit(const Batch& batch) {
  if (batch.empty()) return {};
  std::lock_guard lock(writer_mutex_);
  sqlite3* db = writer_.get();
  if (auto begun = run(db, statements_.begin.get()); !begun) {
    rollback(db);
    return fail(path_, "starting a transaction: " + begun.error().reason);
  }
  if (auto applied = apply(batch); !applied) {
    rollback(db);
    return applied;
  }
  if (auto committed = run(db, statements_.commit.get()); !committed) {
    rollback(db);
    return fail(path_, "committing: " + committed.error().reason);
  }
  return {};
}

Result<void> SqliteStore::apply(const Batch& batch) {
  sqlite3* db = writer_.get();
  auto failed = [&](std::string_view what, const Error& error) {
    return fail(path_, fmt::format("{}: {}", what, error.reason));
  };

  sqlite3_stmt* job_stmt = statements_.upsert_job.get();
  for (const JobRecord& job : batch.jobs) {
    if (job.id <= 0) return fail(path_, fmt::format("job id {} is not positive", job.id));
    if (job.document.empty()) {
      return fail(path_,
                  fmt::format("job {} has no document (a batch committed unsealed?)", job.id));
    }
    const bool bound =
        bind_int(job_stmt, 1, job.id) && bind_text(job_stmt, 2, job.tenant) &&
        bind_text(job_stmt, 3, job.queue) && bind_text(job_stmt, 4, job.state) &&
        (job.idempotency_key.empty() ? sqlite3_bind_null(job_stmt, 5) == SQLITE_OK
                                     : bind_text(job_stmt, 5, job.idempotency_key)) &&
        bind_text(job_stmt, 6, job.document);
    if (!bound) return write_failed(fmt::format("writing job {}", job.id));
    if (auto done = run(db, job_stmt); !done) {
      return failed(fmt::format("writing job {}", job.id), done.error());
    }
  }

  sqlite3_stmt* delete_job = statements_.delete_job.get();
  for (const std::int64_t id : batch.jobs_removed) {
    if (id <= 0) return fail(path_, fmt::format("removed job id {} is not positive", id));
    if (!bind_int(delete_job, 1, id)) return write_failed(fmt::format("removing job {}", id));
    if (auto done = run(db, delete_job); !done) {
      return failed(fmt::format("removing job {}", id), done.error());
    }
  }

  if (!batch.events.empty() || batch.events_dropped_through != 0) {
    std::int64_t stored = 0;
    {
      sqlite3_stmt* stmt = statements_.last_event_seq.get();
      ResetOnExit reset(stmt);
      if (sqlite3_step(stmt) != SQLITE_ROW) return write_failed("reading the last event seq");
      stored = sqlite3_column_int64(stmt, 0);
    }
    auto last = events_last_after_drop(stored, batch.events_dropped_through, path_);
    if (!last) return std::unexpected(last.error());
    if (stored > 0 && batch.events_dropped_through > 0) {
      // Every event through the seq dropped, but the last stored one.
      const std::int64_t through = std::min(batch.events_dropped_through, stored - 1);
      sqlite3_stmt* drop = statements_.delete_events_through.get();
      const std::string what = fmt::format("dropping the events through seq {}", through);
      if (!bind_int(drop, 1, through)) return write_failed(what);
      if (auto done = run(db, drop); !done) return failed(what, done.error());
    }
    sqlite3_stmt* event_stmt = statements_.insert_event.get();
    for (const EventRecord& event : batch.events) {
      if (auto refused = event_append_refusal(event.seq, *last)) return fail(path_, *refused);
      const bool bound =
          bind_int(event_stmt, 1, event.seq) && bind_int(event_stmt, 2, event.at_ms) &&
          bind_text(event_stmt, 3, event.kind) && bind_text(event_stmt, 4, event.document);
      if (!bound) return write_failed(fmt::format("writing event {}", event.seq));
      if (auto done = run(db, event_stmt); !done) {
        return failed(fmt::format("writing event {}", event.seq), done.error());
      }
      *last = event.seq;
    }
  }

  if (!batch.ledger.empty() || !batch.ledger_folds.empty()) {
    std::int64_t last = 0;
    {
      sqlite3_stmt* stmt = statements_.last_ledger_seq.get();
      ResetOnExit reset(stmt);
      if (sqlite3_step(stmt) != SQLITE_ROW) return write_failed("reading the last ledger seq");
      last = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_stmt* ledger_stmt = statements_.insert_ledger.get();
    const auto insert = [&](const LedgerRecord& entry) -> Result<void> {
      const bool bound =
          bind_int(ledger_stmt, 1, entry.seq) && bind_int(ledger_stmt, 2, entry.at) &&
          bind_text(ledger_stmt, 3, entry.tenant) && bind_text(ledger_stmt, 4, entry.document);
      if (!bound) return write_failed(fmt::format("writing ledger entry {}", entry.seq));
      if (auto done = run(db, ledger_stmt); !done) {
        return failed(fmt::format("writing ledger entry {}", entry.seq), done.error());
      }
      return {};
    };
    for (const LedgerRecord& entry : batch.ledger) {
      if (auto refused = ledger_append_refusal(entry.seq, last)) return fail(path_, *refused);
      if (auto ok = insert(entry); !ok) return ok;
      last = entry.seq;
    }
    sqlite3_stmt* delete_stmt = statements_.delete_ledger_run.get();
    for (const LedgerFoldRecord& fold : batch.ledger_folds) {
      if (auto refused = ledger_fold_refusal(fold, last)) return fail(path_, *refused);
      const std::string what =
          fmt::format("folding ledger seqs {}..{}", fold.first_seq, fold.last_seq);
      if (!bind_int(delete_stmt, 1, fold.first_seq) || !bind_int(delete_stmt, 2, fold.last_seq)) {
        return write_failed(what);
      }
      if (auto done = run(db, delete_stmt); !done) return failed(what, done.error());
      for (const LedgerRecord& entry : fold.carried) {
        if (auto ok = insert(entry); !ok) return ok;
      }
    }
  }

  sqlite3_stmt* token_stmt = statements_.upsert_token.get();
  for (const TokenRecord& token : batch.tokens) {
    const bool bound =
        bind_text(token_stmt, 1, token.id) && bind_text(token_stmt, 2, token.hash) &&
        bind_text(token_stmt, 3, token.role) && bind_text(token_stmt, 4, token.tenant) &&
        bind_text(token_stmt, 5, token.node) && bind_text(token_stmt, 6, token.description) &&
        bind_int(token_stmt, 7, token.created_ms) && bind_int(token_stmt, 8, token.revoked ? 1 : 0);
    if (!bound) return write_failed(fmt::format("writing token {}", token.id));
    if (auto done = run(db, token_stmt); !done) {
      return failed(fmt::format("writing token {}", token.id), done.error());
    }
  }

  struct Keyed {
    const char* name;
    sqlite3_stmt* stmt;
    const std::vector<KeyedRecord>& records;
  };
  for (const Keyed& keyed : {Keyed{"node", statements_.upsert_node.get(), batch.nodes},
                             Keyed{"setting", statements_.upsert_setting.get(), batch.settings}}) {
    const auto& [table, stmt, records] = keyed;
    for (const KeyedRecord& record : records) {
      if (!bind_text(stmt, 1, record.key) || !bind_text(stmt, 2, record.document)) {
        return write_failed(fmt::format("writing {} {}", table, record.key));
      }
      if (auto done = run(db, stmt); !done) {
        return failed(fmt::format("writing {} {}", table, record.key), done.error());
      }
    }
  }
  return {};
}

Result<Snapshot> SqliteStore::load() {
  std::lock_guard lock(writer_mutex_);
  sqlite3* db = writer_.get();
  // One read transaction, so the snapshot is consistent even if another process writes.
  if (auto begun = execute(db, path_, "BEGIN", "starting a read transaction"); !begun) {
    return std::unexpected(begun.error());
  }
  Snapshot snapshot;
  auto read = for_each_row(
      db, path_, "SELECT id, tenant, queue, state, idempotency_key, document FROM jobs ORDER BY id",
      "reading jobs", [&](sqlite3_stmt* stmt) {
        snapshot.jobs.push_back(JobRecord{.id = sqlite3_column_int64(stmt, 0),
                                          .tenant = column_text(stmt, 1),
                                          .queue = column_text(stmt, 2),
                                          .state = column_text(stmt, 3),
                                          .idempotency_key = column_text(stmt, 4),
                                          .document = column_text(stmt, 5)});
      });
  if (read) {
    read = for_each_row(
        db, path_,
        "SELECT id, hash, role, tenant, node, description, created_ms, revoked "
        "FROM tokens ORDER BY id",
        "reading tokens", [&](sqlite3_stmt* stmt) {
          snapshot.tokens.push_back(TokenRecord{.id = column_text(stmt, 0),
                                                .hash = column_text(stmt, 1),
                                                .role = column_text(stmt, 2),
                                                .tenant = column_text(stmt, 3),
                                                .node = column_text(stmt, 4),
                                                .description = column_text(stmt, 5),
                                                .created_ms = sqlite3_column_int64(stmt, 6),
                                                .revoked = sqlite3_column_int64(stmt, 7) != 0});
        });
  }
  if (read) {
    read = for_each_row(db, path_, "SELECT key, document FROM nodes ORDER BY key", "reading nodes",
                        [&](sqlite3_stmt* stmt) {
                          snapshot.nodes.push_back({column_text(stmt, 0), column_text(stmt, 1)});
                        });
  }
  if (read) {
    read = for_each_row(db, path_, "SELECT key, document FROM settings ORDER BY key",
                        "reading settings", [&](sqlite3_stmt* stmt) {
                          snapshot.settings.push_back({column_text(stmt, 0), column_text(stmt, 1)});
                        });
  }
  if (read) {
    read =
        for_each_row(db, path_, "SELECT seq, at, tenant, document FROM ledger ORDER BY seq",
                     "reading the ledger", [&](sqlite3_stmt* stmt) {
                       snapshot.ledger.push_back(LedgerRecord{.seq = sqlite3_column_int64(stmt, 0),
                                                              .at = sqlite3_column_int64(stmt, 1),
                                                              .tenant = column_text(stmt, 2),
                                                              .document = column_text(stmt, 3)});
                     });
  }
  if (read) {
    auto last = query_int(db, path_, "SELECT coalesce(max(seq), 0) FROM events",
                          "reading the last event seq");
    if (last) {
      snapshot.last_event_seq = *last;
    } else {
      read = std::unexpected(last.error());
    }
  }
  if (!read) {
    rollback(db);
    return std::unexpected(read.error());
  }
  if (auto ended = execute(db, path_, "COMMIT", "ending the read transaction"); !ended) {
    rollback(db);
    return std::unexpected(ended.error());
  }
  return snapshot;
}

Result<std::vector<EventRecord>> SqliteStore::events_after(std::int64_t after, int limit) {
  if (limit < 0) return fail("limit", fmt::format("must not be negative, got {}", limit));
  std::vector<EventRecord> events;
  if (limit == 0) return events;
  events.reserve(static_cast<std::size_t>(std::min(limit, 1024)));

  std::lock_guard lock(reader_mutex_);
  sqlite3_stmt* stmt = events_after_.get();
  ResetOnExit reset(stmt);
  if (!bind_int(stmt, 1, after) || !bind_int(stmt, 2, limit)) {
    return fail(path_, with_reason("reading events", reader_.get()));
  }
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    events.push_back(EventRecord{.seq = sqlite3_column_int64(stmt, 0),
                                 .at_ms = sqlite3_column_int64(stmt, 1),
                                 .kind = column_text(stmt, 2),
                                 .document = column_text(stmt, 3)});
  }
  if (rc != SQLITE_DONE) return fail(path_, with_reason("reading events", reader_.get()));
  return events;
}

}  // namespace

Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path) {
  if (path.empty() || path == ":memory:") {
    return fail("database path", fmt::format("\"{}\" is not a file path", path));
  }
  if (sqlite3_threadsafe() == 0) {
    return fail(path, "this SQLite library was built without thread support");
  }
  auto writer = open_connection(path);
  if (!writer) return std::unexpected(writer.error());
  // One process per database, before anything is written: a second server would interleave its
  // writes with ours.
  auto lock = FileLock::acquire(path + ".lock");
  if (!lock) return std::unexpected(lock.error());
  sqlite3* db = writer->get();
  if (sqlite3_db_readonly(db, "main") == 1) {
    return fail(path, "the database file is read-only: the server must be able to write it");
  }
  // The state may hold job secrets (their env): the owner only, also for files made before.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string file = path + suffix;
    if (chmod(file.c_str(), 0600) != 0 && errno != ENOENT) {
      return fail(file,
                  fmt::format("cannot make it private (mode 0600): {}", std::strerror(errno)));
    }
  }
  // journal_mode is stored in the file; it answers with the mode in effect.
  auto mode =
      query_text(db, path, "PRAGMA journal_mode = WAL", "switching to the WAL journal mode");
  if (!mode) return std::unexpected(mode.error());
  if (*mode != "wal") {
    return fail(path, fmt::format("cannot use the WAL journal mode (the mode is \"{}\")", *mode));
  }
  if (auto migrated = migrate(db, path); !migrated) return std::unexpected(migrated.error());

  SqliteStore::WriterStatements statements;
  const std::pair<Statement*, std::string_view> writer_sql[] = {
      {&statements.begin, "BEGIN IMMEDIATE"},
      {&statements.commit, "COMMIT"},
      {&statements.upsert_job,
       "INSERT INTO jobs (id, tenant, queue, state, idempotency_key, document) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, "
       "queue = excluded.queue, state = excluded.state, "
       "idempotency_key = excluded.idempotency_key, document = excluded.document"},
      {&statements.last_event_seq, "SELECT coalesce(max(seq), 0) FROM events"},
      {&statements.insert_event,
       "INSERT INTO events (seq, at_ms, kind, document) VALUES (?1, ?2, ?3, ?4)"},
      {&statements.last_ledger_seq, "SELECT coalesce(max(seq), 0) FROM ledger"},
      {&statements.insert_ledger,
       "INSERT INTO ledger (seq, at, tenant, document) VALUES (?1, ?2, ?3, ?4)"},
      {&statements.delete_ledger_run, "DELETE FROM ledger WHERE seq BETWEEN ?1 AND ?2"},
      {&statements.delete_job, "DELETE FROM jobs WHERE id = ?1"},
      {&statements.delete_events_through, "DELETE FROM events WHERE seq <= ?1"},
      {&statements.upsert_token,
       "INSERT INTO tokens (id, hash, role, tenant, node, description, created_ms, revoked) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (id) DO UPDATE SET "
       "hash = excluded.hash, role = excluded.role, tenant = excluded.tenant, "
       "node = excluded.node, description = excluded.description, "
       "created_ms = excluded.created_ms, revoked = excluded.revoked"},
      {&statements.upsert_node,
       "INSERT INTO nodes (key, document) VALUES (?1, ?2) "
       "ON CONFLICT (key) DO UPDATE SET document = excluded.document"},
      {&statements.upsert_setting,
       "INSERT INTO settings (key, document) VALUES (?1, ?2) "
       "ON CONFLICT (key) DO UPDATE SET document = excluded.document"},
  };
  for (const auto& [statement, sql] : writer_sql) {
    auto prepared = prepare(db, path, sql);
    if (!prepared) return std::unexpected(prepared.error());
    *statement = std::move(*prepared);
  }

  auto reader = open_connection(path);
  if (!reader) return std::unexpected(reader.error());
  if (auto set = execute(reader->get(), path, "PRAGMA query_only = ON", "opening the reader");
      !set) {
    return std::unexpected(set.error());
  }
  auto events_after = prepare(reader->get(), path,
                              "SELECT seq, at_ms, kind, document FROM events WHERE seq > ?1 "
                              "ORDER BY seq LIMIT ?2");
  if (!events_after) return std::unexpected(events_after.error());

  return std::make_unique<SqliteStore>(std::move(*lock), path, std::move(*writer),
                                       std::move(statements), std::move(*reader),
                                       std::move(*events_after));
}

}  // namespace tidepool
