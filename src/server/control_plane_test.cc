#include "server/control_plane.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "config/cluster_file.h"
#include "config/market_file.h"
#include "config/tenants_file.h"
#include "config/test_source_dir.h"
#include "server/http_api.h"
#include "server/test_plane_setup.h"

namespace tidepool {
namespace {

using test_support::example_setup;

using ::testing::HasSubstr;

// A reply as the HTTP layer answers it (http_api.h): what the API's users see.
struct Wire {
  int status = 0;
  nlohmann::json body;
};
Wire wire(const Reply& reply) { return Wire{http_status(reply), http_body(reply)}; }

using namespace std::chrono_literals;

// The tests' clock: Unix time in milliseconds, as the server's records keep it.
constexpr Instant at_ms(std::int64_t ms) { return instant_from_unix_ms(ms); }
constexpr Instant kT0 = at_ms(1'000'000);

// A job id as the API shows it, as the plane takes it.
JobId jid(std::int64_t id) {
  const auto job = job_id_from_wire(id);
  EXPECT_TRUE(job.has_value()) << id;
  return job.value_or(JobId{});
}

// What a store would hold after the batches committed so far.
struct MemoryStore {
  std::map<std::int64_t, JobRecord> jobs;
  std::map<std::string, TokenRecord> tokens;
  std::map<std::string, KeyedRecord> nodes;
  std::map<std::string, KeyedRecord> settings;
  std::vector<EventRecord> events;
  std::vector<LedgerRecord> ledger;

  void commit(const Batch& b) {
    for (const LedgerRecord& l : b.ledger) {
      EXPECT_GT(l.seq, ledger.empty() ? 0 : ledger.back().seq);
      ledger.push_back(l);
    }
    for (const LedgerFoldRecord& fold : b.ledger_folds) {
      const auto in_run = [&](const LedgerRecord& l) {
        return l.seq >= fold.first_seq && l.seq <= fold.last_seq;
      };
      const auto at = std::find_if(ledger.begin(), ledger.end(), in_run);
      const auto end = std::find_if_not(at, ledger.end(), in_run);
      ledger.insert(ledger.erase(at, end), fold.carried.begin(), fold.carried.end());
    }
    for (const JobRecord& j : b.jobs) jobs[j.id] = j;
    for (const std::int64_t id : b.jobs_removed) jobs.erase(id);
    for (const TokenRecord& t : b.tokens) tokens[t.id] = t;
    for (const KeyedRecord& n : b.nodes) nodes[n.key] = n;
    for (const KeyedRecord& s : b.settings) settings[s.key] = s;
    for (const EventRecord& e : b.events) {
      EXPECT_EQ(e.seq, static_cast<std::int64_t>(events.size()) + 1);
      events.push_back(e);
    }
  }
  [[nodiscard]] Snapshot snapshot() const {
    Snapshot s;
    for (const auto& [id, j] : jobs) s.jobs.push_back(j);
    for (const auto& [id, t] : tokens) s.tokens.push_back(t);
    for (const auto& [key, n] : nodes) s.nodes.push_back(n);
    for (const auto& [key, v] : settings) s.settings.push_back(v);
    s.last_event_seq = static_cast<std::int64_t>(events.size());
    s.ledger = ledger;
    return s;
  }
};

const Principal kAdmin{"admin-token", Role::kAdmin, "", ""};
const Principal kVision{"vision-token", Role::kUser, "vision", ""};
const Principal kSearch{"search-token", Role::kUser, "search", ""};

JobSpec job(std::string name, int tasks = 1, int gpus = 8, std::string tenant = "vision") {
  JobSpec spec;
  spec.name = std::move(name);
  spec.tenant = std::move(tenant);
  spec.queue = "default";
  spec.tasks = tasks;
  spec.gpus_per_task = gpus;
  spec.gpu_models = {"H100"};
  spec.command = {"train.sh"};
  return spec;
}

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override { plane_ = restart(); }

  std::unique_ptr<ControlPlane> restart(Instant now = kT0) {
    Batch repairs;
    ControlPlaneSetup setup = example_setup();
    setup.market = market_;
    setup.admission = admission_;
    setup.ledger_entries_per_round = ledger_entries_per_round_;
    setup.ledger_books = ledger_books_;
    setup.prewarm = prewarm_;
    auto plane = ControlPlane::create(std::move(setup), store_.snapshot(), now, repairs, tokens_);
    EXPECT_TRUE(plane.has_value()) << plane.error().message();
    store_.commit(repairs);
    return std::move(*plane);
  }

  // Commits a round's batch as the loop does: sealed by the plane first.
  void commit(Batch& batch) {
    plane_->seal(batch);
    store_.commit(batch);
  }

  // Runs `command` like the loop does: then a pass, then the commit.
  template <class Command>
  Wire run(Command command, Instant now = kT0) {
    Batch batch;
    Wire reply = wire(command(*plane_, now, batch));
    plane_->schedule(now, batch);
    commit(batch);
    return reply;
  }

  Wire submit(const JobSpec& spec, const Principal& who = kVision, std::string key = "",
              Instant now = kT0) {
    return run(
        [&](ControlPlane& p, Instant now, Batch& b) { return p.submit(who, spec, key, now, b); },
        now);
  }

  Wire get(std::int64_t id, const Principal& who = kAdmin) {
    return wire(plane_->get_job(who, jid(id)));
  }

  MemoryStore store_;
  std::shared_ptr<TokenTable> tokens_ = std::make_shared<TokenTable>();
  std::optional<MarketSpec> market_;
  AdmissionLimits admission_;
  std::int64_t ledger_entries_per_round_ = 0;
  BookTerms ledger_books_;
  std::optional<PrewarmSetup> prewarm_;
  std::unique_ptr<ControlPlane> plane_;
};

// With no node ready, vision's pending job waits inside its unused guarantee: the figures say
// how long it waited and how much of the guarantee is not honoured; search, with no guarantee,
// waits too but is owed nothing; a held job counts for neither.
TEST(ControlPlaneNodes, FiguresSayWhoWaitsSinceWhenAndWhichGuaranteesAreNotHonoured) {
  ControlPlaneSetup setup = example_setup();
  setup.simulate_unregistered_nodes = false;
  Batch repairs;
  auto made = ControlPlane::create(setup, Snapshot{}, kT0, repairs, std::make_shared<TokenTable>());
  ASSERT_TRUE(made.has_value()) << made.error().message();
  ControlPlane& plane = **made;
  const auto submit = [&](const JobSpec& spec, const Principal& who, Instant now) {
    Batch batch;
    const Wire submitted = wire(plane.submit(who, spec, "", now, batch));
    EXPECT_EQ(submitted.status, 201) << submitted.body.dump();
    plane.schedule(now, batch);
    return submitted.body.value("id", std::int64_t{0});
  };
  const std::int64_t held = submit(job("held", 2, 8), kVision, kT0);
  Batch batch;
  ASSERT_EQ(wire(plane.hold(kVision, jid(held), kT0, batch)).status, 200);
  submit(job("first", 1, 8), kVision, kT0 + 1s);
  submit(job("second", 2, 4), kVision, kT0 + 2s);
  submit(job("borrower", 1, 8, "search"), kSearch, kT0 + 3s);

  const ControlPlane::Figures figures = plane.figures();
  EXPECT_EQ(figures.tenant_oldest_pending_ms.at("vision"), unix_ms(kT0 + 1s));
  EXPECT_EQ(figures.tenant_oldest_pending_ms.at("search"), unix_ms(kT0 + 3s));
  EXPECT_EQ(figures.guarantee_shortfall_milli.at({"vision", "H100"}), 16'000);
  EXPECT_EQ(figures.guarantee_shortfall_milli.at({"search", "H100"}), 0);
  EXPECT_TRUE(figures.tenant_spend_anomalies.empty());  // no market
}

TEST(ControlPlaneNodes, AJobWaitsForANodeWhoseAgentRegistered) {
  ControlPlaneSetup setup = example_setup();
  setup.simulate_unregistered_nodes = false;
  Batch repairs;
  auto made = ControlPlane::create(setup, Snapshot{}, at_ms(1'000'000), repairs,
                                   std::make_shared<TokenTable>());
  ASSERT_TRUE(made.has_value()) << made.error().message();
  ControlPlane& plane = **made;
  const Instant now = kT0;
  Batch batch;
  Wire submitted = wire(plane.submit(kVision, job("waits", 1, 8), "", now, batch));
  ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
  const std::int64_t id = submitted.body["id"];
  plane.schedule(now, batch);
  // No agent has registered a node: nothing runs, nothing is billed, and the nodes say why.
  EXPECT_EQ(wire(plane.get_job(kAdmin, jid(id))).body["state"], "pending");
  const nlohmann::json nodes = wire(plane.list_nodes(kAdmin)).body["nodes"];
  ASSERT_FALSE(nodes.empty());
  for (const auto& node : nodes) {
    EXPECT_EQ(node["state"], "not_ready") << node.dump();
    EXPECT_THAT(node.value("reason", ""), HasSubstr("no agent has registered the node"));
  }
  // An agent registers one H100 node: the job starts there.
  std::string h100;
  for (const auto& node : nodes) {
    if (node["gpu_model"] == "H100") h100 = node["name"];
  }
  ASSERT_FALSE(h100.empty());
  const Principal agent{"agent-token", Role::kAgent, "", h100};
  ASSERT_EQ(wire(plane.register_node(agent, h100, NodeRegistration{}, now + 1s, batch)).status,
            200);
  plane.schedule(now + 1s, batch);
  const Wire ran = wire(plane.get_job(kAdmin, jid(id)));
  ASSERT_EQ(ran.body["state"], "running") << ran.body.dump();
  EXPECT_EQ(ran.body["placement"][0]["node"], h100);
  // The reply must outlive the loop: a range-for over a member of a temporary dangles.
  const Wire listed = wire(plane.list_nodes(kAdmin));
  for (const auto& node : listed.body["nodes"]) {
    EXPECT_EQ(node["state"], node["name"] == h100 ? "ready" : "not_ready") << node.dump();
  }
}

// A cluster whose first A100 node has GPU 0 partitioned into two 3g.40gb instances.
TEST(ControlPlaneMig, AMigJobRunsOnAnInstanceOfAPartitionedGpuAndItsAgentGetsTheInstance) {
  ControlPlaneSetup setup = example_setup();
  setup.simulate_unregistered_nodes = false;
  std::string a100;
  for (NodeSpec& node : setup.cluster.nodes) {
    if (node.gpu_count > 0 && setup.cluster.models.name(node.model) == "A100" && a100.empty()) {
      a100 = node.name;
      node.mig_partitions.push_back({0, {{MigProfile::k3g40gb, 4}, {MigProfile::k3g40gb, 0}}});
    }
  }
  ASSERT_FALSE(a100.empty());
  // Quotas count an instance as its share of a GPU (a 3g.40gb: 0.5).
  auto tenants = read_tenants_yaml(R"(orgs:
  - name: lab
    tenants:
      - name: vision
        quota:
          A100: {guaranteed_gpus: 8}
          H100: {guaranteed_gpus: 8}
)",
                                   "tenants.yaml", setup.cluster.models);
  ASSERT_TRUE(tenants.has_value()) << tenants.error().message();
  setup.tenants = std::move(*tenants);
  Batch repairs;
  auto made = ControlPlane::create(setup, Snapshot{}, kT0, repairs, std::make_shared<TokenTable>());
  ASSERT_TRUE(made.has_value()) << made.error().message();
  ControlPlane& plane = **made;
  Batch batch;
  const Principal agent{"agent-token", Role::kAgent, "", a100};
  // The agent must find what the cluster file declares.
  NodeRegistration registration;
  registration.address = "10.0.0.5";
  for (int g = 0; g < 8; ++g) {
    registration.devices.push_back(GpuDevice{.index = g,
                                             .uuid = fmt::format("GPU-{}", g),
                                             .model = "A100",
                                             .memory_mib = 81920,
                                             .pci_bus_id = "",
                                             .numa_node = -1,
                                             .nvlink_peers = {}});
  }
  const Wire whole = wire(plane.register_node(agent, a100, registration, kT0, batch));
  EXPECT_EQ(whole.status, 409) << whole.body.dump();
  EXPECT_THAT(whole.body.dump(), HasSubstr("devices[0].mig"));
  EXPECT_THAT(whole.body.dump(), HasSubstr("3g.40gb@0, 3g.40gb@4"));
  registration.devices[0].mig = {{"MIG-low", MigProfile::k3g40gb, 0, 40960},
                                 {"MIG-high", MigProfile::k3g40gb, 4, 40960}};
  ASSERT_EQ(wire(plane.register_node(agent, a100, registration, kT0, batch)).status, 200);

  JobSpec spec = job("infer", 1, 1);
  spec.gpu_models = {"A100"};
  spec.mig_profile = MigProfile::k3g40gb;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    const Wire submitted = wire(plane.submit(kVision, spec, "", kT0, batch));
    ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
    ids.push_back(submitted.body["id"]);
  }
  plane.schedule(kT0, batch);
  // Two instances: packing takes the high half first; the third waits.
  for (auto [index, start] : {std::pair{0, 4}, std::pair{1, 0}}) {
    const Wire ran = wire(plane.get_job(kAdmin, jid(ids[index])));
    ASSERT_EQ(ran.body["state"], "running") << ran.body.dump();
    EXPECT_EQ(ran.body["placement"][0]["node"], a100);
    EXPECT_EQ(ran.body["placement"][0]["gpus"], nlohmann::json::array({0}));
    EXPECT_EQ(ran.body["placement"][0]["mig_start"], start);
  }
  const Wire waiting = wire(plane.get_job(kAdmin, jid(ids[2])));
  EXPECT_EQ(waiting.body["state"], "pending");
  EXPECT_EQ(waiting.body["pending"]["kind"], "capacity") << waiting.body.dump();
  EXPECT_THAT(waiting.body["pending"]["reason"].get<std::string>(), HasSubstr("3g.40gb"));
  // The other seven GPUs stay whole: a job of 7 GPUs runs beside the instances.
  JobSpec seven = job("train", 1, 7);
  seven.gpu_models = {"A100"};
  const std::int64_t train = wire(plane.submit(kVision, seven, "", kT0, batch)).body["id"];
  plane.schedule(kT0, batch);
  const Wire trained = wire(plane.get_job(kAdmin, jid(train)));
  ASSERT_EQ(trained.body["state"], "running") << trained.body.dump();
  EXPECT_EQ(trained.body["placement"][0]["node"], a100);
  // The node's view: each instance with its job; the instances count half a GPU each.
  const Wire nodes = wire(plane.list_nodes(kAdmin));
  for (const auto& node : nodes.body["nodes"]) {
    if (node["name"] != a100) continue;
    EXPECT_EQ(node["gpu_milli_allocated"], 500 + 500 + 7000) << node.dump();
    ASSERT_EQ(node["mig"].size(), 1U) << node.dump();
    EXPECT_EQ(node["mig"][0]["gpu"], 0);
    for (const auto& instance : node["mig"][0]["instances"]) {
      EXPECT_EQ(instance["job"], ids[instance["start"] == 4 ? 0 : 1]) << node.dump();
    }
  }
  // The agent's heartbeat reply names each instance by its UUID.
  const Wire beat = wire(plane.heartbeat(agent, a100, NodeHeartbeat{}, kT0 + 1s, batch));
  ASSERT_EQ(beat.status, 200) << beat.body.dump();
  std::map<std::string, std::string> uuid_by_start;
  for (const auto& assignment : beat.body["assignments"]) {
    for (const auto& task : assignment["tasks"]) {
      if (!task.contains("mig")) continue;
      EXPECT_EQ(task["mig"]["profile"], "3g.40gb");
      uuid_by_start[std::to_string(task["mig"]["start"].get<int>())] = task["mig"]["uuid"];
    }
  }
  EXPECT_EQ(uuid_by_start,
            (std::map<std::string, std::string>{{"0", "MIG-low"}, {"4", "MIG-high"}}));
  // An instance freed goes to the job that waited.
  ASSERT_EQ(wire(plane.cancel(kVision, jid(ids[0]), kT0 + 2s, batch)).status, 200);
  plane.schedule(kT0 + 2s, batch);
  const Wire third = wire(plane.get_job(kAdmin, jid(ids[2])));
  ASSERT_EQ(third.body["state"], "running") << third.body.dump();
  EXPECT_EQ(third.body["placement"][0]["mig_start"], 4);
}

TEST(ControlPlaneMig, TheServerRefusesGpusPartitionedOnDemand) {
  ControlPlaneSetup setup = example_setup();
  for (NodeSpec& node : setup.cluster.nodes) {
    if (node.gpu_count > 0 && setup.cluster.models.name(node.model) == "A100") {
      node.mig_on_demand = 0b1;
      break;
    }
  }
  Batch repairs;
  auto made = ControlPlane::create(setup, Snapshot{}, kT0, repairs, std::make_shared<TokenTable>());
  ASSERT_FALSE(made.has_value());
  EXPECT_THAT(made.error().message(), HasSubstr("on_demand"));
}

