// The Store of a highly available control plane: the state lives in an etcd cluster (v3 API over
// gRPC), so that several servers can share it and one takes over when another fails.
//
// Layout: one key per record under a prefix (etcd_keys.h), so load() reads the whole state with
// one Range request per collection (six; seven for a fenced store), whatever the number of jobs;
// the events of a commit share one key (etcd's time for a transaction grows with the keys it
// writes, and a round that starts its jobs writes two events per job).
//
// Atomicity: a commit() is one etcd transaction. The batch's rules depend on some keys (its jobs
// and tokens, the index entries of their idempotency keys and hashes, the last event and ledger
// seqs); the store checks the batch against them in store.h's order (etcd_batch_plan.h) and sends
// one Txn that writes everything if each of those keys still has the revision the check saw. The
// store knows those keys from its load() and its own commits (etcd_known_keys.h), so a commit is
// one round trip; it reads only keys it does not know. A refused batch sends nothing; a Txn whose
// compares fail (another writer changed a key) writes nothing, and the store forgets what it knew,
// reads the keys and checks again, a few times.
//
// Size: etcd refuses a transaction of more than --max-txn-ops operations (default 128) or a request
// of more than --max-request-bytes (default 1.5 MiB). A batch over either limit is refused, before
// anything is sent, with an error that names the limit; the store does not split a batch across
// transactions, as that would give up atomicity, nor a record across keys. Raise etcd's limits and
// these options together.
//
// Durability: etcd answers a Txn once a quorum of members has it in its fsynced log.
//
// History: every commit adds a revision to etcd's history, which the store never compacts; run
// etcd with --auto-compaction-retention (or compact from the leader) so its database stays small.
// The ledger, which grows with every posting (one entry per running job a minute), is folded
// (closing the books, core/ledger_books.h: a LedgerFoldRecord is one DeleteRange and its carried
// entries), so it holds about one entry per job and day for ledger_jobs_kept days; the jobs and
// the events grow with the work submitted.
//
// Fencing: with `guard` set, every Txn also compares the guard key's mod_revision (the leader's
// election key) and fails with "leadership lost" if it moved, so a deposed leader writes nothing.
// Such a store is the only writer of its prefix, so it keeps the index of idempotency keys in
// memory, derived from the jobs at load() and kept from its commits, rather than as a key per job
// in etcd (a submission writes one key and one compare fewer: etcd's time for a transaction grows
// with its keys). Index keys an unfenced store wrote (a restore) are not taken and go with the
// first commit. Whenever what it knows may be stale (a failed call, a key changed under it), a
// fenced store loads again before it plans, rather than read single keys.
//
// Threads: load() and commit() are serialized by a mutex; events_after() needs no lock (gRPC
// stubs may be shared) and sees whole batches only, since each batch is one Txn.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/store.h"

namespace tidepool {

// The calls a store made, by kind; for tests and metrics. Every member may be read from any thread.
struct EtcdCallCounts {
  std::atomic<std::int64_t> range{0};  // KV/Range calls
  std::atomic<std::int64_t> txn{0};    // KV/Txn calls, the reads before a commit included
};

// A key whose mod_revision every write of the store must find unchanged.
struct EtcdGuard {
  std::string key;
  std::int64_t mod_revision = 0;
};

// TLS to the cluster's members (etcd run with --cert-file and --key-file, and for client
// certificates --client-cert-auth and --trusted-ca-file): PEM files, read when the store connects.
struct EtcdTls {
  std::string ca_file;  // the CA that signed the members' certificates; required
  // This client's certificate and its key, for members that ask for one; both or neither.
  std::string cert_file;
  std::string key_file;
};

struct EtcdStoreOptions {
  // Client URLs' host:port of the cluster's members, e.g. "127.0.0.1:2379" (no scheme: gRPC, over
  // TLS when `tls` is set). Calls go to the member that leads etcd's raft when the store opens (a
  // follower would forward each write to it, and ask it before each read), else to the first
  // that answers; they move on to the next when one is unavailable.
  std::vector<std::string> endpoints = {"127.0.0.1:2379"};
  std::optional<EtcdTls> tls;  // absent: plaintext
  // Every key of the store starts with this; several stores may share a cluster under different
  // prefixes. Must not be empty.
  std::string prefix = "/tidepool";
  // open_etcd_store() waits this long for an endpoint to answer.
  std::chrono::milliseconds dial_timeout{5000};
  // Each call's deadline.
  std::chrono::milliseconds request_timeout{5000};
  // etcd's --max-txn-ops and --max-request-bytes: a batch needing more is refused.
  std::int64_t max_txn_ops = 128;
  std::int64_t max_request_bytes = 1536 * 1024;
  std::optional<EtcdGuard> guard;
  // Not owned; nullptr: not counted. Must outlive the store.
  EtcdCallCounts* counts = nullptr;
};

// Connects to the cluster and checks that it answers within options.dial_timeout. Errors have the
// field "etcd store" and name the endpoint and the call that failed with gRPC's reason. The store
// may be opened on an empty prefix (a new cluster): load() then gives an empty Snapshot.
[[nodiscard]] Result<std::unique_ptr<Store>> open_etcd_store(EtcdStoreOptions options);

}  // namespace tidepool
