#include "store/memory_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>

#include "store/ledger_rules.h"

namespace tidepool {
namespace {

constexpr const char* kField = "memory store";

}  // namespace

// What the records of a failing batch replaced, to put back in reverse order. Nodes and settings
// need no entry: they have no rules and are written only once everything else has passed.
struct MemoryStore::Undo {
  std::vector<std::pair<std::int64_t, std::optional<JobRecord>>> jobs;
  std::int64_t last_event = 0;                                 // events after it: appended
  std::optional<std::map<std::int64_t, EventRecord>> events;   // when the batch drops some
  std::optional<std::map<std::int64_t, LedgerRecord>> ledger;  // when the batch changes it
  std::int64_t last_ledger_seq = 0;
  std::vector<std::pair<std::string, std::optional<TokenRecord>>> tokens;
};

Result<void> MemoryStore::commit(const Batch& batch) {
  if (batch.empty()) return {};
  std::lock_guard lock(mutex_);
  Undo undo;
  undo.last_event = events_.empty() ? 0 : events_.rbegin()->first;
  if (batch.events_dropped_through != 0) undo.events = events_;
  if (!batch.ledger.empty() || !batch.ledger_folds.empty()) undo.ledger = ledger_;
  undo.last_ledger_seq = last_ledger_seq_;
  auto applied = apply(batch, undo);
  if (!applied) rollback(undo);
  return applied;
}

// Record by record in store.h's order, each checked against what the ones before it left, as
// SQLite checks its constraints statement by statement.
Result<void> MemoryStore::apply(const Batch& batch, Undo& undo) {
  for (const JobRecord& job : batch.jobs) {
    if (job.id <= 0) return fail(kField, fmt::format("job id {} is not positive", job.id));
    if (job.document.empty()) {
      return fail(kField,
                  fmt::format("job {} has no document (a batch committed unsealed?)", job.id));
    }
    if (!job.idempotency_key.empty()) {
      const auto holder = job_by_key_.find({job.tenant, job.idempotency_key});
      if (holder != job_by_key_.end() && holder->second != job.id) {
        return fail(
            kField,
            fmt::format("writing job {}: job {} of tenant {} has the idempotency key \"{}\"",
                        job.id, holder->second, job.tenant, job.idempotency_key));
      }
    }
    const auto stored = jobs_.find(job.id);
    undo.jobs.emplace_back(
        job.id, stored == jobs_.end() ? std::nullopt : std::optional<JobRecord>(stored->second));
    put_job(job.id, &job);
  }

  for (const std::int64_t id : batch.jobs_removed) {
    if (id <= 0) return fail(kField, fmt::format("removed job id {} is not positive", id));
    const auto stored = jobs_.find(id);
    if (stored == jobs_.end()) continue;
    undo.jobs.emplace_back(id, stored->second);
    put_job(id, nullptr);
  }

  auto last = events_last_after_drop(events_.empty() ? 0 : events_.rbegin()->first,
                                     batch.events_dropped_through, kField);
  if (!last) return std::unexpected(last.error());
  if (!events_.empty()) {
    // Every event through the seq dropped, but the last stored one.
    events_.erase(events_.begin(),
                  events_.upper_bound(std::min(batch.events_dropped_through, *last - 1)));
  }
  for (const EventRecord& event : batch.events) {
    if (auto refused = event_append_refusal(event.seq, *last)) return fail(kField, *refused);
    events_.emplace(event.seq, event);
    *last = event.seq;
  }

  for (const LedgerRecord& entry : batch.ledger) {
    if (auto refused = ledger_append_refusal(entry.seq, last_ledger_seq_)) {
      return fail(kField, *refused);
    }
    ledger_[entry.seq] = entry;
    last_ledger_seq_ = entry.seq;
  }

  for (const LedgerFoldRecord& fold : batch.ledger_folds) {
    if (auto refused = ledger_fold_refusal(fold, last_ledger_seq_)) return fail(kField, *refused);
    ledger_.erase(ledger_.lower_bound(fold.first_seq), ledger_.upper_bound(fold.last_seq));
    for (const LedgerRecord& entry : fold.carried) ledger_[entry.seq] = entry;
  }

  for (const TokenRecord& token : batch.tokens) {
    const auto holder = token_by_hash_.find(token.hash);
    if (holder != token_by_hash_.end() && holder->second != token.id) {
      return fail(kField, fmt::format("writing token {}: token {} has the same hash", token.id,
                                      holder->second));
    }
    const auto stored = tokens_.find(token.id);
    undo.tokens.emplace_back(token.id, stored == tokens_.end()
                                           ? std::nullopt
                                           : std::optional<TokenRecord>(stored->second));
    put_token(token.id, &token);
  }

  for (const KeyedRecord& node : batch.nodes) nodes_[node.key] = node.document;
  for (const KeyedRecord& setting : batch.settings) settings_[setting.key] = setting.document;
  return {};
}

void MemoryStore::rollback(const Undo& undo) {
  for (auto it = undo.jobs.rbegin(); it != undo.jobs.rend(); ++it) {
    put_job(it->first, it->second ? &*it->second : nullptr);
  }
  if (undo.events) {
    events_ = *undo.events;
  } else {
    events_.erase(events_.upper_bound(undo.last_event), events_.end());
  }
  if (undo.ledger) ledger_ = *undo.ledger;
  last_ledger_seq_ = undo.last_ledger_seq;
  for (auto it = undo.tokens.rbegin(); it != undo.tokens.rend(); ++it) {
    put_token(it->first, it->second ? &*it->second : nullptr);
  }
}

// Replaces the job `id` with `job` (nullptr: removes it), keeping job_by_key_ in step.
void MemoryStore::put_job(std::int64_t id, const JobRecord* job) {
  if (const auto stored = jobs_.find(id); stored != jobs_.end()) {
    if (!stored->second.idempotency_key.empty()) {
      job_by_key_.erase({stored->second.tenant, stored->second.idempotency_key});
    }
    jobs_.erase(stored);
  }
  if (job == nullptr) return;
  jobs_.emplace(id, *job);
  if (!job->idempotency_key.empty()) job_by_key_[{job->tenant, job->idempotency_key}] = id;
}

// Replaces the token `id` with `token` (nullptr: removes it), keeping token_by_hash_ in step.
void MemoryStore::put_token(const std::string& id, const TokenRecord* token) {
  if (const auto stored = tokens_.find(id); stored != tokens_.end()) {
    token_by_hash_.erase(stored->second.hash);
    tokens_.erase(stored);
  }
  if (token == nullptr) return;
  tokens_.emplace(id, *token);
  token_by_hash_[token->hash] = id;
}

Result<Snapshot> MemoryStore::load() {
  std::lock_guard lock(mutex_);
  Snapshot snapshot;
  snapshot.jobs.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) snapshot.jobs.push_back(job);
  snapshot.tokens.reserve(tokens_.size());
  for (const auto& [id, token] : tokens_) snapshot.tokens.push_back(token);
  for (const auto& [key, document] : nodes_) snapshot.nodes.push_back({key, document});
  for (const auto& [key, document] : settings_) snapshot.settings.push_back({key, document});
  snapshot.last_event_seq = events_.empty() ? 0 : events_.rbegin()->first;
  snapshot.ledger.reserve(ledger_.size());
  for (const auto& [seq, entry] : ledger_) snapshot.ledger.push_back(entry);
  return snapshot;
}

Result<std::vector<EventRecord>> MemoryStore::events_after(std::int64_t after, int limit) {
  if (limit < 0) return fail("limit", fmt::format("must not be negative, got {}", limit));
  std::vector<EventRecord> events;
  if (limit == 0) return events;
  std::lock_guard lock(mutex_);
  for (auto it = events_.upper_bound(after);
       it != events_.end() && std::cmp_less(events.size(), limit); ++it) {
    events.push_back(it->second);
  }
  return events;
}

}  // namespace tidepool
