// The server's configuration file (`tidepool server --config server.yaml`):
//
//   listen: 127.0.0.1:8470          # host:port (default 127.0.0.1:8470; port 0: any free port)
//   cluster: clusters/lab.yaml      # required: the cluster (topology) file, config/cluster_file.h
//   tenants: tenants/lab.yaml       # required: orgs, tenants, queues and quotas
//   policy: tidepool                # tidepool | quota-borrow | tiresias | fifo-firstfit
//   placement_policy: fgd           # optional: also place whole-GPU jobs with this policy
//                                   #   (random, dot-product, gpu-clustering, gpu-packing,
//                                   #   best-fit, fgd, tidepool) where the topology-aware gang
//                                   #   placement leaves a choice, or none for the gang
//                                   #   placement alone; absent: the policy's (tidepool: fgd)
//   database: tidepool.db           # SQLite file (default ./tidepool.db)
//   store:                          # where the state lives; absent: SQLite, in `database`
//     kind: etcd                    #   sqlite | etcd: several servers share the state, one
//                                   #   leads (store/etcd_election.h), the others stand by
//     endpoints: [127.0.0.1:2379]   #   etcd: its members' client host:port (1..16)
//     prefix: /tidepool             #   etcd: the keys' prefix (several pools on one etcd)
//     lease_ttl: 3s                 #   etcd: a leader silent this long is succeeded (2s..60s)
//     max_txn_ops: 128              #   etcd: its --max-txn-ops and --max-request-bytes (the
//     max_request_bytes: 1572864    #   defaults are etcd's): a round's changes are one
//                                   #   transaction, so the server keeps its rounds within them
//                                   #   (control_loop.h: max_txn_ops / 8 requests and job starts
//                                   #   a round); raise both together for larger rounds
//     tls: {ca: etcd-ca.crt, cert: client.crt, key: client.key}  # etcd over TLS: the CA of
//                                   #   the members' certificates, and this server's client
//                                   #   certificate and key if they ask for one (both or none)
//   advertise_url: https://a:8470   # the URL clients and agents reach this server at, which a
//                                   #   standby names when it sends them to the leader (default:
//                                   #   http[s]://<listen host, or the host name>:<port>)
//   admin_token_file: admin.token   # where the first admin token is written (default: the
//                                   #   database path + ".admin-token"), mode 0600
//   tick: 1s                        # a scheduling pass at least this often
//   rate_limit: {per_second: 1000, burst: 2000}   # per token; per_second 0: no limit
//   tls: {cert: server.crt, key: server.key}      # optional: HTTPS
//   http_threads: 64                # handlers run at once (long polls hold none)
//   metrics_token_required: false   # true: GET /metrics needs a token (any role)
//   heartbeat_timeout: 30s          # a node whose agent is silent this long is NotReady, and
//                                   #   its jobs are requeued (1s..1h)
//   simulate_unregistered_nodes: false  # true: declared nodes take jobs before (or without) an
//                                   #   agent, which then "run" with no process (benchmarks and
//                                   #   API tests); false: only nodes whose agent registered
//   logs: tidepool.logs             # folder of the tasks' output sent by the agents (default: the
//                                   #   database path + ".logs")
//   idle_gpu_window: 15m            # an allocated GPU idle (< 5% busy) this long raises an alert
//   market: market.yaml             # optional: the internal market (config/market_file.h): prices,
//                                   #   charges, lending credits, budgets; absent: none
//   ledger_posting_interval: 60s    # how often accrued charges are posted to the ledger (1s..1d)
//   ledger_jobs_kept: 92d           # closing the books (core/ledger_books.h): once a UTC day is
//                                   #   over, its entries fold into one per job; past this, one
//                                   #   per tenant and model (a live job keeps its own)
//   ledger_days_kept: 400d          #   past this (>= ledger_jobs_kept), into opening entries
//   finished_jobs_kept: 92d         # retention: a job that ended this long ago is removed from
//                                   #   the server and its store (not one a live job runs after;
//                                   #   with a market at least ledger_jobs_kept, so that bills by
//                                   #   job and team name it: the default follows it)
//   events_kept: 30d                # retention: older events are dropped from the store (the
//                                   #   last one is always kept)
//   history_interval: 5m            # GET /v1/history: the figures sampled this often (1m..1h) ...
//   history_kept: 14d               #   ... and kept this long (1d..90d), in the store
//   steps_stored_every: 1m          # a running job's reported steps are written to the store at
//                                   #   least this often while it reports (1s..1h): a server
//                                   #   that stops loses at most this much of them
//   admission:                      # per tenant, unless its entry in the tenants file says
//     max_pending_jobs: 5000        #   jobs waiting at once; past it a submission gets 429
//     submissions_per_second: 200   #   new jobs per second on average (0: no limit) ...
//     submission_burst: 1000        #   ... and at most this many at once
//   prewarm:                        # optional: data pre-warming (core/prewarm.h); absent: off
//     hook: /usr/local/lib/tidepool/stage-data  # required: an executable file, run as
//                                   #   `HOOK prewarm` with the job and its expected nodes as
//                                   #   JSON on stdin, `lead` before its predicted start
//     lead: 10m                     #   how long before the predicted start (1s..1d); starts are
//                                   #   expected up to twice this ahead, asked at most once a
//                                   #   minute
//     timeout: 5m                   #   a hook still running this long is stopped (1s..1h)
//
// Relative paths are relative to the configuration file's folder (the database default: to the
// working directory). Unknown keys are errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/instant.h"
#include "core/ledger_books.h"
#include "core/resources.h"

