#include "apps/server_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "apps/etcd_options.h"
#include "apps/server_life.h"
#include "config/cluster_file.h"
#include "config/market_file.h"
#include "config/tenants_file.h"
#include "core/scheduler.h"
#include "server/control_loop.h"
#include "server/event_log.h"
#include "server/http_api.h"
#include "server/running_backup.h"
#include "server/server_config.h"
#include "server/server_metrics.h"
#include "server/standby_api.h"
#include "store/etcd_election.h"
#include "store/etcd_store.h"
#include "store/sqlite_store.h"

namespace tidepool {
namespace {

struct ServerFlags {
  std::string config;
  std::string listen;
  std::string database;
  std::string tls_cert;
  std::string tls_key;
  std::string port_file;
  std::string log_format = "text";
  std::string log_level = "info";
};

Result<void> write_private_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return fail(path, "cannot write the file");
  out << text << '\n';
  out.close();
  if (!out) return fail(path, "cannot write the file");
  if (::chmod(path.c_str(), S_IRUSR | S_IWUSR) != 0) return fail(path, "cannot make it private");
  return {};
}

// The URL clients reach this server at: the configured one, else the listening address (the
// host name when it listens on every address).
std::string advertised_url(const ServerConfig& config, const std::string& scheme, int port) {
  if (!config.advertise_url.empty()) return config.advertise_url;
  std::string host = config.host;
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) host = name;
  }
  return fmt::format("{}://{}:{}", scheme, host, port);
}

// Writes the port listened on for whoever started the server (tests, scripts); none: no file.
Result<void> write_port_file(const std::string& path, int port) {
  if (path.empty()) return {};
  std::ofstream out(path, std::ios::trunc);
  out << port << '\n';
  out.close();
  if (!out) return fail(path, "cannot write the port file");
  return {};
}

