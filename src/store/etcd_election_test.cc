// Leader election on a real etcd: one leader at a time, the key named by its URL, a successor
// once the leader resigns or stops renewing, and a deposed leader's writes refused by the fence.
#include "store/etcd_election.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/etcd/etcd_rpc.grpc.pb.h"
#include "store/etcd_test_cluster.h"
#include "store/store.h"
#include "store/store_test_records.h"

namespace tidepool {
namespace {

using namespace std::chrono_literals;
using test_support::EtcdTestCluster;
using test_support::job;
using test_support::jobs_batch;
using ::testing::HasSubstr;

class EtcdElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = EtcdTestCluster::start();
    ASSERT_TRUE(started.has_value()) << started.error().message();
    cluster_ = std::move(*started);
  }

  std::unique_ptr<EtcdElection> candidate(const std::string& url, std::chrono::seconds ttl = 2s) {
    EtcdElectionOptions options;
    options.endpoints = cluster_->endpoints();
    options.candidate = url;
    options.lease_ttl = ttl;
    auto election = EtcdElection::open(options);
    EXPECT_TRUE(election.has_value()) << election.error().message();
    return election ? std::move(*election) : nullptr;
  }

  Leadership acquire(EtcdElection& election) {
    auto won = election.try_acquire();
    EXPECT_TRUE(won.has_value()) << won.error().message();
    EXPECT_TRUE(won && won->has_value());
    return won && *won ? **won : Leadership{};
  }

  std::unique_ptr<Store> fenced_store(const EtcdGuard& guard) {
    EtcdStoreOptions options;
    options.endpoints = cluster_->endpoints();
    options.guard = guard;
    auto store = open_etcd_store(options);
    EXPECT_TRUE(store.has_value()) << store.error().message();
    return store ? std::move(*store) : nullptr;
  }

  std::unique_ptr<EtcdTestCluster> cluster_;
};

TEST_F(EtcdElectionTest, OneLeadsAndEveryoneKnowsWho) {
  auto a = candidate("http://a:8470");
  auto b = candidate("http://b:8470");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->leader().value(), std::nullopt);
  const Leadership won = acquire(*a);
  EXPECT_EQ(won.guard.key, "/tidepool/leader");
  EXPECT_GT(won.guard.mod_revision, 0);
  EXPECT_EQ(won.term, 1);
  auto lost = b->try_acquire();
  ASSERT_TRUE(lost.has_value()) << lost.error().message();
  EXPECT_FALSE(lost->has_value());
  EXPECT_EQ(a->leader().value(), "http://a:8470");
  EXPECT_EQ(b->leader().value(), "http://a:8470");
  EXPECT_TRUE(a->renew().value());
  EXPECT_FALSE(b->renew().value());  // b never led
}

TEST_F(EtcdElectionTest, AResignedLeadersWritesAreRefusedAndItsSuccessorsGoThrough) {
  auto a = candidate("http://a:8470");
  auto b = candidate("http://b:8470");
  ASSERT_TRUE(a && b);
  const Leadership first = acquire(*a);
  auto a_store = fenced_store(first.guard);
  ASSERT_NE(a_store, nullptr);
  ASSERT_TRUE(a_store->commit(jobs_batch({job(1, "vision")})).has_value());

  ASSERT_TRUE(a->resign().has_value());
  EXPECT_FALSE(a->renew().value());
  const Leadership second = acquire(*b);
  EXPECT_GT(second.guard.mod_revision, first.guard.mod_revision);
  EXPECT_EQ(second.term, 2);
  EXPECT_EQ(a->leader().value(), "http://b:8470");

  auto refused = a_store->commit(jobs_batch({job(2, "vision")}));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, kLeadershipLostField);
  auto b_store = fenced_store(second.guard);
  ASSERT_NE(b_store, nullptr);
  ASSERT_TRUE(b_store->commit(jobs_batch({job(3, "vision")})).has_value());
  const Snapshot state = test_support::load_or_die(*b_store);
  ASSERT_EQ(state.jobs.size(), 2U);
  EXPECT_EQ(state.jobs[0].id, 1);
  EXPECT_EQ(state.jobs[1].id, 3);
}

