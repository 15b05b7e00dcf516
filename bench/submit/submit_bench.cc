// bench/submit: durable job submission through Tidepool's API and CLI, and submit-to-placed
// latency, on a server with many declared nodes and a standing backlog of pending jobs.
//
// It starts `tidepool server` (the binary given) in a temporary folder on 127.0.0.1 with:
//   - a generated cluster of --nodes nodes of 8 H100 each (20 nodes per leaf, 5 leaves per spine);
//   - two tenants: "prod", guaranteed every GPU, and "backlog", guaranteed none and not allowed
//     to borrow, whose --backlog jobs therefore stay pending for quota the whole run;
//   - no rate limit; the policy "tidepool".
// Then:
//   1. API: --clients threads, each with its own keep-alive connection, submit --jobs one-GPU jobs
//      of "prod" in all (POST /v1/jobs, each with an Idempotency-Key), one at a time per thread.
//      A submission counts when its 201 arrives, i.e. after the server committed it (SQLite WAL,
//      synchronous=FULL). Rate = jobs / (last answer - first request).
//      A watcher long-polls GET /v1/events and notes when each job.started event arrives;
//      submit-to-placed latency = that time - the time the job's request was sent.
//   2. CLI: --clients processes at a time run `tidepool submit job.yaml`, one process per
//      submission as sbatch is, --cli-jobs in all. Rate = jobs / wall time. Also the CPU time per
//      job of the CLI processes (getrusage of the waited-for children) and of the server over the
//      same span (/proc/PID/stat), as slurm_baseline.sh reports them for sbatch and slurmctld.
// Prints a table and, with --json FILE, writes the figures.
#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string cluster_yaml(int nodes) {
  std::string out = "site: bench\nspines:\n";
  constexpr int kNodesPerLeaf = 20;
  constexpr int kLeavesPerSpine = 5;
  int made = 0;
  for (int s = 0; made < nodes; ++s) {
    out += fmt::format("  - name: spine-{}\n    leaves:\n", s);
    for (int l = 0; l < kLeavesPerSpine && made < nodes; ++l) {
      const int count = std::min(kNodesPerLeaf, nodes - made);
      out += fmt::format(
          "      - name: leaf-{}-{}\n        nodes:\n          - name: n{}-{}\n"
          "            count: {}\n            gpu_model: H100\n            gpus: 8\n"
          "            cpus: 96\n            memory_gib: 1024\n",
          s, l, s, l, count);
      made += count;
    }
  }
  return out;
}

// prod may use every GPU but one; backlog one GPU and no more: its first job runs and the others
// wait for quota the whole run (a job that could never run is refused at submission).
std::string tenants_yaml(int nodes) {
  return fmt::format(
      "orgs:\n  - name: bench\n    tenants:\n      - name: prod\n        quota:\n"
      "          H100: {{guaranteed_gpus: {}}}\n      - name: backlog\n        quota:\n"
      "          H100: {{guaranteed_gpus: 1, borrowing_limit_gpus: 0}}\n",
      nodes * 8 - 1);
}

std::string job_json(const std::string& tenant, const std::string& name) {
  return nlohmann::json{{"name", name},
                        {"tenant", tenant},
                        {"gpus_per_task", 1},
                        {"runtime_estimate", "1h"},
                        {"command", {"true"}}}
      .dump();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::ranges::sort(values);
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// CPU seconds (user + system) of this process's children that were waited for.
double children_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// CPU seconds (user + system) of process `pid` so far, from /proc/PID/stat; 0 if unreadable.
double process_cpu_seconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after its closing parenthesis;
  // utime and stime are the 14th and 15th fields of the line.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct Server {
  pid_t pid = -1;
  int port = 0;
  std::string token;
};

