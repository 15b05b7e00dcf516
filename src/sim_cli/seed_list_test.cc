#include "sim_cli/seed_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseSeedListTest, OneSeed) {
  auto seeds = parse_seed_list("42");
  ASSERT_TRUE(seeds.has_value()) << seeds.error().message();
  EXPECT_THAT(*seeds, ElementsAre(42U));
}

TEST(ParseSeedListTest, InclusiveRange) {
  auto seeds = parse_seed_list("42-51");
  ASSERT_TRUE(seeds.has_value()) << seeds.error().message();
  EXPECT_THAT(*seeds, ElementsAre(42U, 43U, 44U, 45U, 46U, 47U, 48U, 49U, 50U, 51U));
}

TEST(ParseSeedListTest, RangeOfOne) {
  auto seeds = parse_seed_list("7-7");
  ASSERT_TRUE(seeds.has_value());
  EXPECT_THAT(*seeds, ElementsAre(7U));
}

TEST(ParseSeedListTest, CommaSeparatedList) {
  auto seeds = parse_seed_list("1,5,9");
  ASSERT_TRUE(seeds.has_value()) << seeds.error().message();
  EXPECT_THAT(*seeds, ElementsAre(1U, 5U, 9U));
}

TEST(ParseSeedListTest, MixOfSeedsAndRangesKeepsTheGivenOrder) {
  auto seeds = parse_seed_list("1,10-12");
  ASSERT_TRUE(seeds.has_value()) << seeds.error().message();
  EXPECT_THAT(*seeds, ElementsAre(1U, 10U, 11U, 12U));
  auto reversed = parse_seed_list("10-12,1");
  ASSERT_TRUE(reversed.has_value());
  EXPECT_THAT(*reversed, ElementsAre(10U, 11U, 12U, 1U));
}

TEST(ParseSeedListTest, ZeroAndLargeSeeds) {
  auto seeds = parse_seed_list("0,18446744073709551614");
  ASSERT_TRUE(seeds.has_value()) << seeds.error().message();
  EXPECT_THAT(*seeds, ElementsAre(0U, 18446744073709551614U));
}

TEST(ParseSeedListTest, RejectsText) {
  auto seeds = parse_seed_list("a");
  ASSERT_FALSE(seeds.has_value());
  EXPECT_EQ(seeds.error().field, "--seeds");
  EXPECT_THAT(seeds.error().reason, HasSubstr("'a'"));
  EXPECT_THAT(seeds.error().message(), HasSubstr("--seeds: "));
}

TEST(ParseSeedListTest, RejectsABackwardsRange) {
  auto seeds = parse_seed_list("5-3");
  ASSERT_FALSE(seeds.has_value());
  EXPECT_EQ(seeds.error().field, "--seeds");
  EXPECT_THAT(seeds.error().reason, HasSubstr("'5-3'"));
  EXPECT_THAT(seeds.error().reason, HasSubstr("backwards"));
}

TEST(ParseSeedListTest, RejectsMalformedLists) {
  for (const char* text : {"", ",", "1,", ",1", "1,,2", "-5", "5-", "1-2-3", "4.5", " 4", "4 ",
                           "1;2", "+3", "99999999999999999999"}) {
    auto seeds = parse_seed_list(text);
    EXPECT_FALSE(seeds.has_value()) << "accepted '" << text << "'";
    if (!seeds) {
      EXPECT_EQ(seeds.error().field, "--seeds") << text;
    }
  }
}

TEST(ParseSeedListTest, RejectsAnUnreasonablyLongRange) {
  auto seeds = parse_seed_list("1-1000000");
  ASSERT_FALSE(seeds.has_value());
  EXPECT_EQ(seeds.error().field, "--seeds");
  EXPECT_THAT(seeds.error().reason, HasSubstr("too long"));
}

}  // namespace
}  // namespace tidepool
