#include "store/etcd_batch_plan.h"

#include <fmt/format.h>

#include <set>
#include <utility>

#include "store/etcd_records.h"
#include "store/ledger_rules.h"

namespace tidepool::etcd_plan {
namespace {

// The keyspace as the records of the batch so far leave it: what they wrote, over what was read.
class Overlay {
 public:
  explicit Overlay(const ReadState& read) : read_(read) {}

  [[nodiscard]] const std::string* get(const std::string& key) const {
    if (const auto written = writes_.find(key); written != writes_.end()) {
      return written->second ? &*written->second : nullptr;
    }
    const auto stored = read_.find(key);
    return stored == read_.end() ? nullptr : &stored->second.value;
  }
  void put(const std::string& key, std::string value) { writes_[key] = std::move(value); }
  void erase(const std::string& key) { writes_[key] = std::nullopt; }
  // Deletes the keys in [key, end) with one operation: the writes there so far are dropped (etcd
  // refuses a transaction that puts a key it deletes).
  void erase_range(const std::string& key, const std::string& end) {
    writes_.erase(writes_.lower_bound(key), writes_.lower_bound(end));
    ranges_.emplace_back(key, end);
  }

  std::map<std::string, std::optional<std::string>> take_writes() { return std::move(writes_); }
  std::vector<std::pair<std::string, std::string>> take_ranges() { return std::move(ranges_); }