Server start_server(const std::string& binary, const std::string& dir) {
  Server s;
  const std::string port_file = dir + "/port";
  s.pid = ::fork();
  if (s.pid == 0) {
    const std::string log = dir + "/server.log";
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    FILE* err = std::freopen(log.c_str(), "a", stderr);
    (void)out;
    (void)err;
    ::execl(binary.c_str(), binary.c_str(), "server", "--config", (dir + "/server.yaml").c_str(),
            "--port-file", port_file.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Ready once the port is known and the first admin token written (on etcd: once it leads).
  for (int i = 0; i < 1000; ++i) {
    const std::string text = read_text(port_file);
    std::string token = read_text(dir + "/tidepool.db.admin-token");
    while (!token.empty() && token.back() == '\n') token.pop_back();
    if (!text.empty() && text.back() == '\n' && !token.empty()) {
      s.port = std::stoi(text);
      s.token = token;
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(s.pid, SIGKILL);
  throw std::runtime_error("the server did not start; see " + dir + "/server.log");
}

// The server's counters that tell how submissions were committed (from its /metrics).
struct ServerFigures {
  double commits = 0;
  double commit_seconds = 0;
  double committed_jobs = 0;
  double passes = 0;
  double pass_seconds = 0;
  double cpu_seconds = 0;  // the server process's CPU time

  ServerFigures operator-(const ServerFigures& before) const {
    return {commits - before.commits,
            commit_seconds - before.commit_seconds,
            committed_jobs - before.committed_jobs,
            passes - before.passes,
            pass_seconds - before.pass_seconds,
            cpu_seconds - before.cpu_seconds};
  }
};

ServerFigures server_figures(const Server& server) {
  ServerFigures figures;
  figures.cpu_seconds = process_cpu_seconds(server.pid);
  httplib::Client client("127.0.0.1", server.port);
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return figures;
  const std::pair<const char*, double*> wanted[] = {
      {"tidepool_store_commit_seconds_count", &figures.commits},
      {"tidepool_store_commit_seconds_sum", &figures.commit_seconds},
      {"tidepool_store_commit_jobs_sum", &figures.committed_jobs},
      {"tidepool_scheduler_pass_duration_seconds_count", &figures.passes},
      {"tidepool_scheduler_pass_duration_seconds_sum", &figures.pass_seconds}};
  std::istringstream lines(res->body);
  std::string line;
  while (std::getline(lines, line)) {
    for (auto [name, value] : wanted) {
      if (line.starts_with(std::string(name) + " ")) {
        *value = std::stod(line.substr(std::string(name).size() + 1));
      }
    }
  }
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Tidepool submission benchmark: API and CLI rates, submit-to-placed latency");
  std::string binary;
  int clients = 8;
  int jobs = 5000;
  int cli_jobs = 1000;
  int nodes = 1000;
  int backlog = 1000;
  std::string json_out;
  std::string etcd;
  app.add_option("--tidepool", binary, "The tidepool binary")->required()->check(CLI::ExistingFile);
  app.add_option("--clients", clients, "Concurrent clients (threads, or CLI processes)")
      ->check(CLI::Range(1, 256));
  app.add_option("--jobs", jobs, "Jobs submitted through the API")->check(CLI::Range(1, 1000000));
  app.add_option("--cli-jobs", cli_jobs, "Jobs submitted through the CLI (0: skip)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--nodes", nodes, "Declared nodes (8 GPUs each)")->check(CLI::Range(1, 100000));
  app.add_option("--backlog", backlog, "Jobs kept pending for the whole run")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--json", json_out, "Write the figures to this JSON file");
  app.add_option("--etcd", etcd,
                 "The server's store: etcd at these comma-separated host:port endpoints (its "
                 "--max-txn-ops raised to 10000), instead of SQLite");
  CLI11_PARSE(app, argc, argv);

  std::string dir = (std::filesystem::temp_directory_path() / "tidepool-bench-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return 1;
  write_text(dir + "/cluster.yaml", cluster_yaml(nodes));
  write_text(dir + "/tenants.yaml", tenants_yaml(nodes));
  write_text(dir + "/server.yaml",
             "cluster: cluster.yaml\ntenants: tenants.yaml\ndatabase: " + dir +
                 "/tidepool.db\nlisten: 127.0.0.1:0\nrate_limit: {per_second: 0}\n"
                 "admission: {max_pending_jobs: 10000000, submissions_per_second: 0}\n"
                 // No agents: the nodes take the jobs without them, as before agents existed.
                 "simulate_unregistered_nodes: true\n" +
                 "admin_token_file: " + dir + "/tidepool.db.admin-token\n" +
                 (etcd.empty() ? std::string()
                               : "store: {kind: etcd, endpoints: [" + etcd +
                                     "], prefix: /bench, max_txn_ops: 10000, "
                                     "max_request_bytes: 33554432}\n"));
  write_text(dir + "/job.yaml",
             "name: cli-job\ntenant: prod\ngpus_per_task: 1\ncommand: [\"true\"]\n");
  Server server = start_server(binary, dir);
  const httplib::Headers auth = {{"Authorization", "Bearer " + server.token}};

  // The backlog: pending for quota for the whole run.
  {
    httplib::Client client("127.0.0.1", server.port);
    for (int i = 0; i < backlog; ++i) {
      auto res = client.Post("/v1/jobs", auth, job_json("backlog", fmt::format("backlog-{}", i)),
                             "application/json");
      if (!res || res->status != 201) {
        fmt::print(stderr, "backlog submission failed: {}\n",
                   res ? fmt::format("{} {}", res->status, res->body)
                       : "no answer (" + httplib::to_string(res.error()) + ")");
        ::kill(server.pid, SIGKILL);
        return 1;
      }
    }
  }

  // The watcher: when each job.started event is seen.
  std::mutex mutex;
  std::map<std::int64_t, std::int64_t> placed_us;  // job id -> when its start was seen
  std::atomic<bool> watching{true};
  std::int64_t since = 0;
  {
    httplib::Client client("127.0.0.1", server.port);
    auto res = client.Get("/v1/events?since=0&timeout=1s&limit=10000", auth);
    if (res && res->status == 200) {
      since = nlohmann::json::parse(res->body)["last_seq"].get<std::int64_t>();
    }
  }
  std::thread watcher([&] {
    httplib::Client client("127.0.0.1", server.port);
    client.set_read_timeout(10, 0);
    while (watching) {
      auto res = client.Get(
          fmt::format("/v1/events?since={}&timeout=1s&limit=10000", since).c_str(), auth);
      const std::int64_t seen = wall_us();
      if (!res || res->status != 200) continue;
      auto body = nlohmann::json::parse(res->body);
      std::lock_guard lock(mutex);
      for (const auto& e : body["events"]) {
        if (e["kind"] == "job.started") placed_us[e["data"]["job"].get<std::int64_t>()] = seen;
      }
      since = body["last_seq"].get<std::int64_t>();
    }
  });

  // 1. The API (the server's figures of its submissions only, not of the backlog's).
  const ServerFigures before_api = server_figures(server);
  std::map<std::int64_t, std::int64_t> sent_us;  // job id -> when its request was sent
  std::atomic<int> accepted{0};
  std::atomic<int> next{0};
  const auto api_start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", server.port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      std::vector<std::pair<std::int64_t, std::int64_t>> mine;
      for (int i = next++; i < jobs; i = next++) {
        httplib::Headers headers = auth;
        headers.emplace("Idempotency-Key", fmt::format("bench-{}", i));
        const std::int64_t sent = wall_us();
        auto res = client.Post("/v1/jobs", headers, job_json("prod", fmt::format("job-{}", i)),
                               "application/json");
        if (!res || res->status != 201) continue;
        ++accepted;
        mine.emplace_back(nlohmann::json::parse(res->body)["id"].get<std::int64_t>(), sent);
      }
      std::lock_guard lock(mutex);
      for (auto [id, sent] : mine) sent_us[id] = sent;
      (void)c;
    });
  }
  for (std::thread& t : threads) t.join();
  const double api_seconds = std::chrono::duration<double>(Clock::now() - api_start).count();
  const ServerFigures api = server_figures(server) - before_api;
  // Let the watcher see the last starts.
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard lock(mutex);
      if (placed_us.size() >= sent_us.size()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  watching = false;
  watcher.join();
  std::vector<double> latency_ms;
  int never_placed = 0;
  for (auto [id, sent] : sent_us) {
    auto it = placed_us.find(id);
    if (it == placed_us.end()) {
      ++never_placed;
      continue;
    }
    latency_ms.push_back(static_cast<double>(it->second - sent) / 1000.0);
  }
  int pending_backlog = 0;
  {
    httplib::Client client("127.0.0.1", server.port);
    auto res = client.Get("/v1/queues", auth);
    if (res && res->status == 200) {
      const auto body = nlohmann::json::parse(res->body);
      for (const auto& q : body["queues"]) {
        if (q.value("tenant", std::string()) == "backlog") pending_backlog += q.value("pending", 0);
      }
    }
  }

  // 2. The CLI: one process per submission.
  double cli_seconds = 0;
  int cli_accepted = 0;
  double cli_cpu_ms = 0;     // per job, in the CLI processes
  double server_cpu_ms = 0;  // per CLI job, in the server
  if (cli_jobs > 0) {
    const std::string url = fmt::format("http://127.0.0.1:{}", server.port);
    const std::string spec = dir + "/job.yaml";
    // Each submission is its own process, started with posix_spawn (vfork-like): a fork of this
    // multithreaded bench would copy its page tables and cost more than the command it starts.
    std::vector<std::string> words = {binary, "submit",  spec,        "--server",
                                      url,    "--token", server.token};
    std::vector<char*> args;
    for (std::string& word : words) args.push_back(word.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    std::atomic<int> cli_next{0};
    std::atomic<int> cli_ok{0};
    const double children_before = children_cpu_seconds();
    const double server_before = process_cpu_seconds(server.pid);
    const auto cli_start = Clock::now();
    std::vector<std::thread> runners;
    for (int c = 0; c < clients; ++c) {
      runners.emplace_back([&] {
        for (int i = cli_next++; i < cli_jobs; i = cli_next++) {
          pid_t pid = 0;
          if (::posix_spawn(&pid, binary.c_str(), &quiet, nullptr, args.data(), environ) != 0) {
            continue;
          }
          int status = 0;
          ::waitpid(pid, &status, 0);
          if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ++cli_ok;
        }
      });
    }
    for (std::thread& t : runners) t.join();
    posix_spawn_file_actions_destroy(&quiet);
    cli_seconds = std::chrono::duration<double>(Clock::now() - cli_start).count();
    cli_accepted = cli_ok;
    cli_cpu_ms = 1000 * (children_cpu_seconds() - children_before) / cli_jobs;
    server_cpu_ms = 1000 * (process_cpu_seconds(server.pid) - server_before) / cli_jobs;
  }

  ::kill(server.pid, SIGTERM);
  int status = 0;
  ::waitpid(server.pid, &status, 0);
  std::filesystem::remove_all(dir);

  const double api_rate = accepted / api_seconds;
  const double cli_rate = cli_jobs > 0 ? cli_accepted / cli_seconds : 0;
  const double p50 = percentile(latency_ms, 0.50);
  const double p99 = percentile(latency_ms, 0.99);
  fmt::print("tidepool ({}): {} nodes, {} pending jobs throughout, {} clients\n",
             etcd.empty() ? "SQLite store" : "etcd store", nodes, pending_backlog, clients);
  fmt::print("  API: {} of {} jobs in {:.2f} s: {:.0f} jobs/s (durable)\n", accepted.load(), jobs,
             api_seconds, api_rate);
  fmt::print("  submit-to-placed: p50 {:.1f} ms, p99 {:.1f} ms ({} jobs, {} never seen placed)\n",
             p50, p99, latency_ms.size(), never_placed);
  const double jobs_per_commit = api.commits > 0 ? api.committed_jobs / api.commits : 0;
  const double commit_ms = api.commits > 0 ? 1000 * api.commit_seconds / api.commits : 0;
  const double server_cpu_ms_per_job = 1000 * api.cpu_seconds / std::max(1, jobs);
  if (api.commits > 0 && api.passes > 0) {
    fmt::print(
        "  server, API submissions: {:.0f} commits, {:.1f} jobs each, {:.2f} ms each; {:.0f} "
        "passes, {:.2f} ms each; {:.2f} ms CPU per job\n",
        api.commits, jobs_per_commit, commit_ms, api.passes, 1000 * api.pass_seconds / api.passes,
        server_cpu_ms_per_job);
  }
  if (cli_jobs > 0) {
    fmt::print("  CLI: {} of {} jobs in {:.2f} s: {:.0f} jobs/s (one process each)\n", cli_accepted,
               cli_jobs, cli_seconds, cli_rate);
    fmt::print("  CLI CPU per job: {:.2f} ms in `tidepool submit`, {:.2f} ms in the server\n",
               cli_cpu_ms, server_cpu_ms);
  }
  if (!json_out.empty()) {
    write_text(json_out, nlohmann::json{{"system", "tidepool"},
                                        {"store", etcd.empty() ? "sqlite" : "etcd"},
                                        {"nodes", nodes},
                                        {"pending_backlog", pending_backlog},
                                        {"clients", clients},
                                        {"api_jobs", jobs},
                                        {"api_accepted", accepted.load()},
                                        {"api_seconds", api_seconds},
                                        {"api_jobs_per_second", api_rate},
                                        {"placed_p50_ms", p50},
                                        {"placed_p99_ms", p99},
                                        {"never_placed", never_placed},
                                        {"api_commits", api.commits},
                                        {"api_jobs_per_commit", jobs_per_commit},
                                        {"api_commit_ms", commit_ms},
                                        {"api_server_cpu_ms_per_job", server_cpu_ms_per_job},
                                        {"cli_jobs", cli_jobs},
                                        {"cli_accepted", cli_accepted},
                                        {"cli_seconds", cli_seconds},
                                        {"cli_jobs_per_second", cli_rate},
                                        {"cli_cpu_ms_per_job", cli_cpu_ms},
                                        {"server_cpu_ms_per_cli_job", server_cpu_ms}}
                             .dump(2));
  }
  return accepted == jobs && (cli_jobs == 0 || cli_accepted == cli_jobs) ? 0 : 1;
}
