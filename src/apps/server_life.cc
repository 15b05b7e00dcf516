#include "apps/server_life.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace tidepool {

void ServerLife::stop(std::string why) { end(std::move(why), false); }

void ServerLife::lose(std::string why) { end(std::move(why), true); }

void ServerLife::end(std::string why, bool lost) {
  {
    std::lock_guard lock(mutex_);
    if (ended_) return;
    ended_ = std::move(why);
    lost_ = lost;
  }
  changed_.notify_all();
}

bool ServerLife::wait_for(Millis span) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, span, [this] { return ended_.has_value(); });
}

bool ServerLife::ended() const {
  std::lock_guard lock(mutex_);
  return ended_.has_value();
}

std::optional<std::string> ServerLife::lost() const {
  std::lock_guard lock(mutex_);
  return lost_ ? ended_ : std::nullopt;
}

std::string ServerLife::reason() const {
  std::lock_guard lock(mutex_);
  return ended_.value_or("");
}

std::optional<Leadership> campaign(EtcdElection& election, StandbyApi& standby, ServerLife& life,
                                   Millis poll) {
  std::optional<std::string> last_leader;
  bool announced = false;
  while (!life.ended()) {
    auto leader = election.leader();
    if (!leader) {
      spdlog::warn("standby: cannot read the leader from etcd: {}", leader.error().message());
    } else {
      standby.set_leader(*leader);
      if (!announced || *leader != last_leader) {
        spdlog::info("standby: {}", *leader ? "the leader is " + **leader
                                            : std::string("no server leads; campaigning"));
        last_leader = *leader;
        announced = true;
      }
      if (!leader->has_value()) {
        auto won = election.try_acquire();
        if (!won) {
          spdlog::warn("standby: the campaign failed: {}", won.error().message());
        } else if (won->has_value()) {
          spdlog::info("this server leads now (term {}; key {} at revision {})", (*won)->term,
                       (*won)->guard.key, (*won)->guard.mod_revision);
          return *won;
        }
      }
    }
    life.wait_for(poll);
  }
  return std::nullopt;
}

void keep_leading(EtcdElection& election, ServerLife& life) {
  const Millis ttl = election.options().lease_ttl;
  auto renewed = std::chrono::steady_clock::now();
  while (!life.wait_for(ttl / 3)) {
    auto alive = election.renew();
    if (alive && *alive) {
      renewed = std::chrono::steady_clock::now();
    } else if (alive) {
      life.lose(
          "the leadership's lease ended (this server was paused or cut off from etcd "
          "longer than lease_ttl); another server may lead");
    } else if (std::chrono::steady_clock::now() - renewed >= ttl) {
      life.lose("etcd did not renew the leadership's lease for a whole lease_ttl: " +
                alive.error().message());
    } else {
      spdlog::warn("cannot renew the leadership's lease yet: {}", alive.error().message());
    }
  }
}

void resign(EtcdElection& election) {
  if (auto resigned = election.resign(); !resigned) {
    spdlog::warn("could not resign the leadership (a standby takes over after lease_ttl): {}",
                 resigned.error().message());
  } else {
    spdlog::info("resigned the leadership");
  }
}

}  // namespace tidepool
