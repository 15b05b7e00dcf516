// The loop under a store with commit limits (etcd's transaction limits): rounds and passes stay
// within them, a round refused all the same is run again in halves, and a request too large for
// any commit is refused alone while the others go on.
#include "server/control_loop.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/test_plane_setup.h"
#include "store/memory_store.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// The keys an etcd transaction of `batch` writes (etcd_batch_plan.cc), in the limit's terms (one
// per event: more than the etcd store writes, which keeps a batch's events under one key).
std::int64_t writes_of(const Batch& batch) {
  std::int64_t writes = 0;
  for (const JobRecord& job : batch.jobs) writes += job.idempotency_key.empty() ? 1 : 2;
  writes += static_cast<std::int64_t>(batch.events.size()) + (batch.events.empty() ? 0 : 1);
  writes += static_cast<std::int64_t>(batch.ledger.size()) + (batch.ledger.empty() ? 0 : 1);
  writes += 2 * static_cast<std::int64_t>(batch.tokens.size());
  writes += static_cast<std::int64_t>(batch.nodes.size() + batch.settings.size());
  return writes;
}

std::int64_t bytes_of(const Batch& batch) {
  std::int64_t bytes = 0;
  for (const JobRecord& job : batch.jobs) bytes += static_cast<std::int64_t>(job.document.size());
  for (const EventRecord& event : batch.events) {
    bytes += static_cast<std::int64_t>(event.document.size());
  }
  return bytes;
}

// A memory store that says it has `said` limits and refuses, as etcd's does, any batch over
// `enforced` (which may be tighter than what it says).
class LimitedStore final : public Store {
 public:
  LimitedStore(CommitLimits said, CommitLimits enforced) : said_(said), enforced_(enforced) {}

  Result<Snapshot> load() override { return inner_.load(); }
  Result<void> commit(const Batch& batch) override {
    const std::int64_t writes = writes_of(batch);
    const std::int64_t bytes = bytes_of(batch);
    if (writes > enforced_.writes || bytes > enforced_.bytes) {
      ++refused;
      return fail(kBatchTooLargeField,
                  fmt::format("{} writes and {} bytes, more than {} or {}", writes, bytes,
                              enforced_.writes, enforced_.bytes));
    }
    most_writes = std::max<std::int64_t>(most_writes, writes);
    return inner_.commit(batch);
  }
  CommitLimits commit_limits() const override { return said_; }
  Result<std::vector<EventRecord>> events_after(std::int64_t after, int limit) override {
    return inner_.events_after(after, limit);
  }

  std::atomic<int> refused{0};
  std::atomic<std::int64_t> most_writes{0};

 private:
  ::tidepool::MemoryStore inner_;  // qualified: a unity batch may hold a test fake of that name
  CommitLimits said_;
  CommitLimits enforced_;
};

const Principal kLoopUser{"vision-token", Role::kUser, "vision", ""};
const Principal kLoopAdmin{"admin-token", Role::kAdmin, "", ""};

JobSpec one_gpu_job(int n, std::string command = "train.sh") {
  JobSpec spec;
  spec.name = "job-" + std::to_string(n);
  spec.tenant = "vision";
  spec.queue = "default";
  spec.tasks = 1;
  spec.gpus_per_task = 1;
  spec.gpu_models = {"H100"};
  spec.command = {std::move(command)};
  return spec;
}

class ControlLoopLimitsTest : public ::testing::Test {
 protected:
  void start(CommitLimits said, CommitLimits enforced) {
    auto store = std::make_unique<LimitedStore>(said, enforced);
    store_ = store.get();
    loop_ = std::make_unique<ControlLoop>(std::move(store), test_support::example_setup(),
                                          ControlLoop::Options{}, metrics_);
    auto started = loop_->start();
    ASSERT_TRUE(started.has_value()) << started.error().message();
  }

