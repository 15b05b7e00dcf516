#include "core/split_text.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace tidepool {
namespace {

using Parts = std::vector<std::string_view>;

TEST(SplitTextTest, KeepsEveryPartEmptyOnesIncluded) {
  EXPECT_EQ(split_text("a,b,c", ','), (Parts{"a", "b", "c"}));
  EXPECT_EQ(split_text("a,,b", ','), (Parts{"a", "", "b"}));
  EXPECT_EQ(split_text("a,", ','), (Parts{"a", ""}));
  EXPECT_EQ(split_text(",a", ','), (Parts{"", "a"}));
  EXPECT_EQ(split_text("", ','), (Parts{""}));
  EXPECT_EQ(split_text("a=1;b=2", ';'), (Parts{"a=1", "b=2"}));
}

}  // namespace
}  // namespace tidepool