TEST_F(ControlPlaneTest, AListingRefusesATenantQueueOrNodeThePoolLacks) {
  ASSERT_EQ(submit(job("one")).status, 201);
  const auto listed = [&](std::string tenant, std::string queue, std::string node = "") {
    JobFilter filter;
    filter.tenant = std::move(tenant);
    filter.queue = std::move(queue);
    filter.node = std::move(node);
    return wire(plane_->list_jobs(kAdmin, filter));
  };
  EXPECT_EQ(listed("vision", "").status, 200);
  EXPECT_EQ(listed("vision", "detection").status, 200);
  EXPECT_EQ(listed("", "detection").status, 200);
  const Wire tenant = listed("visoin", "");
  EXPECT_EQ(tenant.status, 404);
  EXPECT_EQ(tenant.body["field"], "tenant");
  EXPECT_EQ(tenant.body["reason"], "no tenant 'visoin'");
  EXPECT_EQ(listed("search", "detection").status, 404);
  EXPECT_EQ(listed("", "nosuch").body["field"], "queue");
  EXPECT_EQ(listed("", "", "h100-z-99").body["field"], "node");
}

TEST_F(ControlPlaneTest, AJobThatCouldNeverRunIsRefusedAtSubmitWithTheCeiling) {
  // 100 x 8 H100 on a pool of 128 H100: it would wait forever.
  Wire huge = submit(job("huge", 100, 8));
  EXPECT_EQ(huge.status, 400) << huge.body.dump();
  EXPECT_EQ(huge.body["error"], "cannot ever run");
  EXPECT_EQ(huge.body["field"], "tasks");
  EXPECT_THAT(huge.body["reason"].get<std::string>(), HasSubstr("hold at most 16 tasks of 8 GPUs"));
  Wire wide = submit(job("wide", 1, 9));
  EXPECT_EQ(wide.status, 400) << wide.body.dump();
  EXPECT_EQ(wide.body["field"], "gpus_per_task");
  // Nothing was kept of them; a job the pool holds is taken.
  EXPECT_EQ(wire(plane_->list_jobs(kAdmin, JobFilter{})).body["jobs"].size(), 0U);
  EXPECT_EQ(submit(job("full", 16, 8)).status, 201);
}

// A service of one-GPU replicas on the queue target: 2 requests waiting per replica, from 2 to 6
// replicas, spread over nodes, ready 20 s after they start, drained for 30 s.
JobSpec chat_service() {
  JobSpec spec = job("chat", 1, 1);
  spec.job_class = JobClass::kInference;
  ServiceSpec service;
  service.scaler.min_replicas = 2;
  service.scaler.max_replicas = 6;
  service.scaler.metric = ScaleMetric::kQueuePerReplica;
  service.scaler.target = 2000;
  service.scaler.lead = 20;
  service.drain = 30;
  service.metrics_port = 8000;
  spec.service = service;
  return spec;
}

class ControlPlaneServiceTest : public ControlPlaneTest {
 protected:
  // A round of the loop at `now` with no command.
  void round(Instant now) {
    Batch batch;
    plane_->schedule(now, batch);
    commit(batch);
  }
  Wire service(std::int64_t id, Instant now, const Principal& who = kAdmin) {
    return wire(plane_->get_service(who, jid(id), now));
  }
  // The agent of each replica's node reports `waiting` requests queued at the replica.
  void report_waiting(const nlohmann::json& view, std::int64_t waiting_milli, Instant now) {
    for (const auto& replica : view["replicas"]) {
      const std::string node = replica["node"];
      if (node.empty()) continue;
      const std::int64_t id = replica["job"];
      ReplicaFigures figures;
      figures.requests_waiting_milli = waiting_milli;
      NodeHeartbeat beat;
      beat.replicas.push_back(
          {.job = id, .run = get(id).body["starts"].get<std::int64_t>(), .figures = figures});
      Batch batch;
      EXPECT_EQ(wire(plane_->heartbeat(Principal{"agent-" + node, Role::kAgent, "", node}, node,
                                       beat, now, batch))
                    .status,
                200);
      commit(batch);
    }
  }
  static std::map<std::string, int> phases(const nlohmann::json& view) {
    std::map<std::string, int> out;
    for (const auto& replica : view["replicas"]) ++out[replica["phase"].get<std::string>()];
    return out;
  }
};

TEST_F(ControlPlaneServiceTest, AServiceRunsItsMinimumOfReplicasOnDistinctNodesWithPorts) {
  Wire submitted = submit(chat_service());
  ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
  const std::int64_t id = submitted.body["id"];
  EXPECT_EQ(get(id).body["state"], "running");
  EXPECT_TRUE(get(id).body["placement"].empty());
  // The round placed two replicas, on two nodes, each on the service's port of its node.
  Wire view = service(id, kT0);
  ASSERT_EQ(view.status, 200) << view.body.dump();
  ASSERT_EQ(view.body["replicas"].size(), 2U) << view.body.dump();
  std::set<std::string> nodes;
  for (const auto& replica : view.body["replicas"]) {
    nodes.insert(replica["node"].get<std::string>());
    EXPECT_EQ(replica["phase"], "starting");
    EXPECT_EQ(replica["port"], 8000);
    const Wire job = get(replica["job"]);
    EXPECT_EQ(job.body["state"], "running");
    EXPECT_EQ(job.body["replica_of"], id);
    EXPECT_EQ(job.body["spec"]["env"]["TIDEPOOL_SERVICE"], std::to_string(id));
  }
  EXPECT_EQ(nodes.size(), 2U);
  EXPECT_TRUE(view.body["endpoints"].empty());  // none serves yet
  // Past their start-up they are ready, and endpoints.
  round(kT0 + 21s);
  view = service(id, kT0 + 21s);
  EXPECT_EQ(phases(view.body)["ready"], 2) << view.body.dump();
  ASSERT_EQ(view.body["endpoints"].size(), 2U);
  EXPECT_THAT(view.body["endpoints"][0]["url"].get<std::string>(), HasSubstr(":8000"));
  // The job shows the same, and the listing of services has it; another tenant sees none.
  EXPECT_EQ(get(id).body["service_status"]["replicas"].size(), 2U);
  EXPECT_EQ(wire(plane_->list_services(kVision, kT0 + 21s)).body["services"].size(), 1U);
  EXPECT_TRUE(wire(plane_->list_services(kSearch, kT0 + 21s)).body["services"].empty());
  EXPECT_EQ(service(id, kT0 + 21s, kSearch).status, 404);
}

TEST_F(ControlPlaneServiceTest, ItScalesUpOnItsReplicasFiguresAndDrainsOnTheWayDown) {
  const std::int64_t id = submit(chat_service()).body["id"];
  round(kT0 + 21s);
  // 10 requests waiting at each of the 2 replicas: 20 in all, 10 replicas' worth at 2 each, so
  // the autoscaler goes to its maximum of 6.
  Instant now = kT0 + 21s;
  for (int i = 0; i < 5; ++i) {
    now += 2s;
    report_waiting(service(id, now).body, 10'000, now);
    round(now);
  }
  Wire view = service(id, now);
  EXPECT_EQ(view.body["replicas"].size(), 6U) << view.body.dump();
  EXPECT_EQ(view.body["decision"]["wanted"], 6);
  EXPECT_THAT(view.body["decision"]["reason"].get<std::string>(), HasSubstr("-> 6"));
  std::set<std::string> nodes;
  for (const auto& replica : view.body["replicas"]) nodes.insert(replica["node"]);
  EXPECT_EQ(nodes.size(), 6U);  // spread: one per node
  // The load goes: after the down window (5 minutes), replicas drain, newest first; a draining
  // replica is no endpoint and stops once its drain is over.
  std::optional<std::int64_t> draining;
  for (int i = 0; i < 300 && !draining; ++i) {
    now += 2s;
    report_waiting(service(id, now).body, 0, now);
    round(now);
    const Wire after = service(id, now);
    for (const auto& replica : after.body["replicas"]) {
      if (replica["phase"] == "draining") draining = replica["job"].get<std::int64_t>();
    }
  }
  ASSERT_TRUE(draining.has_value());
  EXPECT_GE(now - (kT0 + 31s), 300s);  // not before the down window has passed
  view = service(id, now);
  for (const auto& endpoint : view.body["endpoints"]) EXPECT_NE(endpoint["job"], *draining);
  EXPECT_EQ(get(*draining).body["state"], "running");  // still answering what it holds
  report_waiting(view.body, 0, now + 20s);             // the agents still heartbeat
  round(now + 20s);
  EXPECT_EQ(get(*draining).body["state"], "running");
  round(now + 31s);
  EXPECT_EQ(get(*draining).body["state"], "cancelled");
  EXPECT_THAT(get(*draining).body["message"].get<std::string>(), HasSubstr("drained"));
}

TEST_F(ControlPlaneServiceTest, AReplicaThatEndsIsReplacedAndCancellingTheServiceEndsAll) {
  const std::int64_t id = submit(chat_service()).body["id"];
  const std::int64_t first = service(id, kT0).body["replicas"][0]["job"];
  // A user cancels a replica (as a node failure or a crash would end it): the next round adds one.
  EXPECT_EQ(run([&](ControlPlane& p, Instant now, Batch& b) {
              return p.cancel(kVision, jid(first), now, b);
            }).status,
            200);
  round(kT0 + 1s);
  Wire view = service(id, kT0 + 1s);
  ASSERT_EQ(view.body["replicas"].size(), 2U);
  for (const auto& replica : view.body["replicas"]) EXPECT_NE(replica["job"], first);
  // A service cannot be requeued; cancelling it cancels its replicas.
  EXPECT_EQ(run([&](ControlPlane& p, Instant now, Batch& b) {
              return p.requeue_job(kVision, jid(id), now, b);
            }).status,
            409);
  EXPECT_EQ(run([&](ControlPlane& p, Instant now,
                    Batch& b) { return p.cancel(kVision, jid(id), now, b); },
                kT0 + 2s)
                .body["state"],
            "cancelled");
  for (const auto& replica : view.body["replicas"]) {
    EXPECT_EQ(get(replica["job"]).body["state"], "cancelled");
  }
  EXPECT_EQ(service(id, kT0 + 3s).status, 404);
  round(kT0 + 5s);
  EXPECT_TRUE(wire(plane_->list_services(kAdmin, kT0 + 5s)).body["services"].empty());
}

TEST_F(ControlPlaneServiceTest, AServiceAndItsReplicasComeBackAfterARestart) {
  const std::int64_t id = submit(chat_service()).body["id"];
  round(kT0 + 21s);
  const nlohmann::json before = service(id, kT0 + 21s).body["replicas"];
  plane_ = restart(kT0 + 22s);
  round(kT0 + 23s);
  const nlohmann::json after = service(id, kT0 + 23s).body["replicas"];
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i]["job"], before[i]["job"]);
    EXPECT_EQ(after[i]["node"], before[i]["node"]);
    EXPECT_EQ(after[i]["port"], before[i]["port"]);
  }
}

TEST_F(ControlPlaneServiceTest, ReplicasGoCostFirstToTheCheapestModelThatMeetsTheTarget) {
  JobSpec spec = chat_service();
  spec.gpu_models = {"H100", "A100"};
  spec.service->scaler.metric = ScaleMetric::kP95LatencyMs;
  spec.service->scaler.target = 500;
  // Without a market every GPU-hour costs the same: the H100's 40 requests a second cost least.
  spec.service->models = {{"H100", {.throughput_milli_rps = 40'000, .p95_latency_ms = 120}},
                          {"A100", {.throughput_milli_rps = 15'000, .p95_latency_ms = 150}}};
  const std::int64_t id = submit(spec).body["id"];
  Wire view = service(id, kT0);
  ASSERT_EQ(view.body["replicas"].size(), 2U) << view.body.dump();
  EXPECT_EQ(view.body["model_choice"]["model"], "H100") << view.body.dump();
  EXPECT_THAT(view.body["model_choice"]["reason"].get<std::string>(), HasSubstr("H100"));
  for (const auto& replica : view.body["replicas"]) {
    EXPECT_EQ(get(replica["job"]).body["spec"]["gpu_model"], nlohmann::json::array({"H100"}));
    EXPECT_THAT(replica["node"].get<std::string>(), HasSubstr("h100"));
  }
  // An H100 replica that misses the target is not a choice, and the A100 has no room for vision,
  // whose quota admits no A100 (core/cost_first.h tests the choice among models with room): no
  // model is chosen, and a replica may take any of the service's models.
  spec.name = "slow";
  spec.service->models.at("H100").p95_latency_ms = 600;
  const std::int64_t slow = submit(spec).body["id"];
  view = service(slow, kT0);
  EXPECT_EQ(view.body["model_choice"]["model"], "") << view.body.dump();
  EXPECT_THAT(view.body["model_choice"]["reason"].get<std::string>(), HasSubstr("A100"));
  ASSERT_FALSE(view.body["replicas"].empty());
  EXPECT_EQ(get(view.body["replicas"][0]["job"]).body["spec"]["gpu_model"].size(), 2U);
}

TEST_F(ControlPlaneServiceTest, ReplicasOnNodesThatShareAnAddressGetDifferentPorts) {
  // Every H100 node's agent runs on one machine (as in `tidepool demo`): they share its ports.
  const Wire nodes = wire(plane_->list_nodes(kAdmin));
  for (const auto& node : nodes.body["nodes"]) {
    const std::string name = node["name"];
    if (name.find("h100") == std::string::npos) continue;
    NodeRegistration registration;
    registration.address = "10.0.0.9";
    Batch batch;
    ASSERT_EQ(wire(plane_->register_node(Principal{"agent-" + name, Role::kAgent, "", name}, name,
                                         registration, kT0, batch))
                  .status,
              200);
    commit(batch);
  }
  JobSpec spec = chat_service();
  spec.service->scaler.min_replicas = 3;
  const std::int64_t id = submit(spec).body["id"];
  round(kT0 + 21s);
  const Wire view = service(id, kT0 + 21s);
  std::set<int> ports;
  for (const auto& replica : view.body["replicas"]) ports.insert(replica["port"].get<int>());
  EXPECT_EQ(ports, (std::set<int>{8000, 8001, 8002})) << view.body.dump();
  ASSERT_EQ(view.body["endpoints"].size(), 3U);
  EXPECT_THAT(view.body["endpoints"][0]["url"].get<std::string>(), HasSubstr("10.0.0.9:800"));
}

TEST_F(ControlPlaneServiceTest, AReplicaThatFailsIsReplacedAfterABackOffThatGrows) {
  const std::int64_t id = submit(chat_service()).body["id"];
  const auto fail_one = [&](Instant now) {
    const std::int64_t replica = service(id, now).body["replicas"][0]["job"];
    Batch batch;
    JobStatusReport failed{"failed", 1, "no such model", std::nullopt, std::nullopt};
    EXPECT_EQ(wire(plane_->report_status(kAdmin, jid(replica), failed, now, batch)).status, 200);
    commit(batch);
    return replica;
  };
  const auto live = [&](Instant now) {
    round(now);
    return service(id, now).body["replicas"].size();
  };
  fail_one(kT0 + 1s);
  EXPECT_EQ(live(kT0 + 1s), 1U);      // not replaced at once
  EXPECT_EQ(live(kT0 + 2500ms), 1U);  // the first wait: 2 s
  EXPECT_EQ(live(kT0 + 3s), 2U);
  fail_one(kT0 + 4s);
  EXPECT_EQ(live(kT0 + 4s), 1U);
  EXPECT_EQ(live(kT0 + 7s), 1U);  // the second: 4 s
  EXPECT_EQ(live(kT0 + 8s), 2U);
  // A replica started since the last failure and ready ends the back-off: the next failure waits
  // 2 s again.
  EXPECT_EQ(live(kT0 + 30s), 2U);
  fail_one(kT0 + 31s);
  EXPECT_EQ(live(kT0 + 31s), 1U);
  EXPECT_EQ(live(kT0 + 33s), 2U);
  // One decision to scale (to 2, at the start); the rounds waiting out a back-off add none.
  EXPECT_EQ(std::ranges::count_if(store_.events,
                                  [](const EventRecord& e) { return e.kind == "service.scaled"; }),
            1);
  EXPECT_EQ(std::ranges::count_if(store_.events,
                                  [](const EventRecord& e) { return e.kind == "service.backoff"; }),
            3);
}

TEST_F(ControlPlaneServiceTest, FiguresFromAnotherNodesAgentDoNotCount) {
  const std::int64_t id = submit(chat_service()).body["id"];
  round(kT0 + 21s);
  const nlohmann::json replica = service(id, kT0 + 21s).body["replicas"][0];
  const std::string other = replica["node"] == "h100-a-01" ? "h100-a-02" : "h100-a-01";
  ReplicaFigures figures;
  figures.requests_waiting_milli = 1'000'000;
  NodeHeartbeat beat;
  beat.replicas.push_back(
      {.job = replica["job"].get<std::int64_t>(), .run = 1, .figures = figures});
  Batch batch;
  ASSERT_EQ(wire(plane_->heartbeat(Principal{"agent-" + other, Role::kAgent, "", other}, other,
                                   beat, kT0 + 22s, batch))
                .status,
            200);
  commit(batch);
  round(kT0 + 22s);
  EXPECT_EQ(service(id, kT0 + 22s).body["replicas"][0]["figures"], nullptr);
  EXPECT_EQ(service(id, kT0 + 22s).body["replicas"].size(), 2U);
}

TEST_F(ControlPlaneTest, SubmittedJobIsStoredAndPlacedInTheSameRound) {
  Wire reply = submit(job("train", 2, 8));
  ASSERT_EQ(reply.status, 201) << reply.body.dump();
  const std::int64_t id = reply.body["id"];
  EXPECT_EQ(reply.body["state"], "pending");
  Wire now = get(id);
  EXPECT_EQ(now.body["state"], "running");
  EXPECT_EQ(now.body["placement"].size(), 2U);
  ASSERT_EQ(store_.jobs.size(), 1U);
  EXPECT_EQ(store_.jobs.at(id).state, "running");
  ASSERT_GE(store_.events.size(), 2U);
  EXPECT_EQ(store_.events[0].kind, "job.submitted");
  EXPECT_EQ(store_.events[1].kind, "job.started");
}

TEST_F(ControlPlaneTest, BadSpecsAreRefusedWithTheField) {
  JobSpec unknown_tenant = job("x", 1, 1, "nobody");
  Wire r = submit(unknown_tenant, kAdmin);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["field"], "tenant");
  EXPECT_THAT(r.body["reason"].get<std::string>(), HasSubstr("vision"));
  JobSpec bad_queue = job("x");
  bad_queue.queue = "nope";
  r = submit(bad_queue);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["field"], "queue");
  JobSpec bad_model = job("x");
  bad_model.gpu_models = {"V100"};
  r = submit(bad_model);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["field"], "gpu_model[0]");
  JobSpec too_big = job("x", 1, 16);
  r = submit(too_big);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["field"], "gpus_per_task");
  EXPECT_TRUE(store_.jobs.empty());
  EXPECT_TRUE(store_.events.empty());
}

TEST_F(ControlPlaneTest, UsersSeeAndActOnTheirOwnTenantOnly) {
  const std::int64_t id = submit(job("mine")).body["id"];
  EXPECT_EQ(submit(job("theirs"), kSearch).status, 403);
  EXPECT_EQ(wire(plane_->get_job(kSearch, jid(id))).status, 404);
  EXPECT_EQ(wire(plane_->get_job(kVision, jid(id))).status, 200);
  Wire cancel = run(
      [&](ControlPlane& p, Instant now, Batch& b) { return p.cancel(kSearch, jid(id), now, b); });
  EXPECT_EQ(cancel.status, 404);
  EXPECT_EQ(wire(plane_->list_jobs(kSearch, {})).body["jobs"].size(), 0U);
  EXPECT_EQ(wire(plane_->list_jobs(kVision, {})).body["jobs"].size(), 1U);
  JobFilter other_tenant;
  other_tenant.tenant = "vision";
  EXPECT_EQ(wire(plane_->list_jobs(kSearch, other_tenant)).status, 403);
  const Principal agent{"agent-token", Role::kAgent, "", "h100-a-01"};
  EXPECT_EQ(submit(job("agent"), agent).status, 403);
  Batch batch;
  EXPECT_EQ(wire(plane_->set_drained(kVision, "h100-a-01", true, "", at_ms(0), batch)).status, 403);
  EXPECT_EQ(wire(plane_->list_tokens(kVision)).status, 403);
}

TEST_F(ControlPlaneTest, IdempotencyKeyMakesRetriesSafe) {
  Wire first = submit(job("a"), kVision, "key-1");
  ASSERT_EQ(first.status, 201);
  Wire again = submit(job("a"), kVision, "key-1");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body["id"], first.body["id"]);
  EXPECT_EQ(submit(job("b"), kVision, "key-1").status, 409);
  EXPECT_EQ(store_.jobs.size(), 1U);
  // Keys are printable ASCII: other bytes would not fit the job's JSON document.
  Wire bad_key = submit(job("c"), kVision, "k\xff");
  EXPECT_EQ(bad_key.status, 400);
  EXPECT_EQ(bad_key.body["field"], "Idempotency-Key");
  EXPECT_EQ(store_.jobs.size(), 1U);
  // After a restart the key is still known.
  plane_ = restart();
  EXPECT_EQ(submit(job("a"), kVision, "key-1").body["id"], first.body["id"]);
}

