// Taking a backup (backup_file.h) from a Store, and restoring one into an empty Store of any kind:
// the way to move a Tidepool from SQLite to etcd, or back.
//
// Consistency: a backup is a snapshot (Store::load(), of one moment in every store: one SQLite
// read transaction, one etcd revision) and the events up to its last_event_seq, read after it.
// Events are never changed once committed, so the events read later are those of the snapshot's
// moment, whatever was committed in between: no commit is in a backup in part.
//
// Restoring writes the records with Store::commit() in the store's own checks, in batches that
// fit the store's limits (RestoreLimits): one batch for SQLite, which is then all or nothing;
// several for etcd, whose transactions are bounded, so that a restore into etcd that fails midway
// leaves part of the backup behind, which the error says. The events keep their seqs, the ledger
// its seqs, and every job, token, node and setting its id or key and document, byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/backup_file.h"
#include "store/store.h"

namespace tidepool {

// Every event stored through last_seq, read page by page, from the first one kept (those before
// may have been dropped: retention, also while they are read); an error if one after it is
// missing.
[[nodiscard]] Result<std::vector<EventRecord>> events_through(Store& store, std::int64_t last_seq);

// load(), then events_through() its last seq.
[[nodiscard]] Result<BackupContents> take_backup(Store& store);

// What one commit of a restore may hold. 0: no limit, so the whole backup is one commit.
struct RestoreLimits {
  // etcd's --max-txn-ops and --max-request-bytes, as the etcd store counts a batch (etcd_store.h):
  // a job is one key and one more for its idempotency key, a token two keys (itself and its hash's
  // index), every other record one key, and a batch with events or ledger entries writes their
  // last seq too; each key a job or token writes is also compared.
  std::int64_t max_txn_ops = 0;
  std::int64_t max_request_bytes = 0;
  // The length of the etcd store's key prefix, which every key of a transaction carries.
  std::size_t key_prefix_bytes = 0;
};

// The first record of the backup that a batch starts at: the index of the list (jobs, tokens,
// nodes, settings, ledger, events, in the file's order) and of the record in it.
struct RestoreCursor {
  std::size_t list = 0;
  std::size_t index = 0;

  friend bool operator==(const RestoreCursor&, const RestoreCursor&) = default;
};

// The batches of a restore, each the records from one cursor to the next (the last one past the
// end: {6, 0}), so that each batch fits `limits` by the count above with some room to spare. A
// record that alone is over them gets a batch of its own (the store then refuses it, saying why).
[[nodiscard]] std::vector<RestoreCursor> plan_restore(const BackupContents& contents,
                                                      const RestoreLimits& limits);
// The batch of the records from `from` up to `to`.
[[nodiscard]] Batch restore_batch(const BackupContents& contents, RestoreCursor from,
                                  RestoreCursor to);

struct RestoreReport {
  BackupCounts counts;
  int commits = 0;
  std::string digest;  // backup_digest() of what was written and read back
};

// Restores `contents` into `target`, which must be empty (nothing in its load(): no job, token,
// node, setting, ledger entry or event); a store that holds anything is refused, with what it
// holds, before anything is written. After the last commit the store is loaded again with its
// events and compared with the backup (counts and backup_digest()).
//
// Errors: the field "restore" and a reason that says how far it went: nothing written (refused
// before the first commit, or the first commit failed) or the commits that went through, and that
// the target then holds part of the backup and must be emptied before another try.
[[nodiscard]] Result<RestoreReport> restore_backup(Store& target, const BackupContents& contents,
                                                   const RestoreLimits& limits);

// "3 jobs, 1 token, ..." for a store's snapshot (counts of backup_file.h; events: its
// last_event_seq).
[[nodiscard]] std::string describe_snapshot(const Snapshot& snapshot);

}  // namespace tidepool
