// Tests only: records and batches to commit, a temporary folder for stores that keep files, and
// readable gtest output for the records of store.h. Header only.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "store/store.h"
#include "testing/temp_dir.h"

namespace tidepool {

// gtest prints records with these instead of as bytes.
inline void PrintTo(const JobRecord& job, std::ostream* out) {
  *out << fmt::format("job {{{}, {:?}, {:?}, {:?}, key {:?}, {:?}}}", job.id, job.tenant, job.queue,
                      job.state, job.idempotency_key, job.document);
}
inline void PrintTo(const EventRecord& event, std::ostream* out) {
  *out << fmt::format("event {{{}, {}, {:?}, {:?}}}", event.seq, event.at_ms, event.kind,
                      event.document);
}
inline void PrintTo(const TokenRecord& token, std::ostream* out) {
  *out << fmt::format("token {{{:?}, hash {:?}, {:?}, {:?}, {:?}, {:?}, {}, {}}}", token.id,
                      token.hash, token.role, token.tenant, token.node, token.description,
                      token.created_ms, token.revoked ? "revoked" : "valid");
}
inline void PrintTo(const LedgerRecord& entry, std::ostream* out) {
  *out << fmt::format("ledger {{{}, {}, {:?}, {:?}}}", entry.seq, entry.at, entry.tenant,
                      entry.document);
}
inline void PrintTo(const KeyedRecord& record, std::ostream* out) {
  *out << fmt::format("{{{:?}, {:?}}}", record.key, record.document);
}
inline void PrintTo(const Snapshot& snapshot, std::ostream* out) {
  *out << "snapshot {jobs " << ::testing::PrintToString(snapshot.jobs) << ", tokens "
       << ::testing::PrintToString(snapshot.tokens) << ", nodes "
       << ::testing::PrintToString(snapshot.nodes) << ", settings "
       << ::testing::PrintToString(snapshot.settings) << ", last event seq "
       << snapshot.last_event_seq << ", ledger " << ::testing::PrintToString(snapshot.ledger)
       << "}";
}

namespace test_support {

// A fresh folder in the temporary directory, removed with everything in it at the end of the test.
inline JobRecord job(std::int64_t id, std::string tenant, std::string key = "",
                     std::string state = "pending") {
  return JobRecord{.id = id,
                   .tenant = std::move(tenant),
                   .queue = "default",
                   .state = std::move(state),
                   .idempotency_key = std::move(key),
                   .document = "{\"id\":" + std::to_string(id) + "}"};
}

inline EventRecord event(std::int64_t seq, std::string kind = "job.submitted") {
  return EventRecord{.seq = seq,
                     .at_ms = 1'700'000'000'000 + seq,
                     .kind = std::move(kind),
                     .document = "{\"seq\":" + std::to_string(seq) + "}"};
}

inline TokenRecord token(std::string id, std::string hash, bool revoked = false) {
  return TokenRecord{.id = std::move(id),
                     .hash = std::move(hash),
                     .role = "user",
                     .tenant = "vision",
                     .node = "",
                     .description = "ci token",
                     .created_ms = 1'700'000'000'123,
                     .revoked = revoked};
}

inline LedgerRecord ledger_entry(std::int64_t seq, std::string tenant = "vision") {
  return LedgerRecord{.seq = seq,
                      .at = 1'764'547'200 + 60 * seq,
                      .tenant = std::move(tenant),
                      .document = "{\"seq\":" + std::to_string(seq) + "}"};
}

inline Batch events_batch(std::int64_t first, std::int64_t last) {
  Batch batch;
  for (std::int64_t seq = first; seq <= last; ++seq) batch.events.push_back(event(seq));
  return batch;
}

inline Batch jobs_batch(std::vector<JobRecord> jobs, std::vector<EventRecord> events = {}) {
  Batch batch;
  batch.jobs = std::move(jobs);
  batch.events = std::move(events);
  return batch;
}

inline Batch tokens_batch(std::vector<TokenRecord> tokens) {
  Batch batch;
  batch.tokens = std::move(tokens);
  return batch;
}

// Events and ledger entries to append.
inline Batch appends_batch(std::vector<EventRecord> events, std::vector<LedgerRecord> ledger = {}) {
  Batch batch;
  batch.events = std::move(events);
  batch.ledger = std::move(ledger);
  return batch;
}

inline Snapshot load_or_die(Store& store) {
  auto snapshot = store.load();
  EXPECT_TRUE(snapshot.has_value()) << snapshot.error().message();
  return snapshot ? std::move(*snapshot) : Snapshot{};
}

// Every event of the store, in seq order.
inline std::vector<EventRecord> all_events(Store& store) {
  auto events = store.events_after(0, 1'000'000);
  EXPECT_TRUE(events.has_value()) << events.error().message();
  return events ? std::move(*events) : std::vector<EventRecord>{};
}

// Every kind of record, written out of key order.
inline Batch full_batch() {
  Batch batch;
  batch.jobs = {job(7, "vision", "retry-1"), job(3, "speech")};
  batch.jobs[0].document = "{\"spec\":{\"gpus\":8},\"note\":\"caf\xc3\xa9\"}";
  batch.events = {event(1), event(2, "job.started")};
  batch.tokens = {token("tok-b", "beef"), token("tok-a", "cafe", true)};
  batch.tokens[0].node = "node-17";
  batch.tokens[0].role = "agent";
  batch.nodes = {{"node-2", "{\"gpus\":8}"}, {"node-1", "{}"}};
  batch.settings = {{"tidal", "{\"on\":true}"}, {"quota", ""}};
  batch.ledger = {LedgerRecord{1, 1'764'547'200, "vision", R"({"kind":"charge"})"},
                  LedgerRecord{2, 1'764'547'260, "speech", R"({"kind":"lending-credit"})"}};
  return batch;
}

// What a store holds after committing only full_batch().
inline void expect_full_batch(Store& store) {
  const Batch batch = full_batch();
  const Snapshot snapshot = load_or_die(store);
  EXPECT_EQ(snapshot.jobs, (std::vector{batch.jobs[1], batch.jobs[0]}));
  EXPECT_EQ(snapshot.tokens, (std::vector{batch.tokens[1], batch.tokens[0]}));
  EXPECT_EQ(snapshot.nodes, (std::vector{batch.nodes[1], batch.nodes[0]}));
  EXPECT_EQ(snapshot.settings, (std::vector{batch.settings[1], batch.settings[0]}));
  EXPECT_EQ(snapshot.last_event_seq, 2);
  EXPECT_EQ(snapshot.ledger, batch.ledger);
  EXPECT_EQ(all_events(store), batch.events);
}

}  // namespace test_support
}  // namespace tidepool
