#include "store/etcd_election.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "store/etcd_client.h"

namespace tidepool {

EtcdElection::EtcdElection(EtcdElectionOptions options, std::unique_ptr<EtcdClient> client)
    : options_(std::move(options)),
      key_(options_.prefix + "/leader"),
      term_key_(options_.prefix + "/leader_term"),
      client_(std::move(client)) {}

EtcdElection::~EtcdElection() = default;

Result<std::unique_ptr<EtcdElection>> EtcdElection::open(EtcdElectionOptions options) {
  if (options.candidate.empty()) return fail("candidate", "this server's URL is needed");
  if (options.lease_ttl < std::chrono::seconds{2}) {
    return fail("lease_ttl",
                fmt::format("must be at least 2 s, got {} s", options.lease_ttl.count()));
  }
  if (options.prefix.empty()) return fail("prefix", "must not be empty");
  // A member that hangs (paused, cut off) must not cost a renewal its lease: each call gives up
  // on it after a quarter of the TTL and moves on to the next member.
  const std::chrono::milliseconds per_call = std::min<std::chrono::milliseconds>(
      options.request_timeout, std::chrono::milliseconds(options.lease_ttl) / 4);
  auto client = EtcdClient::connect(options.endpoints, options.tls, options.prefix + "/leader",
                                    options.dial_timeout, per_call, nullptr);
  if (!client) return std::unexpected(client.error());
  return std::unique_ptr<EtcdElection>(new EtcdElection(std::move(options), std::move(*client)));
}

Result<std::optional<std::string>> EtcdElection::leader() {
  etcdserverpb::RangeRequest request;
  request.set_key(key_);
  auto response = client_->range(request);
  if (!response) return std::unexpected(response.error());
  if (response->kvs_size() == 0) return std::optional<std::string>{};
  return std::optional<std::string>{response->kvs(0).value()};
}

Result<std::optional<Leadership>> EtcdElection::try_acquire() {
  auto holder = leader();
  if (!holder) return std::unexpected(holder.error());
  if (holder->has_value()) return std::optional<Leadership>{};
  etcdserverpb::RangeRequest term_read;
  term_read.set_key(term_key_);
  auto terms = client_->range(term_read);
  if (!terms) return std::unexpected(terms.error());
  std::int64_t term = 0;
  std::int64_t term_revision = 0;  // 0: no term yet (etcd compares a missing key as revision 0)
  if (terms->kvs_size() > 0) {
    term = std::atoll(terms->kvs(0).value().c_str());
    term_revision = terms->kvs(0).mod_revision();
  }
  auto lease = client_->lease_grant(options_.lease_ttl.count());
  if (!lease) return std::unexpected(lease.error());
  // Create the key only where it is absent (created at revision 0: never, or deleted since).
  etcdserverpb::TxnRequest request;
  etcdserverpb::Compare& absent = *request.add_compare();
  absent.set_key(key_);
  absent.set_target(etcdserverpb::Compare::CREATE);
  absent.set_result(etcdserverpb::Compare::EQUAL);
  absent.set_create_revision(0);
  // The term read is still the last one: no other server won in between.
  etcdserverpb::Compare& same_term = *request.add_compare();
  same_term.set_key(term_key_);
  same_term.set_target(etcdserverpb::Compare::MOD);
  same_term.set_result(etcdserverpb::Compare::EQUAL);
  same_term.set_mod_revision(term_revision);
  etcdserverpb::PutRequest& put = *request.add_success()->mutable_request_put();
  put.set_key(key_);
  put.set_value(options_.candidate);
  put.set_lease(*lease);
  etcdserverpb::PutRequest& next_term = *request.add_success()->mutable_request_put();
  next_term.set_key(term_key_);
  next_term.set_value(std::to_string(term + 1));
  auto response = client_->txn(request, /*may_resend=*/false);
  if (!response || !response->succeeded()) {
    // Another server won the race (or the answer was lost): this lease holds nothing. Revoked
    // if etcd answers; if not, nobody renews it and it ends after its TTL all the same.
    if (auto revoked = client_->lease_revoke(*lease); !revoked && response) {
      return std::unexpected(revoked.error());
    }
    if (!response) return std::unexpected(response.error());
    return std::optional<Leadership>{};
  }
  lease_ = *lease;
  // Both puts are of this transaction: the key's mod_revision is the answer's revision.
  return std::optional<Leadership>{
      Leadership{EtcdGuard{key_, response->header().revision()}, term + 1}};
}

Result<bool> EtcdElection::renew() {
  const std::int64_t lease = lease_.load();
  if (lease == 0) return false;
  auto ttl = client_->lease_keep_alive(lease);
  if (!ttl) return std::unexpected(ttl.error());
  return *ttl > 0;
}

Result<void> EtcdElection::resign() {
  const std::int64_t lease = lease_.exchange(0);
  if (lease == 0) return {};
  return client_->lease_revoke(lease);
}

}  // namespace tidepool
