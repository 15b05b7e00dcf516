// Where the etcd store keeps each record: one key per record under a prefix, grouped so that each
// collection is one contiguous key range that a single Range request reads whole.
//
//   <prefix>/jobs/<id, 20 digits>          StoredJob          (zero-padded: byte order = id order)
//   <prefix>/events/<seq, 20 digits>       StoredEvent: the events of one commit, under the
//                                          last one's seq
//   <prefix>/ledger/<seq, 20 digits>       StoredLedgerEntry
//   <prefix>/tokens/<id>                   StoredToken        (ids as given: byte order)
//   <prefix>/nodes/<key>                   the document
//   <prefix>/settings/<key>                the document
//   <prefix>/meta/last_event_seq           decimal; absent: 0
//   <prefix>/meta/last_ledger_seq          decimal; absent: 0
//   <prefix>/index/job_key/<hex tenant>/<idempotency key>   the holding job's id, decimal
//                                          (only an unfenced store writes these: etcd_store.h)
//   <prefix>/index/token_hash/<hash>       the holding token's id
//
// The tenant of an idempotency-key index entry is hex-encoded so that no tenant and key pair can
// spell another's entry. Ids and seqs are positive (commit refuses the others), so 20 digits hold
// every one in order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tidepool::etcd_keys {

// A collection's keys: [begin, end) in etcd's byte order.
struct KeyRange {
  std::string begin;
  std::string end;
};

class Layout {
 public:
  explicit Layout(std::string prefix) : prefix_(std::move(prefix)) {}

  [[nodiscard]] std::string job(std::int64_t id) const;
  [[nodiscard]] std::string event(std::int64_t seq) const;
  [[nodiscard]] std::string ledger(std::int64_t seq) const;
  [[nodiscard]] std::string token(std::string_view id) const;
  [[nodiscard]] std::string node(std::string_view key) const;
  [[nodiscard]] std::string setting(std::string_view key) const;
  [[nodiscard]] std::string last_event_seq() const;
  [[nodiscard]] std::string last_ledger_seq() const;
  [[nodiscard]] std::string job_key_index(std::string_view tenant, std::string_view key) const;
  [[nodiscard]] std::string token_hash_index(std::string_view hash) const;

  [[nodiscard]] KeyRange jobs() const { return collection("jobs/"); }
  [[nodiscard]] KeyRange events() const { return collection("events/"); }
  [[nodiscard]] KeyRange ledger() const { return collection("ledger/"); }
  [[nodiscard]] KeyRange tokens() const { return collection("tokens/"); }
  [[nodiscard]] KeyRange nodes() const { return collection("nodes/"); }
  [[nodiscard]] KeyRange settings() const { return collection("settings/"); }
  [[nodiscard]] KeyRange meta() const { return collection("meta/"); }
  // Both indexes (job_key and token_hash).
  [[nodiscard]] KeyRange indexes() const { return collection("index/"); }
  [[nodiscard]] KeyRange job_key_indexes() const { return collection("index/job_key/"); }
  [[nodiscard]] KeyRange token_hash_indexes() const { return collection("index/token_hash/"); }
  // Everything the store wrote.
  [[nodiscard]] KeyRange all() const;

  // The part of `key` after the collection's begin (`key` must be in the range).
  [[nodiscard]] static std::string_view suffix(const KeyRange& range, std::string_view key);

 private:
  [[nodiscard]] KeyRange collection(std::string_view name) const;

  std::string prefix_;
};

// The key that ends the range of every key starting with `prefix`, as etcd clients compute it: the
// prefix with its last byte below 0xff incremented and the rest cut off; "\0" (the end of the
// keyspace) when every byte is 0xff.
[[nodiscard]] std::string prefix_end(std::string_view prefix);

// 20 decimal digits, zero-padded; `number` must not be negative.
[[nodiscard]] std::string padded(std::int64_t number);
// The number a padded() or decimal text spells; nullopt for anything else.
[[nodiscard]] std::optional<std::int64_t> parse_number(std::string_view text);

}  // namespace tidepool::etcd_keys
