#include "store/etcd_client.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

namespace tidepool {
namespace {

constexpr const char* kClientField = "etcd store";

const char* status_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "unknown status";
  }
}

Result<std::string> read_pem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    return fail(kClientField,
                fmt::format("cannot read the {} file {:?}: {}", what, path, std::strerror(errno)));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.find("-----BEGIN ") == std::string::npos) {
    return fail(kClientField, fmt::format("the {} file {:?} holds no PEM block", what, path));
  }
  return text;
}

Result<std::shared_ptr<grpc::ChannelCredentials>> credentials(const std::optional<EtcdTls>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  if (tls->ca_file.empty()) return fail(kClientField, "TLS needs the CA file (tls.ca)");
  if (tls->cert_file.empty() != tls->key_file.empty()) {
    return fail(kClientField,
                "a client certificate needs its key, and a key its certificate "
                "(tls.cert and tls.key: both or neither)");
  }
  grpc::SslCredentialsOptions options;
  auto ca = read_pem(tls->ca_file, "CA");
  if (!ca) return std::unexpected(ca.error());
  options.pem_root_certs = std::move(*ca);
  if (!tls->cert_file.empty()) {
    auto cert = read_pem(tls->cert_file, "client certificate");
    if (!cert) return std::unexpected(cert.error());
    auto key = read_pem(tls->key_file, "client key");
    if (!key) return std::unexpected(key.error());
    options.pem_cert_chain = std::move(*cert);
    options.pem_private_key = std::move(*key);
  }
  return grpc::SslCredentials(options);
}

}  // namespace

EtcdClient::EtcdClient(std::vector<Endpoint> endpoints, std::chrono::milliseconds request_timeout,
                       EtcdCallCounts* counts)
    : endpoints_(std::move(endpoints)), request_timeout_(request_timeout), counts_(counts) {}

Result<std::unique_ptr<EtcdClient>> EtcdClient::connect(const std::vector<std::string>& endpoints,
                                                        const std::optional<EtcdTls>& tls,
                                                        const std::string& probe_key,
                                                        std::chrono::milliseconds dial_timeout,
                                                        std::chrono::milliseconds request_timeout,
                                                        EtcdCallCounts* counts, Member member) {
  if (endpoints.empty()) return fail(kClientField, "no etcd endpoint given");
  auto secure = credentials(tls);
  if (!secure) return std::unexpected(secure.error());
  std::vector<Endpoint> channels;
  for (const std::string& address : endpoints) {
    grpc::ChannelArguments arguments;
    // load() reads a whole collection in one answer: no cap but protobuf's own (2 GiB).
    arguments.SetMaxReceiveMessageSize(-1);
    auto channel = grpc::CreateCustomChannel(address, *secure, arguments);
    channels.push_back(Endpoint{address, etcdserverpb::KV::NewStub(channel),
                                etcdserverpb::Lease::NewStub(channel),
                                etcdserverpb::Maintenance::NewStub(channel)});
  }
  std::unique_ptr<EtcdClient> client(new EtcdClient(std::move(channels), request_timeout, counts));

  // Each endpoint in turn, waiting for it to connect, until one answers or the time is up.
  const auto deadline = std::chrono::system_clock::now() + dial_timeout;
  std::string reasons;
  for (std::size_t i = 0; i < client->endpoints_.size(); ++i) {
    const auto share = (deadline - std::chrono::system_clock::now()) /
                       static_cast<int>(client->endpoints_.size() - i);
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() + share);
    etcdserverpb::RangeRequest probe;
    probe.set_key(probe_key);
    probe.set_count_only(true);
    etcdserverpb::RangeResponse response;
    if (counts != nullptr) ++counts->range;
    const grpc::Status status = client->endpoints_[i].kv->Range(&context, probe, &response);
    if (status.ok()) {
      client->current_ = i;
      if (member == Member::kRaftLeader && client->endpoints_.size() > 1) {
        // A second at most, within the dial timeout: without an answer the first one serves.
        const auto by =
            std::min(deadline, std::chrono::system_clock::now() + std::chrono::seconds(1));
        if (const auto leader = client->raft_leader(by)) client->current_ = *leader;
      }
      return client;
    }
    reasons += fmt::format("{}KV/Range on {}: {} ({})", reasons.empty() ? "" : "; ",
                           client->endpoints_[i].address, status.error_message(),
                           status_name(status.error_code()));
  }
  return fail(kClientField, fmt::format("no etcd endpoint answered within {} ms: {}",
                                        dial_timeout.count(), reasons));
}

