// The etcd store's and the election's options from the server configuration's `store:` section,
// the same for the server and the admin commands that open the store.
#pragma once

#include <optional>
#include <string>

#include "server/server_config.h"
#include "store/etcd_election.h"
#include "store/etcd_store.h"

namespace tidepool {

// The TLS files of `store.tls`; absent when it has no CA (plaintext).
[[nodiscard]] std::optional<EtcdTls> etcd_tls(const StoreConfig& store);
// Endpoints, prefix, TLS and the transaction limits; no guard.
[[nodiscard]] EtcdStoreOptions etcd_store_options(const StoreConfig& store);
// Endpoints, prefix, TLS and the lease's TTL, for the candidate `candidate`.
[[nodiscard]] EtcdElectionOptions etcd_election_options(const StoreConfig& store,
                                                        std::string candidate);

}  // namespace tidepool