  // Submits every spec in one burst (queued behind a round held until all are), and waits for
  // the replies.
  std::vector<Reply> submit_burst(std::vector<JobSpec> specs) {
    std::promise<void> queued;
    std::shared_future<void> all_queued = queued.get_future().share();
    loop_->call_async(
        [all_queued](ControlPlane&, Instant, Batch&) -> Reply {
          all_queued.wait();
          return answer({});
        },
        [](const Reply&) {});
    std::vector<std::future<Reply>> replies;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      auto reply = std::make_shared<std::promise<Reply>>();
      replies.push_back(reply->get_future());
      loop_->call_async(
          [spec = std::move(specs[i]), i](ControlPlane& plane, Instant now, Batch& batch) {
            return plane.submit(kLoopUser, spec, "key-" + std::to_string(i), now, batch);
          },
          [reply](Reply r) { reply->set_value(std::move(r)); });
    }
    queued.set_value();
    std::vector<Reply> answered;
    for (auto& reply : replies) answered.push_back(reply.get());
    return answered;
  }

  // Jobs running, as of a round after every one before this call.
  std::int64_t running() {
    const Reply reply = loop_->call([](ControlPlane& plane, Instant, Batch&) -> Reply {
      const auto figures = plane.figures();
      const auto it = figures.jobs_by_state.find("running");
      return answer({{"running", it == figures.jobs_by_state.end() ? 0 : it->second}});
    });
    return reply ? reply->body.at("running").get<std::int64_t>() : -1;
  }

  // Waits (rounds, not time) until `jobs` run; false after `rounds` rounds without.
  bool until_running(std::int64_t jobs, int rounds = 200) {
    for (int round = 0; round < rounds; ++round) {
      if (running() >= jobs) return true;
    }
    return false;
  }

  ServerMetrics metrics_;
  LimitedStore* store_ = nullptr;
  std::unique_ptr<ControlLoop> loop_;
};

// 60 submissions at once into a store of 32 writes per commit: the loop takes 4 a round, its passes
// start 4 jobs each, one after the other, and no commit is ever refused.
TEST_F(ControlLoopLimitsTest, RoundsAndPassesStayWithinTheStoresLimits) {
  start({.writes = 32, .bytes = 1 << 20}, {.writes = 32, .bytes = 1 << 20});
  std::vector<JobSpec> specs;
  for (int i = 0; i < 60; ++i) specs.push_back(one_gpu_job(i));
  for (const Reply& reply : submit_burst(std::move(specs))) {
    EXPECT_TRUE(reply.has_value()) << reply.error().cause.message();
  }
  EXPECT_TRUE(until_running(60)) << running() << " of 60 running";
  EXPECT_EQ(store_->refused, 0);
  EXPECT_LE(store_->most_writes, 32);
  EXPECT_GT(store_->most_writes, 0);
}

// A store tighter than it says: the round it refuses is run again in halves until each fits; a
// request too large for any commit is refused alone, with the store's reason, and the rest start.
TEST_F(ControlLoopLimitsTest, ARoundTooLargeIsRunAgainInHalvesAndOnlyAnOversizedRequestFails) {
  start({.writes = 800, .bytes = 1 << 30}, {.writes = 24, .bytes = 64 * 1024});
  std::vector<JobSpec> specs;
  for (int i = 0; i < 20; ++i) specs.push_back(one_gpu_job(i));
  specs[7] = one_gpu_job(7, std::string(100 * 1024, 'x'));
  const std::vector<Reply> replies = submit_burst(std::move(specs));
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (i == 7) {
      ASSERT_FALSE(replies[i].has_value());
      EXPECT_EQ(replies[i].error().refusal, Refusal::kUnavailable);
      EXPECT_THAT(replies[i].error().cause.reason, HasSubstr("more than 24 or 65536"));
    } else {
      EXPECT_TRUE(replies[i].has_value()) << i << ": " << replies[i].error().cause.message();
    }
  }
  EXPECT_GT(store_->refused, 0);
  EXPECT_TRUE(until_running(19)) << running() << " of 19 running";
}

// A memory store that keeps, for each commit, the names of the jobs it wrote.
class RecordingStore final : public Store {
 public:
  Result<Snapshot> load() override { return inner_.load(); }
  Result<void> commit(const Batch& batch) override {
    std::vector<std::string> names;
    for (const JobRecord& job : batch.jobs) {
      names.push_back(nlohmann::json::parse(job.document).at("spec").at("name"));
    }
    {
      std::lock_guard lock(mutex_);
      commits_.push_back(std::move(names));
    }
    return inner_.commit(batch);
  }
  Result<std::vector<EventRecord>> events_after(std::int64_t after, int limit) override {
    return inner_.events_after(after, limit);
  }
  // Whether one commit wrote every job named.
  bool committed_together(const std::vector<std::string>& wanted) {
    std::lock_guard lock(mutex_);
    return std::ranges::any_of(commits_, [&](const std::vector<std::string>& names) {
      return std::ranges::all_of(
          wanted, [&](const std::string& name) { return std::ranges::count(names, name) == 1; });
    });
  }