std::optional<std::size_t> EtcdClient::raft_leader(
    std::chrono::system_clock::time_point deadline) const {
  std::uint64_t leader = 0;  // as the first member that knows says
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    etcdserverpb::StatusResponse status;
    if (!endpoints_[i].maintenance->Status(&context, etcdserverpb::StatusRequest{}, &status).ok()) {
      continue;
    }
    if (leader == 0) leader = status.leader();
    if (leader != 0 && status.header().member_id() == leader) return i;
  }
  return std::nullopt;
}

template <class Response, class Call>
Result<Response> EtcdClient::call(const char* method, bool fail_over, Call&& call) {
  const std::size_t first = current_.load();
  const std::size_t tries = fail_over ? endpoints_.size() : 1;
  std::string reasons;
  for (std::size_t n = 0; n < tries; ++n) {
    const std::size_t i = (first + n) % endpoints_.size();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + request_timeout_);
    Response response;
    const grpc::Status status = call(endpoints_[i], context, response);
    if (status.ok()) {
      current_ = i;
      return response;
    }
    reasons += fmt::format("{}{} on {}: {} ({})", reasons.empty() ? "" : "; ", method,
                           endpoints_[i].address, status.error_message(),
                           status_name(status.error_code()));
    // Unavailable, or no answer in time (a member paused or cut off): the next may answer.
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      break;
    }
    if (!fail_over) current_ = (i + 1) % endpoints_.size();
  }
  return fail(kClientField, reasons);
}

Result<etcdserverpb::RangeResponse> EtcdClient::range(const etcdserverpb::RangeRequest& request) {
  if (counts_ != nullptr) ++counts_->range;
  return call<etcdserverpb::RangeResponse>(
      "KV/Range", true,
      [&](Endpoint& endpoint, grpc::ClientContext& context, etcdserverpb::RangeResponse& response) {
        return endpoint.kv->Range(&context, request, &response);
      });
}

Result<etcdserverpb::TxnResponse> EtcdClient::txn(const etcdserverpb::TxnRequest& request,
                                                  bool may_resend) {
  if (counts_ != nullptr) ++counts_->txn;
  return call<etcdserverpb::TxnResponse>(
      "KV/Txn", may_resend,
      [&](Endpoint& endpoint, grpc::ClientContext& context, etcdserverpb::TxnResponse& response) {
        return endpoint.kv->Txn(&context, request, &response);
      });
}

Result<std::int64_t> EtcdClient::lease_grant(std::int64_t ttl_seconds) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  // A grant whose answer was lost leaves a lease that nobody renews: it expires on its own.
  auto response = call<etcdserverpb::LeaseGrantResponse>(
      "Lease/LeaseGrant", true,
      [&](Endpoint& endpoint, grpc::ClientContext& context, etcdserverpb::LeaseGrantResponse& out) {
        return endpoint.lease->LeaseGrant(&context, request, &out);
      });
  if (!response) return std::unexpected(response.error());
  if (!response->error().empty() || response->id() == 0) {
    return fail(kClientField, fmt::format("Lease/LeaseGrant refused: {}", response->error()));
  }
  return response->id();
}

Result<void> EtcdClient::lease_revoke(std::int64_t lease) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  auto response = call<etcdserverpb::LeaseRevokeResponse>(
      "Lease/LeaseRevoke", true,
      [&](Endpoint& endpoint, grpc::ClientContext& context,
          etcdserverpb::LeaseRevokeResponse& out) {
        return endpoint.lease->LeaseRevoke(&context, request, &out);
      });
  if (!response) return std::unexpected(response.error());
  return {};
}

Result<std::int64_t> EtcdClient::lease_keep_alive(std::int64_t lease) {
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  // etcd renews leases on a stream; one short stream per renewal keeps every call unary-shaped
  // (a deadline, a status, failing over like the others).
  auto response = call<etcdserverpb::LeaseKeepAliveResponse>(
      "Lease/LeaseKeepAlive", true,
      [&](Endpoint& endpoint, grpc::ClientContext& context,
          etcdserverpb::LeaseKeepAliveResponse& out) {
        auto stream = endpoint.lease->LeaseKeepAlive(&context);
        if (stream->Write(request)) stream->Read(&out);
        stream->WritesDone();
        return stream->Finish();
      });
  if (!response) return std::unexpected(response.error());
  return response->ttl();
}

}  // namespace tidepool
