#include "cli/client_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// A token-file reader over a fixed map; unknown paths fail.
auto fake_files(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return fail(path, "cannot open the file");
    return it->second;
  };
}

ClientConfigFile config_file(std::optional<std::string> server, std::optional<std::string> token) {
  ClientConfigFile f;
  f.path = "/home/a/.config/tidepool/config.yaml";
  f.server = std::move(server);
  f.token = std::move(token);
  return f;
}

TEST(ResolveClientSettingsTest, DefaultsWithNoSource) {
  auto s = resolve_client_settings(ClientSources{}, fake_files({}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->server, "http://127.0.0.1:8470");
  EXPECT_EQ(s->server_source, "default");
  EXPECT_EQ(s->token, "");
  EXPECT_EQ(s->ca_cert, "");
}

TEST(ResolveClientSettingsTest, FlagsWinOverEnvironmentAndFile) {
  ClientSources sources;
  sources.flag_server = "http://flag:1";
  sources.flag_token = "tp_flag";
  sources.env_server = "http://env:2";
  sources.env_token = "tp_env";
  sources.file = config_file("http://file:3", "tp_file");
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->server, "http://flag:1");
  EXPECT_EQ(s->server_source, "--server");
  EXPECT_EQ(s->token, "tp_flag");
  EXPECT_EQ(s->token_source, "--token");
}

TEST(ResolveClientSettingsTest, EnvironmentWinsOverFile) {
  ClientSources sources;
  sources.env_server = "http://env:2";
  sources.env_token = "tp_env";
  sources.file = config_file("http://file:3", "tp_file");
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->server, "http://env:2");
  EXPECT_EQ(s->server_source, "$TIDEPOOL_SERVER");
  EXPECT_EQ(s->token, "tp_env");
  EXPECT_EQ(s->token_source, "$TIDEPOOL_TOKEN");
}

TEST(ResolveClientSettingsTest, FileWinsOverDefault) {
  ClientSources sources;
  sources.file = config_file("https://file.example.com", "tp_file");
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->server, "https://file.example.com");
  EXPECT_EQ(s->server_source, "/home/a/.config/tidepool/config.yaml server");
  EXPECT_EQ(s->token, "tp_file");
}

TEST(ResolveClientSettingsTest, SettingsResolveIndependently) {
  // The server from the flag, the token from the file.
  ClientSources sources;
  sources.flag_server = "http://flag:1";
  sources.file = config_file("http://file:3", "tp_file");
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->server, "http://flag:1");
  EXPECT_EQ(s->token, "tp_file");
}

TEST(ResolveClientSettingsTest, TokenFileIsReadAndTrimmed) {
  ClientSources sources;
  sources.file = config_file(std::nullopt, std::nullopt);
  sources.file->token_file = "/home/a/.config/tidepool/token";
  auto s = resolve_client_settings(sources,
                                   fake_files({{"/home/a/.config/tidepool/token", "tp_abc\n"}}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->token, "tp_abc");
  EXPECT_THAT(s->token_source, HasSubstr("token_file"));
}

TEST(ResolveClientSettingsTest, EnvironmentTokenWinsOverTokenFile) {
  ClientSources sources;
  sources.env_token = "tp_env";
  sources.file = config_file(std::nullopt, std::nullopt);
  sources.file->token_file = "/missing";  // never read
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->token, "tp_env");
}

TEST(ResolveClientSettingsTest, MissingOrEmptyTokenFileFails) {
  ClientSources sources;
  sources.file = config_file(std::nullopt, std::nullopt);
  sources.file->token_file = "/missing";
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_FALSE(s.has_value());
  EXPECT_THAT(s.error().message(), HasSubstr("cannot read the token file /missing"));
  sources.file->token_file = "/empty";
  s = resolve_client_settings(sources, fake_files({{"/empty", " \n"}}));
  ASSERT_FALSE(s.has_value());
  EXPECT_THAT(s.error().message(), HasSubstr("is empty"));
}

TEST(ResolveClientSettingsTest, CaCertFromEnvironmentThenFile) {
  ClientSources sources;
  sources.file = config_file(std::nullopt, std::nullopt);
  sources.file->ca_cert = "/etc/file-ca.pem";
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->ca_cert, "/etc/file-ca.pem");
  sources.env_ca_cert = "/etc/env-ca.pem";
  s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->ca_cert, "/etc/env-ca.pem");
}

