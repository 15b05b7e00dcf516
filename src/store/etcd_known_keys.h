// What the etcd store knows of the keys its commits depend on (etcd_batch_plan.h's keys_to_read:
// jobs, tokens, their index entries, the last seqs), so that a commit needs no read before its
// transaction: one round trip to etcd instead of two.
//
// It is a guess, never trusted: the transaction compares every key the plan depended on with the
// revision known here, so if another writer changed one the transaction writes nothing, the store
// forgets everything it knew and reads the keys from etcd as before. A batch that the known state
// refuses is planned again on keys read afresh before it is refused (the refusal may be stale).
//
// After load() the store knows every such key (complete()): a key it does not hold is absent. Jobs
// are known by their tenant and idempotency key only (the plan reads no more of a stored job), so
// this costs some tens of bytes per job, not a copy of the documents.
//
// Index in memory (a fenced store's, etcd_store.h): the idempotency-key index entries are not
// keys in etcd but derived from the jobs found (found_job) and kept from the plans committed, as
// if they were; stored index entries are not taken (found() skips them). Such an index is only
// right while complete(): after forget(), the store loads again rather than read its keys.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/etcd_batch_plan.h"
#include "store/etcd_keys.h"
#include "store/store.h"

namespace tidepool {

class EtcdKnownKeys {
 public:
  EtcdKnownKeys(etcd_keys::Layout layout, bool job_key_index_in_memory);

  // What is known of `keys`: those known (present or, when complete, absent) go into `state`
  // (absent ones are left out of it, as a read leaves them), the others are returned, to be read.
  [[nodiscard]] std::vector<std::string> lookup(const std::vector<std::string>& keys,
                                                etcd_plan::ReadState& state) const;

  // Keys read from etcd: `read` holds those found; the other `keys` were absent.
  void learn(const std::vector<std::string>& keys, const etcd_plan::ReadState& read);
  // load() reads every collection that plans read, at one revision: restart() drops what was
  // known, found() adds each key read (others are taken as wanted), and complete() holds once
  // done() is called; if the load fails before, forget().
  void restart();
  void found(const std::string& key, const std::string& value, std::int64_t mod_revision);
  // The same for a job load() decoded already (its value is not decoded a second time).
  void found_job(const std::string& key, const JobRecord& job, std::int64_t mod_revision);
  void done() { complete_ = true; }
  // A transaction of `plan` succeeded at `revision`: what it wrote is now known.
  void committed(const etcd_plan::Plan& plan, std::int64_t revision);
  // Everything known is dropped (a transaction found a key changed by someone else).
  void forget();

  [[nodiscard]] bool complete() const { return complete_; }
  [[nodiscard]] std::size_t size() const { return values_.size(); }
  // The collections plans read.
  [[nodiscard]] const std::vector<etcd_keys::KeyRange>& collections() const { return wanted_; }

 private:
  // Whether `key` is one that plans read (and so is worth knowing).
  [[nodiscard]] bool wanted(const std::string& key) const;
  // The value kept for `key`: a job's tenant and idempotency key only, other values whole.
  [[nodiscard]] std::string kept(const std::string& key, const std::string& value) const;
  void keep(const std::string& key, const etcd_plan::ReadValue& value);

  etcd_keys::Layout layout_;
  bool job_key_index_in_memory_;
  std::vector<etcd_keys::KeyRange> wanted_;  // the collections plans read
  // Known keys: value and mod_revision; mod_revision 0 means known to be absent.
  std::map<std::string, etcd_plan::ReadValue> values_;
  bool complete_ = false;
};

}  // namespace tidepool
