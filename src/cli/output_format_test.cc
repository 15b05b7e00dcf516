#include "cli/output_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <sstream>

#include "cli/api_client.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(OutputFormatTest, ParsesEveryFormAndRefusesOnesTheCommandLacks) {
  EXPECT_EQ(parse_output_format("table", "-o").value(), OutputFormat::kTable);
  EXPECT_EQ(parse_output_format("wide", "-o").value(), OutputFormat::kWide);
  EXPECT_EQ(parse_output_format("name", "-o").value(), OutputFormat::kName);
  EXPECT_EQ(parse_output_format("json", "-o").value(), OutputFormat::kJson);
  EXPECT_EQ(parse_output_format("yaml", "-o").value(), OutputFormat::kYaml);
  EXPECT_EQ(parse_output_format("csv", "-o").value(), OutputFormat::kCsv);
  for (OutputFormat format : kListingFormats) {
    EXPECT_EQ(parse_output_format(output_format_name(format), "-o").value(), format);
  }
  auto bad = parse_output_format("xml", "-o");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "-o");
  EXPECT_EQ(bad.error().reason,
            "unknown output format 'xml'; use table, wide, name, json, yaml or csv");
  auto not_here = parse_output_format("csv", "--output", kDocumentFormats);
  ASSERT_FALSE(not_here.has_value());
  EXPECT_EQ(not_here.error().field, "--output");
  EXPECT_THAT(not_here.error().reason, HasSubstr("use table, json or yaml"));
  EXPECT_TRUE(is_document(OutputFormat::kJson));
  EXPECT_TRUE(is_document(OutputFormat::kYaml));
  EXPECT_FALSE(is_document(OutputFormat::kCsv));
  EXPECT_FALSE(is_document(OutputFormat::kWide));
}

// Strings that a plain YAML scalar would turn into something else come out quoted (tag "!").
TEST(JsonToYamlTest, RoundTripsTrickyStrings) {
  const nlohmann::json value = {
      {"strings",
       {"true", "no", "8080", "", "null", "~", "- x", "a: b", "#c", " pad", "1.5", "-3", ".inf",
        "Y"}},
      {"plain", "plain words"},
      {"numbers", {1, -2, 0.5}},
      {"flags", {true, false}},
      {"nothing", nullptr},
      {"empty_map", nlohmann::json::object()},
      {"empty_list", nlohmann::json::array()},
      {"8080", "a numeric key"},
  };
  const std::string text = json_to_yaml(value);
  const YAML::Node root = YAML::Load(text);
  const auto& strings = value["strings"];
  ASSERT_EQ(root["strings"].size(), strings.size()) << text;
  for (std::size_t i = 0; i < strings.size(); ++i) {
    const YAML::Node item = root["strings"][i];
    EXPECT_EQ(item.Tag(), "!") << "not quoted: " << strings[i] << "\n" << text;
    EXPECT_EQ(item.as<std::string>(), strings[i].get<std::string>()) << text;
  }
  EXPECT_EQ(root["numbers"][0].as<int>(), 1);
  EXPECT_EQ(root["numbers"][1].as<int>(), -2);
  EXPECT_DOUBLE_EQ(root["numbers"][2].as<double>(), 0.5);
  EXPECT_TRUE(root["flags"][0].as<bool>());
  EXPECT_FALSE(root["flags"][1].as<bool>());
  EXPECT_TRUE(root["nothing"].IsNull());
  EXPECT_TRUE(root["empty_map"].IsMap());
  EXPECT_TRUE(root["empty_list"].IsSequence());
  EXPECT_EQ(root["8080"].as<std::string>(), "a numeric key");
  EXPECT_EQ(root["plain"].Tag(), "?");  // no quotes where none are needed
  EXPECT_THAT(text, HasSubstr("empty_map: {}\n"));
  EXPECT_THAT(text, HasSubstr("empty_list: []\n"));
  EXPECT_TRUE(text.ends_with('\n'));
}

TEST(JsonToYamlTest, KeepsKeyOrderOfTheJson) {
  const nlohmann::json value = nlohmann::json::parse(R"({"b": 1, "a": {"w": 2, "v": [3, "s"]}})");
  EXPECT_EQ(json_to_yaml(value), "a:\n  v:\n    - 3\n    - s\n  w: 2\nb: 1\n");
}

TEST(WriteDocumentTest, JsonIsIndentedAndTableWritesNothing) {
  std::ostringstream json;
  write_document({{"id", 1}}, OutputFormat::kJson, json);
  EXPECT_EQ(json.str(), "{\n  \"id\": 1\n}\n");
  std::ostringstream table;
  write_document({{"id", 1}}, OutputFormat::kTable, table);
  EXPECT_EQ(table.str(), "");
}