 private:
  ::tidepool::MemoryStore inner_;
  std::mutex mutex_;
  std::vector<std::vector<std::string>> commits_;
};

// Group commit: the loop expects as many requests as its last round answered, and runs each
// command as it comes while it waits for the others. Here the first blocks until the second is
// queued, which happens only once the first has run: both are in one commit.
TEST(ControlLoopGroupCommitTest, TheCommandsOfARoundRunAsTheyComeWhileTheOthersAreAwaited) {
  auto owned = std::make_unique<RecordingStore>();
  RecordingStore& store = *owned;
  ServerMetrics metrics;
  ControlLoop::Options options;
  options.tick = std::chrono::hours(1);  // no round of its own in between
  ControlLoop loop(std::move(owned), test_support::example_setup(), options, metrics);
  ASSERT_TRUE(loop.start().has_value());
  auto submit = [&](int n, std::function<void()> before = {}) {
    auto reply = std::make_shared<std::promise<Reply>>();
    auto answered = reply->get_future();
    loop.call_async(
        [n, before = std::move(before)](ControlPlane& plane, Instant now, Batch& batch) {
          if (before) before();
          return plane.submit(kLoopUser, one_gpu_job(n), "", now, batch);
        },
        [reply](Reply r) { reply->set_value(std::move(r)); });
    return answered;
  };
  // A round of two (the first holds the loop until the second is queued): the next expects two.
  std::promise<void> second_queued;
  std::shared_future<void> queued = second_queued.get_future().share();
  auto first = submit(1, [queued] { queued.wait(); });
  auto second = submit(2);
  second_queued.set_value();
  ASSERT_TRUE(first.get().has_value());
  ASSERT_TRUE(second.get().has_value());

  std::promise<void> a_ran;
  std::promise<void> b_queued;
  std::shared_future<void> b_is_queued = b_queued.get_future().share();
  auto a = submit(100, [&a_ran, b_is_queued] {
    a_ran.set_value();
    b_is_queued.wait();
  });
  a_ran.get_future().wait();  // the loop runs it before the round is whole
  auto b = submit(101);
  b_queued.set_value();
  ASSERT_TRUE(a.get().has_value());
  ASSERT_TRUE(b.get().has_value());
  EXPECT_TRUE(store.committed_together({"job-100", "job-101"}));
  loop.stop();
}

// Retention at start (and then hourly): the events older than events_kept_for are dropped from the
// store; the newer ones, and the stream's seqs, go on.
TEST(ControlLoopRetentionTest, EventsOlderThanKeptAreDroppedFromTheStore) {
  auto owned = std::make_unique<::tidepool::MemoryStore>();
  Store& store = *owned;
  const std::int64_t old_ms = unix_ms(ControlLoop::now() - std::chrono::days{40});
  for (std::int64_t seq = 1; seq <= 3; ++seq) {
    Batch batch;
    batch.events = {EventRecord{seq, old_ms, "job.submitted", "{}"}};
    ASSERT_TRUE(store.commit(batch).has_value());
  }
  ServerMetrics metrics;
  ControlLoop::Options options;
  options.events_kept_for = std::chrono::days{30};
  ControlLoop loop(std::move(owned), test_support::example_setup(), options, metrics);
  ASSERT_TRUE(loop.start().has_value());  // commits the first admin token's events: new ones
  // A round after the one retention ran in.
  const Reply reply = loop.call([](ControlPlane& plane, Instant now, Batch& batch) {
    return plane.submit(kLoopUser, one_gpu_job(1), "", now, batch);
  });
  ASSERT_TRUE(reply.has_value());
  loop.stop();
  auto events = store.events_after(0, 1000);
  ASSERT_TRUE(events.has_value());
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->front().seq, 4);
  for (const EventRecord& e : *events) EXPECT_GT(e.at_ms, old_ms);
  EXPECT_EQ(store.load()->last_event_seq, events->back().seq);
}

TEST(RoundCapacityTest, TheTighterLimitDecidesAndNoLimitMeansNone) {
  EXPECT_EQ(round_capacity({}), 0);
  EXPECT_EQ(round_capacity({.writes = 128}), 16);
  EXPECT_EQ(round_capacity({.writes = 128, .bytes = 256 * 1024}), 8);
  EXPECT_EQ(round_capacity({.writes = 4}), 1);
  EXPECT_EQ(round_capacity({.bytes = 1536 * 1024}), 48);
}

