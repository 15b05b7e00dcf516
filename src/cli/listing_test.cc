#include "cli/listing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Listing two_jobs() {
  Listing listing;
  listing.kind = "job";
  listing.columns = {"ID", "NAME", "STATE"};
  listing.wide_columns = {"SUBMITTER"};
  listing.rows = {{{"7", "train, big", "running"}, {"ana"}, "7"},
                  {{"8", "say \"hi\"", "pending"}, {"-"}, "8"}};
  return listing;
}

TEST(ListingTest, TableHasTheColumnsAndWideAddsItsOwn) {
  const std::string table = render_listing(two_jobs(), OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("ID"));
  EXPECT_THAT(table, HasSubstr("train, big"));
  EXPECT_THAT(table, Not(HasSubstr("SUBMITTER")));
  EXPECT_THAT(table, Not(HasSubstr("ana")));
  const std::string wide = render_listing(two_jobs(), OutputFormat::kWide);
  EXPECT_THAT(wide, HasSubstr("SUBMITTER"));
  EXPECT_THAT(wide, HasSubstr("ana"));
  // Every line of the wide table starts as the table's does.
  EXPECT_EQ(wide.substr(0, 2), table.substr(0, 2));
}

TEST(ListingTest, NoHeadersLeavesOnlyTheRows) {
  const std::string table = render_listing(two_jobs(), OutputFormat::kTable, false);
  EXPECT_THAT(table, Not(HasSubstr("ID")));
  EXPECT_THAT(table, Not(HasSubstr("STATE")));
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2) << table;
  EXPECT_EQ(table.substr(0, 1), "7");
  const std::string csv = render_listing(two_jobs(), OutputFormat::kCsv, false);
  EXPECT_EQ(csv.substr(0, 2), "7,");
}

TEST(ListingTest, NamePrintsKindSlashNameOncePerName) {
  Listing listing = two_jobs();
  listing.rows.push_back(listing.rows.front());  // a job shown twice (one row per task)
  EXPECT_EQ(render_listing(listing, OutputFormat::kName), "job/7\njob/8\n");
  EXPECT_EQ(render_listing(listing, OutputFormat::kName, false), "job/7\njob/8\n");
}

TEST(ListingTest, CsvQuotesWhatNeedsItAndKeepsEveryField) {
  Listing listing = two_jobs();
  listing.rows.push_back({{"9"}, {}, "9"});  // a row short of cells
  EXPECT_EQ(render_listing(listing, OutputFormat::kCsv),
            "ID,NAME,STATE,SUBMITTER\n"
            "7,\"train, big\",running,ana\n"
            "8,\"say \"\"hi\"\"\",pending,-\n"
            "9,,,\n");
}

TEST(ListingTest, DocumentsAreNotAListingsToPrint) {
  EXPECT_EQ(render_listing(two_jobs(), OutputFormat::kJson), "");
  EXPECT_EQ(render_listing(two_jobs(), OutputFormat::kYaml), "");
}

TEST(ListingTest, AnEmptyListingPrintsItsHeaderOrNothing) {
  Listing listing = two_jobs();
  listing.rows.clear();
  EXPECT_THAT(render_listing(listing, OutputFormat::kTable), HasSubstr("STATE"));
  EXPECT_EQ(render_listing(listing, OutputFormat::kTable, false), "");
  EXPECT_EQ(render_listing(listing, OutputFormat::kName), "");
  EXPECT_EQ(render_listing(listing, OutputFormat::kCsv), "ID,NAME,STATE,SUBMITTER\n");
}

}  // namespace
}  // namespace tidepool
