#include "server/http_route.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

TEST(PercentDecode, DecodesEscapesAndLeavesBrokenOnesAlone) {
  EXPECT_EQ(percent_decode("a%20b%2Fc", false), "a b/c");
  EXPECT_EQ(percent_decode("%FF%fe", false), "\xff\xfe");
  EXPECT_EQ(percent_decode("100%", false), "100%");
  EXPECT_EQ(percent_decode("%4", false), "%4");
  EXPECT_EQ(percent_decode("%zz", false), "%zz");
  EXPECT_EQ(percent_decode("a+b", false), "a+b");
  EXPECT_EQ(percent_decode("a+b", true), "a b");
  EXPECT_EQ(percent_decode("%00", false), std::string(1, '\0'));
}

TEST(QueryParams, ReadsKeysAndValuesDecoded) {
  const QueryParams q("tenant=vision&state=pending%2Crunning&empty&x=1&x=2&a+b=c+d&=v");
  EXPECT_EQ(q.get("tenant"), "vision");
  EXPECT_EQ(q.get("state"), "pending,running");
  EXPECT_TRUE(q.has("empty"));
  EXPECT_EQ(q.get("empty"), "");
  EXPECT_EQ(q.get("x"), "1");
  EXPECT_EQ(q.get("a b"), "c d");
  EXPECT_FALSE(q.has("missing"));
  EXPECT_EQ(q.get("missing"), "");
  EXPECT_FALSE(QueryParams("").has(""));
}

TEST(MatchPath, CapturesDecodedSegments) {
  auto m = match_path("/v1/jobs/{}/why", "/v1/jobs/12/why");
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, std::vector<std::string>{"12"});
  auto odd = match_path("/v1/tenants/{}", "/v1/tenants/%FF%2Fx");
  ASSERT_TRUE(odd);
  EXPECT_EQ((*odd)[0], "\xff/x");
  EXPECT_FALSE(match_path("/v1/jobs/{}", "/v1/jobs/"));
  EXPECT_FALSE(match_path("/v1/jobs/{}", "/v1/jobs/1/why"));
  EXPECT_FALSE(match_path("/v1/jobs", "/v1/jobs/"));
  EXPECT_FALSE(match_path("/v1/jobs", "/v1/job"));
  EXPECT_TRUE(match_path("/v1/jobs", "/v1/jobs"));
}

}  // namespace
}  // namespace tidepool