namespace tidepool {

enum class StoreKind { kSqlite, kEtcd };

struct StoreConfig {
  StoreKind kind = StoreKind::kSqlite;
  std::vector<std::string> endpoints = {"127.0.0.1:2379"};
  std::string prefix = "/tidepool";
  Millis lease_ttl = std::chrono::seconds{3};
  std::int64_t max_txn_ops = 128;
  std::int64_t max_request_bytes = 1536 * 1024;
  // TLS to the members (PEM files); tls_ca empty: plaintext. tls_cert and tls_key: both or none.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8470;
  std::string cluster_path;
  std::string tenants_path;
  std::string policy = "tidepool";
  std::string placement_policy;  // empty: the policy's; "none": the gang placement alone
  std::string database_path = "tidepool.db";
  StoreConfig store;
  std::string advertise_url;     // empty: from the listening address
  std::string admin_token_file;  // empty: database_path + ".admin-token"
  Millis tick{1000};
  double rate_per_second = 1000;
  double rate_burst = 2000;
  std::string tls_cert;
  std::string tls_key;
  int http_threads = 64;
  bool metrics_token_required = false;
  Millis heartbeat_timeout{30'000};
  bool simulate_unregistered_nodes = false;
  std::string log_dir;  // empty: database_path + ".logs"
  Millis idle_gpu_window = std::chrono::minutes{15};
  std::string market_path;  // empty: no market
  Millis ledger_posting_interval = std::chrono::minutes{1};
  BookTerms ledger_books;  // ledger_jobs_kept, ledger_days_kept, in days
  std::int64_t finished_jobs_kept_days = 92;
  std::int64_t events_kept_days = 30;
  Millis history_interval = std::chrono::minutes{5};
  std::int64_t history_kept_days = 14;
  Millis steps_stored_every = std::chrono::minutes{1};
  std::int64_t max_pending_jobs = 5000;
  std::int64_t submissions_per_second = 200;
  std::int64_t submission_burst = 1000;
  // Data pre-warming: the hook (an executable file); empty: off.
  std::string prewarm_hook;
  Seconds prewarm_lead = 600;
  Millis prewarm_timeout = std::chrono::minutes{5};
};

// Reads the file at `path`; errors name the key ("server.yaml:3:9 listen").
Result<ServerConfig> load_server_config(const std::string& path);
// Parses the text of a configuration file whose folder is `base_dir`.
Result<ServerConfig> read_server_config(std::string_view text, const std::string& source,
                                        const std::string& base_dir);

// "host:port" into the config; fails naming `field`.
Result<void> parse_listen(std::string_view text, const std::string& field, ServerConfig& config);

}  // namespace tidepool