TEST_F(ControlPlaneTest, RestartKeepsRunningJobsWhereTheyRunAndPendingJobsQueued) {
  // 16 H100 nodes: 16 one-node jobs fill them; two more wait.
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 18; ++i)
    ids.push_back(submit(job("j" + std::to_string(i)), kAdmin).body["id"]);
  std::map<std::int64_t, nlohmann::json> before;
  for (std::int64_t id : ids) before[id] = get(id).body;
  int running = 0;
  for (const auto& [id, body] : before) running += body["state"] == "running" ? 1 : 0;
  EXPECT_EQ(running, 16);
  plane_ = restart(at_ms(2'000'000));
  for (std::int64_t id : ids) {
    Wire after = get(id);
    EXPECT_EQ(after.body["state"], before[id]["state"]) << id;
    EXPECT_EQ(after.body["placement"], before[id]["placement"]) << id;
  }
  // New ids continue after the old ones; a pass starts nothing twice.
  const std::int64_t next = submit(job("next"), kAdmin, "", at_ms(2'000'000)).body["id"];
  EXPECT_EQ(next, ids.back() + 1);
  EXPECT_EQ(get(next).body["state"], "pending");
  // Ending a running job lets a waiting one start.
  Wire done = run(
      [&](ControlPlane& p, Instant now, Batch& b) {
        return p.report_status(kAdmin, jid(ids[0]),
                               JobStatusReport{"succeeded", 0, "", std::nullopt, std::nullopt}, now,
                               b);
      },
      at_ms(2'100'000));
  EXPECT_EQ(done.status, 200);
  EXPECT_EQ(get(ids[0]).body["state"], "succeeded");
  EXPECT_EQ(get(ids[16]).body["state"], "running");
  // What the job reported is kept across a restart too.
  const nlohmann::json ended = get(ids[0]).body;
  plane_ = restart(at_ms(2'200'000));
  EXPECT_EQ(get(ids[0]).body, ended);
  EXPECT_EQ(ended["exit_code"], 0);
}

TEST_F(ControlPlaneTest, ServiceOfEndedRunsIsKeptOverRestarts) {
  // search (no guarantee) borrows every GPU; an hour later vision reclaims a node of it.
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 16; ++i) {
    ids.push_back(submit(job("s" + std::to_string(i), 1, 8, "search"), kSearch).body["id"]);
  }
  constexpr Instant kHourLater = kT0 + 1h;
  const Wire taker = submit(job("v"), kVision, "", kHourLater);
  ASSERT_EQ(taker.status, 201);
  std::optional<std::int64_t> preempted;
  for (std::int64_t id : ids) {
    if (get(id).body["state"] == "pending") preempted = id;
  }
  ASSERT_TRUE(preempted.has_value());
  // Its transitions say who took its GPUs and why.
  const nlohmann::json transitions = get(*preempted).body["transitions"];
  ASSERT_GE(transitions.size(), 3U);
  EXPECT_EQ(transitions[transitions.size() - 2]["reason"],
            fmt::format("preempted (reclaim) for job {} of tenant vision",
                        taker.body["id"].get<std::int64_t>()));
  EXPECT_EQ(get(*preempted).body["attained_gpu_seconds"], 8 * 3600);
  EXPECT_EQ(get(*preempted).body["ended_runs_gpu_seconds"], 8 * 3600);
  // The waiting job does not rank as new work after a restart.
  plane_ = restart(kHourLater + 1min);
  EXPECT_EQ(get(*preempted).body["state"], "pending");
  EXPECT_EQ(get(*preempted).body["attained_gpu_seconds"], 8 * 3600);
  // A running job: its run so far, as of the restart, then of the next pass.
  const std::int64_t running = ids.front() == *preempted ? ids.back() : ids.front();
  EXPECT_EQ(get(running).body["attained_gpu_seconds"], 8 * 3660);
  run([](ControlPlane&, Instant, Batch&) { return Reply{}; }, kHourLater + 2min);
  EXPECT_EQ(get(*preempted).body["attained_gpu_seconds"], 8 * 3600);
  EXPECT_EQ(get(running).body["attained_gpu_seconds"], 8 * 3720);
}

TEST_F(ControlPlaneTest, CancelEndsPendingAndRunningJobs) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 17; ++i)
    ids.push_back(submit(job("j" + std::to_string(i)), kAdmin).body["id"]);
  EXPECT_EQ(get(ids[16]).body["state"], "pending");
  auto cancel = [&](std::int64_t id) {
    return run(
        [&](ControlPlane& p, Instant now, Batch& b) { return p.cancel(kAdmin, jid(id), now, b); });
  };
  EXPECT_EQ(cancel(ids[16]).body["state"], "cancelled");
  EXPECT_EQ(cancel(ids[16]).status, 409);
  EXPECT_EQ(cancel(ids[0]).body["state"], "cancelled");
  const std::int64_t again = submit(job("again"), kAdmin).body["id"];
  EXPECT_EQ(get(again).body["state"], "running");
  const nlohmann::json transitions = get(ids[0]).body["transitions"];
  ASSERT_EQ(transitions.size(), 3U);
  EXPECT_EQ(transitions[0]["state"], "pending");
  EXPECT_EQ(transitions[1]["state"], "running");
  EXPECT_EQ(transitions[2]["state"], "cancelled");
}

TEST_F(ControlPlaneTest, AHeartbeatAnswersTheJobsRunningOnItsNodeAsTheNodeListingDoes) {
  // Each node's heartbeat finds its jobs from those placed on it; the listing walks every job.
  const auto beats_match_listing = [&](Instant now) {
    int assigned = 0;
    const nlohmann::json nodes = wire(plane_->list_nodes(kAdmin)).body["nodes"];
    for (const auto& node : nodes) {
      const std::string name = node["name"];
      std::vector<std::int64_t> listed;
      for (const auto& j : node["jobs"]) listed.push_back(j["job"]);
      Batch batch;
      const Wire beat = wire(plane_->heartbeat(Principal{"agent-" + name, Role::kAgent, "", name},
                                               name, NodeHeartbeat{}, now, batch));
      commit(batch);
      EXPECT_EQ(beat.status, 200) << name;
      EXPECT_EQ(beat.body["jobs"].get<std::vector<std::int64_t>>(), listed) << name;
      assigned += static_cast<int>(listed.size());
    }
    return assigned;
  };
  // Two-node jobs and half-node jobs: 12 nodes full, the last ones shared; two jobs wait.
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(submit(job("two-" + std::to_string(i), 2, 8)).body["id"]);
  for (int i = 0; i < 10; ++i)
    ids.push_back(submit(job("half-" + std::to_string(i), 1, 4)).body["id"]);
  EXPECT_EQ(get(ids.back()).body["state"], "pending");
  EXPECT_EQ(beats_match_listing(kT0), 6 * 2 + 8);
  // One ends, one is cancelled, one is requeued (and starts again): the waiting jobs take over.
  const Wire done = run([&](ControlPlane& p, Instant now, Batch& b) {
    return p.report_status(kAdmin, jid(ids[0]),
                           JobStatusReport{"succeeded", 0, "", std::nullopt, std::nullopt}, now, b);
  });
  ASSERT_EQ(done.status, 200) << done.body.dump();
  ASSERT_EQ(run([&](ControlPlane& p, Instant now, Batch& b) {
              return p.cancel(kAdmin, jid(ids[6]), now, b);
            }).status,
            200);
  ASSERT_EQ(run([&](ControlPlane& p, Instant now, Batch& b) {
              return p.requeue_job(kAdmin, jid(ids[1]), now, b);
            }).status,
            200);
  EXPECT_EQ(get(ids.back()).body["state"], "running");
  EXPECT_EQ(beats_match_listing(kT0 + 1s), 5 * 2 + 9);
  // After a restart, from the jobs restored where they run.
  plane_ = restart(kT0 + 2s);
  EXPECT_EQ(beats_match_listing(kT0 + 2s), 5 * 2 + 9);
}

TEST_F(ControlPlaneTest, AHeartbeatWritesItsNodeOnlyWhenItsRecordChanges) {
  const std::string node = "h100-a-01";
  const Principal agent{"agent-" + node, Role::kAgent, "", node};
  const auto beat = [&](Instant now) {
    Batch batch;
    EXPECT_EQ(wire(plane_->heartbeat(agent, node, NodeHeartbeat{}, now, batch)).status, 200);
    const std::size_t written = batch.nodes.size();
    commit(batch);
    return written;
  };
  EXPECT_EQ(beat(kT0), 1U);  // registers the node
  EXPECT_EQ(beat(kT0 + 2s), 0U);
  EXPECT_EQ(beat(kT0 + 4s), 0U);
  // Silent past the timeout: NotReady (written), then back (written once).
  run([](ControlPlane&, Instant, Batch&) { return Reply{}; }, kT0 + 40s);
  const auto state = [&]() -> nlohmann::json {
    const nlohmann::json nodes = wire(plane_->list_nodes(kAdmin)).body["nodes"];
    for (const auto& n : nodes) {
      if (n["name"] == node) return n;
    }
    return nullptr;
  };
  EXPECT_EQ(state()["state"], "not_ready");
  EXPECT_EQ(beat(kT0 + 41s), 1U);
  EXPECT_EQ(state()["state"], "ready");
  EXPECT_EQ(beat(kT0 + 43s), 0U);
  // A restart counts the node as heard from when it loads, whatever beat was written last.
  plane_ = restart(kT0 + 60s);
  EXPECT_EQ(state()["state"], "ready");
  EXPECT_EQ(state()["last_heartbeat_ms"], unix_ms(kT0 + 60s));
  run([](ControlPlane&, Instant, Batch&) { return Reply{}; }, kT0 + 80s);
  EXPECT_EQ(state()["state"], "ready");
  run([](ControlPlane&, Instant, Batch&) { return Reply{}; }, kT0 + 91s);
  EXPECT_EQ(state()["state"], "not_ready");
}

// The loop wakes for the first silence: heartbeats move it later, and each node falls silent on
// time, whichever of them was heard from last.
TEST_F(ControlPlaneTest, TheLoopWakesForEachSilenceAsHeartbeatsMoveIt) {
  const auto beat = [&](const std::string& node, Instant now) {
    const Principal agent{"agent-" + node, Role::kAgent, "", node};
    Batch batch;
    EXPECT_EQ(wire(plane_->heartbeat(agent, node, NodeHeartbeat{}, now, batch)).status, 200);
    commit(batch);
  };
  const auto state = [&](const std::string& node) -> std::string {
    const nlohmann::json nodes = wire(plane_->list_nodes(kAdmin)).body["nodes"];
    for (const auto& n : nodes) {
      if (n["name"] == node) return n["state"];
    }
    return "";
  };
  const auto wakes_by = [&](Instant now, Instant by) {
    const std::optional<Instant> wake = plane_->next_wakeup(now);
    return wake.has_value() && *wake <= by;
  };
  const auto idle = [&](Instant now) {
    run([](ControlPlane&, Instant, Batch&) { return Reply{}; }, now);
  };
  const std::string a = "h100-a-01";
  const std::string b = "h100-a-02";
  beat(a, kT0);
  beat(b, kT0 + 10s);
  EXPECT_TRUE(wakes_by(kT0 + 11s, kT0 + 30s + 1ms));
  beat(a, kT0 + 29s);
  idle(kT0 + 31s);
  EXPECT_EQ(state(a), "ready");
  EXPECT_EQ(state(b), "ready");
  EXPECT_TRUE(wakes_by(kT0 + 31s, kT0 + 40s + 1ms));
  idle(kT0 + 41s);
  EXPECT_EQ(state(a), "ready");
  EXPECT_EQ(state(b), "not_ready");
  EXPECT_TRUE(wakes_by(kT0 + 41s, kT0 + 59s + 1ms));
  beat(b, kT0 + 50s);  // back: it falls silent again later than a
  idle(kT0 + 60s);
  EXPECT_EQ(state(a), "not_ready");
  EXPECT_EQ(state(b), "ready");
  EXPECT_TRUE(wakes_by(kT0 + 60s, kT0 + 80s + 1ms));
  idle(kT0 + 81s);
  EXPECT_EQ(state(b), "not_ready");
}

