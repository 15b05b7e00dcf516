#include "apps/etcd_options.h"

#include <chrono>
#include <utility>

namespace tidepool {

std::optional<EtcdTls> etcd_tls(const StoreConfig& store) {
  if (store.tls_ca.empty()) return std::nullopt;
  return EtcdTls{.ca_file = store.tls_ca, .cert_file = store.tls_cert, .key_file = store.tls_key};
}

EtcdStoreOptions etcd_store_options(const StoreConfig& store) {
  EtcdStoreOptions options;
  options.endpoints = store.endpoints;
  options.tls = etcd_tls(store);
  options.prefix = store.prefix;
  options.max_txn_ops = store.max_txn_ops;
  options.max_request_bytes = store.max_request_bytes;
  return options;
}

EtcdElectionOptions etcd_election_options(const StoreConfig& store, std::string candidate) {
  EtcdElectionOptions options;
  options.endpoints = store.endpoints;
  options.tls = etcd_tls(store);
  options.prefix = store.prefix;
  options.candidate = std::move(candidate);
  options.lease_ttl = std::chrono::duration_cast<std::chrono::seconds>(store.lease_ttl);
  return options;
}

}  // namespace tidepool
