#include "store/etcd_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <utility>

#include "store/etcd_batch_plan.h"
#include "store/etcd_client.h"
#include "store/etcd_keys.h"
#include "store/etcd_known_keys.h"
#include "store/etcd_records.h"

namespace tidepool {
namespace {

constexpr const char* kStoreField = "etcd store";
// Reads and plans of one commit() before it gives up on a key that keeps changing under it.
constexpr int kCommitAttempts = 5;
// What etcd adds to a Txn before it checks --max-request-bytes (its raft request's header).
constexpr std::int64_t kRequestOverheadBytes = 1024;

etcdserverpb::RequestOp range_op(const std::string& key) {
  etcdserverpb::RequestOp op;
  op.mutable_request_range()->set_key(key);
  return op;
}

class EtcdStore final : public Store {
 public:
  EtcdStore(EtcdStoreOptions options, std::unique_ptr<EtcdClient> client)
      : options_(std::move(options)),
        layout_(options_.prefix),
        known_(layout_, options_.guard.has_value()),
        client_(std::move(client)) {}

  Result<Snapshot> load() override {
    std::lock_guard lock(mutex_);
    return load_unlocked();
  }
  Result<void> commit(const Batch& batch) override;
  CommitLimits commit_limits() const override {
    return {.writes = options_.max_txn_ops, .bytes = options_.max_request_bytes};
  }
  Result<std::vector<EventRecord>> events_after(std::int64_t after, int limit) override;

 private:
  Result<Snapshot> load_unlocked();
  Result<etcdserverpb::RangeResponse> read_range(const etcd_keys::KeyRange& range,
                                                 std::int64_t revision, bool count_only = false);
  // A fenced store's index of idempotency keys is in memory (known_), not in etcd.
  [[nodiscard]] bool job_key_index_in_memory() const { return options_.guard.has_value(); }
  Result<etcd_plan::ReadState> read_keys(const std::vector<std::string>& keys);
  Result<etcdserverpb::TxnRequest> transaction(const etcd_plan::Plan& plan) const;