TEST_F(ControlPlaneTest, DrainingADrainedNodeAgainWithAnotherReasonReplacesIt) {
  const auto drain = [&](std::string reason, Instant now) {
    return run([&](ControlPlane& p, Instant now,
                   Batch& b) { return p.set_drained(kAdmin, "h100-a-01", true, reason, now, b); },
               now);
  };
  ASSERT_EQ(drain("bad GPU 3", at_ms(1'000'000)).body["drain_reason"], "bad GPU 3");
  const Wire again = drain("rack 7 power", at_ms(2'000'000));
  EXPECT_EQ(again.body["drain_reason"], "rack 7 power");
  EXPECT_EQ(again.body["drained_ms"], 1'000'000);  // drained since the first time
  // Without a reason, the one given stays.
  EXPECT_EQ(drain("", at_ms(3'000'000)).body["drain_reason"], "rack 7 power");
}

TEST_F(ControlPlaneTest, DrainedNodeTakesNoJobAndStaysDrainedAfterRestart) {
  for (int n = 1; n <= 4; ++n) {
    Wire r = run([&](ControlPlane& p, Instant now, Batch& b) {
      return p.set_drained(kAdmin, "h100-a-0" + std::to_string(n), true, "maintenance", now, b);
    });
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body["state"], "drained");
  }
  plane_ = restart();
  for (int i = 0; i < 12; ++i) {
    const std::int64_t id = submit(job("j" + std::to_string(i)), kAdmin).body["id"];
    const Wire r = get(id);
    ASSERT_EQ(r.body["state"], "running");
    EXPECT_THAT(r.body["placement"][0]["node"].get<std::string>(),
                ::testing::Not(HasSubstr("h100-a")));
  }
  const std::int64_t waiting = submit(job("waits"), kAdmin).body["id"];
  EXPECT_EQ(get(waiting).body["state"], "pending");
  EXPECT_EQ(wire(plane_->why(kAdmin, jid(waiting), at_ms(1'000'000))).body["state"], "pending");
}

TEST_F(ControlPlaneTest, MaxRuntimeStopsAJob) {
  JobSpec spec = job("short");
  spec.max_runtime = 60;
  const std::int64_t id = submit(spec).body["id"];
  EXPECT_EQ(get(id).body["state"], "running");
  EXPECT_EQ(plane_->next_wakeup(at_ms(1'000'000)), at_ms(1'060'000));
  run([](ControlPlane&, Instant, Batch&) { return Reply{}; }, kT0 + 61s);
  EXPECT_EQ(get(id).body["state"], "failed");
  EXPECT_THAT(get(id).body["message"].get<std::string>(), HasSubstr("max_runtime"));
}

TEST_F(ControlPlaneTest, TenantQuotaChangeIsAppliedAndKeptOverRestarts) {
  TenantUpdate update;
  update.weight = 3;
  update.queues = {"default"};
  update.quota["H100"] = QuotaSpec{8000, 0, std::nullopt};
  Wire r = run([&](ControlPlane& p, Instant now, Batch& b) {
    return p.put_tenant(kAdmin, "vision", update, now, b);
  });
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["weight"], 3);
  EXPECT_EQ(r.body["quota"]["H100"]["guaranteed_gpus"], 8);
  plane_ = restart();
  Wire tenant = wire(plane_->get_tenant(kAdmin, "vision"));
  EXPECT_EQ(tenant.body["quota"]["H100"]["guaranteed_gpus"], 8);
  // Within 8 GPUs and no borrowing: the second 8-GPU job waits for quota.
  submit(job("a"));
  const std::int64_t second = submit(job("b")).body["id"];
  Wire why = wire(plane_->why(kVision, jid(second), at_ms(1'000'000)));
  EXPECT_EQ(why.body["kind"], "quota") << why.body.dump();
  // A queue with live jobs cannot be removed.
  TenantUpdate drop = update;
  drop.queues = {"detection"};
  Wire refused = run([&](ControlPlane& p, Instant now, Batch& b) {
    return p.put_tenant(kAdmin, "vision", drop, now, b);
  });
  EXPECT_EQ(refused.status, 409);
}

TEST_F(ControlPlaneTest, AWaitingJobIsToldItsPlaceAndListingsShowAttainedServiceAndWaits) {
  TenantUpdate update;
  update.queues = {"default", "detection"};
  update.quota["H100"] = QuotaSpec{8000, 0, std::nullopt};
  ASSERT_EQ(run([&](ControlPlane& p, Instant now, Batch& b) {
              return p.put_tenant(kAdmin, "vision", update, now, b);
            }).status,
            200);
  const std::int64_t first = submit(job("a")).body["id"];
  const std::int64_t second = submit(job("b")).body["id"];
  const std::int64_t third = submit(job("c")).body["id"];
  constexpr Instant kHourLater = kT0 + 1h;
  run([](ControlPlane&, Instant, Batch&) { return Reply{}; }, kHourLater);

  const Wire why = wire(plane_->why(kVision, jid(third), kHourLater));
  ASSERT_EQ(why.body["state"], "pending") << why.body.dump();
  const auto& lane = why.body["lane"];
  EXPECT_EQ(lane["position"], 2) << why.body.dump();
  EXPECT_EQ(lane["pending"], 2);
  EXPECT_EQ(lane["order"], "las");
  EXPECT_EQ(lane["ahead"], nlohmann::json::array({second}));
  EXPECT_EQ(lane["attained_gpu_seconds"], 0);
  // The pool has room for it and the job ahead now: it waits on its quota, not on GPUs.
  EXPECT_EQ(why.body["estimated_start_ms"], unix_ms(kHourLater));

  // The running job attained 8 GPUs x 1 h as of the last pass; the listing and the job say so.
  EXPECT_EQ(get(first).body["attained_gpu_seconds"], 8 * 3600);
  const Wire listed = wire(plane_->list_jobs(kVision, {}));
  ASSERT_EQ(listed.body["jobs"].size(), 3U);
  EXPECT_EQ(listed.body["jobs"][0]["attained_gpu_seconds"], 8 * 3600);
  EXPECT_EQ(listed.body["jobs"][2]["attained_gpu_seconds"], 0);

  // One start so far, at once: vision's queue waits have one wait in the first bucket.
  const auto waits = plane_->figures().tenant_queue_waits;
  ASSERT_TRUE(waits.contains("vision"));
  EXPECT_EQ(waits.at("vision").count, 1);
  EXPECT_EQ(waits.at("vision").counts[0], 1);
  EXPECT_FALSE(waits.contains("search"));
}

TEST_F(ControlPlaneTest, TokensAreStoredHashedAndCanBeRevoked) {
  Wire created = run([&](ControlPlane& p, Instant now, Batch& b) {
    return p.create_token(kAdmin, TokenRequest{"user", "vision", "", "ci"}, now, b);
  });
  ASSERT_EQ(created.status, 201);
  const std::string secret = created.body["secret"];
  const std::string id = created.body["id"];
  ASSERT_EQ(store_.tokens.size(), 1U);
  EXPECT_EQ(store_.tokens.at(id).hash, sha256_hex(secret));
  EXPECT_EQ(store_.tokens.at(id).hash.find(secret), std::string::npos);
  auto tokens = std::make_shared<TokenTable>();
  Batch repairs;
  auto reloaded =
      ControlPlane::create(example_setup(), store_.snapshot(), at_ms(0), repairs, tokens);
  ASSERT_TRUE(reloaded.has_value());
  auto who = tokens->authenticate(secret);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->tenant, "vision");
  EXPECT_EQ(who->role, Role::kUser);
  EXPECT_EQ(run([&](ControlPlane& p, Instant now, Batch& b) {
              return p.create_token(kAdmin, TokenRequest{"user", "nobody", "", ""}, now, b);
            }).status,
            400);
  EXPECT_EQ(run([&](ControlPlane& p, Instant now, Batch& b) {
              return p.revoke_token(kAdmin, id, now, b);
            }).status,
            200);
  tokens = std::make_shared<TokenTable>();
  reloaded = ControlPlane::create(example_setup(), store_.snapshot(), at_ms(0), repairs, tokens);
  ASSERT_TRUE(reloaded.has_value());
  EXPECT_FALSE(tokens->authenticate(secret).has_value());
}
}  // namespace
}  // namespace tidepool

namespace tidepool {
namespace {

constexpr std::string_view kMarketYaml = test_support::kExampleMarketYaml;

class MarketPlaneTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    auto market = read_market_yaml(kMarketYaml, "market.yaml");
    ASSERT_TRUE(market.has_value()) << market.error().message();
    market_ = std::move(*market);
    plane_ = restart(kStart);
  }
  // A pass at `now` (the control loop's tick), committed.
  void tick(Instant now) {
    Batch batch;
    plane_->schedule(now, batch);
    commit(batch);
  }
  std::vector<std::string> event_kinds() const {
    std::vector<std::string> kinds;
    for (const EventRecord& e : store_.events) kinds.push_back(e.kind);
    return kinds;
  }

  // 2026-12-01T00:00:00Z.
  static constexpr std::int64_t kDay = 1'796'083'200;
  static constexpr Instant kStart = instant_from_unix_seconds(kDay);
};

// An agent names the run (and the task) it reports about.
JobStatusReport succeeded(std::optional<std::int64_t> run = std::nullopt,
                          std::optional<int> task = std::nullopt) {
  JobStatusReport report;
  report.state = "succeeded";
  report.run = run;
  report.task = task;
  return report;
}

// Advice from the steps a job reports (a gang of 2 x 8 GPUs on two nodes of one leaf): its
// all-reduce takes 25% of a step. With 1 GB in 200 ms it moves 9.4 GB/s, 37.5% of the leaf
// link: not bandwidth-bound, no accumulation advised, and the note says why. With 4 GB it
// saturates the link, and 3 micro-batches per all-reduce bring the share under 10%. Another
// tenant may not ask.
class AdviceTest : public ControlPlaneTest {
 protected:
  Wire advice_after_steps(std::int64_t bytes) {
    JobSpec spec = job("advised", 2, 8);
    spec.model_flops_per_step = 4e15;
    const std::int64_t id = submit(spec).body["id"];
    const Wire before = wire(plane_->advise(kVision, jid(id)));
    EXPECT_TRUE(before.body["advice"].empty());
    EXPECT_THAT(before.body["note"].get<std::string>(), HasSubstr("no step times"));
    EXPECT_EQ(wire(plane_->advise(kSearch, jid(id))).status, 404);
    const std::string node = get(id).body["placement"][0]["node"];
    NodeHeartbeat beat;
    StepStats stats;
    for (int i = 0; i < 10; ++i) {
      stats.add({.step = i,
                 .step_us = 1'000'000,
                 .compute_us = 750'000,
                 .allreduce_us = 200'000,
                 .allreduce_bytes = bytes});
    }
    beat.steps.push_back(TaskSteps{.job = id, .run = 1, .task = 0, .stats = stats});
    Batch batch;
    const Principal agent{"agent-" + node, Role::kAgent, "", node};
    EXPECT_EQ(wire(plane_->heartbeat(agent, node, beat, kT0 + 1s, batch)).status, 200);
    commit(batch);
    return wire(plane_->advise(kVision, jid(id)));
  }
};

