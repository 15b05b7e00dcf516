#include "server/event_feed.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

// The stream as a store keeps it: events 1..n, read back by seq.
class EventsOnlyStore final : public Store {
 public:
  Result<Snapshot> load() override { return Snapshot{}; }
  Result<void> commit(const Batch& batch) override {
    events.insert(events.end(), batch.events.begin(), batch.events.end());
    return {};
  }
  Result<std::vector<EventRecord>> events_after(std::int64_t after, int limit) override {
    ++reads;
    std::vector<EventRecord> out;
    for (const EventRecord& e : events) {
      if (e.seq > after && std::cmp_less(out.size(), limit)) out.push_back(e);
    }
    return out;
  }
  std::vector<EventRecord> events;
  int reads = 0;
};

// Events 1..count, event i at 1000 * i ms (two per second from 10 on: 10 and 11 share a time).
std::vector<EventRecord> stream(int count) {
  std::vector<EventRecord> out;
  for (int i = 1; i <= count; ++i) {
    out.push_back({i, 1000LL * (i >= 11 ? i - 1 : i), "job.submitted", "{}"});
  }
  return out;
}

TEST(EventFeedTest, SeqBeforeFindsTheLastEventBeforeATimeInMemoryAndInTheStore) {
  EventsOnlyStore store;
  Batch batch;
  batch.events = stream(1000);
  ASSERT_TRUE(store.commit(batch).has_value());
  EventFeed feed(store, 100);  // memory keeps events 901..1000
  feed.reset(0);
  feed.publish(batch.events);
  for (std::int64_t at : {0LL, 1LL, 1000LL, 1500LL, 10'000LL, 10'001LL, 500'000LL, 899'000LL,
                          900'000LL, 950'500LL, 999'000LL, 5'000'000LL}) {
    std::int64_t want = 0;
    for (const EventRecord& e : store.events) {
      if (e.at_ms < at) want = e.seq;
    }
    auto got = feed.seq_before(instant_from_unix_ms(at));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, want) << "at " << at;
  }
  // From memory without reading the store; from the store in O(log n) reads.
  store.reads = 0;
  EXPECT_EQ(*feed.seq_before(instant_from_unix_ms(950'500)), 951);
  EXPECT_EQ(store.reads, 0);
  EXPECT_EQ(*feed.seq_before(instant_from_unix_ms(500'000)), 500);
  EXPECT_LE(store.reads, 11);
}

TEST(EventFeedTest, SeqBeforeOfAnEmptyStreamIsZero) {
  EventsOnlyStore store;
  EventFeed feed(store, 100);
  feed.reset(0);
  EXPECT_EQ(*feed.seq_before(instant_from_unix_ms(12345)), 0);
}

}  // namespace
}  // namespace tidepool
