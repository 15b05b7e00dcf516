#include "report/csv_field.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

TEST(CsvFieldTest, QuotesOnlyFieldsThatNeedItAndDoublesTheirQuotes) {
  EXPECT_EQ(csv_field("plain text"), "plain text");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
}

}  // namespace
}  // namespace tidepool
