// Leader election among the servers that share one etcd store: the server whose URL is the value
// of the key <prefix>/leader leads. The key is created only where it is absent and is attached to
// a lease that its holder renews; when the holder stops (killed, paused, cut off) the lease ends
// after its TTL, etcd deletes the key, and a waiting server creates it anew.
//
// The lease alone cannot make the leadership safe: a paused leader does not know that its lease
// ran out, and etcd 3.4 restarts a lease's countdown when its own leader changes. Safety comes
// from fencing: the guard that try_acquire() returns (the key and the revision at which this
// server created it) goes into the store (EtcdStoreOptions::guard), whose every write is a
// transaction that requires the key to be still at that revision. Once another server has taken
// the key, nothing the old leader sends is written.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/etcd_store.h"

namespace tidepool {

struct EtcdElectionOptions {
  std::vector<std::string> endpoints = {"127.0.0.1:2379"};  // as EtcdStoreOptions
  std::optional<EtcdTls> tls;                               // as EtcdStoreOptions
  std::string prefix = "/tidepool";                         // the store's prefix
  std::string candidate;  // this server's URL, as clients reach it; not empty
  // How long the key outlives its holder's last renewal, whole seconds >= 2 (etcd's own floor is
  // 1.5 s with its default timing). The holder renews every third of it.
  std::chrono::seconds lease_ttl{3};
  std::chrono::milliseconds dial_timeout{5000};
  // Each call's deadline, at most lease_ttl / 4 (a member that hangs is left for the next).
  std::chrono::milliseconds request_timeout{2000};
};

class EtcdClient;

// A leadership won: the guard of its writes, and its term (1 for the pool's first leader, then one
// more for each leader after it: term - 1 failovers; kept in <prefix>/leader_term).
struct Leadership {
  EtcdGuard guard;
  std::int64_t term = 0;
};

class EtcdElection {
 public:
  // Connects (within dial_timeout). Errors name the field: "candidate", "lease_ttl", or the
  // store's "etcd store" with the endpoint and the call.
  [[nodiscard]] static Result<std::unique_ptr<EtcdElection>> open(EtcdElectionOptions options);
  ~EtcdElection();
  EtcdElection(const EtcdElection&) = delete;
  EtcdElection& operator=(const EtcdElection&) = delete;

  [[nodiscard]] const std::string& key() const { return key_; }
  [[nodiscard]] const EtcdElectionOptions& options() const { return options_; }

  // The URL of the server that leads now; none while no server does.
  [[nodiscard]] Result<std::optional<std::string>> leader();

  // One attempt to lead: when no server does, creates the key (with a new lease) and returns the
  // leadership, whose guard this server's writes must carry; none when another server leads (or
  // won the race).
  [[nodiscard]] Result<std::optional<Leadership>> try_acquire();

  // Renews the lease of the leadership won; false when it has ended (expired, revoked): the
  // leadership is lost. An error: etcd did not answer (the lease may still run).
  [[nodiscard]] Result<bool> renew();

  // Gives the leadership up at once (revokes the lease, which deletes the key), so that another
  // server need not wait for the TTL. Nothing to do when this server does not lead.
  Result<void> resign();

 private:
  EtcdElection(EtcdElectionOptions options, std::unique_ptr<EtcdClient> client);

  EtcdElectionOptions options_;
  std::string key_;
  std::string term_key_;
  std::unique_ptr<EtcdClient> client_;
  std::atomic<std::int64_t> lease_{0};  // of the leadership won; 0: none
};

}  // namespace tidepool
