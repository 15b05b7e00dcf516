// The API end to end against the real server process: jobs, nodes, tenants, tokens, events,
// metrics, bad input and the access matrix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "server_process.h"

namespace tidepool::test_support {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char* kJob = R"({"name": "train", "tenant": "vision", "queue": "default", "tasks": 2,
  "gpus_per_task": 8, "gpu_model": ["H100"], "runtime_estimate": "1h",
  "command": ["python", "train.py"]})";

const char* kYamlJob = R"(name: notebook
tenant: vision
class: dev
gpus_per_task: 1
gpu_milli: 500
command: [jupyter, lab]
)";

class ServerApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(
        dir_, write_server_config(dir_, "rate_limit: {per_second: 20, burst: 40}\n"));
    ASSERT_TRUE(server_->start()) << server_->log();
    admin_ = std::make_unique<ApiClient>(server_->port(), server_->admin_token());
  }

  // A new token of `role` (and its tenant or node).
  std::string token(const std::string& role, const std::string& scope = "") {
    nlohmann::json body = {{"role", role}};
    if (role == "user") body["tenant"] = scope;
    if (role == "agent") body["node"] = scope;
    auto created = admin_->post("/v1/tokens", body.dump());
    EXPECT_EQ(created.status, 201) << created.body.dump();
    return created.body.value("secret", "");
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<ApiClient> admin_;
};

TEST_F(ServerApiTest, JobLifecycleOverHttp) {
  auto submitted = admin_->post("/v1/jobs", kJob);
  ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
  const int id = submitted.body["id"];
  auto yaml = admin_->post("/v1/jobs", kYamlJob, "application/yaml");
  ASSERT_EQ(yaml.status, 201) << yaml.body.dump();
  EXPECT_EQ(yaml.body["spec"]["gpu_milli"], 500);

  auto job = admin_->get("/v1/jobs/" + std::to_string(id));
  ASSERT_EQ(job.status, 200);
  EXPECT_EQ(job.body["state"], "running");
  EXPECT_EQ(job.body["placement"].size(), 2U);
  auto why = admin_->get("/v1/jobs/" + std::to_string(id) + "/why");
  EXPECT_THAT(why.body["reason"].get<std::string>(), HasSubstr("running"));

  auto listed = admin_->get("/v1/jobs?tenant=vision&state=running");
  ASSERT_EQ(listed.status, 200);
  EXPECT_EQ(listed.body["jobs"].size(), 2U);

  auto checkpoint =
      admin_->post("/v1/jobs/" + std::to_string(id) + "/checkpoint", R"({"step": 100})");
  EXPECT_EQ(checkpoint.status, 200) << checkpoint.body.dump();
  EXPECT_EQ(checkpoint.body["checkpoint_step"], 100);

  auto cancelled = admin_->del("/v1/jobs/" + std::to_string(id));
  EXPECT_EQ(cancelled.status, 200);
  EXPECT_EQ(cancelled.body["state"], "cancelled");
  EXPECT_EQ(admin_->del("/v1/jobs/" + std::to_string(id)).status, 409);

  // The events tell the story in order, and a long poll returns as soon as one arrives.
  auto events = admin_->get("/v1/events?since=0");
  ASSERT_EQ(events.status, 200);
  std::vector<std::string> kinds;
  for (const auto& e : events.body["events"]) kinds.push_back(e["kind"]);
  EXPECT_THAT(kinds, ::testing::IsSupersetOf({"job.submitted", "job.started", "job.cancelled"}));
  const std::int64_t last = events.body["last_seq"];
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ApiClient(server_->port(), server_->admin_token()).post("/v1/jobs", kJob);
  });
  const auto start = std::chrono::steady_clock::now();
  auto waited = admin_->get("/v1/events?since=" + std::to_string(last) + "&timeout=20s");
  later.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_EQ(waited.status, 200);
  ASSERT_FALSE(waited.body["events"].empty());
  EXPECT_EQ(waited.body["events"][0]["kind"], "job.submitted");
}

