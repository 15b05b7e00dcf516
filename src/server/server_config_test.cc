#include "server/server_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

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

TEST(ServerConfigTest, TheLedgersKeepingIsInWholeDaysWithDefaults) {
  auto plain = read_server_config(kRequired, "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(plain.has_value()) << plain.error().message();
  EXPECT_EQ(plain->ledger_books, (BookTerms{.job_days = 92, .day_days = 400}));
  auto set = read_server_config(
      std::string(kRequired) + "ledger_jobs_kept: 31d\n" + "ledger_days_kept: 366d\n",
      "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(set.has_value()) << set.error().message();
  EXPECT_EQ(set->ledger_books, (BookTerms{.job_days = 31, .day_days = 366}));
}

TEST(ServerConfigTest, TheLedgersKeepingOutOfRangeIsRefusedNamingTheKey) {
  for (const auto& [lines, key, reason] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"ledger_jobs_kept: 12h\n", "ledger_jobs_kept", "whole days"},
           {"ledger_jobs_kept: 36d1h\n", "ledger_jobs_kept", "whole days"},
           {"ledger_days_kept: soon\n", "ledger_days_kept", "from 1d to 3650d"},
           {"ledger_jobs_kept: 100d\nledger_days_kept: 30d\n", "ledger_days_kept",
            "at least ledger_jobs_kept (100d), got 30d"},
           {"ledger_days_kept: 10d\n", "ledger_days_kept", "at least ledger_jobs_kept (92d)"}}) {
    auto bad = read_server_config(std::string(kRequired) + lines, "server.yaml", "/etc/tidepool");
    ASSERT_FALSE(bad.has_value()) << lines;
    EXPECT_THAT(bad.error().message(), HasSubstr(key)) << lines;
    EXPECT_THAT(bad.error().message(), HasSubstr(reason)) << lines;
  }
}

