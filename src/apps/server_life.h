// What ends a server's run, and the leadership of a server on the etcd store: the campaign that
// a standby runs until it leads, and the renewals that keep it leading.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/instant.h"
#include "server/standby_api.h"
#include "store/etcd_election.h"

namespace tidepool {

// A server runs until a stop signal or, on the etcd store, until it loses the leadership. Any
// thread may end it; the first reason counts.
class ServerLife {
 public:
  void stop(std::string why);  // a signal: a clean stop
  void lose(std::string why);  // the leadership is gone: this server must stop serving at once
  // Waits up to `span`; whether the run has ended.
  bool wait_for(Millis span);
  [[nodiscard]] bool ended() const;
  // Why the leadership was lost, if that is what ended the run.
  [[nodiscard]] std::optional<std::string> lost() const;
  // What ended the run ("signal 15", the leadership's loss); empty while it goes on.
  [[nodiscard]] std::string reason() const;

 private:
  void end(std::string why, bool lost);

  mutable std::mutex mutex_;  // guards the two below; ended_ is waited on by changed_
  std::optional<std::string> ended_;
  bool lost_ = false;
  std::condition_variable changed_;
};

// Stands by until this server leads: every `poll`, tells `standby` who leads (for its answers) and
// tries to take the leadership when nobody holds it. The leadership won; none when
// the run ended first. etcd's errors are logged and retried: an unreachable etcd leaves the server
// a standby, not stopped.
[[nodiscard]] std::optional<Leadership> campaign(EtcdElection& election, StandbyApi& standby,
                                                 ServerLife& life, Millis poll);

// Keeps the leadership won: renews its lease every third of the TTL until the run ends, and ends
// the run as lost when etcd says the lease is over or when no renewal succeeded for a whole TTL
// (a leader cut off from etcd must assume another has taken over).
void keep_leading(EtcdElection& election, ServerLife& life);

// After a clean stop (the loop stopped, nothing more to write): gives the leadership up, so that
// a standby takes over at once rather than after the lease's TTL.
void resign(EtcdElection& election);

}  // namespace tidepool
