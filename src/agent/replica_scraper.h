// The figures of the node's service replicas (api/replica_metrics.h), read by the agent before each
// heartbeat and sent in it (NodeHeartbeat::replicas); the server's autoscaler scales on them.
//
// A replica is the one task of a job whose assignment carries a `replica` (api/agent_wire.h:
// ReplicaAssignment). Its metrics are the Prometheus text exposition, read from one of two places:
//   - metrics_file set: the file the replica writes. Opened without following a link in its last
//     component (O_PATH | O_NOFOLLOW) and checked before a byte is read: a regular file of at most
//     kMaxExpositionBytes, and, when the task runs under a uid of its own, owned by that uid, so
//     that a user cannot make the agent (root) read another's file, or open a device or a FIFO;
//   - else port > 0: GET http://127.0.0.1:<port>/metrics, the whole exchange (connecting, sending,
//     the reply) within a deadline, the reply's body at most kMaxExpositionBytes;
//   - neither: nothing to read; the replica is reported without figures.
// A replica's bytes never leave the node: the heartbeat carries only the integers computed here.
//
// ReplicaScraper keeps each replica's previous scrape, so that the counters' increases give the
// rates and latencies (extract_replica_figures); the first scrape of a replica gives its gauges
// only. It does no I/O of its own (the fetch function does) and reads no clock (the caller gives
// the time). Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/agent_wire.h"
#include "api/replica_metrics.h"
#include "core/error.h"

namespace tidepool {

// How long the agent waits for one replica's metrics over HTTP, all of the exchange.
inline constexpr std::chrono::milliseconds kReplicaScrapeTimeout{500};

// The bytes of the exposition `replica` gives: its file when metrics_file is set, else its port.
// `task_uid` is the uid the replica's task runs as (-1: the agent's own, and no owner is checked).
using ReplicaFetch =
    std::function<Result<std::string>(const ReplicaAssignment& replica, int task_uid)>;

// The real ReplicaFetch: read_replica_metrics_file or get_replica_metrics (kReplicaScrapeTimeout).
// An Error ("replica") when there is neither a file nor a port.
Result<std::string> fetch_replica_metrics(const ReplicaAssignment& replica, int task_uid);

// The whole of the file at `path` (absolute), read as the file comment says; `owner_uid` >= 0: the
// file must be owned by it. Errors ("metrics_file") name the path and why: missing, a link, not a
// regular file, another's, larger than kMaxExpositionBytes, unreadable.
Result<std::string> read_replica_metrics_file(const std::string& path, int owner_uid);

// The body of GET http://127.0.0.1:<port>/metrics, whose status must be 200, all within `timeout`.
// Errors ("port"): refused, timed out, a malformed reply, another status, a body larger than
// kMaxExpositionBytes.
Result<std::string> get_replica_metrics(int port, std::chrono::milliseconds timeout);

class ReplicaScraper {
 public:
  // `log` gets one line for each replica's failure the first time it fails for that reason, and
  // one when it is read again after failing.
  using Log = std::function<void(const std::string& line)>;

  ReplicaScraper(ReplicaFetch fetch, Log log) : fetch_(std::move(fetch)), log_(std::move(log)) {}

  // Reads the replica of `run` of `job` at `now_ms` (a monotonic clock, in milliseconds), its task
  // running as `task_uid` (-1: the agent's own), and keeps its figures for reports(): the gauges
  // of this scrape and what changed since its previous one. A scrape that fails (the fetch, the
  // exposition, the metric names) leaves the replica without figures until the next one that
  // works; its previous scrape is kept, so that the rates then cover the whole interval.
  void scrape(std::int64_t job, std::int64_t run, const ReplicaAssignment& replica, int task_uid,
              std::int64_t now_ms);

  // The latest figures of every replica scraped and not forgotten, by job and run.
  [[nodiscard]] std::vector<ReplicaReport> reports() const;

  // Drops the replica of `run` of `job` (its task ended or is stopping): it is not reported again.
  void forget(std::int64_t job, std::int64_t run);

  // The replicas scraped and not forgotten, by job and run.
  [[nodiscard]] std::vector<std::pair<std::int64_t, std::int64_t>> known() const;

 private:
  struct Replica {
    std::optional<ReplicaScrape> previous;  // the last scrape that could be read
    ReplicaFigures figures;                 // of the latest scrape; none when it failed
    std::string failure;                    // the latest failure logged; empty after a success
  };

  void failed(std::int64_t job, std::int64_t run, Replica& replica, const Error& error);

  ReplicaFetch fetch_;
  Log log_;
  std::map<std::pair<std::int64_t, std::int64_t>, Replica> replicas_;
};

}  // namespace tidepool