Result<void> run_server(const ServerFlags& flags) {
  // What the server writes (the database and its WAL, the tasks' logs, the admin token) may hold
  // job secrets: the owner only.
  ::umask(077);
  if (flags.log_format == "json") spdlog::set_formatter(json_log_formatter());
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  auto config = load_server_config(flags.config);
  if (!config) return std::unexpected(config.error());
  if (!flags.listen.empty()) {
    if (auto ok = parse_listen(flags.listen, "--listen", *config); !ok) return ok;
  }
  if (!flags.database.empty()) config->database_path = flags.database;
  if (!flags.tls_cert.empty()) config->tls_cert = flags.tls_cert;
  if (!flags.tls_key.empty()) config->tls_key = flags.tls_key;
  if (config->admin_token_file.empty()) {
    config->admin_token_file = config->database_path + ".admin-token";
  }
  if (config->log_dir.empty()) config->log_dir = config->database_path + ".logs";

  ControlPlaneSetup setup;
  auto cluster = load_cluster_yaml(config->cluster_path);
  if (!cluster) return std::unexpected(cluster.error());
  setup.cluster = std::move(*cluster);
  auto tenants = load_tenants_yaml(config->tenants_path, setup.cluster.models);
  if (!tenants) return std::unexpected(tenants.error());
  setup.tenants = std::move(*tenants);
  auto policy = scheduler_policy(config->policy);
  if (!policy) return fail("policy", policy.error().reason);
  setup.scheduler = std::move(*policy);
  if (config->placement_policy == "none") {
    setup.scheduler.gang_policy.clear();
  } else if (!config->placement_policy.empty()) {
    setup.scheduler.gang_policy = config->placement_policy;
  }
  setup.heartbeat_timeout = config->heartbeat_timeout;
  setup.steps_stored_every = config->steps_stored_every;
  setup.simulate_unregistered_nodes = config->simulate_unregistered_nodes;
  setup.admission = {config->max_pending_jobs, config->submissions_per_second,
                     config->submission_burst};
  setup.idle_gpu.window = config->idle_gpu_window;
  if (!config->prewarm_hook.empty()) {
    PrewarmSetup prewarm;
    prewarm.hook = config->prewarm_hook;
    prewarm.planner.lead = config->prewarm_lead;
    prewarm.planner.horizon = 2 * config->prewarm_lead;  // as the simulator's (core/prewarm.h)
    prewarm.timeout = config->prewarm_timeout;
    setup.prewarm = std::move(prewarm);
  }
  if (!config->market_path.empty()) {
    auto market = load_market_yaml(config->market_path);
    if (!market) return std::unexpected(market.error());
    // A provider's hook is relative to the market file's folder, like the config's paths.
    for (BurstProviderSpec& provider : market->burst_providers) {
      if (!provider.hook.empty() && std::filesystem::path(provider.hook).is_relative()) {
        provider.hook = (std::filesystem::path(config->market_path).parent_path() / provider.hook)
                            .lexically_normal()
                            .string();
      }
    }
    setup.market = std::move(*market);
    setup.ledger_posting_interval = whole_seconds(config->ledger_posting_interval);
    setup.ledger_books = config->ledger_books;
    setup.finished_jobs_kept_days = config->finished_jobs_kept_days;
    setup.history_interval = config->history_interval;
    setup.history_hours_kept = config->history_kept_days * 24;
  }

  // Block the stop signals in every thread (before any starts); one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGUSR1);  // the end of the run wakes the waiting thread
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ServerLife life;
  std::thread signals([&] {
    int signal = 0;
    do {
      sigwait(&stop_signals, &signal);
    } while (signal == SIGUSR1 && !life.ended());
    if (signal != SIGUSR1) life.stop(fmt::format("signal {}", signal));
  });
  // The signal thread ends with the run, whatever ended it.
  struct JoinSignals {
    std::thread& thread;
    ServerLife& life;
    ~JoinSignals() {
      if (!life.ended()) life.stop("the server failed");
      pthread_kill(thread.native_handle(), SIGUSR1);
      thread.join();
    }
  } join_signals{signals, life};

  const bool etcd = config->store.kind == StoreKind::kEtcd;
  const std::string scheme = config->tls_cert.empty() ? "http" : "https";
  std::unique_ptr<EtcdElection> election;
  std::optional<Leadership> leadership;
  // The leadership's renewals (keep_leading), joined once the run has ended, whatever ends it.
  std::thread renewing;
  struct Renewals {
    ServerLife& life;
    std::thread& thread;
    void join() {
      if (!thread.joinable()) return;
      life.stop("the server stopped");  // no effect when the run has ended already
      thread.join();
    }
    ~Renewals() { join(); }
  } renewals{life, renewing};
  std::unique_ptr<Store> store;
  int port = config->port;
  if (!etcd) {
    auto sqlite = open_sqlite_store(config->database_path);
    if (!sqlite) return std::unexpected(sqlite.error());
    store = std::move(*sqlite);
  } else {
    // A standby until this server leads: it answers on the port the API will take.
    StandbyApi standby(HttpServerOptions{.host = config->host,
                                         .port = config->port,
                                         .tls_cert = config->tls_cert,
                                         .tls_key = config->tls_key},
                       "");
    auto bound = standby.bind();
    if (!bound) return std::unexpected(bound.error());
    port = *bound;
    const std::string self = advertised_url(*config, scheme, port);
    standby.set_self(self);
    if (auto ok = write_port_file(flags.port_file, port); !ok) return ok;
    auto opened = EtcdElection::open(etcd_election_options(config->store, self));
    if (!opened) return std::unexpected(opened.error());
    election = std::move(*opened);
    spdlog::info("tidepool server {} standing by on {}://{}:{} (etcd {}, prefix {})", self, scheme,
                 config->host, port, fmt::join(config->store.endpoints, ","), config->store.prefix);
    std::thread standing([&standby] { standby.serve(); });
    leadership = campaign(*election, standby, life, Millis{200});
    standby.stop();
    standing.join();
    if (!leadership) {
      spdlog::info("{}: stopped before leading", life.reason());
      return {};
    }
    // The lease is renewed from the moment it is won, not once the state is loaded: loading a
    // large state may take longer than the lease's TTL.
    renewing = std::thread([&] { keep_leading(*election, life); });
    EtcdStoreOptions options = etcd_store_options(config->store);
    options.guard = leadership->guard;
    auto fenced = open_etcd_store(std::move(options));
    if (!fenced) return std::unexpected(fenced.error());
    store = std::move(*fenced);
  }

  // The loop owns the store; GET /v1/admin/backup reads it through the loop (running_backup.h),
  // and the API stops before the loop does.
  Store& durable = *store;
  // Every node's agent keeps a connection open (it beats every 2 s, within the idle timeout):
  // room for all of them beside the users'.
  const std::size_t max_connections = HttpOptions{}.max_connections + setup.cluster.nodes.size();
  ServerMetrics metrics;
  metrics.set_leading(leadership ? leadership->term : 1);
  ControlLoop loop(
      std::move(store), std::move(setup),
      ControlLoop::Options{
          .tick = config->tick,
          .events_kept_for = std::chrono::days{config->events_kept_days},
          .on_leadership_lost = [&life](const Error& error) { life.lose(error.reason); }},
      metrics);
  HttpApi api(loop, metrics,
              HttpOptions{.host = config->host,
                          .port = port,
                          .tls_cert = config->tls_cert,
                          .tls_key = config->tls_key,
                          .rate_per_second = config->rate_per_second,
                          .rate_burst = config->rate_burst,
                          .max_body_bytes = std::size_t{1} << 20,
                          .threads = config->http_threads,
                          .log_dir = config->log_dir,
                          .max_connections = max_connections,
                          .metrics_token_required = config->metrics_token_required,
                          .backup = [&loop, &durable, etcd] {
                            return back_up_running_store(loop, durable, etcd ? "etcd" : "sqlite");
                          }});
  auto bound = api.bind();
  if (!bound) return std::unexpected(bound.error());
  port = *bound;
  const std::string self = advertised_url(*config, scheme, port);
  api.set_self_url(self);
  // Burst providers' hooks hand this URL to the agents they start.
  loop.set_server_url(self);
  auto started = loop.start();
  if (!started) return std::unexpected(started.error());
  if (*started) {
    if (auto ok = write_private_file(config->admin_token_file, **started); !ok) return ok;
    spdlog::info("created the first admin token; it is in {}", config->admin_token_file);
  }
  if (!etcd) {
    if (auto ok = write_port_file(flags.port_file, port); !ok) return ok;
  }
  spdlog::info("tidepool server listening on {}://{}:{} ({}, policy {})", scheme, config->host,
               port,
               etcd ? fmt::format("etcd {}, prefix {}, leading",
                                  fmt::join(config->store.endpoints, ","), config->store.prefix)
                    : "database " + config->database_path,
               config->policy);
  std::thread http([&api] { api.serve(); });
  while (!life.wait_for(std::chrono::hours{1})) {
  }
  const std::optional<std::string> lost = life.lost();
  spdlog::info("{}: shutting down", lost ? "leadership lost: " + *lost : life.reason());
  api.stop();
  http.join();
  loop.stop();
  renewals.join();
  if (lost) return fail("leadership", *lost);
  if (election) resign(*election);
  spdlog::info("stopped");
  return {};
}

}  // namespace

void add_server_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand(
      "server", "Run the control plane: the REST API, the scheduler and the job database");
  cmd->add_option("--config", flags->config, "Server configuration file (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--listen", flags->listen,
                  "host:port to listen on (default from the config, else 127.0.0.1:8470; port 0: "
                  "any free port)");
  cmd->add_option("--database", flags->database, "SQLite database file (default ./tidepool.db)");
  cmd->add_option("--tls-cert", flags->tls_cert, "PEM certificate: serve HTTPS");
  cmd->add_option("--tls-key", flags->tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--port-file", flags->port_file, "Write the port listened on to this file");
  cmd->add_option("--log-format", flags->log_format,
                  "text, or json: each line of the log one JSON object {time, level, message}")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--log-level", flags->log_level,
                  "debug (also every submission and checkpoint), info (placements, preemptions, "
                  "requeues, failures, nodes), warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();
  cmd->callback([flags, exit_code] {
    if (auto ok = run_server(*flags); !ok) {
      fmt::print(stderr, "error: {}\n", ok.error().message());
      *exit_code = 1;
    }
  });
}

}  // namespace tidepool