// Retention: finished jobs and events kept, in whole days; with a market, jobs stay at least as
// long as the ledger keeps their own entries (the default follows it, a shorter one is refused).
TEST(ServerConfigTest, RetentionIsInWholeDaysAndJobsOutliveTheirLedgerEntries) {
  auto plain = read_server_config(kRequired, "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(plain.has_value()) << plain.error().message();
  EXPECT_EQ(plain->finished_jobs_kept_days, 92);
  EXPECT_EQ(plain->events_kept_days, 30);
  EXPECT_EQ(plain->history_interval, std::chrono::minutes(5));
  EXPECT_EQ(plain->history_kept_days, 14);
  auto set =
      read_server_config(std::string(kRequired) + "finished_jobs_kept: 7d\nevents_kept: 2d\n",
                         "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(set.has_value()) << set.error().message();
  EXPECT_EQ(set->finished_jobs_kept_days, 7);
  EXPECT_EQ(set->events_kept_days, 2);
  auto followed = read_server_config(
      std::string(kRequired) +
          "market: market.yaml\nledger_jobs_kept: 120d\nledger_days_kept: 400d\n",
      "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(followed.has_value()) << followed.error().message();
  EXPECT_EQ(followed->finished_jobs_kept_days, 120);
  for (const auto& [lines, reason] : std::vector<std::pair<std::string, std::string>>{
           {"events_kept: 12h\n", "events_kept"},
           {"finished_jobs_kept: 0d\n", "finished_jobs_kept"},
           {"history_interval: 30s\n", "from 1m to 1h"},
           {"history_kept: 100d\n", "from 1d to 90d"},
           {"market: market.yaml\nfinished_jobs_kept: 30d\n",
            "must be at least ledger_jobs_kept (92d) with a market"}}) {
    auto bad = read_server_config(std::string(kRequired) + lines, "server.yaml", "/etc/tidepool");
    ASSERT_FALSE(bad.has_value()) << lines;
    EXPECT_THAT(bad.error().message(), HasSubstr(reason)) << lines;
  }
}

// How often a running job's reported steps are written: a minute unless set, 1s..1h.
TEST(ServerConfigTest, StepsAreStoredEveryMinuteUnlessSetWithinASecondAndAnHour) {
  auto plain = read_server_config(kRequired, "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(plain.has_value()) << plain.error().message();
  EXPECT_EQ(plain->steps_stored_every, std::chrono::minutes(1));
  auto set = read_server_config(std::string(kRequired) + "steps_stored_every: 5m\n", "server.yaml",
                                "/etc/tidepool");
  ASSERT_TRUE(set.has_value()) << set.error().message();
  EXPECT_EQ(set->steps_stored_every, std::chrono::minutes(5));
  for (const std::string value : {"0s", "2h", "soon"}) {
    auto bad = read_server_config(std::string(kRequired) + "steps_stored_every: " + value + "\n",
                                  "server.yaml", "/etc/tidepool");
    ASSERT_FALSE(bad.has_value()) << value;
    EXPECT_THAT(bad.error().message(), HasSubstr("steps_stored_every")) << value;
    EXPECT_THAT(bad.error().message(), HasSubstr("from 1s to 1h")) << value;
  }
}

TEST(ServerConfigTest, TheStoreIsSqliteUnlessEtcdIsNamed) {
  auto plain = read_server_config(kRequired, "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(plain.has_value()) << plain.error().message();
  EXPECT_EQ(plain->store.kind, StoreKind::kSqlite);
  EXPECT_EQ(plain->advertise_url, "");

  auto etcd =
      read_server_config(std::string(kRequired) +
                             "store:\n  kind: etcd\n  endpoints: [10.0.0.1:2379, 10.0.0.2:2379]\n"
                             "  prefix: /pools/lab\n  lease_ttl: 5s\n  max_txn_ops: 10000\n"
                             "  max_request_bytes: 33554432\n"
                             "  tls: {ca: etcd/ca.crt, cert: /pki/client.crt, key: client.key}\n"
                             "advertise_url: https://a.example:8470\n",
                         "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(etcd.has_value()) << etcd.error().message();
  EXPECT_EQ(etcd->store.kind, StoreKind::kEtcd);
  EXPECT_EQ(etcd->store.endpoints, (std::vector<std::string>{"10.0.0.1:2379", "10.0.0.2:2379"}));
  EXPECT_EQ(etcd->store.prefix, "/pools/lab");
  EXPECT_EQ(etcd->store.lease_ttl, std::chrono::seconds{5});
  EXPECT_EQ(etcd->advertise_url, "https://a.example:8470");
  EXPECT_EQ(etcd->store.max_txn_ops, 10000);
  EXPECT_EQ(etcd->store.max_request_bytes, 33554432);
  EXPECT_EQ(etcd->store.tls_ca, "/etc/tidepool/etcd/ca.crt");
  EXPECT_EQ(etcd->store.tls_cert, "/pki/client.crt");
  EXPECT_EQ(etcd->store.tls_key, "/etc/tidepool/client.key");

  auto defaults = read_server_config(std::string(kRequired) + "store: {kind: etcd}\n",
                                     "server.yaml", "/etc/tidepool");
  ASSERT_TRUE(defaults.has_value()) << defaults.error().message();
  EXPECT_EQ(defaults->store.endpoints, std::vector<std::string>{"127.0.0.1:2379"});
  EXPECT_EQ(defaults->store.prefix, "/tidepool");
  EXPECT_EQ(defaults->store.lease_ttl, std::chrono::seconds{3});
  EXPECT_EQ(defaults->store.tls_ca, "");
}

TEST(ServerConfigTest, ABadStoreIsRefusedNamingTheKey) {
  for (const auto& [text, field, words] : {
           std::tuple{"store: {kind: zookeeper}", "store.kind", "sqlite or etcd"},
           std::tuple{"store: {kind: sqlite, endpoints: [a:1]}", "store.endpoints", "only for"},
           std::tuple{"store: {kind: etcd, endpoints: []}", "store.endpoints", "1..16"},
           std::tuple{"store: {kind: etcd, endpoints: [etcd-1]}", "store.endpoints[0]",
                      "host:port"},
           std::tuple{"store: {kind: etcd, endpoints: [a:0]}", "store.endpoints[0]", "host:port"},
           std::tuple{"store: {kind: etcd, prefix: tidepool}", "store.prefix", "leading /"},
           std::tuple{"store: {kind: etcd, prefix: /tidepool/}", "store.prefix", "trailing /"},
           std::tuple{"store: {kind: etcd, lease_ttl: 1s}", "store.lease_ttl", "2s to 60s"},
           std::tuple{"store: {kind: etcd, lease_ttl: 2m}", "store.lease_ttl", "2s to 60s"},
           std::tuple{"store: {kind: etcd, leases: 3}", "leases", ""},
           std::tuple{"store: {kind: etcd, max_txn_ops: 8}", "store.max_txn_ops", "16.."},
           std::tuple{"store: {kind: sqlite, max_txn_ops: 500}", "store.max_txn_ops", "only for"},
           std::tuple{"store: {kind: sqlite, tls: {ca: ca.crt}}", "store.tls", "only for"},
           std::tuple{"store: {kind: etcd, tls: {cert: c.crt, key: c.key}}", "store.tls.ca",
                      "required"},
           std::tuple{"store: {kind: etcd, tls: {ca: ca.crt, cert: c.crt}}", "store.tls.key",
                      "both or neither"},
           std::tuple{"store: {kind: etcd, tls: {ca: ca.crt, password: x}}", "password", ""},
           std::tuple{"advertise_url: a.example:8470", "advertise_url", "http://"},
       }) {
    auto bad = read_server_config(std::string(kRequired) + text + "\n", "server.yaml", "/etc");
    ASSERT_FALSE(bad.has_value()) << text;
    EXPECT_THAT(bad.error().message(), HasSubstr(field)) << text;
    EXPECT_THAT(bad.error().message(), HasSubstr(words)) << text;
  }
}

// A folder with a pre-warm hook (executable), a file that is not executable and a folder.
class PrewarmConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tidepool-prewarm-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "folder");
    for (const char* name : {"stage.sh", "plain.txt"}) {
      std::ofstream(dir_ / name) << "#!/bin/sh\nexit 0\n";
    }
    std::filesystem::permissions(dir_ / "stage.sh", std::filesystem::perms::owner_all);
    std::filesystem::permissions(dir_ / "plain.txt", std::filesystem::perms::owner_read |
                                                         std::filesystem::perms::owner_write);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<ServerConfig> read(const std::string& lines) const {
    return read_server_config(std::string(kRequired) + lines, "server.yaml", dir_.string());
  }

  std::filesystem::path dir_;
};

TEST_F(PrewarmConfigTest, PrewarmIsOffWithoutTheKeyAndTakesAHookALeadAndATimeout) {
  auto plain = read("");
  ASSERT_TRUE(plain.has_value()) << plain.error().message();
  EXPECT_EQ(plain->prewarm_hook, "");

  auto defaults = read("prewarm: {hook: stage.sh}\n");
  ASSERT_TRUE(defaults.has_value()) << defaults.error().message();
  EXPECT_EQ(defaults->prewarm_hook, (dir_ / "stage.sh").string());  // from the file's folder
  EXPECT_EQ(defaults->prewarm_lead, 600);
  EXPECT_EQ(defaults->prewarm_timeout, std::chrono::minutes(5));

  auto set =
      read("prewarm:\n  hook: " + (dir_ / "stage.sh").string() + "\n  lead: 15m\n  timeout: 90s\n");
  ASSERT_TRUE(set.has_value()) << set.error().message();
  EXPECT_EQ(set->prewarm_hook, (dir_ / "stage.sh").string());
  EXPECT_EQ(set->prewarm_lead, 900);
  EXPECT_EQ(set->prewarm_timeout, std::chrono::seconds(90));
}

TEST_F(PrewarmConfigTest, ABadPrewarmIsRefusedNamingTheKey) {
  for (const auto& [lines, key, reason] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"prewarm: stage.sh\n", "prewarm", "expected a map"},
           {"prewarm: {lead: 10m}\n", "prewarm.hook", "the key is missing"},
           {"prewarm: {hook: missing.sh}\n", "prewarm.hook", "is not a file"},
           {"prewarm: {hook: folder}\n", "prewarm.hook", "is not a file"},
           {"prewarm: {hook: plain.txt}\n", "prewarm.hook", "is not executable"},
           {"prewarm: {hook: stage.sh, lead: 0s}\n", "prewarm.lead", "from 1s to 1d"},
           {"prewarm: {hook: stage.sh, lead: 2d}\n", "prewarm.lead", "from 1s to 1d"},
           {"prewarm: {hook: stage.sh, lead: soon}\n", "prewarm.lead", "from 1s to 1d"},
           {"prewarm: {hook: stage.sh, timeout: 2h}\n", "prewarm.timeout", "from 1s to 1h"},
           {"prewarm: {hook: stage.sh, horizon: 1h}\n", "prewarm.horizon", "unknown key"}}) {
    auto bad = read(lines);
    ASSERT_FALSE(bad.has_value()) << lines;
    EXPECT_THAT(bad.error().message(), HasSubstr(key)) << lines;
    EXPECT_THAT(bad.error().message(), HasSubstr(reason)) << lines;
  }
}

}  // namespace
}  // namespace tidepool