  const EtcdStoreOptions options_;
  const etcd_keys::Layout layout_;
  EtcdKnownKeys known_;  // under mutex_
  // Under mutex_: the load found idempotency-key index entries in etcd that a fenced store does
  // not keep there (written by an unfenced store: a restore); the next commit deletes them.
  bool stored_job_key_index_ = false;
  std::unique_ptr<EtcdClient> client_;
  std::mutex mutex_;  // serializes load() and commit()
};

Result<etcdserverpb::RangeResponse> EtcdStore::read_range(const etcd_keys::KeyRange& range,
                                                          std::int64_t revision, bool count_only) {
  etcdserverpb::RangeRequest request;
  request.set_key(range.begin);
  request.set_range_end(range.end);
  request.set_revision(revision);
  request.set_count_only(count_only);
  return client_->range(request);
}

// Every collection at one revision, the first range's, so the snapshot is of one moment.
// What the commits depend on is learnt on the way (known_), whole once every range was read.
Result<Snapshot> EtcdStore::load_unlocked() {
  Snapshot snapshot;
  known_.restart();
  const auto learn = [&](const etcdserverpb::RangeResponse& response) {
    for (const mvccpb::KeyValue& kv : response.kvs()) {
      known_.found(kv.key(), kv.value(), kv.mod_revision());
    }
  };

  auto jobs = read_range(layout_.jobs(), 0);
  if (!jobs) return std::unexpected(jobs.error());
  const std::int64_t revision = jobs->header().revision();
  for (const mvccpb::KeyValue& kv : jobs->kvs()) {
    const auto id = etcd_keys::parse_number(etcd_keys::Layout::suffix(layout_.jobs(), kv.key()));
    if (!id) return fail(kStoreField, fmt::format("key {:?} names no job id", kv.key()));
    auto job = etcd_records::decode_job(*id, kv.key(), kv.value());
    if (!job) return std::unexpected(job.error());
    known_.found_job(kv.key(), *job, kv.mod_revision());
    snapshot.jobs.push_back(std::move(*job));
  }

  auto tokens = read_range(layout_.tokens(), revision);
  if (!tokens) return std::unexpected(tokens.error());
  learn(*tokens);
  for (const mvccpb::KeyValue& kv : tokens->kvs()) {
    auto token = etcd_records::decode_token(
        std::string(etcd_keys::Layout::suffix(layout_.tokens(), kv.key())), kv.key(), kv.value());
    if (!token) return std::unexpected(token.error());
    snapshot.tokens.push_back(std::move(*token));
  }

  for (auto [range, records] : {std::pair{layout_.nodes(), &snapshot.nodes},
                                std::pair{layout_.settings(), &snapshot.settings}}) {
    auto keyed = read_range(range, revision);
    if (!keyed) return std::unexpected(keyed.error());
    for (const mvccpb::KeyValue& kv : keyed->kvs()) {
      records->push_back({std::string(etcd_keys::Layout::suffix(range, kv.key())), kv.value()});
    }
  }

  auto ledger = read_range(layout_.ledger(), revision);
  if (!ledger) return std::unexpected(ledger.error());
  for (const mvccpb::KeyValue& kv : ledger->kvs()) {
    const auto seq = etcd_keys::parse_number(etcd_keys::Layout::suffix(layout_.ledger(), kv.key()));
    if (!seq) return fail(kStoreField, fmt::format("key {:?} names no ledger seq", kv.key()));
    auto entry = etcd_records::decode_ledger(*seq, kv.key(), kv.value());
    if (!entry) return std::unexpected(entry.error());
    snapshot.ledger.push_back(std::move(*entry));
  }

  auto meta = read_range(layout_.meta(), revision);
  if (!meta) return std::unexpected(meta.error());
  learn(*meta);
  for (const mvccpb::KeyValue& kv : meta->kvs()) {
    if (kv.key() != layout_.last_event_seq()) continue;
    const auto seq = etcd_keys::parse_number(kv.value());
    if (!seq) return fail(kStoreField, fmt::format("key {:?} holds no seq", kv.key()));
    snapshot.last_event_seq = *seq;
  }

  if (job_key_index_in_memory()) {
    auto hashes = read_range(layout_.token_hash_indexes(), revision);
    if (!hashes) return std::unexpected(hashes.error());
    learn(*hashes);
    auto job_keys = read_range(layout_.job_key_indexes(), revision, /*count_only=*/true);
    if (!job_keys) return std::unexpected(job_keys.error());
    stored_job_key_index_ = job_keys->count() > 0;
  } else {
    auto indexes = read_range(layout_.indexes(), revision);
    if (!indexes) return std::unexpected(indexes.error());
    learn(*indexes);
  }
  known_.done();
  return snapshot;
}

// The keys in read-only Txns of at most max_txn_ops ranges each. They need not be of one revision:
// the commit's compares catch any key that changed after it was read.
Result<etcd_plan::ReadState> EtcdStore::read_keys(const std::vector<std::string>& keys) {
  etcd_plan::ReadState read;
  const auto chunk = static_cast<std::size_t>(std::max<std::int64_t>(1, options_.max_txn_ops));
  for (std::size_t first = 0; first < keys.size(); first += chunk) {
    etcdserverpb::TxnRequest request;
    const std::size_t end = std::min(keys.size(), first + chunk);
    for (std::size_t i = first; i < end; ++i) *request.add_success() = range_op(keys[i]);
    auto response = client_->txn(request, /*may_resend=*/true);
    if (!response) return std::unexpected(response.error());
    for (const etcdserverpb::ResponseOp& op : response->responses()) {
      for (const mvccpb::KeyValue& kv : op.response_range().kvs()) {
        read[kv.key()] = etcd_plan::ReadValue{kv.value(), kv.mod_revision()};
      }
    }
  }
  return read;
}

Result<etcdserverpb::TxnRequest> EtcdStore::transaction(const etcd_plan::Plan& plan) const {
  etcdserverpb::TxnRequest request;
  const etcd_keys::KeyRange job_keys = layout_.job_key_indexes();
  // Keys of the index in memory are neither compared nor written (the guard keeps other writers
  // out, and known_ holds the index).
  const auto in_memory = [&](const std::string& key) {
    return job_key_index_in_memory() && key >= job_keys.begin && key < job_keys.end;
  };
  for (const auto& [key, mod_revision] : plan.unchanged) {
    if (in_memory(key)) continue;
    etcdserverpb::Compare& compare = *request.add_compare();
    compare.set_key(key);
    compare.set_target(etcdserverpb::Compare::MOD);
    compare.set_result(etcdserverpb::Compare::EQUAL);
    compare.set_mod_revision(mod_revision);
  }
  if (options_.guard) {
    etcdserverpb::Compare& compare = *request.add_compare();
    compare.set_key(options_.guard->key);
    compare.set_target(etcdserverpb::Compare::MOD);
    compare.set_result(etcdserverpb::Compare::EQUAL);
    compare.set_mod_revision(options_.guard->mod_revision);
    // On failure, the guard's revision tells a lost leadership from a changed key.
    *request.add_failure() = range_op(options_.guard->key);
  }
  for (const auto& [key, value] : plan.writes) {
    if (in_memory(key)) continue;
    etcdserverpb::RequestOp& op = *request.add_success();
    if (value) {
      op.mutable_request_put()->set_key(key);
      op.mutable_request_put()->set_value(*value);
    } else {
      op.mutable_request_delete_range()->set_key(key);
    }
  }
  auto ranges = plan.deleted_ranges;
  if (job_key_index_in_memory() && stored_job_key_index_)
    ranges.emplace_back(job_keys.begin, job_keys.end);
  for (const auto& [key, end] : ranges) {
    etcdserverpb::DeleteRangeRequest& erase =
        *request.add_success()->mutable_request_delete_range();
    erase.set_key(key);
    erase.set_range_end(end);
  }
  const auto compares = static_cast<std::int64_t>(request.compare_size());
  const auto writes = static_cast<std::int64_t>(request.success_size());
  if (std::max(compares, writes) > options_.max_txn_ops) {
    return fail(kBatchTooLargeField,
                fmt::format("the batch is too large for one etcd transaction: {} writes and {} "
                            "compares, etcd allows {} of each (--max-txn-ops); commit smaller "
                            "batches or raise etcd's limit and the store's max_txn_ops together",
                            writes, compares, options_.max_txn_ops));
  }
  const auto bytes = static_cast<std::int64_t>(request.ByteSizeLong());
  if (bytes + kRequestOverheadBytes > options_.max_request_bytes) {
    return fail(kBatchTooLargeField,
                fmt::format("the batch is too large for one etcd transaction: {} bytes, etcd "
                            "allows {} (--max-request-bytes); commit smaller batches or raise "
                            "etcd's limit and the store's max_request_bytes together",
                            bytes + kRequestOverheadBytes, options_.max_request_bytes));
  }
  return request;
}

// Planned on what is known (no read), else on the unknown keys read first. A plan refused on what
// was known is planned again on every key read afresh (the refusal may rest on a stale guess); a
// transaction that finds a key changed drops what is known and is tried again. A fenced store,
// whose index is in memory, reads everything again (a load) instead of some keys.
Result<void> EtcdStore::commit(const Batch& batch) {
  if (batch.empty()) return {};
  std::lock_guard lock(mutex_);
  const std::vector<std::string> keys = etcd_plan::keys_to_read(batch, layout_);
  bool read_every_key = false;
  bool loaded = false;
  for (int attempt = 1; attempt <= kCommitAttempts; ++attempt) {
    if (job_key_index_in_memory() && !known_.complete()) {
      if (auto reloaded = load_unlocked(); !reloaded) {
        known_.forget();
        return std::unexpected(reloaded.error());
      }
      loaded = true;
    }
    etcd_plan::ReadState read;
    const std::vector<std::string> to_read = read_every_key ? keys : known_.lookup(keys, read);
    if (!to_read.empty()) {
      auto fresh = read_keys(to_read);
      if (!fresh) return std::unexpected(fresh.error());
      known_.learn(to_read, *fresh);
      read.merge(*fresh);
    }
    auto plan = etcd_plan::plan(batch, layout_, read, kStoreField);
    if (!plan && job_key_index_in_memory()) {
      if (loaded) return std::unexpected(plan.error());
      known_.forget();
      continue;
    }
    if (!plan) {
      if (to_read.size() == keys.size()) return std::unexpected(plan.error());
      read_every_key = true;
      continue;
    }
    auto request = transaction(*plan);
    if (!request) return std::unexpected(request.error());
    auto response = client_->txn(*request, /*may_resend=*/true);
    if (!response) {
      known_.forget();  // the transaction may or may not have been applied
      return std::unexpected(response.error());
    }
    if (response->succeeded()) {
      known_.committed(*plan, response->header().revision());
      if (job_key_index_in_memory()) stored_job_key_index_ = false;  // deleted with it
      return {};
    }
    known_.forget();
    if (options_.guard) {
      std::int64_t now = 0;
      for (const etcdserverpb::ResponseOp& op : response->responses()) {
        for (const mvccpb::KeyValue& kv : op.response_range().kvs()) now = kv.mod_revision();
      }
      if (now != options_.guard->mod_revision) {
        return fail(kLeadershipLostField,
                    fmt::format("leadership lost: the guard key {:?} is at revision {}, not {}; "
                                "the batch was not written",
                                options_.guard->key, now, options_.guard->mod_revision));
      }
    }
  }
  return fail(kStoreField, fmt::format("the keys the batch depends on changed under it {} times "
                                       "(another writer on prefix {:?}?); nothing was written",
                                       kCommitAttempts, options_.prefix));
}

Result<std::vector<EventRecord>> EtcdStore::events_after(std::int64_t after, int limit) {
  if (limit < 0) return fail("limit", fmt::format("must not be negative, got {}", limit));
  std::vector<EventRecord> events;
  if (limit == 0 || after == std::numeric_limits<std::int64_t>::max()) return events;
  const etcd_keys::KeyRange all = layout_.events();
  etcdserverpb::RangeRequest request;
  // Each key holds a run of events under its last seq (etcd_records.h): the first key from seq
  // after + 1 on holds that seq, and `limit` keys hold at least `limit` events.
  request.set_key(layout_.event(std::max<std::int64_t>(after, 0) + 1));
  request.set_range_end(all.end);
  request.set_limit(limit);
  auto response = client_->range(request);
  if (!response) return std::unexpected(response.error());
  for (const mvccpb::KeyValue& kv : response->kvs()) {
    const auto seq = etcd_keys::parse_number(etcd_keys::Layout::suffix(all, kv.key()));
    if (!seq) return fail(kStoreField, fmt::format("key {:?} names no event seq", kv.key()));
    auto run = etcd_records::decode_events(*seq, kv.key(), kv.value());
    if (!run) return std::unexpected(run.error());
    for (EventRecord& event : *run) {
      if (event.seq <= after) continue;
      if (std::cmp_greater_equal(events.size(), limit)) return events;
      events.push_back(std::move(event));
    }
  }
  return events;
}

}  // namespace

Result<std::unique_ptr<Store>> open_etcd_store(EtcdStoreOptions options) {
  if (options.prefix.empty()) return fail("prefix", "must not be empty");
  if (options.max_txn_ops < 1) return fail("max_txn_ops", "must be at least 1");
  const etcd_keys::Layout layout(options.prefix);
  auto client = EtcdClient::connect(options.endpoints, options.tls, layout.last_event_seq(),
                                    options.dial_timeout, options.request_timeout, options.counts,
                                    EtcdClient::Member::kRaftLeader);
  if (!client) return std::unexpected(client.error());
  return std::make_unique<EtcdStore>(std::move(options), std::move(*client));
}

}  // namespace tidepool
