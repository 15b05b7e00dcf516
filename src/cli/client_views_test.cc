#include "cli/client_views.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

constexpr std::int64_t kNow = 1'700'000'000'000;

Json job(std::int64_t id, const std::string& state, const std::string& tenant, Json placement,
         int tasks = 1, int gpus = 8, int milli = 1000) {
  return {
      {"id", id},
      {"spec",
       {{"name", "job-" + std::to_string(id)},
        {"tenant", tenant},
        {"queue", "default"},
        {"class", "training"},
        {"priority", 0},
        {"tasks", tasks},
        {"gpus_per_task", gpus},
        {"gpu_milli", milli},
        {"gpu_model", Json::array({"H100"})},
        {"cpu_milli_per_task", 8000},
        {"memory_mib_per_task", 65536},
        {"topology", {{"within", "leaf"}, {"mode", "required"}}},
        {"runtime_estimate", "6h"},
        {"max_runtime", nullptr},
        {"preemptible", true},
        {"checkpoint_interval", nullptr},
        {"command", Json::array({"python", "train.py"})},
        {"env", Json::object()},
        {"labels", {{"team", "cv"}}}}},
      {"state", state},
      {"transitions",
       Json::array({{{"state", "pending"}, {"at_ms", kNow - 120'000}, {"reason", "submitted"}}})},
      {"placement", std::move(placement)},
      {"submitted_ms", kNow - 120'000},
      {"started_ms", state == "pending" ? 0 : kNow - 60'000},
      {"ended_ms", 0},
      {"starts", state == "pending" ? 0 : 1},
      {"preemptions", 0},
      {"message", state == "pending" ? "submitted" : "placed on 1 node(s) (within its quota)"},
      {"last_checkpoint_ms", 0}};
}

Json place(const std::string& node, std::vector<int> gpus) {
  return {{"node", node}, {"gpus", gpus}};
}

// A job of one task on a 3g.40gb MIG instance, as the server writes its spec (mig_profile in
// place of gpu_milli), placed at memory slice 4 of GPU 1 of a100-01 when running.
Json mig_job(std::int64_t id, const std::string& state) {
  Json j = job(id, state, "vision",
               state == "running" ? Json::array({place("a100-01", {1})}) : Json::array(), 1, 1);
  j["spec"].erase("gpu_milli");
  j["spec"]["mig_profile"] = "3g.40gb";
  j["spec"]["gpu_model"] = Json::array({"A100"});
  if (state == "running") j["placement"][0]["mig_start"] = 4;
  return j;
}

// The table a listing prints by default (`-o table`).
std::string table_of(const Listing& listing) {
  return render_listing(listing, OutputFormat::kTable);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

TEST(RenderJobsTableTest, ColumnsAndReasons) {
  Json jobs = Json::array({job(1, "running", "vision",
                               Json::array({place("h100-a-01", {0, 1, 2, 3, 4, 5, 6, 7}),
                                            place("h100-a-02", {0, 1, 2, 3, 4, 5, 6, 7})}),
                               2),
                           job(2, "pending", "vision", Json::array()),
                           job(3, "pending", "search", Json::array())});
  const std::string text = table_of(jobs_listing(jobs, {{2, "quota"}}, kNow));
  const auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 5U) << text;
  EXPECT_THAT(lines[0], HasSubstr("ID"));
  for (const char* column :
       {"NAME", "TENANT", "QUEUE", "STATE", "GPUS", "AGE", "TIME", "ATTAINED", "NODES", "REASON"}) {
    EXPECT_THAT(lines[0], HasSubstr(column));
  }
  EXPECT_THAT(lines[2], HasSubstr("job-1"));
  EXPECT_THAT(lines[2], HasSubstr("16"));              // 2 tasks x 8 GPUs
  EXPECT_THAT(lines[2], HasSubstr("h100-a-[01-02]"));  // compressed node list
  EXPECT_THAT(lines[2], HasSubstr("2m"));              // age
  EXPECT_THAT(lines[2], HasSubstr("1m"));              // run time
  EXPECT_THAT(lines[3], HasSubstr("quota"));           // the why kind
  EXPECT_THAT(lines[4], HasSubstr("submitted"));       // no kind known: the message
}

TEST(RenderJobsTableTest, AttainedServiceInGpuHoursWhereTheServerGivesIt) {
  Json running = job(1, "running", "vision", Json::array({place("h100-a-01", {0, 1})}), 1, 2);
  running["attained_gpu_seconds"] = 43'200;
  const auto lines = lines_of(table_of(jobs_listing(
      Json::array({running, job(2, "succeeded", "vision", Json::array())}), {}, kNow)));
  ASSERT_EQ(lines.size(), 4U);
  EXPECT_THAT(lines[2], HasSubstr("12.0 GPU-h"));
  EXPECT_THAT(lines[3], Not(HasSubstr("GPU-h")));
}

TEST(RenderJobsTableTest, FractionalGpus) {
  const std::string text = table_of(
      jobs_listing(Json::array({job(7, "pending", "vision", Json::array(), 1, 1, 500)}), {}, kNow));
  EXPECT_THAT(text, HasSubstr("0.5"));
}

TEST(RenderJobsTableTest, AJobOnAMigInstanceShowsItsProfile) {
  const auto lines = lines_of(table_of(jobs_listing(
      Json::array({mig_job(7, "running"), job(8, "pending", "vision", Json::array(), 1, 1, 500)}),
      {}, kNow)));
  ASSERT_EQ(lines.size(), 4U);
  EXPECT_THAT(lines[2], HasSubstr("running  MIG 3g.40gb"));
  EXPECT_THAT(lines[3], Not(HasSubstr("MIG")));
  EXPECT_THAT(lines[3], HasSubstr("0.5"));
}

TEST(JobsListingTest, WideColumnsNamesAndCsv) {
  Json pending = job(2, "pending", "vision", Json::array());
  pending["submitter"] = "ana";
  const Json jobs = Json::array(
      {job(1, "running", "vision", Json::array({place("h100-a-01", {0, 1})}), 1, 2), pending});
  const Listing listing = jobs_listing(jobs, {{2, "quota"}}, kNow);
  ASSERT_EQ(listing.rows.size(), 2U);
  EXPECT_EQ(listing.rows[1].name, "2");
  const auto wide = lines_of(render_listing(listing, OutputFormat::kWide));
  ASSERT_EQ(wide.size(), 4U);
  for (const char* column : {"PRIORITY", "CLASS", "MODELS", "SUBMITTED", "SUBMITTER"}) {
    EXPECT_THAT(wide[0], HasSubstr(column));
  }
  EXPECT_THAT(wide[2], HasSubstr("training"));
  EXPECT_THAT(wide[2], HasSubstr("H100"));
  EXPECT_TRUE(wide[3].ends_with("ana")) << wide[3];
  EXPECT_EQ(render_listing(listing, OutputFormat::kName), "job/1\njob/2\n");
  const auto csv = lines_of(render_listing(listing, OutputFormat::kCsv, false));
  ASSERT_EQ(csv.size(), 2U);
  EXPECT_THAT(csv[1],
              HasSubstr("2,job-2,vision,default,pending,8,2m,-,-,-,quota,0,training,H100,"));
  EXPECT_TRUE(csv[1].ends_with(",ana")) << csv[1];
}

TEST(NodesListingTest, NamesAreNodesAndWideShowsWhereTheyAre) {
  const Json nodes = Json::array({{{"name", "h100-a-01"},
                                   {"state", "ready"},
                                   {"gpu_model", "H100"},
                                   {"gpus", 8},
                                   {"leaf", "leaf-1"},
                                   {"spine", "spine-1"},
                                   {"jobs", Json::array()}}});
  const Listing listing = nodes_listing(nodes, kNow);
  EXPECT_EQ(render_listing(listing, OutputFormat::kName), "node/h100-a-01\n");
  const auto wide = lines_of(render_listing(listing, OutputFormat::kWide, false));
  ASSERT_EQ(wide.size(), 1U);
  EXPECT_THAT(wide[0], HasSubstr("spine-1"));
  EXPECT_THAT(lines_of(render_listing(listing, OutputFormat::kTable, false))[0],
              Not(HasSubstr("spine-1")));
}

TEST(RenderJobDetailsTest, SpecTransitionsPlacement) {
  const std::string text = render_job_details(
      job(1, "running", "vision", Json::array({place("h100-a-01", {0, 1, 2, 3})}), 1, 4), kNow);
  EXPECT_THAT(text, HasSubstr("Job 1: job-1"));
  EXPECT_THAT(text, HasSubstr("running (placed on 1 node(s) (within its quota))"));
  EXPECT_THAT(text, HasSubstr("vision, queue default"));
  EXPECT_THAT(text, HasSubstr("1 task x 4 GPUs (H100), 8 CPUs and 64 GiB per task"));
  EXPECT_THAT(text, HasSubstr("within leaf (required)"));
  EXPECT_THAT(text, HasSubstr("estimate 6h"));
  EXPECT_THAT(text, HasSubstr("python train.py"));
  EXPECT_THAT(text, HasSubstr("team=cv"));
  EXPECT_THAT(text, HasSubstr("Transitions:"));
  EXPECT_THAT(text, HasSubstr("submitted"));
  EXPECT_THAT(text, HasSubstr("Placement:"));
  EXPECT_THAT(text, HasSubstr("0,1,2,3"));
}

TEST(RenderJobDetailsTest, AJobOnAMigInstanceShowsItsProfileAndPlace) {
  const std::string text = render_job_details(mig_job(7, "running"), kNow);
  EXPECT_THAT(text, HasSubstr("1 task x MIG 3g.40gb (A100), 8 CPUs and 64 GiB per task"));
  EXPECT_THAT(text, HasSubstr("a100-01  1 (MIG 3g.40gb at memory slice 4)"));
  // A placement from a server that does not say the slice: the GPU alone.
  Json older = mig_job(7, "running");
  older["placement"][0].erase("mig_start");
  EXPECT_THAT(render_job_details(older, kNow), Not(HasSubstr("memory slice")));
}

TEST(RenderJobDetailsTest, StepsShowTimesCommunicationAndMfu) {
  Json with_steps =
      job(1, "running", "vision", Json::array({place("h100-a-01", {0, 1, 2, 3})}), 1, 4);
  with_steps["step_summary"] = {{"steps", 120},
                                {"last_step", 119},
                                {"mean_us", 45'000},
                                {"p50_us", 44'800},
                                {"p90_us", 47'000},
                                {"p99_us", 1'510'000},
                                {"comm_share", 0.3334},
                                {"comm_share_source", "step_minus_compute"},
                                {"mean_compute_us", 30'000},
                                {"mean_allreduce_us", 850},
                                {"mean_allreduce_bytes", 1'048'576},
                                {"allreduce_alg_bytes_per_s", 1.2e9},
                                {"allreduce_bus_bytes_per_s", 1.8e9},
                                {"allreduce_ranks", 4},
                                {"model_flops_per_step", 1e15},
                                {"peak_flops_per_s", 3.9576e15},
                                {"mfu", 0.5612},
                                {"refused_lines", 2}};
  const std::string text = render_job_details(with_steps, kNow);
  EXPECT_THAT(text, HasSubstr("Steps:       120 reported (last step 119); time p50 44.8 ms, p90 "
                              "47.0 ms, p99 1.51 s, mean 45.0 ms; 2 line(s) refused"));
  EXPECT_THAT(text, HasSubstr("Comm share:  33.3% of step time (step - compute); compute 30.0 ms"));
  EXPECT_THAT(text, HasSubstr("All-reduce:  850 us per step of 1048576 bytes; bus bandwidth 1.80 "
                              "GB/s (4 ranks), algorithm 1.20 GB/s"));
  EXPECT_THAT(text,
              HasSubstr("MFU:         56.1% (1e+15 model FLOPs per step, peak 3958 TFLOP/s)"));
  // Without steps, none of it.
  EXPECT_THAT(render_job_details(job(2, "pending", "vision", Json::array()), kNow),
              Not(HasSubstr("Steps:")));
}

// A server with a pre-warm hook says how the last start stood with its data.
TEST(RenderJobDetailsTest, ThePrewarmOfTheLastStartIsShownWhenTheServerSaysIt) {
  Json warm = job(1, "running", "vision", Json::array({place("h100-a-01", {0, 1, 2, 3})}), 1, 4);
  warm["prewarm"] = {{"prewarmed", true}, {"lead_seconds", 300}};
  EXPECT_THAT(render_job_details(warm, kNow),
              HasSubstr("Pre-warm:    data staged for the last start, called 5m before it"));
  warm["prewarm"] = {{"prewarmed", false}, {"lead_seconds", 0}};
  EXPECT_THAT(render_job_details(warm, kNow),
              HasSubstr("Pre-warm:    none: the last start began without its data staged"));
  warm.erase("prewarm");
  EXPECT_THAT(render_job_details(warm, kNow), Not(HasSubstr("Pre-warm")));
}

TEST(RenderJobDetailsTest, PendingHasNoPlacement) {
  const std::string text = render_job_details(job(2, "pending", "vision", Json::array()), kNow);
  EXPECT_THAT(text, HasSubstr("Placement: none"));
  EXPECT_THAT(text, Not(HasSubstr("Started:")));
}

// A service as GET /v1/services/{id} shows it: a ready replica with every figure, a starting one
// with some, a pending one not yet on a node.
Json service_view() {
  return {{"service", 7},
          {"name", "chat"},
          {"tenant", "vision"},
          {"state", "running"},
          {"min_replicas", 2},
          {"max_replicas", 6},
          {"target", {{"metric", "queue_per_replica"}, {"value", 2000}}},
          {"spread", "node"},
          {"max_per_node", 0},
          {"wanted", 3},
          {"decision",
           {{"wanted", 3},
            {"panic", false},
            {"reason", "5 -> 3: 0.0 requests waiting over 60s, target 2.0 per replica"},
            {"at_ms", kNow - 90'000}}},
          {"replicas", Json::array({{{"job", 8},
                                     {"phase", "ready"},
                                     {"node", "h100-a-01"},
                                     {"port", 8000},
                                     {"since_ms", kNow - 600'000},
                                     {"figures",
                                      {{"requests_waiting_milli", 1250},
                                       {"requests_in_flight_milli", 4000},
                                       {"requests_per_s_milli", 12'345},
                                       {"mean_latency_ms", 180},
                                       {"p95_latency_ms", 420}}}},
                                    {{"job", 9},
                                     {"phase", "starting"},
                                     {"node", "h100-a-02"},
                                     {"port", 8001},
                                     {"since_ms", kNow - 20'000},
                                     {"figures", {{"p95_latency_ms", 95}}}},
                                    {{"job", 10},
                                     {"phase", "pending"},
                                     {"node", ""},
                                     {"port", 0},
                                     {"since_ms", kNow - 5'000},
                                     {"figures", nullptr}}})},
          {"endpoints",
           Json::array({{{"job", 8}, {"node", "h100-a-01"}, {"url", "http://10.0.0.5:8000"}}})}};
}

// The cells of a table's line, split on runs of two or more spaces.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t start = line.find_first_not_of(' ');
  while (start != std::string::npos) {
    std::size_t end = line.find("  ", start);
    cells.push_back(line.substr(start, end == std::string::npos ? end : end - start));
    start = end == std::string::npos ? end : line.find_first_not_of(' ', end);
  }
  return cells;
}

TEST(ServicesListingTest, ReadyOfWantedTargetAndDecision) {
  Json p95 = service_view();
  p95["service"] = 11;
  p95["name"] = "embed";
  p95["target"] = {{"metric", "p95_latency_ms"}, {"value", 500}};
  p95["wanted"] = nullptr;
  p95["decision"] = nullptr;
  p95["replicas"] = Json::array();
  p95["endpoints"] = Json::array();
  Json concurrency = service_view();
  concurrency["service"] = 12;
  concurrency["target"] = {{"metric", "concurrency_per_replica"}, {"value", 2250}};
  const Listing listing = services_listing(Json::array({service_view(), p95, concurrency}), kNow);
  const auto lines = lines_of(render_listing(listing, OutputFormat::kTable));
  ASSERT_EQ(lines.size(), 5U);
  EXPECT_EQ(cells_of(lines[0]), (std::vector<std::string>{"ID", "NAME", "TENANT", "READY/WANTED",
                                                          "MIN-MAX", "TARGET", "LAST-DECISION"}));
  EXPECT_EQ(cells_of(lines[2]),
            (std::vector<std::string>{"7", "chat", "vision", "1/3", "2-6", "queue 2.0/replica",
                                      "5 -> 3: 0.0 requests waiting over 60s, target 2.0 per..."}));
  EXPECT_EQ(cells_of(lines[3]),
            (std::vector<std::string>{"11", "embed", "vision", "0/-", "2-6", "p95 500ms", "-"}));
  EXPECT_THAT(lines[4], HasSubstr("concurrency 2.25/replica"));
  EXPECT_EQ(render_listing(listing, OutputFormat::kName), "service/7\nservice/11\nservice/12\n");
  const auto wide = lines_of(render_listing(listing, OutputFormat::kWide, false));
  ASSERT_EQ(wide.size(), 3U);
  EXPECT_THAT(wide[0], HasSubstr("running  node  1 pending, 1 starting, 1 ready  1  1m30s ago"));
  const auto no_replicas = cells_of(wide[1]);
  ASSERT_GE(no_replicas.size(), 5U);
  EXPECT_EQ(std::vector<std::string>(no_replicas.end() - 5, no_replicas.end()),
            (std::vector<std::string>{"running", "node", "-", "0", "-"}));
}

TEST(ServicesListingTest, CsvKeepsTheWholeReason) {
  const Listing listing = services_listing(Json::array({service_view()}), kNow, 0);
  const auto csv = lines_of(render_listing(listing, OutputFormat::kCsv));
  ASSERT_EQ(csv.size(), 2U);
  EXPECT_EQ(csv[0],
            "ID,NAME,TENANT,READY/WANTED,MIN-MAX,TARGET,LAST-DECISION,STATE,SPREAD,PHASES,"
            "ENDPOINTS,DECIDED");
  EXPECT_THAT(csv[1], HasSubstr(",\"5 -> 3: 0.0 requests waiting over 60s, target 2.0 per "
                                "replica\",running,node,"));
}

TEST(ReplicasTableTest, FiguresInNaturalUnitsAndDashesForWhatIsAbsent) {
  const auto lines = lines_of(replicas_table(service_view()["replicas"]));
  ASSERT_EQ(lines.size(), 5U);
  EXPECT_EQ(cells_of(lines[0]), (std::vector<std::string>{"JOB", "PHASE", "NODE", "PORT", "RPS",
                                                          "P95 MS", "WAITING", "IN FLIGHT"}));
  EXPECT_EQ(cells_of(lines[2]), (std::vector<std::string>{"8", "ready", "h100-a-01", "8000", "12.3",
                                                          "420", "1.3", "4.0"}));
  // Some figures: the others are dashes.
  EXPECT_EQ(cells_of(lines[3]),
            (std::vector<std::string>{"9", "starting", "h100-a-02", "8001", "-", "95", "-", "-"}));
  // Pending: no node, no port, no figures.
  EXPECT_EQ(cells_of(lines[4]),
            (std::vector<std::string>{"10", "pending", "-", "-", "-", "-", "-", "-"}));
}

TEST(RenderServiceDetailsTest, HeaderReplicasEndpointsAndDecision) {
  Json view = service_view();
  view["max_per_node"] = 2;
  const std::string text = render_service_details(view, kNow);
  EXPECT_THAT(text, HasSubstr("Service 7: chat\n"));
  EXPECT_THAT(text, HasSubstr("  State:    running\n"));
  EXPECT_THAT(text, HasSubstr("  Tenant:   vision\n"));
  EXPECT_THAT(text, HasSubstr("  Replicas: 1 ready of 3 wanted (min 2, max 6); 1 pending, 1 "
                              "starting, 1 ready\n"));
  EXPECT_THAT(text, HasSubstr("  Target:   queue 2.0/replica\n"));
  EXPECT_THAT(text, HasSubstr("  Spread:   over nodes, at most 2 per node\n"));
  EXPECT_THAT(text, HasSubstr("\nReplicas:\n  JOB"));
  EXPECT_THAT(text, HasSubstr("h100-a-01"));
  EXPECT_THAT(text, HasSubstr("\nEndpoints:\n"));
  EXPECT_THAT(text, HasSubstr("http://10.0.0.5:8000"));
  EXPECT_THAT(text, HasSubstr("\nLast decision: 3 replica(s), "));
  EXPECT_THAT(text, HasSubstr("(1m30s ago)\n  5 -> 3: 0.0 requests waiting over 60s, target 2.0 "
                              "per replica\n"));
}

TEST(RenderServiceDetailsTest, BeforeAnyDecisionOrReplica) {
  Json view = service_view();
  view["wanted"] = nullptr;
  view["decision"] = nullptr;
  view["replicas"] = Json::array();
  view["endpoints"] = Json::array();
  view["spread"] = "leaf";
  view["target"] = {{"metric", "p95_latency_ms"}, {"value", 500}};
  const std::string text = render_service_details(view, kNow);
  EXPECT_THAT(text, HasSubstr("  Replicas: 0 ready, no decision yet (min 2, max 6); none live\n"));
  EXPECT_THAT(text, HasSubstr("  Target:   p95 500ms\n"));
  EXPECT_THAT(text, HasSubstr("  Spread:   over leaves\n"));
  EXPECT_THAT(text, HasSubstr("\nReplicas: none live\n"));
  EXPECT_THAT(text, HasSubstr("\nEndpoints: none"));
  EXPECT_THAT(text, HasSubstr("\nLast decision: none yet"));
}

TEST(RenderJobDetailsTest, AServiceShowsItsReplicas) {
  Json service = job(7, "running", "vision", Json::array());
  service["service_status"] = service_view();
  const std::string text = render_job_details(service, kNow);
  EXPECT_THAT(text, HasSubstr("Placement: none (a service: its replicas are placed, below)"));
  EXPECT_THAT(text, HasSubstr("\nReplicas: 1 ready of 3 wanted (min 2, max 6)\n  JOB"));
  const auto lines = lines_of(text);
  const auto pending = std::ranges::find_if(lines, [](const std::string& line) {
    return line.find("pending") != std::string::npos && line.starts_with("  10");
  });
  ASSERT_NE(pending, lines.end()) << text;
  EXPECT_EQ(cells_of(*pending),
            (std::vector<std::string>{"10", "pending", "-", "-", "-", "-", "-", "-"}));
  // Any other job: no replicas.
  EXPECT_THAT(render_job_details(job(2, "pending", "vision", Json::array()), kNow),
              Not(HasSubstr("Replicas")));
}

TEST(RenderAdviceTest, EachAdviceOnALineWithTheMfuItWouldReach) {
  const Json advice = {
      {"job", 42},
      {"advice", {"accumulate gradients over 6 micro-batches", "2 of its 8 GPUs idle"}},
      {"note", "the all-reduce is bandwidth-bound"},
      {"mfu_now", 0.3},
      {"mfu_expected", 0.45}};
  const std::string text = render_advice(advice);
  EXPECT_THAT(text, HasSubstr("Advice for job 42:\n  - accumulate gradients over 6 micro-batches\n"
                              "  - 2 of its 8 GPUs idle\n"));
  EXPECT_THAT(text, HasSubstr("MFU: 30.0% now, 45.0% with the advice"));
}

TEST(RenderAdviceTest, NoAdviceSaysWhy) {
  const Json advice = {{"job", 7}, {"advice", Json::array()}, {"note", "no step times reported"}};
  EXPECT_EQ(render_advice(advice), "No advice for job 7: no step times reported\n");
  // A hostile or old server's body does not crash it.
  EXPECT_THAT(render_advice(Json{{"advice", "x"}, {"mfu_now", "y"}}), HasSubstr("job"));
}

TEST(RenderWhyTest, PendingWithWaitedTimes) {
  const Json why = {{"id", 5},
                    {"state", "pending"},
                    {"kind", "quota"},
                    {"reason", "tenant vision is at its H100 guarantee"},
                    {"waited_seconds", {{"quota", 60}, {"capacity", 5}}},
                    {"pending_seconds", 65}};
  const std::string text = render_why(why);
  EXPECT_THAT(text, HasSubstr("Job 5 is pending (quota): tenant vision is at its H100 guarantee"));
  EXPECT_THAT(text, HasSubstr("1m5s"));
  EXPECT_THAT(text, HasSubstr("capacity"));
  EXPECT_THAT(text, HasSubstr("5s"));
}

TEST(RenderWhyTest, PendingWithItsPlaceInItsLane) {
  const Json why = {{"id", 44},
                    {"state", "pending"},
                    {"kind", "quota"},
                    {"reason", "tenant vision is at its H100 guarantee"},
                    {"pending_seconds", 65},
                    {"lane",
                     {{"position", 3},
                      {"pending", 12},
                      {"order", "las"},
                      {"promoted", false},
                      {"rank", "attained 12.0 GPU-h, band 2 of 3"},
                      {"ahead", Json::array({43, 41})},
                      {"ahead_hidden", 0}}}};
  EXPECT_THAT(render_why(why),
              HasSubstr("It is 3rd of 12 pending in its lane (las order): attained 12.0 GPU-h, "
                        "band 2 of 3; just ahead: 43, 41.\n"));
  Json promoted = why;
  promoted["lane"]["promoted"] = true;
  promoted["lane"]["ahead"] = Json::array({43});
  promoted["lane"]["ahead_hidden"] = 1;
  const std::string text = render_why(promoted);
  EXPECT_THAT(text, HasSubstr("promoted after waiting the starvation limit"));
  EXPECT_THAT(text, HasSubstr("just ahead: 43 and 1 of other tenants."));
}

TEST(RenderWhyTest, Running) {
  EXPECT_EQ(render_why({{"id", 5}, {"state", "running"}, {"reason", "running since 3 s on n1"}}),
            "Job 5 is running: running since 3 s on n1\n");
}

TEST(RenderNodesTableTest, StateUsedJobs) {
  Json nodes = Json::array({{{"name", "h100-a-01"},
                             {"state", "ready"},
                             {"gpu_model", "H100"},
                             {"gpus", 8},
                             {"gpu_milli_allocated", 4500},
                             {"leaf", "leaf-1"},
                             {"jobs", Json::array({{{"job", 1}},
                                                   {{"job", 2}},
                                                   {{"job", 3}},
                                                   {{"job", 4}},
                                                   {{"job", 5}},
                                                   {{"job", 6}}})}},
                            {{"name", "cpu-login"},
                             {"state", "drained"},
                             {"gpu_model", ""},
                             {"gpus", 0},
                             {"gpu_milli_allocated", 0},
                             {"leaf", "leaf-4"},
                             {"jobs", Json::array()},
                             {"drain_reason", "maintenance"}}});
  nodes[0]["agent"] = {{"agent_version", "0.1.0"}};
  nodes[0]["last_heartbeat_ms"] = 1'000'000;
  nodes.push_back({{"name", "h100-b-01"},
                   {"state", "not_ready"},
                   {"gpu_model", "H100"},
                   {"gpus", 8},
                   {"leaf", "leaf-2"},
                   {"jobs", Json::array()},
                   {"reason", "no agent has registered the node"}});
  const auto lines = lines_of(table_of(nodes_listing(nodes, 1'004'000)));
  ASSERT_EQ(lines.size(), 5U);
  for (const char* column :
       {"NAME", "STATE", "MODEL", "GPUS", "USED", "LEAF", "AGENT", "HEARTBEAT", "JOBS"}) {
    EXPECT_THAT(lines[0], HasSubstr(column));
  }
  EXPECT_THAT(lines[2], HasSubstr("4.5"));
  EXPECT_THAT(lines[2], HasSubstr("1,2,3,4,+2"));
  EXPECT_THAT(lines[3], HasSubstr("drained"));
  EXPECT_THAT(lines[3], HasSubstr("maintenance"));
  EXPECT_THAT(lines[2], HasSubstr("0.1.0"));
  EXPECT_THAT(lines[2], HasSubstr("4s ago"));
  EXPECT_THAT(lines[4], HasSubstr("not_ready"));
  EXPECT_THAT(lines[4], HasSubstr("no agent has registered the node"));
}

TEST(RenderQueuesTableTest, Rows) {
  const auto lines = lines_of(table_of(queues_listing(Json::array(
      {{{"tenant", "vision"}, {"queue", "default"}, {"pending", 3}, {"running", 1}}}))));
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_THAT(lines[0], HasSubstr("TENANT"));
  EXPECT_THAT(lines[2], HasSubstr("vision"));
  EXPECT_THAT(lines[2], HasSubstr("default"));
}

TEST(RenderTenantsTableTest, RowPerModelAndUnlimitedBorrowing) {
  const Json tenants = Json::array({{{"name", "search"},
                                     {"org", "research"},
                                     {"weight", 2},
                                     {"quota",
                                      {{"A100",
                                        {{"guaranteed_gpus", 8},
                                         {"lending_limit_gpus", 8},
                                         {"used_gpus", 0},
                                         {"borrowed_gpus", 0},
                                         {"borrowing_limit_gpus", nullptr}}},
                                       {"H100",
                                        {{"guaranteed_gpus", 64},
                                         {"lending_limit_gpus", 64},
                                         {"used_gpus", 70},
                                         {"borrowed_gpus", 6},
                                         {"borrowing_limit_gpus", 32}}}}},
                                     {"gpu_milli_used", 70000},
                                     {"jobs_pending", 1},
                                     {"jobs_running", 3}},
                                    {{"name", "interns"},
                                     {"org", "products"},
                                     {"weight", 1},
                                     {"quota", Json::object()},
                                     {"gpu_milli_used", 0},
                                     {"jobs_pending", 0},
                                     {"jobs_running", 0}}});
  const auto lines = lines_of(table_of(tenants_listing(tenants)));
  ASSERT_EQ(lines.size(), 5U);
  EXPECT_THAT(lines[0], HasSubstr("GUARANTEED"));
  EXPECT_THAT(lines[0], HasSubstr("BORROWED"));
  EXPECT_THAT(lines[2], HasSubstr("A100"));
  EXPECT_THAT(lines[2], HasSubstr("unlimited"));
  EXPECT_THAT(lines[3], HasSubstr("H100"));
  EXPECT_THAT(lines[3], HasSubstr("70"));
  EXPECT_THAT(lines[4], HasSubstr("interns"));
}

TEST(RenderTokensTableTest, RevokedAndDashes) {
  const auto lines = lines_of(table_of(tokens_listing(Json::array({{{"id", "abc"},
                                                                    {"role", "admin"},
                                                                    {"tenant", ""},
                                                                    {"node", ""},
                                                                    {"description", "first"},
                                                                    {"created_ms", kNow},
                                                                    {"revoked", true}}}))));
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_THAT(lines[2], HasSubstr("revoked"));
  EXPECT_THAT(lines[2], HasSubstr("admin"));
}

TEST(RenderTopFrameTest, BarsLegendAndQueues) {
  const Json nodes =
      Json::array({{{"name", "n1"}, {"state", "ready"}, {"gpus", 4}, {"gpu_milli_allocated", 2500}},
                   {{"name", "n2"}, {"state", "drained"}, {"gpus", 2}, {"gpu_milli_allocated", 0}},
                   {{"name", "cpu"}, {"state", "ready"}, {"gpus", 0}, {"gpu_milli_allocated", 0}}});
  const Json running =
      Json::array({job(1, "running", "vision", Json::array({place("n1", {0, 1})}), 1, 2),
                   job(2, "running", "search", Json::array({place("n1", {2})}), 1, 1, 500)});
  const Json queues =
      Json::array({{{"tenant", "search"}, {"queue", "ranking"}, {"pending", 2}, {"running", 1}},
                   {{"tenant", "vision"}, {"queue", "default"}, {"pending", 0}, {"running", 1}}});
  TopFrameStyle style;
  style.width = 40;
  style.title = "tidepool top";
  const std::string text = render_top_frame(nodes, running, queues, style);
  EXPECT_THAT(text, HasSubstr("tidepool top\n"));
  EXPECT_THAT(text, HasSubstr("GPUs: 2.5 of 6 allocated"));
  EXPECT_THAT(text, HasSubstr("2 running, 2 pending"));
  // search is A (first in the queues), vision B; search's half GPU is lower case.
  EXPECT_THAT(text, HasSubstr("n1 [BBa.] 3/4"));
  EXPECT_THAT(text, HasSubstr("n2 [xx]"));
  EXPECT_THAT(text, Not(HasSubstr("cpu ")));
  EXPECT_THAT(text, HasSubstr("A search"));
  EXPECT_THAT(text, HasSubstr("B vision"));
  EXPECT_THAT(text, HasSubstr("ranking 2"));
  EXPECT_THAT(text, Not(HasSubstr("\x1b[")));
  style.color = true;
  EXPECT_THAT(render_top_frame(nodes, running, queues, style), HasSubstr("\x1b["));
}

TEST(RenderTopFrameTest, AMigInstanceCountsItsShareOfTheGpu) {
  const Json nodes = Json::array(
      {{{"name", "a100-01"}, {"state", "ready"}, {"gpus", 2}, {"gpu_milli_allocated", 500}}});
  TopFrameStyle style;
  style.width = 40;
  // 3g.40gb counts 500 milli-GPU (4 of 8 memory slices): the tenant's GPU 1 is half taken.
  const std::string text =
      render_top_frame(nodes, Json::array({mig_job(7, "running")}), Json::array(), style);
  EXPECT_THAT(text, HasSubstr("a100-01 [.a] 1/2"));
  EXPECT_THAT(text, HasSubstr("A    vision   0.5"));
}

TEST(RenderTopFrameTest, NodesPackedIntoColumns) {
  Json nodes = Json::array();
  for (int i = 1; i <= 4; ++i) {
    nodes.push_back({{"name", "node-" + std::to_string(i)},
                     {"state", "ready"},
                     {"gpus", 2},
                     {"gpu_milli_allocated", 0}});
  }
  TopFrameStyle style;
  style.width = 60;  // cells are "node-1 [..] 0/2" (15 wide) with 3 between: 3 per line
  const std::string text = render_top_frame(nodes, Json::array(), Json::array(), style);
  EXPECT_THAT(text, HasSubstr("node-1 [..] 0/2   node-2 [..] 0/2   node-3 [..] 0/2\nnode-4"));
}

}  // namespace
}  // namespace tidepool
