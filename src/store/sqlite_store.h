// The Store of a single server: one SQLite database file.
//
// Durability: the file is in WAL journal mode with synchronous=FULL, so a commit() that returns
// success has been fsynced and survives a crash of the process or the machine. The schema is
// versioned in `PRAGMA user_version` and migrated forward, one transaction per step, when the file
// is opened; a file written by a newer tidepool is refused rather than misread.
//
// Threads: load() and commit() share one connection and are serialized by a mutex; the server calls
// them from its loop thread. events_after() has its own connection, so HTTP threads can read the
// event stream while a commit is being written and synced; it sees only committed batches.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "store/store.h"

namespace tidepool {

// The schema version this build writes; files with a higher user_version are refused.
inline constexpr int kSqliteSchemaVersion = 2;

// Opens the database at `path`, creating the file if it does not exist, and migrates its schema
// to kSqliteSchemaVersion. The store holds an exclusive lock (`<path>.lock`, file_lock.h) while it
// is open, so a second store on the same file, in this process or another, is refused with the
// holder's PID; a read-only file is refused; the file and its WAL are made mode 0600. `path` must
// name a file (":memory:" and URIs are not supported: the reader connection must see the same
// database). Errors name the path and give sqlite's reason.
[[nodiscard]] Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path);

}  // namespace tidepool
