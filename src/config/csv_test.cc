#include "config/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> out;
  for (std::string_view field : split_csv_line(line)) out.emplace_back(field);
  return out;
}

TEST(SplitCsvLineTest, SplitsAtEveryComma) {
  EXPECT_THAT(split("a,b,c"), ElementsAre("a", "b", "c"));
  EXPECT_THAT(split("one"), ElementsAre("one"));
}

TEST(SplitCsvLineTest, KeepsEmptyFields) {
  EXPECT_THAT(split("a,,c"), ElementsAre("a", "", "c"));
  EXPECT_THAT(split("a,"), ElementsAre("a", ""));
  EXPECT_THAT(split(",a"), ElementsAre("", "a"));
  EXPECT_THAT(split(""), ElementsAre(""));
}

TEST(SplitCsvLineTest, DropsATrailingCarriageReturn) {
  EXPECT_THAT(split("a,b\r"), ElementsAre("a", "b"));
  EXPECT_THAT(split("a,\r"), ElementsAre("a", ""));
}

TEST(CsvReaderTest, ReadsHeaderAndRowsByColumnName) {
  std::istringstream in("id,name,size\n1,alpha,10\n2,beta,20\n");
  auto csv = CsvReader::open(in, "data.csv");
  ASSERT_TRUE(csv.has_value()) << csv.error().message();
  EXPECT_TRUE(csv->has_column("name"));
  EXPECT_FALSE(csv->has_column("colour"));
  EXPECT_EQ(csv->line_number(), 1);

  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->line_number(), 2);
  EXPECT_EQ(csv->text("name"), "alpha");
  EXPECT_EQ(csv->integer("size").value(), 10);
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->text("id"), "2");
  EXPECT_EQ(csv->integer("size").value(), 20);
  EXPECT_FALSE(csv->next());
}

TEST(CsvReaderTest, ColumnsMayComeInAnyOrder) {
  std::istringstream in("size,id\n7,x\n");
  auto csv = CsvReader::open(in, "data.csv");
  ASSERT_TRUE(csv.has_value());
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->text("id"), "x");
  EXPECT_EQ(csv->integer("size").value(), 7);
}

TEST(CsvReaderTest, SkipsEmptyLinesButCountsThem) {
  std::istringstream in("a,b\n1,2\n\n\r\n3,4\n\n");
  auto csv = CsvReader::open(in, "data.csv");
  ASSERT_TRUE(csv.has_value());
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->line_number(), 2);
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->line_number(), 5);
  EXPECT_EQ(csv->text("b"), "4");
  EXPECT_FALSE(csv->next());
}

TEST(CsvReaderTest, HandlesWindowsLineEndings) {
  std::istringstream in("a,b\r\n1,2\r\n");
  auto csv = CsvReader::open(in, "data.csv");
  ASSERT_TRUE(csv.has_value());
  EXPECT_TRUE(csv->has_column("b"));
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->text("b"), "2");
  EXPECT_EQ(csv->integer("b").value(), 2);
}

TEST(CsvReaderTest, ShortRowsAndAbsentColumnsReadAsEmpty) {
  std::istringstream in("a,b,c\n1\n");
  auto csv = CsvReader::open(in, "data.csv");
  ASSERT_TRUE(csv.has_value());
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->text("a"), "1");
  EXPECT_EQ(csv->text("c"), "");
  EXPECT_EQ(csv->text("no_such_column"), "");
  auto absent = csv->optional_integer("no_such_column");
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->has_value());
}

TEST(CsvReaderTest, EmptyInputHasNoHeader) {
  std::istringstream in("");
  auto csv = CsvReader::open(in, "empty.csv");
  ASSERT_FALSE(csv.has_value());
  EXPECT_EQ(csv.error().field, "empty.csv");
  EXPECT_THAT(csv.error().reason, HasSubstr("no header"));
}

TEST(CsvReaderTest, RejectsADuplicateColumn) {
  std::istringstream in("a,b,a\n1,2,3\n");
  auto csv = CsvReader::open(in, "dup.csv");
  ASSERT_FALSE(csv.has_value());
  EXPECT_EQ(csv.error().field, "dup.csv:1");
  EXPECT_THAT(csv.error().reason, HasSubstr("'a'"));
}

TEST(CsvReaderTest, RequireNamesEveryMissingColumn) {
  std::istringstream in("a,b\n");
  auto csv = CsvReader::open(in, "cols.csv");
  ASSERT_TRUE(csv.has_value());
  EXPECT_TRUE(csv->require({"a", "b"}).has_value());
  auto missing = csv->require({"a", "c", "b", "d"});
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().field, "cols.csv:1");
  EXPECT_EQ(missing.error().reason, "missing column(s): c, d");
  EXPECT_EQ(missing.error().message(), "cols.csv:1: missing column(s): c, d");
}

TEST(CsvReaderTest, ParsesIntegers) {
  std::istringstream in("v\n-17\n0\n9000000000\n");
  auto csv = CsvReader::open(in, "n.csv");
  ASSERT_TRUE(csv.has_value());
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->integer("v").value(), -17);
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->integer("v").value(), 0);
  ASSERT_TRUE(csv->next());
  EXPECT_EQ(csv->integer("v").value(), 9'000'000'000);
}

TEST(CsvReaderTest, BadIntegerErrorNamesFileLineAndColumn) {
  std::istringstream in("id,size\n1,10\n2,12abc\n");
  auto csv = CsvReader::open(in, "pods.csv");
  ASSERT_TRUE(csv.has_value());
  ASSERT_TRUE(csv->next());
  ASSERT_TRUE(csv->next());
  auto bad = csv->integer("size");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "pods.csv:3 column 'size'");
  EXPECT_THAT(bad.error().reason, HasSubstr("'12abc'"));
  EXPECT_EQ(csv->where("size"), "pods.csv:3 column 'size'");
}

TEST(CsvReaderTest, RejectsTextThatIsNotExactlyAnInteger) {
  for (const char* text : {"abc", "1.5", " 3", "3 ", "+3", "1e3", "99999999999999999999"}) {
    std::istringstream in(std::string("v\n") + text + "\n");
    auto csv = CsvReader::open(in, "n.csv");
    ASSERT_TRUE(csv.has_value());
    ASSERT_TRUE(csv->next());
    auto value = csv->integer("v");
    EXPECT_FALSE(value.has_value()) << "accepted '" << text << "'";
    auto optional = csv->optional_integer("v");
    EXPECT_FALSE(optional.has_value()) << "accepted '" << text << "'";
  }
}

TEST(CsvReaderTest, EmptyFieldIsMissingForIntegerButAbsentForOptional) {
  std::istringstream in("a,b\n1,\n");
  auto csv = CsvReader::open(in, "e.csv");
  ASSERT_TRUE(csv.has_value());
  ASSERT_TRUE(csv->next());
  auto required = csv->integer("b");
  ASSERT_FALSE(required.has_value());
  EXPECT_EQ(required.error().field, "e.csv:2 column 'b'");
  EXPECT_THAT(required.error().reason, HasSubstr("missing"));

  auto optional = csv->optional_integer("b");
  ASSERT_TRUE(optional.has_value());
  EXPECT_FALSE(optional->has_value());
  auto present = csv->optional_integer("a");
  ASSERT_TRUE(present.has_value());
  EXPECT_EQ(present->value(), 1);
}

}  // namespace
}  // namespace tidepool
