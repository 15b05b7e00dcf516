#include "agent/gpu_hold.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace tidepool {
namespace {

constexpr std::optional<MigInstance> kWhole = std::nullopt;

MigInstance instance(MigProfile profile, int start) {
  return MigInstance{.profile = profile, .start = start};
}

TEST(GpuHold, AGpuHeldWholeWaitsForItsTask) {
  GpuHold held;
  EXPECT_TRUE(held.free_for(std::vector{0, 1}, kWhole));
  held.add(std::vector{0, 1}, kWhole);
  EXPECT_FALSE(held.free_for(std::vector{1, 2}, kWhole));
  EXPECT_FALSE(held.free_for(std::vector{1}, instance(MigProfile::k1g10gb, 0)));
  EXPECT_TRUE(held.free_for(std::vector{2, 3}, kWhole));
  EXPECT_TRUE(held.free_for(std::vector<int>{}, kWhole));  // a CPU-only task
}

TEST(GpuHold, TasksOnOtherInstancesOfAGpuRunBesideEachOther) {
  GpuHold held;
  held.add(std::vector{1}, instance(MigProfile::k3g40gb, 4));
  // The other half of GPU 1, or part of it.
  EXPECT_TRUE(held.free_for(std::vector{1}, instance(MigProfile::k3g40gb, 0)));
  EXPECT_TRUE(held.free_for(std::vector{1}, instance(MigProfile::k1g10gb, 3)));
  // The same slices: the task on them is still there.
  EXPECT_FALSE(held.free_for(std::vector{1}, instance(MigProfile::k3g40gb, 4)));
  EXPECT_FALSE(held.free_for(std::vector{1}, instance(MigProfile::k1g10gb, 5)));
  EXPECT_FALSE(held.free_for(std::vector{1}, instance(MigProfile::k7g80gb, 0)));
  // A task on the whole GPU waits for every instance; other GPUs are free.
  EXPECT_FALSE(held.free_for(std::vector{1}, kWhole));
  EXPECT_FALSE(held.free_for(std::vector{0, 1}, kWhole));
  EXPECT_TRUE(held.free_for(std::vector{0}, kWhole));
  EXPECT_TRUE(held.free_for(std::vector{2}, instance(MigProfile::k3g40gb, 4)));

  held.add(std::vector{1}, instance(MigProfile::k3g40gb, 0));
  EXPECT_FALSE(held.free_for(std::vector{1}, instance(MigProfile::k1g10gb, 0)));
}

TEST(GpuHold, AnInstanceOverlappingOneHeldHoldsItsGpuWhole) {
  GpuHold held;
  held.add(std::vector{1}, instance(MigProfile::k3g40gb, 4));
  held.add(std::vector{1}, instance(MigProfile::k1g10gb, 4));  // no valid assignment does this
  EXPECT_FALSE(held.free_for(std::vector{1}, instance(MigProfile::k3g40gb, 0)));
  // An instance given with more than one GPU (neither does this) holds them whole.
  held.add(std::vector{2, 3}, instance(MigProfile::k1g10gb, 0));
  EXPECT_FALSE(held.free_for(std::vector{3}, instance(MigProfile::k1g10gb, 6)));
}

TEST(GpuHold, SharesOfAGpuRunBesideEachOtherUpToTheWholeGpu) {
  GpuHold held;
  held.add(std::vector{0}, kWhole, 500);
  EXPECT_TRUE(held.free_for(std::vector{0}, kWhole, 500));
  EXPECT_FALSE(held.free_for(std::vector{0}, kWhole, 501));
  EXPECT_FALSE(held.free_for(std::vector{0}, kWhole));  // whole: it waits for the share
  EXPECT_FALSE(held.free_for(std::vector{0}, instance(MigProfile::k1g10gb, 0)));
  held.add(std::vector{0}, kWhole, 250);
  EXPECT_TRUE(held.free_for(std::vector{0}, kWhole, 250));
  EXPECT_FALSE(held.free_for(std::vector{0}, kWhole, 251));
  EXPECT_TRUE(held.free_for(std::vector{1}, kWhole));
  // A share does not go where instances or a whole task are held.
  held.add(std::vector{1}, instance(MigProfile::k1g10gb, 0));
  EXPECT_FALSE(held.free_for(std::vector{1}, kWhole, 100));
  held.add(std::vector{2}, kWhole);
  EXPECT_FALSE(held.free_for(std::vector{2}, kWhole, 100));
  // A share past the whole GPU (no valid assignment gives it) holds the GPU whole.
  held.add(std::vector{0}, kWhole, 400);
  EXPECT_FALSE(held.free_for(std::vector{0}, kWhole, 1));
}

}  // namespace
}  // namespace tidepool
