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

std::string encode(const EventRecord& event) {
  etcd_store::StoredEvent stored;
  stored.set_at_ms(event.at_ms);
  stored.set_kind(event.kind);
  stored.set_document(event.document);
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

Result<EventRecord> decode_event(std::int64_t seq, std::string_view key, const std::string& value) {
  etcd_store::StoredEvent stored;
  if (!stored.ParseFromString(value)) return std::unexpected(unreadable(key));
  return EventRecord{.seq = seq,
                     .at_ms = stored.at_ms(),
                     .kind = std::move(*stored.mutable_kind()),
                     .document = std::move(*stored.mutable_document())};
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
