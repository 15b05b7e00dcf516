#include "cli/demo_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/cluster_file.h"
#include "config/tenants_file.h"

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DemoPlan, ParsesFakeGpus) {
  auto gpus = parse_demo_gpus("fake:8xH100");
  ASSERT_TRUE(gpus) << gpus.error().message();
  EXPECT_EQ(gpus->count, 8);
  EXPECT_EQ(gpus->model, "H100");
  EXPECT_THAT(parse_demo_gpus("nvml").error().reason, HasSubstr("not fake GPUs"));
  EXPECT_FALSE(parse_demo_gpus("fake:0xH100"));
  EXPECT_FALSE(parse_demo_gpus("fake:17xH100"));
  EXPECT_FALSE(parse_demo_gpus("fake:8x"));
  EXPECT_FALSE(parse_demo_gpus("fake:8H100"));
  EXPECT_FALSE(parse_demo_gpus("fake:8xH 100"));
}

TEST(DemoPlan, ParsesSpeedAndRefresh) {
  EXPECT_EQ(parse_demo_speed("1").value(), 1000);
  EXPECT_EQ(parse_demo_speed("0.5").value(), 500);
  EXPECT_EQ(parse_demo_speed("20").value(), 20'000);
  EXPECT_FALSE(parse_demo_speed("0"));
  EXPECT_FALSE(parse_demo_speed("21"));
  EXPECT_FALSE(parse_demo_speed("-1"));
  EXPECT_EQ(parse_refresh_ms("2s").value(), 2000);
  EXPECT_EQ(parse_refresh_ms("500ms").value(), 500);
  EXPECT_FALSE(parse_refresh_ms("100ms"));
  EXPECT_FALSE(parse_refresh_ms("2h"));
}

TEST(DemoPlan, FormatsSeconds) {
  EXPECT_EQ(format_seconds(1000), "1");
  EXPECT_EQ(format_seconds(500), "0.5");
  EXPECT_EQ(format_seconds(1250), "1.25");
  EXPECT_EQ(format_seconds(50'000), "50");
  EXPECT_EQ(format_seconds(0), "0");
}

TEST(DemoPlan, SplitsNodesOverTwoLeavesAndGuaranteesThePool) {
  auto pool = make_demo_pool(5, DemoGpus{8, "H100"});
  ASSERT_TRUE(pool) << pool.error().message();
  std::vector<std::string> leaves;
  for (const DemoNode& node : pool->nodes) leaves.push_back(node.name + "@" + node.leaf);
  EXPECT_THAT(leaves, ElementsAre("node-1@leaf-1", "node-2@leaf-1", "node-3@leaf-1",
                                  "node-4@leaf-2", "node-5@leaf-2"));
  int guaranteed = 0;
  for (const DemoTenant& t : pool->tenants) guaranteed += t.guaranteed_gpus;
  EXPECT_EQ(guaranteed, pool->total_gpus());
  EXPECT_EQ(pool->tenants[0].guaranteed_gpus, 20);
  EXPECT_FALSE(make_demo_pool(0, DemoGpus{}));
  EXPECT_FALSE(make_demo_pool(kMaxDemoNodes + 1, DemoGpus{}));
}

TEST(DemoPlan, WritesFilesTheServerReads) {
  for (int nodes : {1, 4}) {
    auto pool = make_demo_pool(nodes, DemoGpus{4, "A100"});
    ASSERT_TRUE(pool);
    auto cluster = read_cluster_yaml(demo_cluster_yaml(*pool), "cluster.yaml");
    ASSERT_TRUE(cluster) << cluster.error().message();
    ASSERT_EQ(cluster->nodes.size(), static_cast<std::size_t>(nodes));
    EXPECT_EQ(cluster->nodes[0].name, "node-1");
    auto tenants = read_tenants_yaml(demo_tenants_yaml(*pool), "tenants.yaml", cluster->models);
    ASSERT_TRUE(tenants) << tenants.error().message();
    EXPECT_EQ(tenants->orgs.size(), 2u);
  }
  const std::string server = demo_server_yaml("/tmp/run");
  EXPECT_THAT(server, HasSubstr("listen: 127.0.0.1:0\n"));
  EXPECT_THAT(server, HasSubstr("database: /tmp/run/tidepool.db\n"));
  EXPECT_THAT(server, HasSubstr("heartbeat_timeout: 5s\n"));
}

TEST(DemoPlan, AgentsShareTheCheckpointRoot) {
  auto pool = make_demo_pool(2, DemoGpus{8, "H100"});
  ASSERT_TRUE(pool);
  const DemoPaths paths{"/tmp/run"};
  const auto a = demo_agent_command("agent", paths, *pool, pool->nodes[0], "http://h:1", "t1");
  const auto b = demo_agent_command("agent", paths, *pool, pool->nodes[1], "http://h:1", "t2");
  const std::string line_a = shell_line(a);
  EXPECT_THAT(line_a, HasSubstr("--node node-1 --leaf leaf-1 --spine spine-1"));
  EXPECT_THAT(line_a, HasSubstr("--state-dir /tmp/run/agents/node-1 "));
  EXPECT_THAT(line_a, HasSubstr("--checkpoint-root /tmp/run/checkpoints "));
  EXPECT_THAT(shell_line(b), HasSubstr("--checkpoint-root /tmp/run/checkpoints "));
  EXPECT_THAT(shell_line(b), HasSubstr("--state-dir /tmp/run/agents/node-2 "));
  // The nodes share this machine: a service's endpoints must be reachable at 127.0.0.1.
  EXPECT_THAT(line_a, HasSubstr(" --address 127.0.0.1 "));
}

TEST(DemoPlan, LoadStepsUpAndBackDownScaledBySpeed) {
  EXPECT_EQ(demo_load_steps(1000), "5:20,40:60,5:60");
  EXPECT_EQ(demo_load_steps(2000), "5:10,40:30,5:30");
  EXPECT_EQ(demo_load_steps(500), "5:40,40:120,5:120");
  EXPECT_EQ(demo_load_steps(20'000), "5:1,40:3,5:3");  // never under 1 s a step
}

TEST(DemoPlan, LoadGeneratorFollowsTheService) {
  const DemoPaths paths{"/tmp/run"};
  EXPECT_EQ(paths.load_generator_log(), "/tmp/run/load_generator.log");
  const auto argv = demo_load_generator_command("/usr/bin/python3", "/d/demo",
                                                "http://127.0.0.1:8470/v1/services/7",
                                                paths.admin_token_file(), demo_load_steps(1000));
  EXPECT_EQ(shell_line(argv),
            "/usr/bin/python3 /d/demo/load_generator.py --service "
            "http://127.0.0.1:8470/v1/services/7 --token-file /tmp/run/admin.token --steps "
            "5:20,40:60,5:60");
}

TEST(DemoPlan, ServiceNeedsItsSpec) {
  auto missing = load_demo_service("/nonexistent/demo", 1000);
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(), HasSubstr("/nonexistent/demo/service.yaml"));
}

TEST(DemoPlan, QuotesShellWords) {
  EXPECT_EQ(shell_line({"sh", "/a/b.sh", "--x=1"}), "sh /a/b.sh --x=1");
  EXPECT_EQ(shell_line({"echo", "a b", "it's", ""}), "echo 'a b' 'it'\\''s' ''");
}

TEST(DemoPlan, SubstitutesPlaceholders) {
  EXPECT_EQ(substitute_demo_placeholders("[sh, ${DEMO_DIR}/t.sh] ${DEMO_STEP_SECONDS} ${HOME}",
                                         "/d", "0.5"),
            "[sh, /d/t.sh] 0.5 ${HOME}");
}

TEST(DemoPlan, ParsesWorkload) {
  auto ok = parse_workload("# comment\n\n0s a.yaml\n  20s\tb.yaml  \n90 c.json\n", "w.txt");
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_THAT(*ok, ElementsAre(std::pair<std::int64_t, std::string>{0, "a.yaml"},
                               std::pair<std::int64_t, std::string>{20, "b.yaml"},
                               std::pair<std::int64_t, std::string>{90, "c.json"}));
  EXPECT_EQ(parse_workload("0s a.yaml\nsoon b.yaml\n", "w.txt").error().field, "w.txt:2");
  EXPECT_EQ(parse_workload("a.yaml\n", "w.txt").error().field, "w.txt:1");
  EXPECT_EQ(parse_workload("0s a.yaml b.yaml\n", "w.txt").error().field, "w.txt:1");
}

TEST(DemoPlan, RefusesJobsThatFitNowhere) {
  auto pool = make_demo_pool(2, DemoGpus{4, "H100"});
  ASSERT_TRUE(pool);
  DemoSubmission sub;
  sub.file = "x.yaml";
  sub.spec.name = "x";
  sub.spec.gpus_per_task = 4;
  sub.spec.tasks = 2;
  EXPECT_FALSE(demo_misfit(sub, *pool));
  sub.spec.tasks = 3;
  EXPECT_THAT(demo_misfit(sub, *pool)->reason, HasSubstr("more than the pool's 8"));
  sub.spec.tasks = 1;
  sub.spec.gpus_per_task = 8;
  EXPECT_THAT(demo_misfit(sub, *pool)->reason, HasSubstr("more than a node has"));
  sub.spec.gpus_per_task = 1;
  sub.spec.gpu_models = {"A100"};
  EXPECT_THAT(demo_misfit(sub, *pool)->reason, HasSubstr("not the pool's H100"));
}

TEST(DemoPlan, LooksForTheDemoFolderInOrder) {
  EXPECT_THAT(demo_folder_candidates(std::string("/src"), "/usr/bin", "/built"),
              ElementsAre("/src/data/examples/demo", "/usr/bin/../share/tidepool/examples/demo",
                          "/built/data/examples/demo"));
  EXPECT_THAT(demo_folder_candidates(std::nullopt, "/usr/bin", ""),
              ElementsAre("/usr/bin/../share/tidepool/examples/demo"));
  auto missing = find_demo_folder({"/nonexistent/a", "/nonexistent/b"});
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().reason, HasSubstr("/nonexistent/a, /nonexistent/b"));
}

// The shipped demo folder: every spec parses with its placeholders substituted, and fits the
// default pool.
TEST(DemoPlan, ShippedWorkloadLoads) {
  const char* root = std::getenv("TIDEPOOL_SOURCE_DIR");
  if (root == nullptr) GTEST_SKIP() << "TIDEPOOL_SOURCE_DIR is not set";
  const std::string dir = std::string(root) + "/data/examples/demo";
  auto workload = load_demo_workload(dir, 2000);
  ASSERT_TRUE(workload) << workload.error().message();
  ASSERT_FALSE(workload->empty());
  auto pool = make_demo_pool(4, DemoGpus{8, "H100"});
  ASSERT_TRUE(pool);
  for (const DemoSubmission& sub : *workload) {
    EXPECT_FALSE(demo_misfit(sub, *pool)) << sub.file;
    ASSERT_FALSE(sub.spec.command.empty()) << sub.file;
    EXPECT_TRUE(sub.spec.command.back().starts_with(dir + "/")) << sub.file;
    EXPECT_EQ(sub.spec.env.at("STEP_SECONDS"), "0.5") << sub.file;
  }
  EXPECT_EQ(workload->back().at_ms, 10'000);  // finetune at 20 s, twice as fast
}

// --service: the shipped service.yaml is a service, not in the workload, that fits the default
// pool, and runs service_replica.py of the demo folder.
TEST(DemoPlan, ShippedServiceLoads) {
  const char* root = std::getenv("TIDEPOOL_SOURCE_DIR");
  if (root == nullptr) GTEST_SKIP() << "TIDEPOOL_SOURCE_DIR is not set";
  const std::string dir = std::string(root) + "/data/examples/demo";
  auto service = load_demo_service(dir, 1000);
  ASSERT_TRUE(service) << service.error().message();
  EXPECT_EQ(service->file, dir + "/service.yaml");
  EXPECT_EQ(service->at_ms, 0);
  ASSERT_TRUE(service->spec.service);
  EXPECT_EQ(service->spec.name, "chat");
  ASSERT_FALSE(service->spec.command.empty());
  EXPECT_EQ(service->spec.command.back(), dir);  // ${DEMO_DIR}, sh's $0
  auto pool = make_demo_pool(4, DemoGpus{8, "H100"});
  ASSERT_TRUE(pool);
  EXPECT_FALSE(demo_misfit(*service, *pool));
  auto workload = load_demo_workload(dir, 1000);
  ASSERT_TRUE(workload);
  for (const DemoSubmission& sub : *workload) EXPECT_NE(sub.file, service->file);
}

}  // namespace
}  // namespace tidepool
