#include "core/topology.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

TEST(TopologyTest, LinkFiguresHaveDocumentedDefaults) {
  const Topology topology = Topology::single_leaf("site-a");
  EXPECT_EQ(topology.site, "site-a");
  ASSERT_EQ(topology.spines.size(), 1U);
  ASSERT_EQ(topology.leaves.size(), 1U);
  EXPECT_EQ(topology.leaves[0].spine, SpineId{0});
  EXPECT_EQ(topology.spines[0].oversubscription, 1);
  EXPECT_EQ(topology.links.nvlink_gbps, 2400);
  EXPECT_EQ(topology.links.pcie_gbps, 256);
  EXPECT_EQ(topology.links.leaf_gbps, 200);
  EXPECT_EQ(topology.links.spine_gbps, 200);
  EXPECT_EQ(SpineSpec{.name = "s"}.oversubscription, 1);
}

}  // namespace
}  // namespace tidepool
