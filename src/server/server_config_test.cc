#include "server/server_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

constexpr const char* kRequired = "cluster: lab.yaml\ntenants: tenants.yaml\n";

TEST(ServerConfigTest, APlacementPolicyIsOptionalAndNamedByNameOrLabel) {
  auto plain = read_server_config(kRequired, "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(plain.has_value()) << plain.error().message();
  EXPECT_EQ(plain->placement_policy, "");
  EXPECT_EQ(plain->cluster_path, "/etc/tidepool/lab.yaml");

  auto fgd = read_server_config(std::string(kRequired) + "placement_policy: 06-FGD\n",
                                "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(fgd.has_value()) << fgd.error().message();
  EXPECT_EQ(fgd->placement_policy, "fgd");

  auto none = read_server_config(std::string(kRequired) + "placement_policy: none\n", "server.yaml",
                                 "/etc/tidepool");
  ASSERT_TRUE(none.has_value()) << none.error().message();
  EXPECT_EQ(none->placement_policy, "none");
}

TEST(ServerConfigTest, AnUnknownPlacementPolicyIsRefusedWithTheKnownOnes) {
  auto bad = read_server_config(std::string(kRequired) + "placement_policy: slurm\n", "server.yaml",
                                "/etc/tidepool");
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message(), HasSubstr("placement_policy"));
  EXPECT_THAT(bad.error().message(), HasSubstr("best-fit"));
}

}  // namespace
}  // namespace tidepool