 private:
  const ReadState& read_;
  std::map<std::string, std::optional<std::string>> writes_;
  std::vector<std::pair<std::string, std::string>> ranges_;
};

// The last seq stored under `key` (meta keys hold decimal text; absent: 0).
Result<std::int64_t> last_seq(const Overlay& overlay, const std::string& key,
                              const std::string& field) {
  const std::string* text = overlay.get(key);
  if (text == nullptr) return 0;
  const auto seq = etcd_keys::parse_number(*text);
  if (!seq || *seq < 0) return fail(field, fmt::format("key {:?} holds no seq: {:?}", key, *text));
  return *seq;
}

}  // namespace

std::vector<std::string> keys_to_read(const Batch& batch, const etcd_keys::Layout& layout) {
  std::set<std::string> keys;
  for (const JobRecord& job : batch.jobs) {
    if (job.id <= 0) continue;  // refused before anything is looked up
    keys.insert(layout.job(job.id));
    if (!job.idempotency_key.empty()) {
      keys.insert(layout.job_key_index(job.tenant, job.idempotency_key));
    }
  }
  for (const std::int64_t id : batch.jobs_removed) {
    if (id > 0) keys.insert(layout.job(id));
  }
  if (!batch.events.empty() || batch.events_dropped_through != 0) {
    keys.insert(layout.last_event_seq());
  }
  if (!batch.ledger.empty() || !batch.ledger_folds.empty()) keys.insert(layout.last_ledger_seq());
  for (const TokenRecord& token : batch.tokens) {
    keys.insert(layout.token(token.id));
    keys.insert(layout.token_hash_index(token.hash));
  }
  return {keys.begin(), keys.end()};
}

Result<Plan> plan(const Batch& batch, const etcd_keys::Layout& layout, const ReadState& read,
                  const std::string& field) {
  Overlay overlay(read);

  for (const JobRecord& job : batch.jobs) {
    if (job.id <= 0) return fail(field, fmt::format("job id {} is not positive", job.id));
    if (job.document.empty()) {
      return fail(field,
                  fmt::format("job {} has no document (a batch committed unsealed?)", job.id));
    }
    if (!job.idempotency_key.empty()) {
      const std::string* holder =
          overlay.get(layout.job_key_index(job.tenant, job.idempotency_key));
      if (holder != nullptr && etcd_keys::parse_number(*holder) != job.id) {
        return fail(
            field, fmt::format("writing job {}: job {} of tenant {} has the idempotency key \"{}\"",
                               job.id, *holder, job.tenant, job.idempotency_key));
      }
    }
    const std::string key = layout.job(job.id);
    if (const std::string* stored = overlay.get(key); stored != nullptr) {
      auto old = etcd_records::decode_job(job.id, key, *stored);
      if (!old) return std::unexpected(old.error());
      if (!old->idempotency_key.empty()) {
        overlay.erase(layout.job_key_index(old->tenant, old->idempotency_key));
      }
    }
    overlay.put(key, etcd_records::encode(job));
    if (!job.idempotency_key.empty()) {
      overlay.put(layout.job_key_index(job.tenant, job.idempotency_key), std::to_string(job.id));
    }
  }

  for (const std::int64_t id : batch.jobs_removed) {
    if (id <= 0) return fail(field, fmt::format("removed job id {} is not positive", id));
    const std::string key = layout.job(id);
    const std::string* stored = overlay.get(key);
    if (stored == nullptr) continue;
    auto old = etcd_records::decode_job(id, key, *stored);
    if (!old) return std::unexpected(old.error());
    if (!old->idempotency_key.empty()) {
      overlay.erase(layout.job_key_index(old->tenant, old->idempotency_key));
    }
    overlay.erase(key);
  }

  if (!batch.events.empty() || batch.events_dropped_through != 0) {
    auto stored = last_seq(overlay, layout.last_event_seq(), field);
    if (!stored) return std::unexpected(stored.error());
    auto last = events_last_after_drop(*stored, batch.events_dropped_through, field);
    if (!last) return std::unexpected(last.error());
    // Every key whose run ends at or before the seq dropped, but the last stored event's (a run
    // that goes past it is kept whole): one range.
    const std::int64_t through = std::min(batch.events_dropped_through, *stored - 1);
    if (*stored > 0 && through >= 1) {
      overlay.erase_range(layout.event(1), layout.event(through + 1));
    }
    for (const EventRecord& event : batch.events) {
      if (auto refused = event_append_refusal(event.seq, *last)) return fail(field, *refused);
      *last = event.seq;
    }
    if (!batch.events.empty()) {
      // One key for the batch's events, the last one's seq (etcd_records.h).
      overlay.put(layout.event(*last), etcd_records::encode(batch.events));
      overlay.put(layout.last_event_seq(), std::to_string(*last));
    }
  }

  if (!batch.ledger.empty() || !batch.ledger_folds.empty()) {
    auto last = last_seq(overlay, layout.last_ledger_seq(), field);
    if (!last) return std::unexpected(last.error());
    for (const LedgerRecord& entry : batch.ledger) {
      if (auto refused = ledger_append_refusal(entry.seq, *last)) return fail(field, *refused);
      overlay.put(layout.ledger(entry.seq), etcd_records::encode(entry));
      *last = entry.seq;
    }
    if (!batch.ledger.empty()) overlay.put(layout.last_ledger_seq(), std::to_string(*last));
    for (const LedgerFoldRecord& fold : batch.ledger_folds) {
      if (auto refused = ledger_fold_refusal(fold, *last)) return fail(field, *refused);
      // The carried entries overwrite the last seqs of the run; the rest is one range.
      const std::int64_t carried_from = fold.carried.front().seq;
      if (fold.first_seq < carried_from) {
        overlay.erase_range(layout.ledger(fold.first_seq), layout.ledger(carried_from));
      }
      for (const LedgerRecord& entry : fold.carried) {
        overlay.put(layout.ledger(entry.seq), etcd_records::encode(entry));
      }
    }
  }

  for (const TokenRecord& token : batch.tokens) {
    const std::string* holder = overlay.get(layout.token_hash_index(token.hash));
    if (holder != nullptr && *holder != token.id) {
      return fail(field,
                  fmt::format("writing token {}: token {} has the same hash", token.id, *holder));
    }
    const std::string key = layout.token(token.id);
    if (const std::string* stored = overlay.get(key); stored != nullptr) {
      auto old = etcd_records::decode_token(token.id, key, *stored);
      if (!old) return std::unexpected(old.error());
      overlay.erase(layout.token_hash_index(old->hash));
    }
    overlay.put(key, etcd_records::encode(token));
    overlay.put(layout.token_hash_index(token.hash), token.id);
  }

  for (const KeyedRecord& node : batch.nodes) overlay.put(layout.node(node.key), node.document);
  for (const KeyedRecord& setting : batch.settings) {
    overlay.put(layout.setting(setting.key), setting.document);
  }

  Plan result;
  result.writes = overlay.take_writes();
  result.deleted_ranges = overlay.take_ranges();
  for (const std::string& key : keys_to_read(batch, layout)) {
    const auto stored = read.find(key);
    result.unchanged[key] = stored == read.end() ? 0 : stored->second.mod_revision;
  }
  return result;
}

}  // namespace tidepool::etcd_plan
