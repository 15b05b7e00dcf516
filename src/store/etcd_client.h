// The etcd calls of the store: one gRPC channel per endpoint, a deadline on every call, and gRPC
// failures turned into errors that name the endpoint and the call. Thread-safe: the stubs may be
// shared; the endpoint in use is an atomic index.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/etcd/etcd_rpc.grpc.pb.h"
#include "store/etcd_store.h"

namespace tidepool {

class EtcdClient {
 public:
  // How calls pick their member: the first that answers, or the one that leads etcd's raft (if the
  // members say which in time; else the first that answered), which saves writes and reads a hop.
  enum class Member : std::uint8_t { kFirstAnswering, kRaftLeader };

  // Fails when no endpoint answers a Range of `probe_key` within `dial_timeout`, or when a file of
  // `tls` cannot be read (the error names it).
  [[nodiscard]] static Result<std::unique_ptr<EtcdClient>> connect(
      const std::vector<std::string>& endpoints, const std::optional<EtcdTls>& tls,
      const std::string& probe_key, std::chrono::milliseconds dial_timeout,
      std::chrono::milliseconds request_timeout, EtcdCallCounts* counts,
      Member member = Member::kFirstAnswering);

  // The endpoint calls go to now.
  [[nodiscard]] const std::string& endpoint() const { return endpoints_[current_.load()].address; }

  // Reads; when an endpoint is unavailable (or answers too late), tries the next ones.
  [[nodiscard]] Result<etcdserverpb::RangeResponse> range(
      const etcdserverpb::RangeRequest& request);
  // `may_resend`: the Txn may go to the next endpoint when one is unavailable, like range():
  // read-only ones, and writes that a second application would not change (the store's: each
  // compares the revisions of the keys it writes, so a resend of one applied already fails its
  // compares). Others are sent to one endpoint only (a resend after a lost answer could apply
  // them twice); when it is unavailable the next call starts at the next endpoint.
  [[nodiscard]] Result<etcdserverpb::TxnResponse> txn(const etcdserverpb::TxnRequest& request,
                                                      bool may_resend);

  // Leases (for leader election): a new lease of `ttl_seconds`, its id; revoking one (the keys
  // attached to it go with it); renewing one once, its remaining TTL in seconds (0: it expired
  // or was revoked).
  [[nodiscard]] Result<std::int64_t> lease_grant(std::int64_t ttl_seconds);
  [[nodiscard]] Result<void> lease_revoke(std::int64_t lease);
  [[nodiscard]] Result<std::int64_t> lease_keep_alive(std::int64_t lease);

 private:
  struct Endpoint {
    std::string address;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  };

  // The endpoint of the member that leads etcd's raft, if the members say which within
  // `deadline`: a write sent to a follower is forwarded to the leader, and a read waits for the
  // leader's word, one more hop each.
  [[nodiscard]] std::optional<std::size_t> raft_leader(
      std::chrono::system_clock::time_point deadline) const;

  EtcdClient(std::vector<Endpoint> endpoints, std::chrono::milliseconds request_timeout,
             EtcdCallCounts* counts);

  // Runs `call` on the endpoint in use and, if `fail_over`, on the others while they are
  // unavailable or do not answer within the deadline; the first that answers becomes the one in
  // use. Without `fail_over`, an
  // unavailable endpoint hands its place to the next for the next call.
  template <class Response, class Call>
  Result<Response> call(const char* method, bool fail_over, Call&& call);

  std::vector<Endpoint> endpoints_;
  std::atomic<std::size_t> current_{0};
  std::chrono::milliseconds request_timeout_;
  EtcdCallCounts* counts_;
};

}  // namespace tidepool