TEST_F(ServerApiTest, NodesTenantsAndQueues) {
  auto drained = admin_->post("/v1/nodes/h100-a-01/drain", R"({"reason": "fan"})");
  ASSERT_EQ(drained.status, 200) << drained.body.dump();
  EXPECT_EQ(drained.body["state"], "drained");
  auto nodes = admin_->get("/v1/nodes");
  ASSERT_EQ(nodes.status, 200);
  EXPECT_EQ(nodes.body["nodes"].size(), 23U);
  EXPECT_EQ(nodes.body["nodes"][0]["drain_reason"], "fan");
  EXPECT_EQ(admin_->post("/v1/nodes/h100-a-01/undrain", "").body["state"], "ready");
  EXPECT_EQ(admin_->post("/v1/nodes/nope/drain", "").status, 404);

  auto tenants = admin_->get("/v1/tenants");
  ASSERT_EQ(tenants.status, 200);
  EXPECT_EQ(tenants.body["tenants"].size(), 5U);
  auto put = admin_->put("/v1/tenants/vision",
                         R"({"weight": 2, "queues": ["default", "detection"],
                             "quota": {"H100": {"guaranteed_gpus": 24}}})");
  ASSERT_EQ(put.status, 200) << put.body.dump();
  EXPECT_EQ(put.body["quota"]["H100"]["guaranteed_gpus"], 24);
  // The org caps its tenants' guarantees at 96 H100; search holds 64.
  auto over = admin_->put("/v1/tenants/vision", R"({"quota": {"H100": {"guaranteed_gpus": 40}}})");
  EXPECT_EQ(over.status, 400);
  EXPECT_THAT(over.body["reason"].get<std::string>(), HasSubstr("96000m"));
  auto bad = admin_->put("/v1/tenants/vision", R"({"quota": {"H100": {"guaranteed_gpus": -1}}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body["field"].get<std::string>(), HasSubstr("guaranteed_gpus"));
  auto queues = admin_->get("/v1/queues");
  ASSERT_EQ(queues.status, 200);
  EXPECT_GE(queues.body["queues"].size(), 8U);
}