TEST_F(AdviceTest, NoAccumulationWhenTheAllReduceIsNotBandwidthBound) {
  const Wire advice = advice_after_steps(1'000'000'000);
  ASSERT_EQ(advice.status, 200);
  EXPECT_TRUE(advice.body["advice"].empty()) << advice.body.dump();
  EXPECT_THAT(advice.body["note"].get<std::string>(), HasSubstr("37.5% of its leaf"));
  // 4e15 FLOPs a second on 16 H100 at 989.4 TFLOP/s each; nothing to gain.
  EXPECT_NEAR(advice.body["mfu_now"].get<double>(), 4e15 / (16 * 989.4e12), 1e-9);
  EXPECT_DOUBLE_EQ(advice.body["mfu_expected"].get<double>(), advice.body["mfu_now"].get<double>());
}

TEST_F(AdviceTest, AccumulationWhenTheAllReduceSaturatesItsLink) {
  const Wire advice = advice_after_steps(4'000'000'000);
  ASSERT_EQ(advice.status, 200);
  ASSERT_TRUE(advice.body.contains("accumulate")) << advice.body.dump();
  EXPECT_EQ(advice.body["accumulate"]["steps"], 3);
  EXPECT_EQ(advice.body["accumulate"]["link"], "leaf");
  EXPECT_GT(advice.body["mfu_expected"].get<double>(), advice.body["mfu_now"].get<double>());
  ASSERT_EQ(advice.body["advice"].size(), 1U);
  EXPECT_THAT(advice.body["advice"][0].get<std::string>(), HasSubstr("over 3 micro-batches"));
}

// Step telemetry: what the agents of a gang's nodes report (heartbeats, then each task's exit
// report) is merged into the job, shown in its step_summary with the MFU of its declared FLOPs on
// its H100s, and kept over a restart; a node reporting a task it does not run counts for nothing.
TEST_F(ControlPlaneTest, StepsFromTheAgentsOfAJobsNodesAddUpAndSurviveARestart) {
  JobSpec spec = job("steps", 2, 8);
  spec.model_flops_per_step = 4e15;
  const std::int64_t id = submit(spec).body["id"];
  const nlohmann::json placement = get(id).body["placement"];
  ASSERT_EQ(placement.size(), 2U);
  const std::string node0 = placement[0]["node"];
  const std::string node1 = placement[1]["node"];
  ASSERT_NE(node0, node1);
  const auto agent = [](const std::string& node) {
    return Principal{"agent-" + node, Role::kAgent, "", node};
  };
  const auto stats_of = [](std::int64_t first, int count) {
    StepStats stats;
    for (int i = 0; i < count; ++i) {
      stats.add({.step = first + i,
                 .step_us = 1'000'000,
                 .compute_us = 750'000,
                 .allreduce_us = 200'000,
                 .allreduce_bytes = 1'000'000'000});
    }
    return stats;
  };
  NodeHeartbeat beat;
  beat.steps.push_back(TaskSteps{.job = id, .run = 1, .task = 0, .stats = stats_of(0, 10)});
  // Not this node's task, and an earlier run: ignored.
  beat.steps.push_back(TaskSteps{.job = id, .run = 1, .task = 1, .stats = stats_of(0, 5)});
  beat.steps.push_back(TaskSteps{.job = id, .run = 2, .task = 0, .stats = stats_of(0, 5)});
  Batch batch;
  ASSERT_EQ(wire(plane_->heartbeat(agent(node0), node0, beat, kT0 + 1s, batch)).status, 200);
  commit(batch);
  nlohmann::json summary = get(id).body["step_summary"];
  EXPECT_EQ(summary["steps"], 10) << summary.dump();
  EXPECT_EQ(summary["p50_us"], 1'000'000);
  EXPECT_DOUBLE_EQ(summary["comm_share"].get<double>(), 0.25);
  // 4e15 FLOPs a second on 16 H100 at 989.4 TFLOP/s each.
  EXPECT_NEAR(summary["mfu"].get<double>(), 4e15 / (16 * 989.4e12), 1e-9);
  EXPECT_EQ(summary["allreduce_ranks"], 16);
  // Task 1 ends: its last steps come with its exit report.
  JobStatusReport done = succeeded(1, 1);
  done.steps = stats_of(0, 10);
  batch = Batch{};
  ASSERT_EQ(wire(plane_->report_status(agent(node1), jid(id), done, kT0 + 2s, batch)).status, 200);
  commit(batch);
  EXPECT_EQ(get(id).body["step_summary"]["steps"], 20);
  plane_ = restart(kT0 + 3s);
  const nlohmann::json after = get(id).body;
  EXPECT_EQ(after["step_summary"]["steps"], 20) << after.dump();
  EXPECT_EQ(after["steps"]["compute_steps"], 20);
  const ControlPlane::Figures figures = plane_->figures();
  ASSERT_TRUE(figures.running_job_steps.contains(id));
  EXPECT_DOUBLE_EQ(*figures.running_job_steps.at(id).comm_share, 0.25);
  EXPECT_NEAR(
      figures.tenant_steps.at("vision").model_flops / figures.tenant_steps.at("vision").peak_flops,
      4e15 / (16 * 989.4e12), 1e-9);
}

// Steps reported while a job runs, with nothing else about it changing, are written to the store
// at the first heartbeat steps_stored_every (a minute) after a report was left unwritten, not at
// every heartbeat: a restart before that loses them, one after keeps them.
TEST_F(ControlPlaneTest, StepsOfARunningJobAreStoredOnceAMinuteWhileItReports) {
  const std::int64_t id = submit(job("steps", 1, 8)).body["id"];
  const std::string node = get(id).body["placement"][0]["node"];
  const Principal agent{"agent-" + node, Role::kAgent, "", node};
  const auto beat_of = [&](int steps) {
    StepStats stats;
    for (int i = 0; i < steps; ++i) stats.add({.step = i, .step_us = 1'000'000});
    NodeHeartbeat beat;
    beat.steps.push_back(TaskSteps{.job = id, .run = 1, .task = 0, .stats = stats});
    return beat;
  };
  // Whether a heartbeat at `at` wrote the job.
  const auto beat_writes_job = [&](int steps, Instant at) {
    Batch batch;
    EXPECT_EQ(wire(plane_->heartbeat(agent, node, beat_of(steps), at, batch)).status, 200);
    plane_->seal(batch);
    const bool written =
        std::ranges::any_of(batch.jobs, [&](const JobRecord& record) { return record.id == id; });
    commit(batch);
    return written;
  };
  EXPECT_FALSE(beat_writes_job(10, kT0 + 1s));
  EXPECT_FALSE(beat_writes_job(5, kT0 + 60s));
  plane_ = restart(kT0 + 61s);
  EXPECT_FALSE(get(id).body.contains("step_summary")) << "no write yet, nothing kept";
  EXPECT_FALSE(beat_writes_job(10, kT0 + 62s));
  EXPECT_FALSE(beat_writes_job(5, kT0 + 121s));
  EXPECT_TRUE(beat_writes_job(5, kT0 + 122s)) << "a minute after the first unwritten report";
  EXPECT_FALSE(beat_writes_job(1, kT0 + 123s)) << "the next minute starts again";
  plane_ = restart(kT0 + 124s);
  EXPECT_EQ(get(id).body["step_summary"]["steps"], 20);
}

double price_of(const Wire& prices, const std::string& model, const std::string& price_class) {
  for (const auto& m : prices.body.at("models")) {
    if (m.at("model") == model) return m.at("per_gpu_hour").at(price_class).get<double>();
  }
  ADD_FAILURE() << "no model " << model;
  return 0;
}

TEST_F(MarketPlaneTest, RunningJobsAreChargedAtThePriceAndBilledByGroup) {
  Wire prices = wire(plane_->prices(kStart));
  ASSERT_EQ(prices.status, 200) << prices.body.dump();
  EXPECT_EQ(prices.body["currency"], "USD");
  const double h100 = price_of(prices, "H100", "standard");
  EXPECT_GT(h100, 0);
  EXPECT_NEAR(price_of(prices, "H100", "preemptible"), h100 * 0.6, 1e-6);
  JobSpec spec = job("train", 1, 8);
  spec.preemptible = false;
  spec.labels = {{"project", "cats"}};
  const std::int64_t id = submit(spec, kVision, "", kStart).body["id"];
  ASSERT_EQ(get(id).body["state"], "running");
  // Postings every minute store the charges so far.
  tick(kStart + 1min);
  ASSERT_FALSE(store_.ledger.empty());
  EXPECT_EQ(store_.ledger.back().tenant, "vision");
  // Finished after an hour: 8 GPU-hours at the standard price.
  Batch batch;
  ASSERT_EQ(wire(plane_->report_status(kAdmin, jid(id), succeeded(), kStart + 1h, batch)).status,
            200);
  commit(batch);
  BillQuery query{"vision", kDay, kDay + 86'400, BillGrouping::kTeam};
  Wire bill = wire(plane_->bill(kVision, query));
  ASSERT_EQ(bill.status, 200) << bill.body.dump();
  EXPECT_NEAR(bill.body["total"]["charges"].get<double>(), 8 * h100, 1e-5);
  EXPECT_NEAR(bill.body["total"]["gpu_hours"].get<double>(), 8.0, 1e-9);
  ASSERT_EQ(bill.body["groups"].size(), 1U);
  EXPECT_EQ(bill.body["groups"][0]["group"], "default");
  query.by = BillGrouping::kLabel;
  EXPECT_EQ(wire(plane_->bill(kAdmin, query)).body["groups"][0]["group"], "project=cats");
  query.by = BillGrouping::kJob;
  EXPECT_EQ(wire(plane_->bill(kAdmin, query)).body["groups"][0]["group"],
            std::to_string(id) + " train");
  // Users see their own tenant's bill only.
  EXPECT_EQ(wire(plane_->bill(kSearch, query)).status, 403);
  query.tenant = "nobody";
  EXPECT_EQ(wire(plane_->bill(kAdmin, query)).status, 404);
  // A restart rebuilds the balances from the stored entries.
  plane_ = restart(kStart + 4000s);
  query.tenant = "vision";
  query.by = BillGrouping::kModel;
  Wire again = wire(plane_->bill(kVision, query));
  EXPECT_EQ(again.body["total"], bill.body["total"]);
  EXPECT_EQ(again.body["groups"][0]["group"], "H100");
  ControlPlane::Figures figures = plane_->figures();
  EXPECT_EQ(figures.tenant_charges.at("vision"), static_cast<Micros>(std::llround(8 * h100 * 1e6)));
  EXPECT_TRUE(figures.price_per_gpu_hour.contains({"H100", "preemptible"}));
}

// A posting of more entries than a round may store (a store's commit limits) is stored over the
// rounds after it, at once (the plane wants a pass), in seq order, and nothing is lost.
TEST_F(MarketPlaneTest, APostingLargerThanARoundIsStoredOverTheNextRounds) {
  ledger_entries_per_round_ = 2;
  plane_ = restart(kStart);
  const double h100 = price_of(wire(plane_->prices(kStart)), "H100", "standard");
  for (int i = 0; i < 7; ++i) {
    JobSpec spec = job("one-" + std::to_string(i), 1, 1);
    spec.preemptible = false;  // the standard price
    const std::int64_t id = submit(spec, kVision, "", kStart).body["id"];
    ASSERT_EQ(get(id).body["state"], "running");
  }
  std::size_t rounds = 0;
  std::size_t most = 0;
  for (Instant now = kStart + 1min; rounds < 20; now += 1ms) {
    Batch batch;
    plane_->schedule(now, batch);
    most = std::max(most, batch.ledger.size());
    commit(batch);
    ++rounds;
    if (!plane_->wants_pass()) break;
  }
  EXPECT_EQ(most, 2U);
  EXPECT_GE(rounds, 4U);  // 7 charges, 2 a round
  EXPECT_FALSE(plane_->wants_pass());
  EXPECT_GE(store_.ledger.size(), 7U);
  // Every charge is there: 7 GPU-minutes at the standard price.
  const BillQuery query{"vision", kDay, kDay + 86'400, BillGrouping::kTeam};
  const Wire bill = wire(plane_->bill(kVision, query));
  ASSERT_EQ(bill.status, 200) << bill.body.dump();
  EXPECT_NEAR(bill.body["total"]["charges"].get<double>(), 7 * h100 / 60, 1e-5);
  // And a restart from the store finds them all.
  plane_ = restart(kStart + 1min + 1s);
  EXPECT_NEAR(wire(plane_->bill(kVision, query)).body["total"]["charges"].get<double>(),
              7 * h100 / 60, 1e-5);
}

// Closing the books: once a day is over, its stored entries fold into one per job (days older
// than ledger_books.job_days into one per tenant and model), in the store as in the plane; bills
// over whole days, balances and a restart see the same money.
TEST_F(MarketPlaneTest, ClosedDaysAreFoldedInTheStoreAndEveryBillStaysTheSame) {
  ledger_books_ = BookTerms{.job_days = 1, .day_days = 3};
  ledger_entries_per_round_ = 16;
  plane_ = restart(kStart);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    JobSpec spec = job("long-" + std::to_string(i), 1, 1);
    spec.preemptible = false;
    ids.push_back(submit(spec, kVision, "", kStart).body["id"]);
    ASSERT_EQ(get(ids.back()).body["state"], "running");
  }
  // A posting every 10 minutes of the clock for two days and a bit; two jobs end on day 0.
  const auto bill = [&](std::int64_t day, BillGrouping by) {
    const BillQuery query{"vision", kDay + day * 86'400, kDay + (day + 1) * 86'400, by};
    return wire(plane_->bill(kVision, query)).body;
  };
  std::vector<nlohmann::json> bills;
  std::size_t posted = 0;
  std::size_t folds = 0;
  for (Instant now = kStart + 10min; now <= kStart + 50h; now += 10min) {
    if (now == kStart + 12h) {
      for (int ended : {0, 1}) {
        Batch batch;
        ASSERT_EQ(
            wire(plane_->report_status(kAdmin, jid(ids[ended]), succeeded(), now, batch)).status,
            200);
        commit(batch);
      }
    }
    if (now == kStart + 24h) bills = {bill(0, BillGrouping::kJob), bill(0, BillGrouping::kModel)};
    for (int round = 0; round < 10; ++round) {
      Batch batch;
      plane_->schedule(now, batch);
      posted += batch.ledger.size();
      folds += batch.ledger_folds.size();
      EXPECT_LE(batch.ledger.size() +
                    (batch.ledger_folds.empty() ? 0 : batch.ledger_folds[0].carried.size()),
                16U);
      commit(batch);
      if (!plane_->wants_pass()) break;
    }
  }
  // Day 0 and day 1 are closed: day 0's entries by tenant and model (older than a day), day 1's by
  // job; day 2 is open.
  EXPECT_GE(folds, 2U);
  EXPECT_LT(store_.ledger.size(), posted / 4);
  std::set<std::string> day0_jobs;
  for (const LedgerRecord& r : store_.ledger) {
    const auto doc = nlohmann::json::parse(r.document);
    if (r.at <= kDay + 86'400 && doc.contains("folded")) day0_jobs.insert(doc["job"].dump());
  }
  // Day 0 keeps the two live jobs' own entries; the ended jobs' are the tenant's.
  EXPECT_EQ(day0_jobs,
            (std::set<std::string>{"null", std::to_string(ids[2]), std::to_string(ids[3])}));
  const nlohmann::json by_model = bill(0, BillGrouping::kModel);
  EXPECT_EQ(by_model["total"], bills[1]["total"]);
  EXPECT_EQ(by_model["groups"][0]["gpu_hours"], bills[1]["groups"][0]["gpu_hours"]);
  // By job, day 0's ended jobs are the tenant's now; the live ones keep their own lines.
  const nlohmann::json by_job = bill(0, BillGrouping::kJob);
  EXPECT_EQ(by_job["total"]["charges"], bills[0]["total"]["charges"]);
  EXPECT_EQ(by_job["groups"].size(), 3U);
  EXPECT_EQ(by_job["groups"][0]["group"], "(books closed: by model only)");
  // A restart reads the folded ledger: the same bills and charges.
  const auto charges = plane_->figures().tenant_charges.at("vision");
  plane_ = restart(kStart + 50h + 1s);
  EXPECT_EQ(bill(0, BillGrouping::kModel)["total"], bills[1]["total"]);
  EXPECT_EQ(plane_->figures().tenant_charges.at("vision"), charges);
}

TEST_F(MarketPlaneTest, LendersEarnCreditsForTheIdleGuaranteeOthersUse) {
  // search has no guarantee: its job runs on vision's idle H100, and vision is credited.
  const std::int64_t id = submit(job("borrow", 1, 8, "search"), kSearch, "", kStart).body["id"];
  ASSERT_EQ(get(id).body["state"], "running");
  tick(kStart + 1h);
  BillQuery query{"vision", kDay, kDay + 86'400, BillGrouping::kTeam};
  Wire bill = wire(plane_->bill(kVision, query));
  ASSERT_EQ(bill.status, 200);
  EXPECT_GT(bill.body["total"]["credits"].get<double>(), 0);
  EXPECT_EQ(bill.body["total"]["charges"].get<double>(), 0);
  ASSERT_EQ(bill.body["groups"].size(), 1U);
  EXPECT_EQ(bill.body["groups"][0]["group"], "(lending credits)");
  // The lender's share (0.8) of the standard price of the 8 GPU-hours lent.
  const double standard = price_of(wire(plane_->prices(kStart)), "H100", "standard");
  EXPECT_NEAR(bill.body["total"]["credits"].get<double>(), 8 * standard * 0.8, 1e-5);
  EXPECT_GT(plane_->figures().tenant_credits.at("vision"), 0);
}

TEST_F(MarketPlaneTest, WithoutAMarketPricesAndBillsAreNotFound) {
  market_.reset();
  plane_ = restart(kStart);
  EXPECT_EQ(wire(plane_->prices(kStart)).status, 404);
  EXPECT_EQ(
      wire(plane_->bill(kVision, BillQuery{"vision", kDay, kDay + 86'400, BillGrouping::kTeam}))
          .status,
      404);
}

TEST_F(MarketPlaneTest, SpentBudgetHoldsNewJobsBackUntilTheQuarterEnds) {
  // 16 H100 (about 18.6 USD an hour) for long enough to pass the budget of 30 (half of it
  // raises the alert).
  const std::int64_t first = submit(job("big", 2, 8), kVision, "", kStart).body["id"];
  ASSERT_EQ(get(first).body["state"], "running");
  Instant now = kStart;
  for (int minute = 1; minute <= 180; ++minute) {
    now = kStart + minute * 1min;
    tick(now);
  }
  const auto kinds = event_kinds();
  EXPECT_EQ(std::ranges::count(kinds, "budget.alert"), 1);
  EXPECT_EQ(std::ranges::count(kinds, "budget.exhausted"), 1);
  // Running jobs go on; a new job waits with the reason.
  EXPECT_EQ(get(first).body["state"], "running");
  const std::int64_t second = submit(job("next", 1, 8), kVision, "", now).body["id"];
  Wire why = wire(plane_->why(kVision, jid(second), now));
  EXPECT_EQ(why.body["state"], "pending");
  EXPECT_THAT(why.body["reason"].get<std::string>(), HasSubstr("budget exhausted"));
  // The tenant's view shows where its budget stands; a tenant without one has none.
  const Wire vision = wire(plane_->get_tenant(kVision, "vision"));
  ASSERT_TRUE(vision.body.contains("budget")) << vision.body.dump();
  EXPECT_EQ(vision.body["budget"]["state"], "exhausted");
  EXPECT_EQ(vision.body["budget"]["budget"], 30);
  EXPECT_GE(vision.body["budget"]["spent"].get<double>(), 30.0);
  EXPECT_LT(vision.body["budget"]["remaining"].get<double>(), 0.0);
  EXPECT_EQ(vision.body["budget"]["quarter"], "2026-Q4");
  EXPECT_FALSE(wire(plane_->get_tenant(kSearch, "search")).body.contains("budget"));
  // Other tenants are not held back.
  const std::int64_t other = submit(job("s", 1, 8, "search"), kSearch, "", now).body["id"];
  EXPECT_EQ(get(other).body["state"], "running");
  // Held back after a restart too, without a second alert or exhausted event.
  plane_ = restart(now + 1s);
  tick(now + 61s);
  EXPECT_EQ(std::ranges::count(event_kinds(), "budget.alert"), 1);
  EXPECT_EQ(std::ranges::count(event_kinds(), "budget.exhausted"), 1);
  EXPECT_EQ(get(second).body["state"], "pending");
  // The next quarter (2027-01-01) lifts it.
  const Instant next_quarter = at_ms(1'798'761'600'000);
  plane_ = restart(next_quarter);
  tick(next_quarter + 61s);
  EXPECT_EQ(get(second).body["state"], "running");
}

TEST_F(MarketPlaneTest, MaxCostStopsAJobLikeMaxRuntime) {
  // 8 preemptible H100 cost about 9.3 USD an hour: 5 USD are reached after about 32 minutes.
  JobSpec spec = job("capped", 1, 8);
  spec.max_cost = 5 * kMicrosPerUnit;
  const std::int64_t id = submit(spec, kVision, "", kStart).body["id"];
  tick(kStart + 20min);
  EXPECT_EQ(get(id).body["state"], "running");
  tick(kStart + 40min);
  EXPECT_EQ(get(id).body["state"], "failed");
  EXPECT_THAT(wire(plane_->why(kVision, jid(id), kStart + 40min)).body["reason"].get<std::string>(),
              HasSubstr("reaching its max_cost of 5.00 USD"));
}

TEST_F(MarketPlaneTest, DailySpendAboveTwiceTheWeeksAverageRaisesAnAnomaly) {
  market_->budgets.clear();
  plane_ = restart(kStart);
  // Eight days: 1 GPU for an hour a day, then 8 GPUs for an hour.
  for (int day = 0; day < 8; ++day) {
    const Instant start = kStart + day * 24h;
    const std::int64_t id =
        submit(job(fmt::format("d{}", day), 1, day == 7 ? 8 : 1), kVision, "", start).body["id"];
    Batch batch;
    wire(plane_->report_status(kAdmin, jid(id), succeeded(), start + 1h, batch));
    commit(batch);
    tick(start + 61min);
  }
  EXPECT_EQ(std::ranges::count(event_kinds(), "cost.anomaly"), 0);
  tick(kStart + 8 * 24h + 1min);
  ASSERT_EQ(std::ranges::count(event_kinds(), "cost.anomaly"), 1);
  const auto it = std::ranges::find_if(
      store_.events, [](const EventRecord& e) { return e.kind == "cost.anomaly"; });
  EXPECT_THAT(it->document, HasSubstr("2026-12-08"));
  EXPECT_THAT(it->document, HasSubstr("vision"));
}

// --- bursting ---------------------------------------------------------------------------------

constexpr std::string_view kBurstYaml = test_support::kExampleBurstYaml;

class BurstPlaneTest : public MarketPlaneTest {
 protected:
  void SetUp() override {
    auto market = read_market_yaml(std::string(kMarketYaml) + std::string(kBurstYaml), "m.yaml");
    ASSERT_TRUE(market.has_value()) << market.error().message();
    market_ = std::move(*market);
    market_->budgets.clear();
    plane_ = restart(kStart);
  }
  // Fills every H100 of the pool, then submits a job of one 8-GPU task that has to wait.
  std::int64_t waiting_job() {
    const std::int64_t fill = submit(job("fill", 16, 8), kVision, "", kStart).body["id"];
    EXPECT_EQ(get(fill).body["state"], "running");
    const std::int64_t id = submit(job("wait", 1, 8), kVision, "", kStart).body["id"];
    EXPECT_EQ(get(id).body["state"], "pending");
    return id;
  }
  static Principal agent(const std::string& node) { return {"agent", Role::kAgent, "", node}; }
  Wire register_node(const std::string& node, int gpus, Instant now) {
    NodeRegistration registration;
    registration.gpus = gpus;
    registration.address = "10.9.0.1";
    Batch batch;
    Wire reply = wire(plane_->register_node(agent(node), node, registration, now, batch));
    commit(batch);
    return reply;
  }
  double burst_charges(const std::string& tenant = "vision") {
    double sum = 0;
    for (const LedgerRecord& r : store_.ledger) {
      auto entry = nlohmann::json::parse(r.document);
      if (entry["kind"] == "burst-charge" && r.tenant == tenant)
        sum += entry["amount"].get<double>();
    }
    return sum / 1e6;
  }
  static constexpr Instant kRent = kStart + 10min;  // the threshold passed
};

TEST_F(BurstPlaneTest, WaitingJobRunsOnRentedNodesAndIsChargedTheOfferPrice) {
  const std::int64_t id = waiting_job();
  tick(kRent - 1s);
  EXPECT_TRUE(plane_->take_provider_calls().empty());
  tick(kRent);
  std::vector<ProviderCall> calls = plane_->take_provider_calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].action, "up");
  EXPECT_EQ(calls[0].hook, "/opt/tidepool/rent-cloud");
  const nlohmann::json& request = calls[0].request;
  EXPECT_EQ(request["offer"], "cloud-h100");
  EXPECT_EQ(request["model"], "H100");
  EXPECT_EQ(request["job"]["id"], id);
  ASSERT_EQ(request["nodes"].size(), 1U);
  const std::string node = request["nodes"][0]["node"];
  EXPECT_EQ(request["nodes"][0]["gpus"], 8);
  EXPECT_TRUE(request["nodes"][0]["token"].get<std::string>().starts_with("tp_"));
  // Pending while the node comes up; the token is stored (hashed) as the node's agent token.
  Wire view = get(id);
  EXPECT_EQ(view.body["state"], "pending");
  EXPECT_EQ(view.body["pending"]["kind"], "burst");
  EXPECT_THAT(view.body["pending"]["reason"].get<std::string>(), HasSubstr("0 of 1 node(s)"));
  EXPECT_EQ(
      std::ranges::count_if(
          store_.tokens, [&](const auto& t) { return t.second.node == node && !t.second.revoked; }),
      1);
  // Too few GPUs is refused; the right node registers and the job runs there.
  EXPECT_EQ(register_node(node, 4, kRent + 1min).status, 409);
  ASSERT_EQ(register_node(node, 8, kRent + 2min).status, 200);
  view = get(id);
  ASSERT_EQ(view.body["state"], "running");
  EXPECT_EQ(view.body["placement"][0]["node"], node);
  Batch batch;
  Wire beat = wire(plane_->heartbeat(agent(node), node, NodeHeartbeat{}, kRent + 130s, batch));
  commit(batch);
  ASSERT_EQ(beat.status, 200) << beat.body.dump();
  ASSERT_EQ(beat.body["assignments"].size(), 1U);
  EXPECT_EQ(beat.body["assignments"][0]["job"], id);
  EXPECT_EQ(beat.body["assignments"][0]["master_addr"], "10.9.0.1");
  EXPECT_EQ(plane_->figures().burst_gpus.at("cloud-h100"), 8);
  const nlohmann::json listed = wire(plane_->list_nodes(kVision)).body["nodes"].back();
  EXPECT_EQ(listed["name"], node);
  EXPECT_EQ(listed["gpu_model"], "H100");
  EXPECT_EQ(listed["gpus"], 8);
  EXPECT_EQ(listed["state"], "ready");
  EXPECT_EQ(listed["jobs"][0]["job"], id);
  EXPECT_EQ(listed["rental"]["offer"], "cloud-h100");
  // The job ends after an hour on the node: released, and charged from the request on.
  const Instant end = kRent + 2min + 1h;
  Batch done;
  ASSERT_EQ(wire(plane_->report_status(agent(node), jid(id), succeeded(1, 0), end, done)).status,
            200);
  commit(done);
  EXPECT_EQ(get(id).body["state"], "succeeded");
  calls = plane_->take_provider_calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].action, "down");
  EXPECT_EQ(calls[0].request["nodes"][0]["node"], node);
  EXPECT_EQ(
      std::ranges::count_if(
          store_.tokens, [&](const auto& t) { return t.second.node == node && !t.second.revoked; }),
      0);
  const double hours = std::chrono::duration<double, std::ratio<3600>>(end - kRent).count();
  EXPECT_NEAR(burst_charges(), 8 * 4 * hours, 1e-5);
  BillQuery query{"vision", kDay, kDay + 86'400, BillGrouping::kJob};
  Wire bill = wire(plane_->bill(kVision, query));
  ASSERT_EQ(bill.status, 200);
  EXPECT_GE(bill.body["total"]["charges"].get<double>(), 8 * 4 * hours - 1e-5);
  EXPECT_EQ(plane_->figures().burst_gpus.at("cloud-h100"), 0);
  EXPECT_EQ(plane_->figures().burst_rentals, 1);
  // A job on rented capacity ended outside the pool's scheduler, which let it go at the rental.
  EXPECT_EQ(plane_->figures().internal_errors, 0);
}

TEST_F(BurstPlaneTest, FailedUpHookSendsTheJobBackToThePoolAndRestsTheOffer) {
  const std::int64_t id = waiting_job();
  tick(kRent);
  std::vector<ProviderCall> calls = plane_->take_provider_calls();
  ASSERT_EQ(calls.size(), 1U);
  Batch batch;
  wire(plane_->provider_result(calls[0].id, false, "quota exceeded (exited with status 3)",
                               kRent + 5s, batch));
  commit(batch);
  Wire view = get(id);
  EXPECT_EQ(view.body["state"], "pending");
  EXPECT_NE(view.body["pending"]["kind"], "burst");
  EXPECT_THAT(view.body["message"].get<std::string>(), HasSubstr("quota exceeded"));
  EXPECT_EQ(std::ranges::count(event_kinds(), "burst.hook_failed"), 1);
  calls = plane_->take_provider_calls();
  ASSERT_EQ(calls.size(), 1U);  // down, to clean up what the hook may have left
  EXPECT_EQ(calls[0].action, "down");
  EXPECT_EQ(burst_charges(), 0);
  // The offer rests (10 minutes: the threshold, above the 5-minute floor).
  tick(kRent + 5s + 9min);
  EXPECT_TRUE(plane_->take_provider_calls().empty());
  tick(kRent + 5s + 11min);
  calls = plane_->take_provider_calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].action, "up");
}

TEST_F(BurstPlaneTest, SilentRentedNodeRequeuesItsJobInThePool) {
  const std::int64_t id = waiting_job();
  tick(kRent);
  const std::string node = plane_->take_provider_calls()[0].request["nodes"][0]["node"];
  ASSERT_EQ(register_node(node, 8, kRent + 1min).status, 200);
  ASSERT_EQ(get(id).body["state"], "running");
  tick(kRent + 1min + 31s);  // the default heartbeat timeout is 30 s
  Wire view = get(id);
  EXPECT_EQ(view.body["state"], "pending");
  EXPECT_EQ(view.body["faults"], 1);
  EXPECT_THAT(view.body["message"].get<std::string>(), HasSubstr("sent no heartbeat"));
  const std::vector<ProviderCall> calls = plane_->take_provider_calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls[0].action, "down");
  EXPECT_GT(burst_charges(), 0);
  // Its node is gone: a late heartbeat is refused.
  Batch batch;
  EXPECT_EQ(wire(plane_->heartbeat(agent(node), node, NodeHeartbeat{}, kRent + 100s, batch)).status,
            404);
}

TEST_F(BurstPlaneTest, RestartAsksUpAgainWithNewTokensAndKeepsRunningRentals) {
  const std::int64_t id = waiting_job();
  tick(kRent);
  const ProviderCall first = plane_->take_provider_calls()[0];
  const std::string node = first.request["nodes"][0]["node"];
  plane_ = restart(kRent + 30s);
  std::vector<ProviderCall> calls = plane_->take_provider_calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].action, "up");
  EXPECT_EQ(calls[0].request["nodes"][0]["node"], node);
  EXPECT_NE(calls[0].request["nodes"][0]["token"], first.request["nodes"][0]["token"]);
  EXPECT_EQ(
      std::ranges::count_if(
          store_.tokens, [&](const auto& t) { return t.second.node == node && !t.second.revoked; }),
      1);
  ASSERT_EQ(register_node(node, 8, kRent + 1min).status, 200);
  ASSERT_EQ(get(id).body["state"], "running");
  // Running on its rented node after another restart, still charged from the first request.
  plane_ = restart(kRent + 90s);
  EXPECT_TRUE(plane_->take_provider_calls().empty());
  EXPECT_EQ(get(id).body["state"], "running");
  Batch batch;
  ASSERT_EQ(
      wire(plane_->report_status(agent(node), jid(id), succeeded(1, 0), kRent + 1h, batch)).status,
      200);
  commit(batch);
  EXPECT_NEAR(burst_charges(), 8 * 4.0, 1e-5);
}

TEST_F(BurstPlaneTest, TenantWithoutEnoughBudgetLeftIsNotRented) {
  // vision's budget of 30 does not cover the estimate: 8 GPUs x (1 h + 5 min) x 4.
  market_->budgets = {{"vision", Budget{30 * kMicrosPerUnit, 500'000}}};
  plane_ = restart(kStart);
  const std::int64_t id = waiting_job();
  tick(kRent);
  EXPECT_TRUE(plane_->take_provider_calls().empty());
  Wire view = get(id);
  EXPECT_EQ(view.body["state"], "pending");
  EXPECT_THAT(view.body["pending"]["burst"].get<std::string>(), HasSubstr("not rented: budget"));
}

TEST_F(BurstPlaneTest, ProvidersWithoutAHookAreRefusedAtStart) {
  market_->burst_providers[0].hook.clear();
  Batch repairs;
  ControlPlaneSetup setup = example_setup();
  setup.market = market_;
  auto plane = ControlPlane::create(std::move(setup), store_.snapshot(), kStart, repairs,
                                    std::make_shared<TokenTable>());
  ASSERT_FALSE(plane.has_value());
  EXPECT_EQ(plane.error().field, "market burst.providers.cloud.hook");
}

// --- hardening: what a careless or hostile client or node must not be able to do ---

TEST_F(ControlPlaneTest, AJobWithoutACommandIsRefusedAtSubmission) {
  for (const auto& [command, field] :
       {std::pair{std::vector<std::string>{}, "command"},
        std::pair{std::vector<std::string>{"", "x"}, "command[0]"}}) {
    JobSpec spec = job("no-program");
    spec.command = command;
    const Wire refused = submit(spec);
    EXPECT_EQ(refused.status, 400);
    EXPECT_EQ(refused.body["field"], field);
  }
  EXPECT_EQ(submit(job("ok")).status, 201);
}

TEST_F(ControlPlaneTest, TasksThatRequestNothingStayOffDrainedNodes) {
  const nlohmann::json nodes = wire(plane_->list_nodes(kAdmin)).body["nodes"];
  for (const auto& node : nodes) {
    Batch batch;
    ASSERT_EQ(wire(plane_->set_drained(kAdmin, node["name"], true, "maintenance", at_ms(0), batch))
                  .status,
              200);
    commit(batch);
  }
  JobSpec nothing = job("nothing", 100, 0);
  nothing.gpu_models.clear();
  const Wire reply = submit(nothing);
  ASSERT_EQ(reply.status, 201) << reply.body.dump();
  const Wire now = get(reply.body["id"]);
  EXPECT_EQ(now.body["state"], "pending") << now.body.dump();
  EXPECT_TRUE(now.body["placement"].empty());
}

TEST_F(ControlPlaneTest, ATenantPastItsPendingCapOrItsRateGets429) {
  admission_ = AdmissionLimits{.max_pending_jobs = 2, .submissions_per_second = 0};
  plane_ = restart();
  ASSERT_EQ(submit(job("fill", 16, 8)).status, 201);  // every H100
  EXPECT_EQ(submit(job("wait-1")).status, 201);
  EXPECT_EQ(submit(job("wait-2")).status, 201);
  Wire over = submit(job("wait-3"));
  EXPECT_EQ(over.status, 429) << over.body.dump();
  EXPECT_EQ(over.body["field"], "tenant");
  EXPECT_THAT(over.body["reason"].get<std::string>(), HasSubstr("2 jobs pending"));
  // Another tenant is not held back by vision's queue.
  EXPECT_EQ(submit(job("other", 1, 8, "search"), kSearch).status, 201);

  admission_ =
      AdmissionLimits{.max_pending_jobs = 100, .submissions_per_second = 1, .submission_burst = 2};
  plane_ = restart(at_ms(2'000'000));
  EXPECT_EQ(submit(job("r1"), kVision, "", at_ms(2'000'000)).status, 201);
  EXPECT_EQ(submit(job("r2"), kVision, "", at_ms(2'000'000)).status, 201);
  over = submit(job("r3"), kVision, "", at_ms(2'000'000));
  EXPECT_EQ(over.status, 429);
  EXPECT_THAT(over.body["reason"].get<std::string>(), HasSubstr("more than 1 jobs per second"));
  EXPECT_EQ(submit(job("r4"), kVision, "", at_ms(2'001'000)).status, 201);  // a second later
}

TEST_F(ControlPlaneTest, AnAgentReportingAnotherGpuModelIsRefused) {
  const Principal agent{"agent", Role::kAgent, "", "h100-a-01"};
  NodeRegistration wrong;
  wrong.gpus = 8;
  wrong.gpu_model = "A100";
  Batch batch;
  Wire refused = wire(plane_->register_node(agent, "h100-a-01", wrong, at_ms(0), batch));
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(refused.body["field"], "gpu_model");
  NodeRegistration one_wrong;
  one_wrong.gpus = 8;
  const auto device = [](int index, std::string model) {
    GpuDevice d;
    d.index = index;
    d.model = std::move(model);
    return d;
  };
  one_wrong.devices = {device(0, "NVIDIA H100 80GB HBM3"), device(1, "NVIDIA A100-SXM4-80GB")};
  refused = wire(plane_->register_node(agent, "h100-a-01", one_wrong, at_ms(0), batch));
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(refused.body["field"], "devices[1].model");
  NodeRegistration right;
  right.gpus = 8;
  right.gpu_model = "NVIDIA H100 80GB HBM3";
  right.devices = {device(0, "NVIDIA H100 80GB HBM3")};
  EXPECT_EQ(wire(plane_->register_node(agent, "h100-a-01", right, at_ms(0), batch)).status, 200);
}

TEST_F(ControlPlaneTest, ANodeTheJobLeftCannotActOnItAndAgentsNameTheRun) {
  // Every node's agent is up; the job runs on node A.
  const auto agent = [](const std::string& node) {
    return Principal{"agent-" + node, Role::kAgent, "", node};
  };
  Instant now = kT0;
  const nlohmann::json nodes = wire(plane_->list_nodes(kAdmin)).body["nodes"];
  for (const auto& node : nodes) {
    Batch batch;
    ASSERT_EQ(wire(plane_->register_node(agent(node["name"]), node["name"], NodeRegistration{}, now,
                                         batch))
                  .status,
              200);
    commit(batch);
  }
  const std::int64_t id = submit(job("moved")).body["id"];
  const std::string a = get(id).body["placement"][0]["node"];
  const auto checkpoint = [&](const std::string& node, std::optional<std::int64_t> run) {
    Batch batch;
    Wire reply = wire(plane_->report_checkpoint(
        agent(node), jid(id), CheckpointReport{{}, "/ckpt/x", "", run}, now, batch));
    commit(batch);
    return reply;
  };
  const auto status = [&](const std::string& node, std::optional<std::int64_t> run,
                          std::optional<int> task) {
    Batch batch;
    Wire reply = wire(plane_->report_status(
        agent(node), jid(id), JobStatusReport{"failed", 1, "", task, run}, now, batch));
    commit(batch);
    return reply;
  };
  EXPECT_EQ(checkpoint(a, std::nullopt).status, 400);  // an agent names the run
  EXPECT_EQ(checkpoint(a, 1).status, 200);
  EXPECT_EQ(wire(plane_->log_access(agent(a), jid(id), true, 0, 1)).status, 200);
  EXPECT_EQ(wire(plane_->log_access(agent(a), jid(id), true, 1, 1)).status,
            400);  // it has no task 1

  // A falls silent: the job moves to B, in run 2.
  now += 31s;
  for (const auto& node : nodes) {
    if (node["name"] == a) continue;
    Batch batch;
    wire(plane_->heartbeat(agent(node["name"]), node["name"], NodeHeartbeat{}, now, batch));
    commit(batch);
  }
  run([](ControlPlane&, Instant, Batch&) { return Reply{}; }, now);
  const Wire moved = get(id);
  ASSERT_EQ(moved.body["state"], "running") << moved.body.dump();
  ASSERT_EQ(moved.body["starts"], 2);
  const std::string b = moved.body["placement"][0]["node"];
  ASSERT_NE(a, b);
  // A can no longer set its checkpoint, write run 2's log or end it, in either run; it may still
  // ship the last of run 1's output (each run has its own log), which a node that ran no run of
  // the job may not (to its agent the job is not there).
  EXPECT_EQ(checkpoint(a, 1).status, 409);
  EXPECT_EQ(checkpoint(a, 2).status, 403);
  EXPECT_EQ(wire(plane_->log_access(agent(a), jid(id), true, 0, 1)).status, 200);
  EXPECT_EQ(wire(plane_->log_access(agent(a), jid(id), true, 1, 1)).status,
            400);  // it has no task 1
  for (const auto& node : nodes) {
    if (node["name"] == a || node["name"] == b) continue;
    EXPECT_EQ(wire(plane_->log_access(agent(node["name"]), jid(id), true, 0, 1)).status, 404);
  }
  EXPECT_EQ(wire(plane_->log_access(agent(a), jid(id), true, 0, 2)).status, 403);
  EXPECT_EQ(wire(plane_->log_access(agent(a), jid(id), true, 0, std::nullopt)).status, 400);
  EXPECT_EQ(status(a, 2, 0).status, 403);
  EXPECT_EQ(status(a, std::nullopt, 0).status, 400);
  EXPECT_EQ(get(id).body["state"], "running");
  EXPECT_EQ(get(id).body["checkpoint_path"], "/ckpt/x");
  // B can, for its own task of run 2; and so can A's reads of nothing (it sees the job ran there).
  EXPECT_EQ(wire(plane_->log_access(agent(b), jid(id), true, 0, 2)).status, 200);
  EXPECT_EQ(checkpoint(b, 2).status, 200);
  EXPECT_EQ(status(b, 2, 0).status, 200);
  EXPECT_EQ(get(id).body["state"], "failed");
  // The latest run's placement survives a restart.
  plane_ = restart(now);
  EXPECT_EQ(checkpoint(b, 2).status, 409);  // ended
}

TEST_F(ControlPlaneTest, AJobRecordsItsSubmitterAndHistoryIsAWindowOfTime) {
  tokens_->put(TokenRecord{.id = "vision-token",
                           .hash = "h",
                           .role = "user",
                           .tenant = "vision",
                           .node = "",
                           .description = "alice's laptop",
                           .created_ms = 1,
                           .revoked = false});
  const std::int64_t early = submit(job("early", 1, 1), kVision, "", at_ms(1'000'000)).body["id"];
  ASSERT_EQ(run([&](ControlPlane& p, Instant now,
                    Batch& b) { return p.cancel(kAdmin, jid(early), now, b); },
                at_ms(2'000'000))
                .status,
            200);
  const std::int64_t late = submit(job("late", 1, 1), kAdmin, "", at_ms(3'000'000)).body["id"];
  EXPECT_EQ(get(early).body["submitter"], "alice's laptop");
  EXPECT_EQ(get(early).body["submitter_token"], "vision-token");
  EXPECT_FALSE(get(late).body.contains("submitter"));  // a token without a description
  const auto ids = [&](std::int64_t since, std::int64_t until) {
    JobFilter filter;
    if (since > 0) filter.since = at_ms(since);
    if (until > 0) filter.until = at_ms(until);
    const Wire page = wire(plane_->list_jobs(kAdmin, filter));
    EXPECT_EQ(page.status, 200) << page.body.dump();
    std::vector<std::int64_t> out;
    for (const auto& j : page.body["jobs"]) out.push_back(j["id"]);
    return out;
  };
  using Ids = std::vector<std::int64_t>;
  EXPECT_EQ(ids(0, 0), (Ids{early, late}));
  EXPECT_EQ(ids(2'500'000, 0), Ids{late});           // early ended before the window
  EXPECT_EQ(ids(2'000'000, 0), (Ids{early, late}));  // ended at its start: in it
  EXPECT_EQ(ids(0, 1'500'000), Ids{early});          // late was submitted after it
  EXPECT_EQ(ids(1'500'000, 2'500'000), Ids{early});
  EXPECT_EQ(ids(3'500'000, 4'000'000), Ids{late});  // still live
  JobFilter backwards;
  backwards.since = at_ms(2'000'000);
  backwards.until = at_ms(1'000'000);
  const Wire refused = wire(plane_->list_jobs(kAdmin, backwards));
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.body["field"], "until_ms");
  // The submitter is kept in the store.
  plane_ = restart(at_ms(4'000'000));
  EXPECT_EQ(get(early).body["submitter"], "alice's laptop");
}

// Retention: jobs that ended finished_jobs_kept_days ago leave the plane and the store, a round's
// worth at a time; a job a live job runs after stays, and so does a job that has not ended. An
// idempotency key of a removed job is free again.
TEST_F(ControlPlaneTest, JobsEndedLongAgoAreRemovedButThoseALiveJobRunsAfter) {
  const auto end = [&](std::int64_t id, std::string state) {
    JobStatusReport r;
    r.state = std::move(state);
    r.exit_code = r.state == "succeeded" ? 0 : 1;
    return run([&](ControlPlane& p, Instant at, Batch& b) {
      return p.report_status(kAdmin, jid(id), r, at, b);
    });
  };
  const std::int64_t keyed = submit(job("keyed", 1, 8), kVision, "key-1").body["id"];
  const std::int64_t parent = submit(job("parent", 1, 8)).body["id"];
  const std::int64_t other = submit(job("other", 1, 8)).body["id"];
  const std::int64_t alive = submit(job("alive", 1, 8)).body["id"];
  ASSERT_EQ(end(keyed, "succeeded").status, 200);
  ASSERT_EQ(end(parent, "succeeded").status, 200);
  ASSERT_EQ(end(other, "failed").status, 200);
  JobSpec child = job("child", 1, 8);
  child.after_ok = {parent};
  const std::int64_t after = submit(child).body["id"];
  ASSERT_EQ(get(after).body["state"], "running");

  const Instant kept_until = kT0 + std::chrono::days{92};
  Batch early;
  EXPECT_FALSE(plane_->remove_finished(kept_until, 10, early));
  EXPECT_TRUE(early.jobs_removed.empty());

  // One round's worth (here one job), then the other; `parent` stays while `child` lives.
  Batch first;
  EXPECT_TRUE(plane_->remove_finished(kept_until + 1ms, 1, first));
  EXPECT_EQ(first.jobs_removed, (std::vector<std::int64_t>{keyed}));
  commit(first);
  Batch second;
  EXPECT_FALSE(plane_->remove_finished(kept_until + 1ms, 1, second));
  EXPECT_EQ(second.jobs_removed, (std::vector<std::int64_t>{other}));
  commit(second);
  EXPECT_EQ(get(keyed).status, 404);
  EXPECT_EQ(get(parent).body["state"], "succeeded");
  EXPECT_EQ(get(alive).body["state"], "running");
  EXPECT_FALSE(store_.jobs.contains(keyed));
  EXPECT_TRUE(store_.jobs.contains(parent));

  // The key is free: a new job, not the removed one.
  const Wire again = submit(job("keyed", 1, 8), kVision, "key-1", kept_until + 2ms);
  ASSERT_EQ(again.status, 201) << again.body.dump();
  EXPECT_NE(again.body["id"], keyed);
  // Once the child ended too, the parent may go; a restart does not bring anything back.
  ASSERT_EQ(end(after, "succeeded").status, 200);
  Batch third;
  EXPECT_FALSE(plane_->remove_finished(kept_until + std::chrono::days{92}, 10, third));
  EXPECT_EQ(third.jobs_removed, (std::vector<std::int64_t>{parent, after}));
  commit(third);
  plane_ = restart(kept_until + std::chrono::days{92});
  EXPECT_EQ(get(parent).status, 404);
  EXPECT_EQ(get(alive).body["state"], "running");
}

// The job with the highest id removed, a restart gives the next job a new id all the same.
TEST_F(ControlPlaneTest, NoJobIdIsGivenTwiceAfterTheHighestWasRemoved) {
  const std::int64_t first = submit(job("first", 1, 8)).body["id"];
  ASSERT_EQ(run([&](ControlPlane& p, Instant at, Batch& b) {
              return p.cancel(kVision, jid(first), at, b);
            }).status,
            200);
  const Instant later = kT0 + std::chrono::days{93};
  Batch removal;
  EXPECT_FALSE(plane_->remove_finished(later, 10, removal));
  ASSERT_EQ(removal.jobs_removed, (std::vector<std::int64_t>{first}));
  commit(removal);
  ASSERT_TRUE(store_.jobs.empty());
  plane_ = restart(later);
  const std::int64_t next = submit(job("next", 1, 8), kVision, "", later).body["id"];
  EXPECT_EQ(next, first + 1);
}

// The figures' history: a pass samples them (once per interval) into the store; a restart reads
// them back; a user sees the pool's series and its own tenant's, an admin every tenant's.
TEST_F(ControlPlaneTest, PassesSampleTheHistoryWhichUsersSeeForTheirTenant) {
  submit(job("vision-job", 1, 8));
  submit(job("search-job", 1, 4, "search"), kSearch, "", kT0 + 5min);  // the next sample's
  const auto history_records = [&] {
    return std::ranges::count_if(
        store_.settings, [](const auto& s) { return s.first.starts_with(History::kKeyPrefix); });
  };
  EXPECT_EQ(history_records(), 1);
  plane_ = restart(kT0 + 6min);
  const HistoryQuery query{kT0 - 1h, kT0 + 1h, {}, {}, {}};
  const auto series = [&](const Principal& who) {
    std::set<std::string> seen;
    const Wire answer = wire(plane_->history(who, query));
    for (const auto& s : answer.body["series"]) {
      seen.insert(s["name"].get<std::string>() + ":" + s["labels"].value("tenant", ""));
    }
    return seen;
  };
  const std::set<std::string> vision = series(kVision);
  EXPECT_TRUE(vision.contains("used_milli_gpus:vision"));
  EXPECT_TRUE(vision.contains("guaranteed_milli_gpus:vision"));
  EXPECT_TRUE(vision.contains("allocated_milli_gpus:"));
  EXPECT_FALSE(vision.contains("used_milli_gpus:search"));
  EXPECT_FALSE(vision.contains("borrowed_milli_gpus:search"));
  const std::set<std::string> admin = series(kAdmin);
  EXPECT_TRUE(admin.contains("used_milli_gpus:search"));
  EXPECT_TRUE(admin.contains("borrowed_milli_gpus:search"));  // no guarantee: all of it borrowed
  const Wire all = wire(plane_->history(kAdmin, query));
  for (const auto& s : all.body["series"]) {
    if (s["name"] == "allocated_milli_gpus") {
      EXPECT_EQ(s["points"],
                nlohmann::json::parse(fmt::format("[[{}, 8000], [{}, 12000]]", unix_seconds(kT0),
                                                  unix_seconds(kT0 + 5min))));
    }
  }
}

TEST_F(ControlPlaneTest, HoldReleaseRequeueAndUpdateAsScontrolDoes) {
  const auto act = [&](auto method, const Principal& who, std::int64_t id, Instant now = kT0) {
    return run(
        [&](ControlPlane& p, Instant at, Batch& b) { return (p.*method)(who, jid(id), at, b); },
        now);
  };
  const auto update = [&](const Principal& who, std::int64_t id, nlohmann::json fields) {
    return run([&](ControlPlane& p, Instant at, Batch& b) {
      return p.update_job(who, jid(id), JobUpdate{std::move(fields)}, at, b);
    });
  };
  // Job `whole` takes every H100; `waiting` waits for it.
  const std::int64_t whole = submit(job("whole", 16, 8)).body["id"];
  ASSERT_EQ(get(whole).body["state"], "running");
  const std::int64_t waiting = submit(job("waiting", 1, 8)).body["id"];
  ASSERT_EQ(get(waiting).body["state"], "pending");

  Wire held = act(&ControlPlane::hold, kVision, waiting);
  ASSERT_EQ(held.status, 200) << held.body.dump();
  EXPECT_EQ(get(waiting).body["pending"]["kind"], "held");
  EXPECT_EQ(get(waiting).body["held"], "held by token vision-token (user)");
  EXPECT_EQ(act(&ControlPlane::hold, kVision, waiting).status, 409);  // already held
  EXPECT_EQ(act(&ControlPlane::hold, kVision, whole).status, 409);    // running
  EXPECT_EQ(act(&ControlPlane::hold, kSearch, waiting).status, 404);  // another tenant's
  const Principal agent{"agent-token", Role::kAgent, "", "h100-a-01"};
  EXPECT_EQ(act(&ControlPlane::hold, agent, waiting).status, 403);

  // Requeued, `whole` runs again; the held job does not start in the gap it left.
  Wire requeued = act(&ControlPlane::requeue_job, kVision, whole, at_ms(2'000'000));
  ASSERT_EQ(requeued.status, 200) << requeued.body.dump();
  EXPECT_EQ(get(whole).body["state"], "running");
  EXPECT_EQ(get(whole).body["starts"], 2);
  EXPECT_EQ(get(waiting).body["state"], "pending");
  EXPECT_EQ(act(&ControlPlane::requeue_job, kVision, waiting).status, 409);

  // An update is checked as a submission is; a running job cannot be updated.
  // (Lowered: a higher priority than `whole` would preempt it once released.)
  Wire lowered = update(kVision, waiting, {{"priority", -500}, {"max_runtime", "2h"}});
  ASSERT_EQ(lowered.status, 200) << lowered.body.dump();
  EXPECT_EQ(get(waiting).body["spec"]["priority"], -500);
  EXPECT_EQ(get(waiting).body["spec"]["max_runtime"], "2h");
  Wire too_high = update(kVision, waiting, {{"priority", 2'000'000}});
  EXPECT_EQ(too_high.status, 400);
  EXPECT_EQ(too_high.body["field"], "priority");
  Wire shape = update(kVision, waiting, {{"tasks", 2}});
  EXPECT_EQ(shape.status, 400);
  EXPECT_EQ(shape.body["field"], "tasks");
  EXPECT_EQ(update(kVision, whole, {{"priority", 1}}).status, 409);
  EXPECT_EQ(get(waiting).body["spec"]["priority"], -500);  // refused updates change nothing

  // A hold survives a restart; released, the job waits for capacity again.
  plane_ = restart(at_ms(3'000'000));
  EXPECT_EQ(get(waiting).body["pending"]["kind"], "held");
  Wire released = act(&ControlPlane::release, kVision, waiting, at_ms(3'000'000));
  ASSERT_EQ(released.status, 200) << released.body.dump();
  EXPECT_FALSE(get(waiting).body.contains("held"));
  EXPECT_EQ(get(waiting).body["state"], "pending");
  EXPECT_NE(get(waiting).body["pending"]["kind"], "held");
  EXPECT_EQ(act(&ControlPlane::release, kVision, waiting).status, 409);
  // A held job that is cancelled is no longer held, and cannot be released into the queue.
  const std::int64_t dropped = submit(job("dropped", 1, 8)).body["id"];
  ASSERT_EQ(act(&ControlPlane::hold, kVision, dropped, at_ms(3'000'000)).status, 200);
  ASSERT_EQ(act(&ControlPlane::cancel, kVision, dropped, at_ms(3'000'000)).status, 200);
  EXPECT_FALSE(get(dropped).body.contains("held"));
  EXPECT_EQ(act(&ControlPlane::release, kVision, dropped, at_ms(3'000'000)).status, 409);
  EXPECT_EQ(get(dropped).body["state"], "cancelled");
  // Once `whole` is cancelled, it runs.
  ASSERT_EQ(act(&ControlPlane::cancel, kVision, whole, at_ms(4'000'000)).status, 200);
  EXPECT_EQ(get(waiting).body["state"], "running");
}

TEST_F(ControlPlaneTest, AJobAfterOthersStartsWhenTheySucceedAndIsCancelledWhenOneFails) {
  const auto report = [&](std::int64_t id, std::string state, Instant now) {
    JobStatusReport r;
    r.state = std::move(state);
    r.exit_code = r.state == "succeeded" ? 0 : 1;
    return run([&](ControlPlane& p, Instant at,
                   Batch& b) { return p.report_status(kAdmin, jid(id), r, at, b); },
               now);
  };
  const auto after = [&](std::string name, std::vector<std::int64_t> ids,
                         const Principal& who = kVision) {
    JobSpec spec = job(std::move(name), 1, 8, who.role == Role::kUser ? who.tenant : "vision");
    spec.after_ok = std::move(ids);
    return submit(spec, who);
  };
  const std::int64_t first = submit(job("first", 1, 8)).body["id"];
  ASSERT_EQ(get(first).body["state"], "running");
  const std::int64_t second = after("second", {first}).body["id"];
  const std::int64_t third = after("third", {second}).body["id"];
  // Free GPUs do not start them: they wait for the jobs they run after, and say so.
  EXPECT_EQ(get(second).body["state"], "pending");
  EXPECT_EQ(get(second).body["pending"]["kind"], "dependency");
  EXPECT_THAT(get(second).body["pending"]["reason"].get<std::string>(),
              HasSubstr(fmt::format("runs after job {} (running) succeeds", first)));
  EXPECT_EQ(get(third).body["spec"]["after_ok"], nlohmann::json::array({second}));
  // Jobs that do not exist, or that the submitter cannot see, are refused.
  Wire missing = after("missing", {first, 999});
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.body["field"], "after_ok[1]");
  EXPECT_EQ(missing.body["reason"], "no job 999");
  EXPECT_EQ(after("other", {first}, kSearch).status, 400);
  // A restart keeps them waiting.
  plane_ = restart(at_ms(1'500'000));
  EXPECT_EQ(get(second).body["pending"]["kind"], "dependency");
  // first succeeds: second starts; it fails: third is cancelled.
  ASSERT_EQ(report(first, "succeeded", at_ms(2'000'000)).status, 200);
  EXPECT_EQ(get(second).body["state"], "running");
  EXPECT_EQ(get(third).body["pending"]["kind"], "dependency");
  ASSERT_EQ(report(second, "failed", at_ms(3'000'000)).status, 200);
  EXPECT_EQ(get(third).body["state"], "cancelled");
  EXPECT_THAT(get(third).body["message"].get<std::string>(),
              HasSubstr(fmt::format("job {} that it runs after (after_ok) ended failed", second)));
  // Jobs waiting for others, and held ones, count against the tenant's pending limit.
  admission_.max_pending_jobs = 2;
  plane_ = restart(at_ms(3'000'000));
  const std::int64_t busy = submit(job("busy", 16, 8), kVision, "", at_ms(3'000'000)).body["id"];
  ASSERT_EQ(get(busy).body["state"], "running");
  ASSERT_EQ(after("parked-1", {busy}).status, 201);
  const std::int64_t to_hold =
      submit(job("to-hold", 1, 8), kVision, "", at_ms(3'000'000)).body["id"];
  ASSERT_EQ(run([&](ControlPlane& p, Instant at, Batch& b) {
              return p.hold(kVision, jid(to_hold), at, b);
            }).status,
            200);
  EXPECT_EQ(after("parked-3", {busy}).status, 429);
  admission_.max_pending_jobs = 5000;
  plane_ = restart(at_ms(3'000'000));
  ASSERT_EQ(run([&](ControlPlane& p, Instant at, Batch& b) {
              return p.cancel(kVision, jid(busy), at, b);
            }).status,
            200);
  // After a job that succeeded, a job starts at once; after one that did not, it is refused.
  const std::int64_t fourth = after("fourth", {first}).body["id"];
  EXPECT_EQ(get(fourth).body["state"], "running");
  Wire never = after("never", {second});
  EXPECT_EQ(never.status, 400);
  EXPECT_THAT(never.body["reason"].get<std::string>(), HasSubstr("already ended failed"));
}

TEST_F(ControlPlaneTest, AnArrayIsOneJobPerIndexEachToldItsIndex) {
  JobSpec spec = job("sweep", 1, 1);
  spec.array = "0-2,5";
  Wire made = submit(spec, kVision, "sweep-1");
  ASSERT_EQ(made.status, 201) << made.body.dump();
  const std::int64_t first = made.body["id"];
  EXPECT_EQ(made.body["array"]["job"], first);
  EXPECT_EQ(made.body["array"]["jobs"],
            nlohmann::json::array({first, first + 1, first + 2, first + 3}));
  const std::vector<std::int64_t> indexes = {0, 1, 2, 5};
  for (std::size_t k = 0; k < indexes.size(); ++k) {
    const nlohmann::json member = get(first + static_cast<std::int64_t>(k)).body;
    EXPECT_EQ(member["array_job"], first);
    EXPECT_EQ(member["array_index"], indexes[k]);
    EXPECT_EQ(member["spec"]["env"]["TIDEPOOL_ARRAY_INDEX"], std::to_string(indexes[k]));
    EXPECT_EQ(member["spec"]["env"]["TIDEPOOL_ARRAY_JOB_ID"], std::to_string(first));
    EXPECT_FALSE(member["spec"].contains("array"));
    EXPECT_EQ(member["state"], "running");
  }
  // The same key and spec again: the same array.
  Wire again = submit(spec, kVision, "sweep-1");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body["array"]["jobs"].size(), 4U);
  // An array is admitted whole or not at all: each of its jobs counts against the limit.
  admission_.max_pending_jobs = 3;
  plane_ = restart();
  JobSpec big = job("big", 16, 8);
  big.array = "0-3";
  Wire refused = submit(big);
  EXPECT_EQ(refused.status, 429) << refused.body.dump();
  EXPECT_THAT(refused.body["reason"].get<std::string>(), HasSubstr("4 more do not fit"));
  JobFilter everything;
  EXPECT_EQ(wire(plane_->list_jobs(kAdmin, everything)).body["jobs"].size(), 4U);
  JobSpec crowded = job("crowded", 1, 1);
  crowded.array = "0-1";
  for (int i = 0; i < 255; ++i) crowded.env["V" + std::to_string(i)] = "x";
  Wire full = submit(crowded);
  EXPECT_EQ(full.status, 400);
  EXPECT_EQ(full.body["field"], "env");
}

TEST_F(ControlPlaneTest, ListingsArePagedNewestFirstWithACursor) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(submit(job("j" + std::to_string(i), 1, 1)).body["id"]);
  JobFilter filter;
  filter.limit = 3;
  std::vector<std::int64_t> seen;
  std::vector<std::size_t> pages;
  while (true) {
    const Wire page = wire(plane_->list_jobs(kVision, filter));
    ASSERT_EQ(page.status, 200) << page.body.dump();
    pages.push_back(page.body["jobs"].size());
    std::vector<std::int64_t> in_page;
    for (const auto& j : page.body["jobs"]) in_page.push_back(j["id"]);
    EXPECT_TRUE(std::ranges::is_sorted(in_page));  // id order within a page
    seen.insert(seen.begin(), in_page.begin(), in_page.end());
    if (!page.body.contains("next")) break;
    filter.before = std::stoll(page.body["next"].get<std::string>());
  }
  EXPECT_EQ(seen, ids);
  EXPECT_EQ(pages, (std::vector<std::size_t>{3, 3, 1}));
  filter = JobFilter{};
  filter.limit = kMaxJobPage + 1;
  EXPECT_EQ(wire(plane_->list_jobs(kVision, filter)).status, 400);
  filter.limit = 0;
  EXPECT_EQ(wire(plane_->list_jobs(kVision, filter)).status, 400);
  // Another tenant's page holds none of them.
  EXPECT_TRUE(wire(plane_->list_jobs(kSearch, JobFilter{})).body["jobs"].empty());
}

TEST_F(ControlPlaneTest, JobsOutsideTheSchedulerEndWithoutAnInternalError) {
  const std::int64_t busy = submit(job("busy", 16, 8)).body["id"];
  ASSERT_EQ(get(busy).body["state"], "running");
  JobSpec after = job("after");
  after.after_ok = {busy};
  const std::int64_t waiting = submit(after).body["id"];
  const std::int64_t held_waiting = submit(after).body["id"];
  const std::int64_t queued = submit(job("queued")).body["id"];
  const std::int64_t held = submit(job("held")).body["id"];
  for (std::int64_t id : {held_waiting, held}) {
    ASSERT_EQ(run([&](ControlPlane& p, Instant at, Batch& b) {
                return p.hold(kVision, jid(id), at, b);
              }).status,
              200);
  }
  // Held, waiting for another job, both, queued: each ends where it is.
  for (std::int64_t id : {waiting, held_waiting, held, queued, busy}) {
    ASSERT_EQ(run([&](ControlPlane& p, Instant at, Batch& b) {
                return p.cancel(kVision, jid(id), at, b);
              }).status,
              200);
    EXPECT_EQ(get(id).body["state"], "cancelled");
  }
  EXPECT_EQ(plane_->figures().internal_errors, 0);
  for (const EventRecord& e : store_.events) EXPECT_NE(e.kind, "internal.error") << e.document;
}

// Data pre-warming (prewarm_calls.h): a lead of 10 minutes. "fill" takes every H100 (16 x 8
// GPUs) for an hour, as its runtime estimate predicts; "wait" (one task of 8 GPUs) waits behind
// it, expected to start on one of fill's nodes when fill ends.
class PrewarmPlaneTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    PrewarmSetup prewarm;
    prewarm.hook = "/opt/tidepool/stage-data";
    prewarm.planner.lead = 600;
    prewarm.planner.horizon = 1200;
    prewarm_ = prewarm;
    plane_ = restart();
    JobSpec fill = job("fill", 16, 8);
    fill.runtime_estimate = 3600;
    fill_ = submit(fill, kVision, "", kT0).body["id"];
    EXPECT_EQ(get(fill_).body["state"], "running");
    JobSpec waiting = job("wait", 1, 8);
    waiting.env = {{"DATASET", "s3://corpus/v3"}};
    waiting.labels = {{"team", "vision"}};
    wait_ = submit(waiting, kVision, "", kT0 + 1s).body["id"];
    EXPECT_EQ(get(wait_).body["state"], "pending");
  }
  // A pass at `now` (the control loop's tick), committed.
  void tick(Instant now) {
    Batch batch;
    plane_->schedule(now, batch);
    commit(batch);
  }
  Wire act(const std::function<Reply(ControlPlane&, Instant, Batch&)>& command, Instant now) {
    return run([&](ControlPlane& p, Instant at, Batch& b) { return command(p, at, b); }, now);
  }
  Wire cancel(std::int64_t id, Instant now) {
    return act(
        [&](ControlPlane& p, Instant at, Batch& b) { return p.cancel(kAdmin, jid(id), at, b); },
        now);
  }

  // fill ends at kT0 + 1h (predicted): wait's call is due 10 minutes before.
  static constexpr Instant kEnd = kT0 + 1h;
  static constexpr Instant kDue = kEnd - 10min;
  std::int64_t fill_ = 0;
  std::int64_t wait_ = 0;
};

