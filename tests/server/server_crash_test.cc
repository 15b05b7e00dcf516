// The crash test: clients submit jobs concurrently, each with its own Idempotency-Key; the server
// is killed with SIGKILL in the middle of the burst and restarted. Every acknowledged submission
// must be there exactly once; retrying the unanswered ones with the same keys must not duplicate
// anything. Rounds: $TIDEPOOL_CRASH_ROUNDS (default 20), each on the database the last left.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace tidepool::test_support {
namespace {

int rounds() {
  const char* text = std::getenv("TIDEPOOL_CRASH_ROUNDS");
  return text == nullptr ? 20 : std::max(1, std::atoi(text));
}

std::string job_body(const std::string& name) {
  return nlohmann::json{
      {"name", name}, {"tenant", "interns"}, {"gpus_per_task", 1}, {"command", {"true"}}}
      .dump();
}

// Every job's idempotency key, counted, page after page.
std::map<std::string, int> stored_keys(ApiClient& client) {
  std::map<std::string, int> keys;
  std::string next;
  do {
    auto page = client.get("/v1/jobs?limit=5000" + (next.empty() ? "" : "&before=" + next));
    EXPECT_EQ(page.status, 200) << page.body.dump();
    for (const auto& job : page.body["jobs"]) ++keys[job.value("idempotency_key", "")];
    next = page.body.value("next", "");
  } while (!next.empty());
  return keys;
}

TEST(ServerCrash, AcknowledgedJobsSurviveKillNineExactlyOnce) {
  TempDir dir;
  ServerProcess server(dir, write_server_config(dir,
                                                "rate_limit: {per_second: 0}\n"
                                                "admission: {max_pending_jobs: 10000000, "
                                                "submissions_per_second: 0}\n"));
  ASSERT_TRUE(server.start()) << server.log();
  const std::string admin = server.admin_token();
  std::mt19937 rng(20261130);
  std::set<std::string> acknowledged;
  std::set<std::string> unanswered;
  std::size_t retried = 0;
  constexpr int kClients = 8;
  for (int round = 0; round < rounds(); ++round) {
    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        ApiClient client(server.port(), admin);
        for (int i = 0; !stop; ++i) {
          const std::string key =
              "r" + std::to_string(round) + "-c" + std::to_string(c) + "-" + std::to_string(i);
          auto answer = client.post("/v1/jobs", job_body(key), "application/json", key);
          std::lock_guard lock(mutex);
          if (answer.status == 201 || answer.status == 200) {
            acknowledged.insert(key);
          } else {
            unanswered.insert(key);
            if (answer.status == 0) return;  // the server is gone
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
    server.kill_hard();
    stop = true;
    for (std::thread& t : clients) t.join();
    ASSERT_TRUE(server.start()) << "round " << round << ": " << server.log();
    ApiClient client(server.port(), admin);
    std::map<std::string, int> keys = stored_keys(client);
    for (const std::string& key : acknowledged) {
      ASSERT_EQ(keys[key], 1) << "round " << round << ": acknowledged job " << key;
    }
    for (const auto& [key, count] : keys) {
      ASSERT_EQ(count, 1) << "round " << round << ": key " << key << " stored " << count
                          << " times";
    }
    // Retries of the unanswered submissions with their keys: each ends up stored once.
    for (const std::string& key : unanswered) {
      auto answer = client.post("/v1/jobs", job_body(key), "application/json", key);
      ASSERT_TRUE(answer.status == 200 || answer.status == 201) << answer.body.dump();
      acknowledged.insert(key);
    }
    retried += unanswered.size();
    unanswered.clear();
    keys = stored_keys(client);
    for (const std::string& key : acknowledged) ASSERT_EQ(keys[key], 1) << key;
    EXPECT_EQ(keys.size(), acknowledged.size());
  }
  EXPECT_GT(acknowledged.size(), static_cast<std::size_t>(rounds()));
  RecordProperty("acknowledged_jobs", static_cast<int>(acknowledged.size()));
  std::cout << rounds() << " kill -9 rounds: " << acknowledged.size()
            << " jobs acknowledged, each stored exactly once; " << retried
            << " unanswered submissions retried with their keys, none duplicated\n";
}

}  // namespace
}  // namespace tidepool::test_support
