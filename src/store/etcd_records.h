// The bytes the etcd store writes for each record (etcd/stored_records.proto), and back. The id or
// seq of a record is in its key (etcd_keys.h), so decoding takes it from there.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "store/store.h"

namespace tidepool::etcd_records {

[[nodiscard]] std::string encode(const JobRecord& job);
// A run of events of consecutive seqs, stored under the key of the last one's seq (one key per
// commit: etcd's cost grows with the keys a transaction writes).
[[nodiscard]] std::string encode(std::span<const EventRecord> run);
[[nodiscard]] std::string encode(const TokenRecord& token);
[[nodiscard]] std::string encode(const LedgerRecord& entry);

// Errors name the key whose value could not be read.
[[nodiscard]] Result<JobRecord> decode_job(std::int64_t id, std::string_view key,
                                           const std::string& value);
// The events of a run stored under the key of seq `last`, in seq order.
[[nodiscard]] Result<std::vector<EventRecord>> decode_events(std::int64_t last,
                                                             std::string_view key,
                                                             const std::string& value);
[[nodiscard]] Result<TokenRecord> decode_token(std::string id, std::string_view key,
                                               const std::string& value);
[[nodiscard]] Result<LedgerRecord> decode_ledger(std::int64_t seq, std::string_view key,
                                                 const std::string& value);

}  // namespace tidepool::etcd_records