TEST(ResolveClientSettingsTest, BadServerNamesItsSource) {
  ClientSources sources;
  sources.env_server = "ftp://host";
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().field, "$TIDEPOOL_SERVER");
  EXPECT_THAT(s.error().reason, HasSubstr("http or https"));
}

TEST(ResolveClientSettingsTest, SeveralServersFromEachSource) {
  ClientSources sources;
  sources.file = config_file("https://a.example.com, https://b.example.com/", "tp_file");
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->server, "https://a.example.com,https://b.example.com");
  sources.env_server = "http://env:1,env:2, http://env:1";
  s = resolve_client_settings(sources, fake_files({}));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->server, "http://env:1,http://env:2");
  sources.flag_server = "http://flag:1 ,http://flag:2/x";
  s = resolve_client_settings(sources, fake_files({}));
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().field, "--server");
  EXPECT_THAT(s.error().reason, HasSubstr("'http://flag:2/x' is not a server URL"));
}

TEST(ParseClientConfigTest, ReadsAListOfServers) {
  auto f = parse_client_config("server: http://a:8470,http://b:8470\n", "c.yaml", "/home/a");
  ASSERT_TRUE(f.has_value()) << f.error().message();
  EXPECT_EQ(f->server, "http://a:8470,http://b:8470");
}

TEST(ResolveClientSettingsTest, TokenWithSpacesFails) {
  ClientSources sources;
  sources.flag_token = "two words";
  auto s = resolve_client_settings(sources, fake_files({}));
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().field, "--token");
}

TEST(ParseClientConfigTest, ReadsKeysAndResolvesPaths) {
  auto f = parse_client_config(
      "server: https://tp.example.com:8470\ntoken_file: token\nca_cert: ~/ca.pem\n",
      "/home/a/.config/tidepool/config.yaml", "/home/a");
  ASSERT_TRUE(f.has_value()) << f.error().message();
  EXPECT_EQ(f->server, "https://tp.example.com:8470");
  EXPECT_EQ(f->token_file, "/home/a/.config/tidepool/token");
  EXPECT_EQ(f->ca_cert, "/home/a/ca.pem");
  EXPECT_FALSE(f->token.has_value());
}

TEST(ParseClientConfigTest, EmptyFileGivesNothing) {
  auto f = parse_client_config("# nothing yet\n", "c.yaml", "/home/a");
  ASSERT_TRUE(f.has_value()) << f.error().message();
  EXPECT_FALSE(f->server.has_value());
  EXPECT_FALSE(f->token.has_value());
}

TEST(ParseClientConfigTest, RefusesUnknownKeysAndBothTokens) {
  auto f = parse_client_config("sever: http://x\n", "c.yaml", "/home/a");
  ASSERT_FALSE(f.has_value());
  EXPECT_THAT(f.error().message(), HasSubstr("c.yaml:1:1"));
  EXPECT_THAT(f.error().message(), HasSubstr("sever"));
  f = parse_client_config("token: a\ntoken_file: b\n", "c.yaml", "/home/a");
  ASSERT_FALSE(f.has_value());
  EXPECT_THAT(f.error().message(), HasSubstr("not both"));
  f = parse_client_config("server: [a, b]\n", "c.yaml", "/home/a");
  ASSERT_FALSE(f.has_value());
  EXPECT_THAT(f.error().message(), HasSubstr("server"));
}

TEST(ClientConfigPathTest, Precedence) {
  std::map<std::string, std::string> env = {{"HOME", "/home/a"}};
  const EnvLookup lookup = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(client_config_path(lookup), "/home/a/.config/tidepool/config.yaml");
  env["XDG_CONFIG_HOME"] = "/xdg";
  EXPECT_EQ(client_config_path(lookup), "/xdg/tidepool/config.yaml");
  env["TIDEPOOL_CONFIG"] = "/etc/tp.yaml";
  EXPECT_EQ(client_config_path(lookup), "/etc/tp.yaml");
  env.clear();
  EXPECT_EQ(client_config_path(lookup), "");
}

}  // namespace
}  // namespace tidepool
