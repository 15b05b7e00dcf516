#include "server/control_plane.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "sim/cluster_file.h"
#include "sim/tenants_file.h"
#include "sim/test_source_dir.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// What a store would hold after the batches committed so far.
struct MemoryStore {
  std::map<std::int64_t, JobRecord> jobs;
  std::map<std::string, TokenRecord> tokens;
  std::map<std::string, KeyedRecord> nodes;
  std::map<std::string, KeyedRecord> settings;
  std::vector<EventRecord> events;

  void commit(const Batch& b) {
    for (const JobRecord& j : b.jobs) jobs[j.id] = j;
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
    return s;
  }
};

ControlPlaneSetup example_setup(std::string_view policy = "tidepool") {
  ControlPlaneSetup setup;
  auto cluster = load_cluster_yaml(test_support::test_source_dir() + "/data/clusters/example.yaml");
  EXPECT_TRUE(cluster.has_value());
  setup.cluster = std::move(*cluster);
  // vision may use every H100 (128) on its own; search has no guarantee.
  auto tenants = read_tenants_yaml(R"(orgs:
  - name: lab
    tenants:
      - name: vision
        quota:
          H100: {guaranteed_gpus: 128}
        queues: [default, detection]
      - name: search
)",
                                   "tenants.yaml", setup.cluster.models);
  EXPECT_TRUE(tenants.has_value());
  setup.tenants = std::move(*tenants);
  setup.scheduler = *scheduler_policy(policy);
  return setup;
}

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
  return spec;
}

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override { plane_ = restart(); }

  std::unique_ptr<ControlPlane> restart(std::int64_t now_ms = 1'000'000) {
    Batch repairs;
    auto plane = ControlPlane::create(example_setup(), store_.snapshot(), now_ms, repairs,
                                      std::make_shared<TokenTable>());
    EXPECT_TRUE(plane.has_value()) << plane.error().message();
    store_.commit(repairs);
    return std::move(*plane);
  }

  // Runs `command` like the loop does: then a pass, then the commit.
  template <class Command>
  Reply run(Command command, std::int64_t now_ms = 1'000'000) {
    Batch batch;
    Reply reply = command(*plane_, now_ms, batch);
    plane_->schedule(now_ms, batch);
    store_.commit(batch);
    return reply;
  }

  Reply submit(const JobSpec& spec, const Principal& who = kVision, std::string key = "",
               std::int64_t now_ms = 1'000'000) {
    return run([&](ControlPlane& p, std::int64_t now,
                   Batch& b) { return p.submit(who, spec, key, now, b); },
               now_ms);
  }

  Reply get(std::int64_t id, const Principal& who = kAdmin) { return plane_->get_job(who, id); }

  MemoryStore store_;
  std::unique_ptr<ControlPlane> plane_;
};

TEST_F(ControlPlaneTest, SubmittedJobIsStoredAndPlacedInTheSameRound) {
  Reply reply = submit(job("train", 2, 8));
  ASSERT_EQ(reply.status, 201) << reply.body.dump();
  const std::int64_t id = reply.body["id"];
  EXPECT_EQ(reply.body["state"], "pending");
  Reply now = get(id);
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
  Reply r = submit(unknown_tenant, kAdmin);
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
  EXPECT_EQ(plane_->get_job(kSearch, id).status, 404);
  EXPECT_EQ(plane_->get_job(kVision, id).status, 200);
  Reply cancel = run(
      [&](ControlPlane& p, std::int64_t now, Batch& b) { return p.cancel(kSearch, id, now, b); });
  EXPECT_EQ(cancel.status, 404);
  EXPECT_EQ(plane_->list_jobs(kSearch, {}).body["jobs"].size(), 0U);
  EXPECT_EQ(plane_->list_jobs(kVision, {}).body["jobs"].size(), 1U);
  JobFilter other_tenant;
  other_tenant.tenant = "vision";
  EXPECT_EQ(plane_->list_jobs(kSearch, other_tenant).status, 403);
  const Principal agent{"agent-token", Role::kAgent, "", "h100-a-01"};
  EXPECT_EQ(submit(job("agent"), agent).status, 403);
  Batch batch;
  EXPECT_EQ(plane_->set_drained(kVision, "h100-a-01", true, "", 0, batch).status, 403);
  EXPECT_EQ(plane_->list_tokens(kVision).status, 403);
}

TEST_F(ControlPlaneTest, IdempotencyKeyMakesRetriesSafe) {
  Reply first = submit(job("a"), kVision, "key-1");
  ASSERT_EQ(first.status, 201);
  Reply again = submit(job("a"), kVision, "key-1");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body["id"], first.body["id"]);
  EXPECT_EQ(submit(job("b"), kVision, "key-1").status, 409);
  EXPECT_EQ(store_.jobs.size(), 1U);
  // Keys are printable ASCII: other bytes would not fit the job's JSON document.
  Reply bad_key = submit(job("c"), kVision, "k\xff");
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
  plane_ = restart(2'000'000);
  for (std::int64_t id : ids) {
    Reply after = get(id);
    EXPECT_EQ(after.body["state"], before[id]["state"]) << id;
    EXPECT_EQ(after.body["placement"], before[id]["placement"]) << id;
  }
  // New ids continue after the old ones; a pass starts nothing twice.
  const std::int64_t next = submit(job("next"), kAdmin, "", 2'000'000).body["id"];
  EXPECT_EQ(next, ids.back() + 1);
  EXPECT_EQ(get(next).body["state"], "pending");
  // Ending a running job lets a waiting one start.
  Reply done = run(
      [&](ControlPlane& p, std::int64_t now, Batch& b) {
        return p.report_status(kAdmin, ids[0],
                               JobStatusReport{"succeeded", 0, "", std::nullopt, std::nullopt}, now,
                               b);
      },
      2'100'000);
  EXPECT_EQ(done.status, 200);
  EXPECT_EQ(get(ids[0]).body["state"], "succeeded");
  EXPECT_EQ(get(ids[16]).body["state"], "running");
  // What the job reported is kept across a restart too.
  const nlohmann::json ended = get(ids[0]).body;
  plane_ = restart(2'200'000);
  EXPECT_EQ(get(ids[0]).body, ended);
  EXPECT_EQ(ended["exit_code"], 0);
}