// Pre-warming through the loop, with a real hook: a script that writes its action and its request
// to files. With the tick an hour away, the loop wakes for the call due a lead before the waiting
// job's predicted start (when the job holding the pool is predicted to end: 603 s after it started;
// the scheduler takes no running job to end sooner than 600 s from now), 2 s after that start; the
// hook gets the job and its node, the call is counted, and the start is pre-warmed.
TEST(ControlLoopPrewarmTest, TheLoopWakesForTheCallAndRunsTheHook) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tidepool-prewarm-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const std::filesystem::path dir = pattern;
  const std::string hook = (dir / "stage-data").string();
  std::ofstream(hook) << "#!/bin/sh\necho \"$1\" > '" << (dir / "action").string() << "'\ncat > '"
                      << (dir / "request.tmp").string() << "'\nmv '"
                      << (dir / "request.tmp").string() << "' '" << (dir / "request.json").string()
                      << "'\n";
  ::chmod(hook.c_str(), 0700);
  ControlPlaneSetup setup = test_support::example_setup();
  setup.prewarm = PrewarmSetup{hook, PrewarmConfig{.lead = 601, .horizon = 1202, .refresh = 0},
                               std::chrono::seconds(10)};
  ServerMetrics metrics;
  ControlLoop::Options options;
  options.tick = std::chrono::hours(1);  // only the wakeups run passes
  ControlLoop loop(std::make_unique<::tidepool::MemoryStore>(), std::move(setup), options, metrics);
  ASSERT_TRUE(loop.start().has_value());
  const auto submit = [&](JobSpec spec) -> std::int64_t {
    const Reply reply = loop.call([&](ControlPlane& plane, Instant now, Batch& batch) {
      return plane.submit(kLoopUser, spec, "", now, batch);
    });
    EXPECT_TRUE(reply.has_value());
    return reply ? reply->body.value("id", std::int64_t{0}) : 0;
  };
  const auto job = [&](std::int64_t id) {
    const Reply reply = loop.call([&](ControlPlane& plane, Instant, Batch&) {
      return plane.get_job(kLoopAdmin, *job_id_from_wire(id));
    });
    return reply ? reply->body : nlohmann::json();
  };
  JobSpec fill = one_gpu_job(1);
  fill.tasks = 16;  // every H100
  fill.gpus_per_task = 8;
  fill.runtime_estimate = 603;
  const std::int64_t filling = submit(fill);
  ASSERT_EQ(job(filling)["state"], "running");
  JobSpec waiting = one_gpu_job(2);
  waiting.gpus_per_task = 8;
  waiting.env = {{"DATASET", "/data/corpus"}};
  const auto submitted = std::chrono::steady_clock::now();
  const std::int64_t id = submit(waiting);
  ASSERT_EQ(job(id)["state"], "pending");

  const auto eventually = [](const std::function<bool()>& done) {
    for (int i = 0; i < 200 && !done(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return done();
  };
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(dir / "request.json"); }));
  // Due at least a second after the fill started (its predicted end less the lead, in whole
  // seconds): the loop woke for it.
  EXPECT_GT(std::chrono::steady_clock::now() - submitted, std::chrono::milliseconds(500));
  std::ifstream action(dir / "action");
  std::string word;
  action >> word;
  EXPECT_EQ(word, "prewarm");
  std::ifstream text(dir / "request.json");
  const nlohmann::json request = nlohmann::json::parse(text, nullptr, false);
  ASSERT_TRUE(request.is_object());
  EXPECT_EQ(request["job"]["id"], id);
  EXPECT_EQ(request["job"]["env"]["DATASET"], "/data/corpus");
  ASSERT_EQ(request["nodes"].size(), 1U);
  EXPECT_TRUE(eventually([&] {
    return metrics.render().find("tidepool_prewarm_calls_total{outcome=\"ok\"} 1") !=
           std::string::npos;
  })) << metrics.render();
  // The fill ends: the job starts where it was expected, pre-warmed.
  ASSERT_TRUE(loop.call([&](ControlPlane& plane, Instant now, Batch& batch) {
                    return plane.cancel(kLoopAdmin, *job_id_from_wire(filling), now, batch);
                  })
                  .has_value());
  const nlohmann::json started = job(id);
  ASSERT_EQ(started["state"], "running");
  EXPECT_EQ(started["placement"][0]["node"], request["nodes"][0]);
  EXPECT_EQ(started["prewarm"]["prewarmed"], true);
  loop.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tidepool