// A leader that stops renewing (killed, paused) loses the key after its lease's TTL, and then
// learns that it lost it; a waiting server takes over.
TEST_F(EtcdElectionTest, ALeaderThatStopsRenewingIsSucceededAfterItsTtl) {
  auto a = candidate("http://a:8470", 2s);
  auto b = candidate("http://b:8470", 2s);
  ASSERT_TRUE(a && b);
  const Leadership first = acquire(*a);
  const auto stopped = std::chrono::steady_clock::now();
  std::optional<Leadership> second;
  while (!second && std::chrono::steady_clock::now() - stopped < 15s) {
    auto won = b->try_acquire();
    ASSERT_TRUE(won.has_value()) << won.error().message();
    second = *won;
    if (!second) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(second.has_value()) << "b never took over";
  const auto waited = std::chrono::steady_clock::now() - stopped;
  EXPECT_GE(waited, 1500ms);  // not before the lease could end
  EXPECT_GT(second->guard.mod_revision, first.guard.mod_revision);
  EXPECT_EQ(second->term, first.term + 1);
  EXPECT_FALSE(a->renew().value());
}

// A member that hangs (paused: connected, silent) costs the leader no renewal: each call gives it
// up after a quarter of the TTL and asks the next member, so the lease never goes a whole TTL
// unrenewed, and the leadership stays. The member paused is a follower of etcd's raft (were it the
// raft's leader, the other two would need a second or two to elect another, in which no lease is
// renewed at all: the lease then runs on, as etcd restarts leases when its leader changes).
TEST(EtcdElectionClusterTest, ALeaderKeepsItsLeaseWhileTheMemberItTalksToHangs) {
  auto started = EtcdTestCluster::start(3);
  ASSERT_TRUE(started.has_value()) << started.error().message();
  EtcdTestCluster& cluster = **started;
  const Result<std::size_t> leader = cluster.raft_leader();
  ASSERT_TRUE(leader.has_value()) << leader.error().message();
  const std::size_t hanging = (*leader + 1) % 3;
  EtcdElectionOptions options;
  options.endpoints = cluster.endpoints();
  std::rotate(options.endpoints.begin(),
              options.endpoints.begin() + static_cast<std::ptrdiff_t>(hanging),
              options.endpoints.end());  // the client asks it first
  options.candidate = "http://a:8470";
  options.lease_ttl = 3s;
  auto opened = EtcdElection::open(options);
  ASSERT_TRUE(opened.has_value()) << opened.error().message();
  EtcdElection& election = **opened;
  auto won = election.try_acquire();
  ASSERT_TRUE(won.has_value() && won->has_value());

  ASSERT_TRUE(cluster.pause_member(hanging, true).has_value());
  auto renewed = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration longest{0};
  std::string missed;  // the renewals etcd did not answer (tolerated while the lease runs)
  const auto until = renewed + 4s;
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(options.lease_ttl / 3);
    auto alive = election.renew();
    if (!alive) {
      missed += "\n  " + alive.error().message();
      continue;
    }
    ASSERT_TRUE(*alive) << "the lease ended";
    const auto now = std::chrono::steady_clock::now();
    longest = std::max(longest, now - renewed);
    renewed = now;
  }
  longest = std::max(longest, std::chrono::steady_clock::now() - renewed);
  ASSERT_TRUE(cluster.pause_member(hanging, false).has_value());
  EXPECT_LT(longest, std::chrono::steady_clock::duration(options.lease_ttl))
      << std::chrono::duration_cast<std::chrono::milliseconds>(longest).count()
      << " ms without a renewal; missed:" << missed;
  auto leading = election.leader();
  ASSERT_TRUE(leading.has_value()) << leading.error().message();
  EXPECT_EQ(*leading, std::optional<std::string>("http://a:8470"));
}

TEST_F(EtcdElectionTest, OptionsAreChecked) {
  EtcdElectionOptions options;
  options.endpoints = cluster_->endpoints();
  auto no_url = EtcdElection::open(options);
  ASSERT_FALSE(no_url.has_value());
  EXPECT_EQ(no_url.error().field, "candidate");
  options.candidate = "http://a:8470";
  options.lease_ttl = 1s;
  auto short_ttl = EtcdElection::open(options);
  ASSERT_FALSE(short_ttl.has_value());
  EXPECT_EQ(short_ttl.error().field, "lease_ttl");
  EXPECT_THAT(short_ttl.error().reason, HasSubstr("at least 2 s"));
}

}  // namespace
}  // namespace tidepool
