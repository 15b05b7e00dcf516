// bench/http_slowloris: the latency of GET /healthz and of a job submission while attackers hold
// connections to the server: --idle connections that send nothing and --slow ones that trickle
// a request head one byte per second, spread over the loopback addresses 127.0.0.2..127.0.0.9
// (so that the per-address cap does not turn them away). It starts `tidepool server` (the binary
// given) in a temporary folder on 127.0.0.1 with the example cluster and tenants of the source
// tree, then measures --samples probes of each from 127.0.0.1: /healthz on a fresh connection
// each time, and POST /v1/jobs (one GPU, admin token) on one keep-alive connection.
// Prints p50, p99 and the worst, in milliseconds.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/http_test_socket.h"

namespace {

using Clock = std::chrono::steady_clock;
using tidepool::test_support::TestSocket;
using namespace std::chrono_literals;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void report(const std::string& what, std::vector<double> ms, int failures) {
  std::ranges::sort(ms);
  auto at = [&](double q) {
    return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * ms.size()))];
  };
  fmt::print("{:<28} n={:<5} p50={:8.2f} ms  p99={:8.2f} ms  max={:8.2f} ms  failed={}\n", what,
             ms.size(), at(0.50), at(0.99), ms.empty() ? 0.0 : ms.back(), failures);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HTTP latency under idle and slow connections (slowloris)"};
  std::string binary;
  std::string source;
  int idle = 800;
  int slow = 200;
  int samples = 200;
  app.add_option("--tidepool", binary, "the tidepool binary")->required();
  app.add_option("--source", source, "the source tree (for data/clusters and data/tenants)")
      ->required();
  app.add_option("--idle", idle, "connections that send nothing");
  app.add_option("--slow", slow, "connections that trickle a head, a byte a second");
  app.add_option("--samples", samples, "probes of each kind");
  CLI11_PARSE(app, argc, argv);

  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("tidepool-slowloris-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string config = (dir / "server.yaml").string();
  std::ofstream(config) << fmt::format(
      "cluster: {0}/data/clusters/example.yaml\ntenants: {0}/data/tenants/example.yaml\n"
      "database: {1}/tidepool.db\nlisten: 127.0.0.1:0\nrate_limit: {{per_second: 0}}\n",
      source, dir.string());
  const std::string port_file = (dir / "port").string();
  const pid_t server = ::fork();
  if (server == 0) {
    const std::string log = (dir / "server.log").string();
    if (std::freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(127);
    ::dup2(STDOUT_FILENO, STDERR_FILENO);
    ::execl(binary.c_str(), binary.c_str(), "server", "--config", config.c_str(), "--port-file",
            port_file.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int port = 0;
  for (int i = 0; i < 400 && port == 0; ++i) {
    const std::string text = read_text(port_file);
    if (!text.empty() && text.back() == '\n') port = std::stoi(text);
    std::this_thread::sleep_for(50ms);
  }
  std::string token = read_text((dir / "tidepool.db.admin-token").string());
  while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
  if (port == 0 || token.empty()) {
    fmt::print(stderr, "http_slowloris: the server did not start; see {}/server.log\n",
               dir.string());
    ::kill(server, SIGKILL);
    ::waitpid(server, nullptr, 0);
    return 1;
  }

  std::vector<TestSocket> attackers;
  for (int i = 0; i < idle + slow; ++i) {
    attackers.emplace_back(port, fmt::format("127.0.0.{}", 2 + i % 8));
    if (i >= idle) attackers.back().send("POST /v1/jobs HTTP/1.1\r\n");
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      for (int i = idle; i < idle + slow; ++i) attackers[i].send("X");
      for (int t = 0; t < 20 && !done; ++t) std::this_thread::sleep_for(50ms);
    }
  });
  fmt::print("{} idle and {} slow connections held on 127.0.0.1:{}\n", idle, slow, port);

  std::vector<double> health;
  int health_failed = 0;
  for (int i = 0; i < samples; ++i) {
    const auto start = Clock::now();
    TestSocket probe(port);
    probe.send("GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n");
    if (probe.read_response(30s).status == 200) {
      health.push_back(ms_since(start));
    } else {
      ++health_failed;
    }
  }
  std::vector<double> submit;
  int submit_failed = 0;
  {
    std::optional<TestSocket> client(std::in_place, port);
    const std::string job =
        R"({"name": "bench", "tenant": "vision", "queue": "default",)"
        R"( "gpus_per_task": 1, "gpu_model": ["H100"], "runtime_estimate": "1h"})";
    for (int i = 0; i < samples; ++i) {
      const auto start = Clock::now();
      client->send(
          fmt::format("POST /v1/jobs HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {}"
                      "\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
                      token, job.size(), job));
      if (client->read_response(30s).status == 201) {
        submit.push_back(ms_since(start));
      } else {
        ++submit_failed;
        client.emplace(port);
      }
    }
  }
  done = true;
  trickle.join();
  report("GET /healthz (new conn.)", health, health_failed);
  report("POST /v1/jobs (keep-alive)", submit, submit_failed);
  attackers.clear();
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
