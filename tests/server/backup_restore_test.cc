// Backup and restore end to end, across the two kinds of store: a server on SQLite with jobs and
// tokens is backed up while it runs (`tidepool admin backup FILE`, through its API), the backup is
// restored into etcd (a one-member cluster started by the test), and a server started on it holds
// the same jobs, tokens and events; then the way back: an offline backup of the etcd store
// (`--config`), restored into a new SQLite database. On the way, what must be refused: a user
// token's backup, an offline backup of a database its server holds, a restore into a store that is
// not empty, a truncated backup.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server_process.h"
#include "store/etcd_test_cluster.h"

namespace tidepool::test_support {
namespace {

using ::testing::HasSubstr;

struct Ran {
  int status = -1;
  std::string output;  // stdout and stderr
};

// Runs `tidepool ARGS...` to its end.
Ran run_tidepool(const TempDir& dir, std::vector<std::string> args) {
  static int runs = 0;
  const std::string log = dir.file("cli-" + std::to_string(++runs) + ".log");
  args.insert(args.begin(), tidepool_binary());
  pid_t pid = spawn_logged(std::move(args), log);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(log)};
}

// What must survive a backup and restore, by job id: its state, its spec, placement,
// transitions and submission time (as JSON text).
using JobsSeen = std::map<std::int64_t, std::pair<std::string, std::string>>;

JobsSeen jobs_of(ApiClient& api) {
  const ApiClient::Answer answer = api.get("/v1/jobs?limit=1000");
  EXPECT_EQ(answer.status, 200) << answer.body.dump();
  JobsSeen jobs;
  if (answer.status != 200) return jobs;
  for (const nlohmann::json& job : answer.body["jobs"]) {
    const nlohmann::json kept = {{"spec", job["spec"]},
                                 {"placement", job["placement"]},
                                 {"transitions", job["transitions"]},
                                 {"submitted_ms", job["submitted_ms"]}};
    jobs[job["id"].get<std::int64_t>()] = {job["state"].get<std::string>(), kept.dump()};
  }
  return jobs;
}

std::vector<std::string> token_ids(ApiClient& api) {
  const ApiClient::Answer answer = api.get("/v1/tokens");
  EXPECT_EQ(answer.status, 200) << answer.body.dump();
  std::vector<std::string> ids;
  for (const nlohmann::json& token : answer.body["tokens"]) ids.push_back(token["id"]);
  return ids;
}

// The first `count` events, as "seq kind".
std::vector<std::string> events_of(ApiClient& api, std::size_t count) {
  const ApiClient::Answer answer = api.get("/v1/events?since=0&limit=1000&timeout=0");
  EXPECT_EQ(answer.status, 200) << answer.body.dump();
  std::vector<std::string> events;
  for (const nlohmann::json& e : answer.body["events"]) {
    if (events.size() == count) break;
    events.push_back(std::to_string(e["seq"].get<std::int64_t>()) + " " +
                     e["kind"].get<std::string>());
  }
  return events;
}

// A server configuration on etcd, with its files in `dir`.
std::string write_etcd_config(const TempDir& dir, const EtcdTestCluster& etcd) {
  const std::string config = dir.file("server.yaml");
  write_text(config, "cluster: " + source_tree() + "/data/clusters/example.yaml\n" +
                         "tenants: " + source_tree() + "/data/tenants/example.yaml\n" +
                         "listen: 127.0.0.1:0\nsimulate_unregistered_nodes: true\n" +
                         "admin_token_file: " + dir.file("tidepool.db.admin-token") + "\n" +
                         "logs: " + dir.file("logs") + "\n" + "store: {kind: etcd, endpoints: [" +
                         etcd.endpoints()[0] + "], prefix: /restored}\n");
  return config;
}

TEST(BackupRestore, FromSqliteToEtcdAndBackThroughRealServers) {
  // --- a server on SQLite, with jobs (one cancelled) and a user token ---
  const TempDir sqlite_dir;
  const std::string sqlite_config = write_server_config(sqlite_dir);
  ServerProcess sqlite_server(sqlite_dir, sqlite_config);
  ASSERT_TRUE(sqlite_server.start()) << sqlite_server.log();
  const std::string admin = sqlite_server.admin_token();
  ApiClient api(sqlite_server.port(), admin);
  for (int i = 1; i <= 4; ++i) {
    const auto submitted = api.post("/v1/jobs",
                                    R"({"name": "train-)" + std::to_string(i) +
                                        R"(", "tenant": "vision", "tasks": 1, "gpus_per_task": 1,)"
                                        R"( "command": ["sleep", "3600"]})",
                                    "application/json", "key-" + std::to_string(i));
    ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
  }
  ASSERT_EQ(api.del("/v1/jobs/2").status, 200);
  const auto user = api.post("/v1/tokens", R"({"role": "user", "tenant": "vision"})");
  ASSERT_EQ(user.status, 201) << user.body.dump();
  const std::string user_secret = user.body["secret"];
  // The jobs that fit are placed by the next pass; then nothing changes.
  ASSERT_TRUE(eventually([&] {
    for (const auto& [id, job] : jobs_of(api)) {
      if (job.first == "pending") return false;
    }
    return true;
  }));
  const JobsSeen jobs = jobs_of(api);
  ASSERT_EQ(jobs.size(), 4U);
  EXPECT_EQ(jobs.at(1).first, "running");
  EXPECT_EQ(jobs.at(2).first, "cancelled");
  const std::vector<std::string> tokens = token_ids(api);
  ASSERT_EQ(tokens.size(), 2U);
  const std::vector<std::string> events = events_of(api, 1000);
  ASSERT_GE(events.size(), 5U);

  // --- backups of the running server: a user token may not; the offline path is locked out ---
  const std::string url = "http://127.0.0.1:" + std::to_string(sqlite_server.port());
  const std::string file = sqlite_dir.file("state.backup");
  Ran ran =
      run_tidepool(sqlite_dir, {"admin", "backup", file, "--server", url, "--token", user_secret});
  EXPECT_EQ(ran.status, 4) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("admin token is needed"));
  EXPECT_FALSE(std::filesystem::exists(file));
  ran = run_tidepool(sqlite_dir, {"admin", "backup", file, "--config", sqlite_config});
  EXPECT_EQ(ran.status, 1) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("in use"));
  EXPECT_THAT(ran.output, HasSubstr("tidepool admin backup FILE --server URL"));
  EXPECT_FALSE(std::filesystem::exists(file));

  ran = run_tidepool(sqlite_dir, {"admin", "backup", file, "--server", url, "--token", admin});
  ASSERT_EQ(ran.status, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("4 jobs, 2 tokens"));
  struct stat info {};
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600U);
  EXPECT_EQ(sqlite_server.terminate(), 0);

  // --- restored into etcd: refused whole when truncated, then whole, then refused as not empty ---
  auto etcd = EtcdTestCluster::start();
  ASSERT_TRUE(etcd.has_value()) << etcd.error().message();
  const TempDir etcd_dir;
  const std::string etcd_config = write_etcd_config(etcd_dir, **etcd);
  const std::string text = read_text(file);
  const std::string truncated = etcd_dir.file("truncated.backup");
  write_text(truncated, text.substr(0, text.size() * 2 / 3));
  ran = run_tidepool(etcd_dir, {"admin", "restore", truncated, "--config", etcd_config});
  EXPECT_EQ(ran.status, 1) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr(", line "));
  EXPECT_THAT(ran.output, HasSubstr("truncated"));

  ran = run_tidepool(etcd_dir, {"admin", "restore", file, "--config", etcd_config});
  ASSERT_EQ(ran.status, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("from a sqlite store) into etcd"));
  EXPECT_THAT(ran.output, HasSubstr("read back and compared"));
  ran = run_tidepool(etcd_dir, {"admin", "restore", file, "--config", etcd_config});
  EXPECT_EQ(ran.status, 1) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("not empty: it holds 4 jobs, 2 tokens"));

  // --- a server on etcd: the same jobs, tokens (the old secrets work) and events ---
  {
    ServerProcess etcd_server(etcd_dir, etcd_config);
    ASSERT_TRUE(etcd_server.start()) << etcd_server.log();
    ApiClient restored(etcd_server.port(), admin);
    EXPECT_EQ(jobs_of(restored), jobs);
    EXPECT_EQ(token_ids(restored), tokens);
    EXPECT_EQ(events_of(restored, events.size()), events);
    ApiClient as_user(etcd_server.port(), user_secret);
    EXPECT_EQ(jobs_of(as_user).size(), 4U);
    EXPECT_FALSE(std::filesystem::exists(etcd_dir.file("tidepool.db.admin-token")))
        << "the restored tokens include an admin: no new one is created";
    EXPECT_EQ(etcd_server.terminate(), 0);
  }

  // --- and back: an offline backup of the etcd store, into a new SQLite database ---
  const std::string again = etcd_dir.file("again.backup");
  ran = run_tidepool(etcd_dir, {"admin", "backup", again, "--config", etcd_config});
  ASSERT_EQ(ran.status, 0) << ran.output;
  ran = run_tidepool(etcd_dir, {"admin", "verify", again});
  ASSERT_EQ(ran.status, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("from an etcd store: 4 jobs, 2 tokens"));
  const TempDir back_dir;
  const std::string back_config = write_server_config(back_dir);
  ran = run_tidepool(back_dir, {"admin", "restore", again, "--config", back_config});
  ASSERT_EQ(ran.status, 0) << ran.output;
  ServerProcess back_server(back_dir, back_config);
  ASSERT_TRUE(back_server.start()) << back_server.log();
  ApiClient back(back_server.port(), admin);
  EXPECT_EQ(jobs_of(back), jobs);
  EXPECT_EQ(token_ids(back), tokens);
  EXPECT_EQ(events_of(back, events.size()), events);
  EXPECT_EQ(back_server.terminate(), 0);
}

}  // namespace
}  // namespace tidepool::test_support
