#include "core/cost_first.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

ModelOffer offer(std::uint32_t id, std::string name, std::int64_t rps, std::int64_t p95,
                 double price_per_hour, std::int64_t milli_gpus = 1000) {
  ModelOffer o;
  o.model = GpuModelId{id};
  o.name = std::move(name);
  o.replica_milli_gpus = milli_gpus;
  o.throughput_milli_rps = rps * 1000;
  o.p95_latency_ms = p95;
  o.price_per_gpu_hour = static_cast<Micros>(price_per_hour * kMicrosPerUnit);
  return o;
}

TEST(CostFirstTest, PricePerRequestIsTheReplicasGpuHourOverItsRequests) {
  // 3.60 an hour for 10 requests a second: 36,000 requests an hour, 0.10 per 1000.
  EXPECT_EQ(price_per_thousand_requests(offer(0, "A100", 10, 50, 3.6)), 100'000);
  // Half a GPU per replica: half the price.
  EXPECT_EQ(price_per_thousand_requests(offer(0, "A100", 10, 50, 3.6, 500)), 50'000);
  EXPECT_FALSE(price_per_thousand_requests(offer(0, "A100", 0, 50, 3.6)).has_value());
}

TEST(CostFirstTest, TheCheapestPerRequestThatMeetsTheTargetAndHasRoom) {
  // H100: 6.88/h for 40 rps (0.0478 per 1000); A100: 3.00/h for 12 rps (0.0695); T4: 0.50/h for
  // 4 rps (0.0348) but p95 180 ms.
  std::vector<ModelOffer> offers = {offer(0, "H100", 40, 60, 6.88), offer(1, "A100", 12, 90, 3.0),
                                    offer(2, "T4", 4, 180, 0.5)};
  auto choice = cheapest_model(offers, 100);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->model, GpuModelId{0});
  EXPECT_THAT(choice->reason, HasSubstr("H100, the cheapest per request meeting p95 100 ms"));
  EXPECT_THAT(choice->reason, HasSubstr("T4: p95 180 ms over the target of 100 ms"));
  // A looser target lets the T4 win; no room on it: the H100 again.
  EXPECT_EQ(cheapest_model(offers, 200)->model, GpuModelId{2});
  offers[2].has_room = false;
  EXPECT_EQ(cheapest_model(offers, 200)->model, GpuModelId{0});
  // Nothing meets a target of 10 ms: none, and why for each.
  std::string why;
  EXPECT_FALSE(cheapest_model(offers, 10, &why).has_value());
  EXPECT_THAT(why, HasSubstr("H100: p95 60 ms over the target of 10 ms"));
  EXPECT_THAT(why, HasSubstr("A100: p95 90 ms"));
}

TEST(CostFirstTest, WithOnePriceForAllTheFastestWinsAndTiesGoToTheLowerLatency) {
  const std::vector<ModelOffer> same = {offer(0, "A", 10, 80, 2.0), offer(1, "B", 20, 80, 2.0),
                                        offer(2, "C", 20, 40, 2.0)};
  EXPECT_EQ(cheapest_model(same, 100)->model, GpuModelId{2});
}

}  // namespace
}  // namespace tidepool
