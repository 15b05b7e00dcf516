// A Store kept in memory: the fake of the store seam, for tests of the control plane and as the
// model that every other store is checked against (store_contract_test.cc).
//
// It keeps every promise of store.h but durability: its state lives and dies with the object.
// It refuses what the SQLite store refuses, checking the records of a batch in the same order,
// and a refused batch leaves nothing behind. Errors have the field "memory store" and a reason
// that names the record, as store.h says.
//
// Threads: one mutex guards the whole state, so every method may be called from any thread;
// events_after() waits for a commit in progress and so sees whole batches only.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "store/store.h"

namespace tidepool {

class MemoryStore final : public Store {
 public:
  MemoryStore() = default;

  [[nodiscard]] Result<Snapshot> load() override;
  [[nodiscard]] Result<void> commit(const Batch& batch) override;
  [[nodiscard]] Result<std::vector<EventRecord>> events_after(std::int64_t after,
                                                              int limit) override;

 private:
  struct Undo;

  Result<void> apply(const Batch& batch, Undo& undo);
  void rollback(const Undo& undo);
  void put_job(std::int64_t id, const JobRecord* job);
  void put_token(const std::string& id, const TokenRecord* token);

  std::mutex mutex_;  // guards every member below
  std::map<std::int64_t, JobRecord> jobs_;
  // (tenant, idempotency key) -> the job holding it; jobs without a key are not in it.
  std::map<std::pair<std::string, std::string>, std::int64_t> job_by_key_;
  std::map<std::int64_t, EventRecord> events_;   // by seq: consecutive, from the first kept
  std::map<std::int64_t, LedgerRecord> ledger_;  // by seq
  std::int64_t last_ledger_seq_ = 0;             // the last appended (0: none)
  std::map<std::string, TokenRecord> tokens_;
  std::map<std::string, std::string> token_by_hash_;  // hash -> token id
  std::map<std::string, std::string> nodes_;          // key -> document
  std::map<std::string, std::string> settings_;       // key -> document
};

}  // namespace tidepool
