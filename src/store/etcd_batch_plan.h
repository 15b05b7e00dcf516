// How the etcd store turns a Batch into one etcd transaction, without talking to etcd: which keys
// it must read first, and, given what they held, either the refusal that store.h asks for or the
// keys to write and the revisions that the transaction must find unchanged.
//
// The rules of store.h are checked here, record by record in store.h's order, against the keys
// read and what the records before left (an overlay of the keyspace): a refused batch never
// reaches etcd. The transaction then compares every key read with the mod_revision it was read
// at, so a batch planned on state that another writer changed meanwhile is not applied (the store
// reads again and plans again).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "store/etcd_keys.h"
#include "store/store.h"

namespace tidepool::etcd_plan {

// A key as read: its value and the revision of its last change.
struct ReadValue {
  std::string value;
  std::int64_t mod_revision = 0;
};
// Keys read and found; a key read but not found is absent.
using ReadState = std::map<std::string, ReadValue>;

struct Plan {
  // Key -> new value; nullopt: delete the key. One entry per key (etcd refuses a transaction that
  // writes a key twice).
  std::map<std::string, std::optional<std::string>> writes;
  // [key, range_end) ranges deleted whole (a ledger fold's run), each one operation; no key of
  // `writes` lies in one.
  std::vector<std::pair<std::string, std::string>> deleted_ranges;
  // Each key read -> the mod_revision it must still have (0: it must still be absent).
  std::map<std::string, std::int64_t> unchanged;
};

// The keys plan() reads, each once, in byte order: the batch's jobs and tokens, the index entries
// of their idempotency keys and hashes, and the last event and ledger seqs.
[[nodiscard]] std::vector<std::string> keys_to_read(const Batch& batch,
                                                    const etcd_keys::Layout& layout);

// Checks `batch` against `read` (what keys_to_read() held) and says what to write. Errors have the
// field `field` and a reason that names the first broken record as store.h says, in the words of
// the memory store (memory_store.cc).
[[nodiscard]] Result<Plan> plan(const Batch& batch, const etcd_keys::Layout& layout,
                                const ReadState& read, const std::string& field);

}  // namespace tidepool::etcd_plan