TEST_F(ControlPlaneTest, CancelEndsPendingAndRunningJobs) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 17; ++i)
    ids.push_back(submit(job("j" + std::to_string(i)), kAdmin).body["id"]);
  EXPECT_EQ(get(ids[16]).body["state"], "pending");
  auto cancel = [&](std::int64_t id) {
    return run(
        [&](ControlPlane& p, std::int64_t now, Batch& b) { return p.cancel(kAdmin, id, now, b); });
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

TEST_F(ControlPlaneTest, DrainedNodeTakesNoJobAndStaysDrainedAfterRestart) {
  for (int n = 1; n <= 4; ++n) {
    Reply r = run([&](ControlPlane& p, std::int64_t now, Batch& b) {
      return p.set_drained(kAdmin, "h100-a-0" + std::to_string(n), true, "maintenance", now, b);
    });
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body["state"], "drained");
  }
  plane_ = restart();
  for (int i = 0; i < 12; ++i) {
    const std::int64_t id = submit(job("j" + std::to_string(i)), kAdmin).body["id"];
    const Reply r = get(id);
    ASSERT_EQ(r.body["state"], "running");
    EXPECT_THAT(r.body["placement"][0]["node"].get<std::string>(),
                ::testing::Not(HasSubstr("h100-a")));
  }
  const std::int64_t waiting = submit(job("waits"), kAdmin).body["id"];
  EXPECT_EQ(get(waiting).body["state"], "pending");
  EXPECT_EQ(plane_->why(kAdmin, waiting, 1'000'000).body["state"], "pending");
}

TEST_F(ControlPlaneTest, MaxRuntimeStopsAJob) {
  JobSpec spec = job("short");
  spec.max_runtime = 60;
  const std::int64_t id = submit(spec).body["id"];
  EXPECT_EQ(get(id).body["state"], "running");
  EXPECT_EQ(plane_->next_wakeup_ms(1'000'000), 1'060'000);
  run([](ControlPlane&, std::int64_t, Batch&) { return Reply{}; }, 1'061'000);
  EXPECT_EQ(get(id).body["state"], "failed");
  EXPECT_THAT(get(id).body["message"].get<std::string>(), HasSubstr("max_runtime"));
}

TEST_F(ControlPlaneTest, TenantQuotaChangeIsAppliedAndKeptOverRestarts) {
  TenantUpdate update;
  update.weight = 3;
  update.queues = {"default"};
  update.quota["H100"] = QuotaSpec{8000, 0, std::nullopt};
  Reply r = run([&](ControlPlane& p, std::int64_t now, Batch& b) {
    return p.put_tenant(kAdmin, "vision", update, now, b);
  });
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["weight"], 3);
  EXPECT_EQ(r.body["quota"]["H100"]["guaranteed_gpus"], 8);
  plane_ = restart();
  Reply tenant = plane_->get_tenant(kAdmin, "vision");
  EXPECT_EQ(tenant.body["quota"]["H100"]["guaranteed_gpus"], 8);
  // Within 8 GPUs and no borrowing: the second 8-GPU job waits for quota.
  submit(job("a"));
  const std::int64_t second = submit(job("b")).body["id"];
  Reply why = plane_->why(kVision, second, 1'000'000);
  EXPECT_EQ(why.body["kind"], "quota") << why.body.dump();
  // A queue with live jobs cannot be removed.
  TenantUpdate drop = update;
  drop.queues = {"detection"};
  Reply refused = run([&](ControlPlane& p, std::int64_t now, Batch& b) {
    return p.put_tenant(kAdmin, "vision", drop, now, b);
  });
  EXPECT_EQ(refused.status, 409);
}

TEST_F(ControlPlaneTest, TokensAreStoredHashedAndCanBeRevoked) {
  Reply created = run([&](ControlPlane& p, std::int64_t now, Batch& b) {
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
  auto reloaded = ControlPlane::create(example_setup(), store_.snapshot(), 0, repairs, tokens);
  ASSERT_TRUE(reloaded.has_value());
  auto who = tokens->authenticate(secret);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->tenant, "vision");
  EXPECT_EQ(who->role, Role::kUser);
  EXPECT_EQ(run([&](ControlPlane& p, std::int64_t now, Batch& b) {
              return p.create_token(kAdmin, TokenRequest{"user", "nobody", "", ""}, now, b);
            }).status,
            400);
  EXPECT_EQ(run([&](ControlPlane& p, std::int64_t now, Batch& b) {
              return p.revoke_token(kAdmin, id, now, b);
            }).status,
            200);
  tokens = std::make_shared<TokenTable>();
  reloaded = ControlPlane::create(example_setup(), store_.snapshot(), 0, repairs, tokens);
  ASSERT_TRUE(reloaded.has_value());
  EXPECT_FALSE(tokens->authenticate(secret).has_value());
}

}  // namespace
}  // namespace tidepool