TEST_F(PrewarmPlaneTest, TheHookIsCalledALeadBeforeThePredictedStartAndTheStartIsPrewarmed) {
  tick(kT0 + 1min);  // expectations are asked for at most once a minute
  tick(kDue - 1min);
  EXPECT_TRUE(plane_->take_prewarm_calls().empty());
  // The loop wakes for the call.
  EXPECT_EQ(plane_->next_wakeup(kDue - 1min), kDue);
  tick(kDue - 1s);
  EXPECT_TRUE(plane_->take_prewarm_calls().empty());
  tick(kDue);
  std::vector<PrewarmHookCall> calls = plane_->take_prewarm_calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].job, jid(wait_));
  EXPECT_EQ(calls[0].hook, "/opt/tidepool/stage-data");
  const nlohmann::json& request = calls[0].request;
  EXPECT_EQ(request["action"], "prewarm");
  EXPECT_EQ(request["job"]["id"], wait_);
  EXPECT_EQ(request["job"]["name"], "wait");
  EXPECT_EQ(request["job"]["tenant"], "vision");
  EXPECT_EQ(request["job"]["env"]["DATASET"], "s3://corpus/v3");
  EXPECT_EQ(request["job"]["labels"]["team"], "vision");
  EXPECT_EQ(request["predicted_start"], rfc3339_utc(unix_seconds(kEnd)));
  EXPECT_EQ(request["predicted_start_in_seconds"], 600);
  EXPECT_EQ(request["lead_seconds"], 600);
  ASSERT_EQ(request["nodes"].size(), 1U);
  const std::string node = request["nodes"][0];
  EXPECT_THAT(node, HasSubstr("h100-"));
  // Called once: the passes after do not call again for the same node.
  tick(kDue + 2min);
  EXPECT_TRUE(plane_->take_prewarm_calls().empty());
  // fill ends 5 minutes later than the call: wait starts where it was expected, pre-warmed.
  ASSERT_EQ(cancel(fill_, kDue + 5min).status, 200);
  const Wire view = get(wait_);
  ASSERT_EQ(view.body["state"], "running");
  EXPECT_EQ(view.body["placement"][0]["node"], node);
  EXPECT_EQ(view.body["prewarm"], (nlohmann::json{{"prewarmed", true}, {"lead_seconds", 300}}));
  EXPECT_EQ(plane_->figures().starts_prewarmed, 1);
  EXPECT_EQ(plane_->figures().starts_not_prewarmed, 1);  // fill, which never waited
  // The job's record keeps it over a restart.
  plane_ = restart(kDue + 6min);
  EXPECT_EQ(get(wait_).body["prewarm"]["lead_seconds"], 300);
}