// The web dashboard: its files open to all with a strict content policy, revalidated by ETag;
// the data behind it needs a token.
TEST_F(ServerApiTest, ServesTheDashboardsFilesWithAStrictPolicy) {
  httplib::Client browser("127.0.0.1", server_->port());
  auto index = browser.Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_THAT(index->get_header_value("Content-Type"), HasSubstr("text/html"));
  EXPECT_THAT(index->body, HasSubstr("/ui/app.js"));
  EXPECT_THAT(index->get_header_value("Content-Security-Policy"), HasSubstr("script-src 'self'"));
  EXPECT_EQ(index->get_header_value("X-Content-Type-Options"), "nosniff");
  const std::string etag = index->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = browser.Get("/", httplib::Headers{{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());

  // Chart.js comes from Debian's package, embedded at build time.
  auto chart = browser.Get("/ui/vendor/chart.min.js");
  ASSERT_TRUE(chart);
  EXPECT_EQ(chart->status, 200);
  EXPECT_THAT(chart->get_header_value("Content-Type"), HasSubstr("text/javascript"));
  EXPECT_GT(chart->body.size(), 100'000U);
  for (const char* missing : {"/ui/", "/ui/nothing.js", "/ui/../CMakeLists.txt", "/index.html"}) {
    auto refused = browser.Get(missing);
    ASSERT_TRUE(refused) << missing;
    EXPECT_EQ(refused->status, 404) << missing;
  }
  auto no_token = ApiClient(server_->port(), "").get("/v1/pool");
  EXPECT_EQ(no_token.status, 401);
}

// GET /v1/whoami and GET /v1/pool: the map has a cell per GPU, a job's shares where its tasks
// run, and a user sees its own tenant's jobs only.
TEST_F(ServerApiTest, PoolMapHasACellPerGpuAndHidesOtherTenantsJobs) {
  auto me = admin_->get("/v1/whoami");
  ASSERT_EQ(me.status, 200) << me.body.dump();
  EXPECT_EQ(me.body["role"], "admin");
  EXPECT_EQ(me.body["market"], false);
  const std::string vision = token("user", "vision");
  ApiClient user(server_->port(), vision);
  auto user_me = user.get("/v1/whoami");
  EXPECT_EQ(user_me.body["role"], "user");
  EXPECT_EQ(user_me.body["tenant"], "vision");

  auto submitted = admin_->post("/v1/jobs", kJob);  // vision: 2 tasks of 8 H100
  ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
  auto notebook = admin_->post("/v1/jobs", R"({"name": "nb", "tenant": "search", "queue": "ranking",
    "gpus_per_task": 1, "gpu_milli": 500, "command": ["jupyter"]})");
  ASSERT_EQ(notebook.status, 201) << notebook.body.dump();
  ASSERT_TRUE(admin_->post("/v1/nodes/h100-b-02/drain", R"({"reason": "fan"})").status == 200);

  auto map = admin_->get("/v1/pool");
  ASSERT_EQ(map.status, 200) << map.body.dump();
  const nlohmann::json& figures = map.body["figures"];
  EXPECT_EQ(figures["gpus"], 176);
  EXPECT_EQ(figures["allocated_milli"], 16 * 1000 + 500);
  EXPECT_EQ(figures["nodes"], 23);
  EXPECT_EQ(figures["nodes_drained"], 1);
  EXPECT_EQ(figures["jobs_running"], 2);
  int cells = 0;
  int vision_cells = 0;
  int half_cells = 0;
  int nodes = 0;
  for (const auto& spine : map.body["spines"]) {
    for (const auto& leaf : spine["leaves"]) {
      for (const auto& node : leaf["nodes"]) {
        ++nodes;
        ASSERT_EQ(node["cells"].size(), node["gpus"].get<std::size_t>()) << node.dump();
        if (node["name"] == "h100-b-02") {
          EXPECT_EQ(node["state"], "drained");
          EXPECT_THAT(node["reason"].get<std::string>(), HasSubstr("fan"));
        }
        for (const auto& shares : node["cells"]) {
          ++cells;
          for (const auto& share : shares) {
            const std::string tenant = map.body["tenants"][share["tenant"].get<int>()]["name"];
            if (tenant == "vision") {
              ++vision_cells;
              EXPECT_EQ(share["job"], submitted.body["id"]);
            }
            if (share["milli"] == 500) ++half_cells;
          }
        }
      }
    }
  }
  EXPECT_EQ(nodes, 23);
  EXPECT_EQ(cells, 176);
  EXPECT_EQ(vision_cells, 16);
  EXPECT_EQ(half_cells, 1);

  // The vision user sees its job's cells, and search's share without its job.
  auto seen = user.get("/v1/pool");
  ASSERT_EQ(seen.status, 200);
  ASSERT_EQ(seen.body["tenants"].size(), 1U);
  EXPECT_EQ(seen.body["tenants"][0]["name"], "vision");
  const std::string text = seen.body.dump();
  EXPECT_THAT(text, Not(HasSubstr("\"nb\"")));
  EXPECT_THAT(text, HasSubstr(R"({"milli":500,"tenant":-1})"));
}

// GET /v1/history: the server sampled its figures at start; bad parameters name the field.
TEST_F(ServerApiTest, HistoryAnswersTheSampledSeriesAndNamesABadParameter) {
  auto history = admin_->get("/v1/history?series=pool_milli_gpus,allocated_milli_gpus&step=10m");
  ASSERT_EQ(history.status, 200) << history.body.dump();
  EXPECT_EQ(history.body["step_s"], 600);
  ASSERT_EQ(history.body["series"].size(), 2U) << history.body.dump();
  EXPECT_EQ(history.body["series"][1]["name"], "pool_milli_gpus");
  EXPECT_GT(history.body["series"][1]["points"][0][1].get<std::int64_t>(), 0);
  for (const auto& [query, field] :
       std::vector<std::pair<std::string, std::string>>{{"?step=soon", "step"},
                                                        {"?from=yesterday", "from"},
                                                        {"?from=20&to=10", "to"},
                                                        {"?to=-5", "to"}}) {
    auto bad = admin_->get("/v1/history" + query);
    EXPECT_EQ(bad.status, 400) << query;
    EXPECT_EQ(bad.body["field"], field) << query << " " << bad.body.dump();
  }
}

TEST_F(ServerApiTest, BadInputGetsAFieldAndAReasonAndStoresNothing) {
  auto missing = admin_->post("/v1/jobs", R"({"name": "x"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.body["field"], "tenant");
  auto range = admin_->post("/v1/jobs", R"({"name": "x", "tenant": "vision", "tasks": 0})");
  EXPECT_EQ(range.status, 400);
  EXPECT_EQ(range.body["field"], "tasks");
  auto malformed = admin_->post("/v1/jobs", "{not json");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_TRUE(malformed.body.contains("reason"));
  auto huge = admin_->post("/v1/jobs", std::string(std::size_t{1} << 21, ' '));
  EXPECT_EQ(huge.status, 413);
  auto unknown_route = admin_->get("/v1/nothing");
  EXPECT_EQ(unknown_route.status, 404);
  EXPECT_TRUE(unknown_route.body.contains("error"));
  EXPECT_EQ(admin_->get("/v1/jobs/abc").status, 404);
  EXPECT_EQ(admin_->get("/v1/jobs/99999999999999999999").status, 404);
  EXPECT_EQ(admin_->get("/v1/events?since=-3").status, 400);
  EXPECT_EQ(admin_->get("/v1/jobs").body["jobs"].size(), 0U);
}

TEST_F(ServerApiTest, AccessMatrix) {
  const std::string vision = token("user", "vision");
  const std::string search = token("user", "search");
  const std::string agent = token("agent", "a100-a-01");  // vision's job needs H100
  auto submitted = ApiClient(server_->port(), vision).post("/v1/jobs", kJob);
  ASSERT_EQ(submitted.status, 201);
  const std::string job = "/v1/jobs/" + std::to_string(submitted.body["id"].get<int>());
  struct Case {
    std::string method, path, body;
    int none, bad, own_user, other_user, agent_, admin;
  };
  // Expected statuses: no token, a wrong token, vision's user, search's user, the agent, admin.
  const std::vector<Case> cases = {
      {"GET", "/v1/jobs", "", 401, 401, 200, 200, 200, 200},
      {"GET", job, "", 401, 401, 200, 404, 404, 200},
      {"GET", job + "/why", "", 401, 401, 200, 404, 404, 200},
      {"POST", "/v1/jobs", kJob, 401, 401, 201, 403, 403, 201},
      {"POST", "/v1/nodes/h100-a-02/drain", "", 401, 401, 403, 403, 403, 200},
      {"POST", "/v1/nodes/a100-a-01/register", "{}", 401, 401, 403, 403, 200, 200},
      {"POST", "/v1/nodes/h100-a-02/heartbeat", "{}", 401, 401, 403, 403, 403, 200},
      {"PUT", "/v1/tenants/search", R"({"queues": ["ranking", "retrieval"]})", 401, 401, 403, 403,
       403, 200},
      {"GET", "/v1/tokens", "", 401, 401, 403, 403, 403, 200},
      {"POST", "/v1/tokens", R"({"role": "admin"})", 401, 401, 403, 403, 403, 201},
      {"GET", "/v1/nodes", "", 401, 401, 200, 200, 200, 200},
      {"GET", "/v1/tenants", "", 401, 401, 200, 200, 200, 200},
      // Every job's spec and the tokens' hashes: admins only.
      {"GET", "/v1/admin/backup", "", 401, 401, 403, 403, 403, 200},
  };
  const std::vector<std::string> tokens = {"",     "tp_wrong", vision,
                                           search, agent,      server_->admin_token()};
  for (const Case& c : cases) {
    const std::vector<int> expected = {c.none, c.bad, c.own_user, c.other_user, c.agent_, c.admin};
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      ApiClient client(server_->port(), tokens[t]);
      ApiClient::Answer a;
      if (c.method == "GET") {
        a = client.get(c.path);
      } else if (c.method == "POST") {
        a = client.post(c.path, c.body);
      } else {
        a = client.put(c.path, c.body);
      }
      EXPECT_EQ(a.status, expected[t])
          << c.method << " " << c.path << " with token #" << t << ": " << a.body.dump();
      if (a.status >= 400) {
        EXPECT_TRUE(a.body.contains("reason")) << a.body.dump();
      }
    }
  }
  // Revoked tokens stop working at once.
  auto listed = admin_->get("/v1/tokens");
  for (const auto& t : listed.body["tokens"]) {
    if (t["tenant"] == "search") {
      EXPECT_EQ(admin_->del("/v1/tokens/" + t["id"].get<std::string>()).status, 200);
    }
  }
  EXPECT_EQ(ApiClient(server_->port(), search).get("/v1/jobs").status, 401);
  // The token file of the first start is private.
  EXPECT_EQ(std::filesystem::status(dir_.file("tidepool.db.admin-token")).permissions() &
                std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST_F(ServerApiTest, RateLimitAnswers429) {
  int limited = 0;
  for (int i = 0; i < 100; ++i) limited += admin_->get("/v1/queues").status == 429 ? 1 : 0;
  EXPECT_GT(limited, 0);
}

TEST_F(ServerApiTest, MetricsAreValidPrometheusText) {
  admin_->post("/v1/jobs", kJob);
  httplib::Client client("127.0.0.1", server_->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr("tidepool_jobs{state=\"running\"} 1"));
  EXPECT_THAT(res->body, HasSubstr("tidepool_http_requests_total"));
  EXPECT_THAT(res->body, HasSubstr("tidepool_store_commit_seconds_bucket"));
  // The job started at once: one wait of vision's, in the first bucket.
  EXPECT_THAT(res->body, HasSubstr("tidepool_queue_wait_seconds_count{tenant=\"vision\"} 1"));
  EXPECT_THAT(res->body,
              HasSubstr("tidepool_queue_wait_seconds_bucket{tenant=\"vision\",le=\"60\"} 1"));
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed";
  }
  const std::string file = dir_.file("metrics.txt");
  write_text(file, res->body);
  EXPECT_EQ(
      std::system(("promtool check metrics < " + file + " > " + dir_.file("promtool.log") + " 2>&1")
                      .c_str()),
      0)
      << read_text(dir_.file("promtool.log"));
}

TEST_F(ServerApiTest, RestartKeepsRunningJobsAndTheirPlaces) {
  std::vector<nlohmann::json> before;
  for (int i = 0; i < 5; ++i) {
    auto r = admin_->post("/v1/jobs", kJob);
    ASSERT_EQ(r.status, 201);
  }
  auto listed = admin_->get("/v1/jobs");
  ASSERT_EQ(server_->terminate(), 0) << server_->log();
  ASSERT_TRUE(server_->start()) << server_->log();
  ApiClient again(server_->port(), server_->admin_token());
  auto relisted = again.get("/v1/jobs");
  ASSERT_EQ(relisted.body["jobs"].size(), listed.body["jobs"].size());
  for (std::size_t i = 0; i < listed.body["jobs"].size(); ++i) {
    EXPECT_EQ(relisted.body["jobs"][i]["state"], listed.body["jobs"][i]["state"]);
    EXPECT_EQ(relisted.body["jobs"][i]["placement"], listed.body["jobs"][i]["placement"]);
  }
  EXPECT_EQ(listed.body["jobs"][0]["state"], "running");
}

TEST(ServerTls, ServesHttpsWithTheGivenCertificate) {
  if (std::system("command -v openssl > /dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl";
  TempDir dir;
  const std::string cert = dir.file("cert.pem");
  const std::string key = dir.file("key.pem");
  ASSERT_EQ(std::system(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                         "-addext subjectAltName=IP:127.0.0.1 -keyout " +
                         key + " -out " + cert + " > " + dir.file("openssl.log") + " 2>&1")
                            .c_str()),
            0)
      << read_text(dir.file("openssl.log"));
  ServerProcess server(dir, write_server_config(dir), {"--tls-cert", cert, "--tls-key", key});
  server.use_tls(cert);
  ASSERT_TRUE(server.start()) << server.log();
  httplib::SSLClient client("127.0.0.1", server.port());
  client.set_ca_cert_path(cert.c_str());
  client.enable_server_certificate_verification(true);
  client.set_bearer_token_auth(server.admin_token().c_str());
  auto jobs = client.Get("/v1/jobs");
  ASSERT_TRUE(jobs) << httplib::to_string(jobs.error());
  EXPECT_EQ(jobs->status, 200);
  // The CLI trusts the server through TIDEPOOL_CA_CERT, and without it says what to set.
  const std::string cli = tidepool_binary() + " queues -o json --server https://127.0.0.1:" +
                          std::to_string(server.port()) + " --token " + server.admin_token();
  const std::string isolated = "env -u TIDEPOOL_CA_CERT XDG_CONFIG_HOME=" + dir.file("xdg") + " ";
  EXPECT_EQ(std::system((isolated + "TIDEPOOL_CA_CERT=" + cert + " " + cli + " > " +
                         dir.file("cli.out") + " 2>&1")
                            .c_str()),
            0)
      << read_text(dir.file("cli.out"));
  EXPECT_THAT(read_text(dir.file("cli.out")), HasSubstr("\"vision\""));
  EXPECT_NE(std::system((isolated + cli + " > " + dir.file("cli.err") + " 2>&1").c_str()), 0);
  EXPECT_THAT(read_text(dir.file("cli.err")), HasSubstr("is not trusted"));
  EXPECT_THAT(read_text(dir.file("cli.err")), HasSubstr("TIDEPOOL_CA_CERT"));
  // Plain HTTP gets no answer from the TLS port.
  httplib::Client plain("127.0.0.1", server.port());
  plain.set_read_timeout(2, 0);
  auto refused = plain.Get("/healthz");
  EXPECT_TRUE(!refused || refused->status != 200);
  // A server given a certificate without its key does not start.
  TempDir half_dir;
  ServerProcess half(half_dir, write_server_config(half_dir), {"--tls-cert", cert});
  EXPECT_FALSE(half.start());
  EXPECT_THAT(half.log(), HasSubstr("--tls-key"));
}

}  // namespace
}  // namespace tidepool::test_support