TEST(FormatGpusTest, GpuSecondsAsGpuHoursAndPlacesAsOrdinals) {
  EXPECT_EQ(format_gpu_hours(43'200), "12.0 GPU-h");
  EXPECT_EQ(format_gpu_hours(180), "0.1 GPU-h");
  EXPECT_EQ(format_gpu_hours(-5), "0.0 GPU-h");
  EXPECT_EQ(ordinal(1), "1st");
  EXPECT_EQ(ordinal(2), "2nd");
  EXPECT_EQ(ordinal(3), "3rd");
  EXPECT_EQ(ordinal(4), "4th");
  EXPECT_EQ(ordinal(11), "11th");
  EXPECT_EQ(ordinal(12), "12th");
  EXPECT_EQ(ordinal(13), "13th");
  EXPECT_EQ(ordinal(22), "22nd");
  EXPECT_EQ(ordinal(101), "101st");
}

TEST(FormatGpusTest, MilliAsGpus) {
  EXPECT_EQ(format_gpus(0), "0");
  EXPECT_EQ(format_gpus(8000), "8");
  EXPECT_EQ(format_gpus(500), "0.5");
  EXPECT_EQ(format_gpus(1250), "1.25");
  EXPECT_EQ(format_gpus(1), "0.001");
  EXPECT_EQ(format_gpus(-1500), "-1.5");
  EXPECT_EQ(format_gpu_value(nlohmann::json(32)), "32");
  EXPECT_EQ(format_gpu_value(nlohmann::json(16.5)), "16.5");
  EXPECT_EQ(format_gpu_value(nlohmann::json(nullptr), "unlimited"), "unlimited");
}

TEST(FormatLocalTimeTest, ZeroIsADash) {
  EXPECT_EQ(format_local_time(0), "-");
  EXPECT_THAT(format_local_time(1'700'000'000'000),
              MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}"));
}

TEST(CompressNodeNamesTest, SlurmStyleRanges) {
  EXPECT_EQ(compress_node_names({}), "");
  EXPECT_EQ(compress_node_names({"h100-a-01"}), "h100-a-01");
  EXPECT_EQ(compress_node_names({"h100-a-02", "h100-a-01", "h100-a-04", "cpu-login", "h100-a-01"}),
            "cpu-login,h100-a-[01-02,04]");
  EXPECT_EQ(compress_node_names({"n1", "n2", "n3", "n10"}), "n[1-3],n10");
  EXPECT_EQ(compress_node_names({"a100-b-03", "h100-c-01"}), "a100-b-03,h100-c-01");
}

TEST(ExpandNodeNamesTest, SlurmHostlists) {
  using V = std::vector<std::string>;
  EXPECT_EQ(*expand_node_names("h100-a-01", "NODE"), V{"h100-a-01"});
  EXPECT_EQ(*expand_node_names("h100-a-[01-03,05],cpu-login", "NODE"),
            (V{"h100-a-01", "h100-a-02", "h100-a-03", "h100-a-05", "cpu-login"}));
  EXPECT_EQ(*expand_node_names("n[8-10]", "NODE"), (V{"n8", "n9", "n10"}));
  EXPECT_EQ(*expand_node_names("n[08-10]", "NODE"), (V{"n08", "n09", "n10"}));
  EXPECT_EQ(*expand_node_names("r[1-2]-n[1-2]", "NODE"), (V{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  // What compress_node_names writes reads back.
  const V names = {"cpu-login", "h100-a-01", "h100-a-02", "h100-a-04", "n1", "n2", "n3", "n10"};
  EXPECT_EQ(*expand_node_names(compress_node_names(names), "NODE"), names);
  for (const char* bad : {"n[1-", "n[3-1]", "n[a-b]", "a,,b", ",a", "n[]", "n[1-2"}) {
    auto refused = expand_node_names(bad, "NODE");
    ASSERT_FALSE(refused.has_value()) << bad;
    EXPECT_EQ(refused.error().field, "NODE");
  }
  auto huge = expand_node_names("n[0-99999],m[0-9]", "NODE");
  ASSERT_FALSE(huge.has_value());
  EXPECT_THAT(huge.error().reason, ::testing::HasSubstr("more than 100000 nodes"));
  EXPECT_FALSE(expand_node_names("a[0-999]b[0-999]", "NODE").has_value());
}

TEST(ApiErrorTest, ServerErrorBodyGivesFieldAndReason) {
  const Error e = api_error(
      400,
      R"({"error":"invalid job spec","field":"tasks","reason":"0 is out of range 1..100000"})");
  EXPECT_EQ(e.message(), "tasks: 0 is out of range 1..100000");
}

TEST(ApiErrorTest, OtherBodiesGiveTheStatus) {
  EXPECT_EQ(api_error(502, "Bad Gateway\n").message(),
            "the server answered HTTP status 502: Bad Gateway");
  EXPECT_EQ(api_error(500, "").message(), "the server answered HTTP status 500 without a message");
  EXPECT_EQ(api_error(500, R"({"error":"internal error","field":"","reason":"see the server log"})")
                .message(),
            "see the server log");
}

TEST(ApiErrorTest, UnreachableSaysWhatToDo) {
  const Error e = unreachable_error("http://127.0.0.1:1", "connection refused");
  EXPECT_EQ(e.message(),
            "cannot reach the Tidepool server at http://127.0.0.1:1: connection refused; is it "
            "running? set --server or TIDEPOOL_SERVER");
}

TEST(ApiErrorTest, ConnectionErrorsAreRecognized) {
  EXPECT_TRUE(is_connection_error(unreachable_error("http://h:1", "refused")));
  EXPECT_FALSE(is_connection_error(api_error(404, R"({"field":"id","reason":"no job 4"})")));
}

TEST(PathWithQueryTest, EncodesAndSkipsEmptyValues) {
  EXPECT_EQ(path_with_query("/v1/jobs", {}), "/v1/jobs");
  EXPECT_EQ(
      path_with_query(
          "/v1/jobs",
          {{"tenant", "vision"}, {"queue", ""}, {"state", "pending,running"}, {"node", "a b&c"}}),
      "/v1/jobs?tenant=vision&state=pending,running&node=a%20b%26c");
  EXPECT_EQ(url_escape("h100-a-01"), "h100-a-01");
  EXPECT_EQ(url_escape("a/b"), "a%2Fb");
}

TEST(RandomUuidTest, VersionFourAndDistinct) {
  const std::string a = random_uuid();
  const std::string b = random_uuid();
  EXPECT_THAT(a,
              MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace tidepool