TEST_F(PrewarmPlaneTest, AJobStartedOnOtherNodesThanItsCallsIsNotPrewarmed) {
  tick(kT0 + 1min);
  tick(kDue);
  std::vector<PrewarmHookCall> calls = plane_->take_prewarm_calls();
  ASSERT_EQ(calls.size(), 1U);
  const std::string node = calls[0].request["nodes"][0];
  // The node it was called for is drained; wait starts elsewhere, without its data staged.
  ASSERT_EQ(act([&](ControlPlane& p, Instant at,
                    Batch& b) { return p.set_drained(kAdmin, node, true, "maintenance", at, b); },
                kDue + 10s)
                .status,
            200);
  ASSERT_EQ(cancel(fill_, kDue + 20s).status, 200);
  const Wire view = get(wait_);
  ASSERT_EQ(view.body["state"], "running");
  EXPECT_NE(view.body["placement"][0]["node"], node);
  EXPECT_EQ(view.body["prewarm"], (nlohmann::json{{"prewarmed", false}, {"lead_seconds", 0}}));
  EXPECT_EQ(plane_->figures().starts_prewarmed, 0);
  EXPECT_EQ(plane_->figures().starts_not_prewarmed, 2);
}

TEST_F(PrewarmPlaneTest, AJobHeldOrCancelledWhileWaitingIsForgotten) {
  tick(kT0 + 1min);
  tick(kDue);
  ASSERT_EQ(plane_->take_prewarm_calls().size(), 1U);
  // Held and released: what was called for it no longer counts, and it is called again.
  ASSERT_EQ(
      act([&](ControlPlane& p, Instant at, Batch& b) { return p.hold(kAdmin, jid(wait_), at, b); },
          kDue + 10s)
          .status,
      200);
  ASSERT_EQ(act([&](ControlPlane& p, Instant at,
                    Batch& b) { return p.release(kAdmin, jid(wait_), at, b); },
                kDue + 20s)
                .status,
            200);
  tick(kDue + 1min);
  std::vector<PrewarmHookCall> calls = plane_->take_prewarm_calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].job, jid(wait_));
  // Cancelled while waiting: no call for it any more.
  ASSERT_EQ(cancel(wait_, kDue + 2min).status, 200);
  tick(kDue + 4min);
  EXPECT_TRUE(plane_->take_prewarm_calls().empty());
}

// Without a pre-warm hook nothing is called and the jobs' views say nothing of it.
TEST_F(ControlPlaneTest, WithoutPrewarmingNoCallIsMadeAndStartsCountAsNotPrewarmed) {
  const std::int64_t id = submit(job("plain")).body["id"];
  ASSERT_EQ(get(id).body["state"], "running");
  EXPECT_FALSE(get(id).body.contains("prewarm"));
  EXPECT_TRUE(plane_->take_prewarm_calls().empty());
  EXPECT_EQ(plane_->figures().starts_not_prewarmed, 1);
}

}  // namespace
}  // namespace tidepool
