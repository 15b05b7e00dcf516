#include "api/server_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NormalizeServerUrlTest, AcceptsAndNormalizes) {
  EXPECT_EQ(normalize_server_url("http://127.0.0.1:8470", "f").value(), "http://127.0.0.1:8470");
  EXPECT_EQ(normalize_server_url("https://tp.example.com/", "f").value(), "https://tp.example.com");
  EXPECT_EQ(normalize_server_url("localhost:9000", "f").value(), "http://localhost:9000");
  EXPECT_EQ(normalize_server_url(" http://[::1]:8470 ", "f").value(), "http://[::1]:8470");
}

TEST(NormalizeServerUrlTest, RefusesWhatIsNotAServer) {
  for (const char* bad : {"", "ftp://x", "http://", "http://:80", "http://host:0",
                          "http://host:99999", "http://host:port", "http://host/api"}) {
    auto url = normalize_server_url(bad, "--server");
    EXPECT_FALSE(url.has_value()) << bad;
    if (!url) {
      EXPECT_EQ(url.error().field, "--server");
    }
  }
}

TEST(ServerListTest, OneUrlIsAListOfOne) {
  auto servers = parse_server_list("127.0.0.1:8470/", "--server");
  ASSERT_TRUE(servers.has_value()) << servers.error().message();
  EXPECT_THAT(*servers, ElementsAre("http://127.0.0.1:8470"));
  EXPECT_EQ(join_server_list(*servers), "http://127.0.0.1:8470");
}

TEST(ServerListTest, ReadsSeveralWithSpacesAndDropsDuplicates) {
  auto servers = parse_server_list(
      " http://a:8470 ,https://b:8470/,\tc:8470, http://a:8470,http://c:8470", "$TIDEPOOL_SERVER");
  ASSERT_TRUE(servers.has_value()) << servers.error().message();
  EXPECT_THAT(*servers, ElementsAre("http://a:8470", "https://b:8470", "http://c:8470"));
  EXPECT_EQ(join_server_list(*servers), "http://a:8470,https://b:8470,http://c:8470");
  auto again = parse_server_list(join_server_list(*servers), "f");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *servers);
}

TEST(ServerListTest, NamesTheSourceAndTheBadUrl) {
  auto bad = parse_server_list("http://a:8470,ftp://b,http://c:8470", "--server");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "--server");
  EXPECT_THAT(bad.error().reason, HasSubstr("'ftp://b' is not a server URL"));
  auto port = parse_server_list("http://a:8470, http://b:99999", "config.yaml server");
  ASSERT_FALSE(port.has_value());
  EXPECT_EQ(port.error().field, "config.yaml server");
  EXPECT_THAT(port.error().reason, HasSubstr("'http://b:99999'"));
  for (const char* empty : {"http://a:8470,,http://b:8470", "http://a:8470,", ",", " , "}) {
    auto gap = parse_server_list(empty, "--server");
    ASSERT_FALSE(gap.has_value()) << empty;
    EXPECT_THAT(gap.error().reason, HasSubstr("has an empty entry")) << empty;
  }
  EXPECT_FALSE(parse_server_list("", "--server").has_value());
}

TEST(ServerListTest, RefusesMoreThanSixteen) {
  std::vector<std::string> urls;
  for (int i = 1; i <= 17; ++i) urls.push_back("http://s" + std::to_string(i) + ":8470");
  auto too_many = parse_server_list(join_server_list(urls), "--server");
  ASSERT_FALSE(too_many.has_value());
  EXPECT_EQ(too_many.error().field, "--server");
  EXPECT_THAT(too_many.error().reason, HasSubstr("more than 16 servers"));
  urls.pop_back();
  urls.push_back(urls.front());  // a duplicate is not one more server
  auto sixteen = parse_server_list(join_server_list(urls), "--server");
  ASSERT_TRUE(sixteen.has_value()) << sixteen.error().message();
  EXPECT_EQ(sixteen->size(), kMaxServers);
}

}  // namespace
}  // namespace tidepool
