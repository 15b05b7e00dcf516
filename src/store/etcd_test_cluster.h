// Tests only: a real etcd cluster of `members` processes, started by the test on free ports of
// 127.0.0.1 with its data in a fresh temporary folder, and killed (by the PIDs it started, and by
// the kernel if the test process dies first) when the object goes.
//
// The etcd binary is looked up on PATH; without it start() fails with a message that says to run
// scripts/setup, so that a machine without etcd fails the tests instead of skipping them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/etcd_store.h"
#include "store/store_test_records.h"

namespace tidepool::test_support {

// `count` different ports of 127.0.0.1 that nothing listens on now (the kernel's choice for port 0,
// all held until every one is chosen).
[[nodiscard]] Result<std::vector<int>> free_ports(std::size_t count);

class EtcdTestCluster {
 public:
  // Starts the members and waits, at most `timeout`, until each answers a Range request.
  [[nodiscard]] static Result<std::unique_ptr<EtcdTestCluster>> start(
      int members = 1, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // The same, its members serving clients over TLS only and requiring a client certificate: one
  // self-signed certificate for 127.0.0.1, made with the openssl command, is the members' and
  // the clients' (tls()).
  [[nodiscard]] static Result<std::unique_ptr<EtcdTestCluster>> start_tls(
      int members = 1, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~EtcdTestCluster();
  EtcdTestCluster(const EtcdTestCluster&) = delete;
  EtcdTestCluster& operator=(const EtcdTestCluster&) = delete;

  // "127.0.0.1:PORT" of each member's client URL, for EtcdStoreOptions::endpoints.
  [[nodiscard]] std::vector<std::string> endpoints() const;
  // The index in endpoints() of the member that leads etcd's own raft, once every member says the
  // same (asked again for up to `timeout`: they agree within an election timeout). Plaintext
  // clusters only.
  [[nodiscard]] Result<std::size_t> raft_leader(
      std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;
  // What a client needs to reach the members (absent: plaintext).
  [[nodiscard]] const std::optional<EtcdTls>& tls() const { return tls_; }

  // Stops member `index` (SIGTERM, then SIGKILL if it lingers).
  [[nodiscard]] Result<void> stop_member(std::size_t index);
  // Starts a stopped member again on its ports and data, and waits until it answers.
  [[nodiscard]] Result<void> start_member(std::size_t index);
  // Both.
  [[nodiscard]] Result<void> restart_member(std::size_t index);
  // Pauses a running member (SIGSTOP: it keeps its connections and answers nothing, as a member
  // that hangs), or lets it go on (SIGCONT).
  [[nodiscard]] Result<void> pause_member(std::size_t index, bool paused);

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };

  EtcdTestCluster(std::string binary, std::vector<Member> members);
  [[nodiscard]] static Result<std::unique_ptr<EtcdTestCluster>> start(
      int members, std::chrono::milliseconds timeout, bool tls);
  // Makes the certificate and key that tls() names.
  [[nodiscard]] Result<void> make_certificate();
  [[nodiscard]] std::string client_url(int port) const;
  [[nodiscard]] Result<void> spawn(Member& member, bool fresh);
  [[nodiscard]] Result<void> wait_until_answering(Member& member,
                                                  std::chrono::steady_clock::time_point deadline);
  void stop(Member& member);
  [[nodiscard]] std::string log_tail(const Member& member) const;

  std::string binary_;
  TempDir dir_;
  std::vector<Member> members_;
  std::optional<EtcdTls> tls_;
};

}  // namespace tidepool::test_support
