#include "store/etcd_records.h"

#include <fmt/format.h>

#include <utility>

#include "store/etcd/stored_records.pb.h"

namespace tidepool::etcd_records {
namespace {

Error unreadable(std::string_view key) {
  return Error{"etcd store", fmt::format("the value of key {:?} is not a stored record", key)};
}

}  // namespace

std::string encode(const JobRecord& job) {
  etcd_store::StoredJob stored;
  stored.set_tenant(job.tenant);
  stored.set_queue(job.queue);
  stored.set_state(job.state);
  stored.set_idempotency_key(job.idempotency_key);
  stored.set_document(job.document);
  return stored.SerializeAsString();
}

std::string encode(std::span<const EventRecord> run) {
  etcd_store::StoredEvent stored;
  for (std::size_t i = 0; i < run.size(); ++i) {
    etcd_store::StoredEvent& at = i == 0 ? stored : *stored.add_following();
    at.set_at_ms(run[i].at_ms);
    at.set_kind(run[i].kind);
    at.set_document(run[i].document);
  }
  return stored.SerializeAsString();
}

std::string encode(const TokenRecord& token) {
  etcd_store::StoredToken stored;
  stored.set_hash(token.hash);
  stored.set_role(token.role);
  stored.set_tenant(token.tenant);
  stored.set_node(token.node);
  stored.set_description(token.description);
  stored.set_created_ms(token.created_ms);
  stored.set_revoked(token.revoked);
  return stored.SerializeAsString();
}

std::string encode(const LedgerRecord& entry) {
  etcd_store::StoredLedgerEntry stored;
  stored.set_at(entry.at);
  stored.set_tenant(entry.tenant);
  stored.set_document(entry.document);
  return stored.SerializeAsString();
}

Result<JobRecord> decode_job(std::int64_t id, std::string_view key, const std::string& value) {
  etcd_store::StoredJob stored;
  if (!stored.ParseFromString(value)) return std::unexpected(unreadable(key));
  return JobRecord{.id = id,
                   .tenant = std::move(*stored.mutable_tenant()),
                   .queue = std::move(*stored.mutable_queue()),
                   .state = std::move(*stored.mutable_state()),
                   .idempotency_key = std::move(*stored.mutable_idempotency_key()),
                   .document = std::move(*stored.mutable_document())};
}

Result<std::vector<EventRecord>> decode_events(std::int64_t last, std::string_view key,
                                               const std::string& value) {
  etcd_store::StoredEvent stored;
  if (!stored.ParseFromString(value)) return std::unexpected(unreadable(key));
  const auto count = static_cast<std::int64_t>(stored.following_size()) + 1;
  if (last < count) return std::unexpected(unreadable(key));  // seqs start at 1
  std::vector<EventRecord> run;
  run.reserve(static_cast<std::size_t>(count));
  auto take = [&](etcd_store::StoredEvent& event) {
    run.push_back(EventRecord{.seq = last - count + 1 + static_cast<std::int64_t>(run.size()),
                              .at_ms = event.at_ms(),
                              .kind = std::move(*event.mutable_kind()),
                              .document = std::move(*event.mutable_document())});
  };
  take(stored);
  for (etcd_store::StoredEvent& event : *stored.mutable_following()) take(event);
  return run;
}

Result<TokenRecord> decode_token(std::string id, std::string_view key, const std::string& value) {
  etcd_store::StoredToken stored;
  if (!stored.ParseFromString(value)) return std::unexpected(unreadable(key));
  return TokenRecord{.id = std::move(id),
                     .hash = std::move(*stored.mutable_hash()),
                     .role = std::move(*stored.mutable_role()),
                     .tenant = std::move(*stored.mutable_tenant()),
                     .node = std::move(*stored.mutable_node()),
                     .description = std::move(*stored.mutable_description()),
                     .created_ms = stored.created_ms(),
                     .revoked = stored.revoked()};
}

Result<LedgerRecord> decode_ledger(std::int64_t seq, std::string_view key,
                                   const std::string& value) {
  etcd_store::StoredLedgerEntry stored;
  if (!stored.ParseFromString(value)) return std::unexpected(unreadable(key));
  return LedgerRecord{.seq = seq,
                      .at = stored.at(),
                      .tenant = std::move(*stored.mutable_tenant()),
                      .document = std::move(*stored.mutable_document())};
}

}  // namespace tidepool::etcd_records
