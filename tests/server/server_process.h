// Starts the real `tidepool server` for a test, on 127.0.0.1 and a free port, in a folder of its
// own, and ends it (SIGTERM, or SIGKILL for the crash test). Header only; tests only.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agent/test_processes.h"
#include "testing/temp_dir.h"

namespace tidepool::test_support {

// The tidepool binary under test: $TIDEPOOL_BINARY, else the one this test was built with.
inline std::string tidepool_binary() {
  const char* path = std::getenv("TIDEPOOL_BINARY");
  return path != nullptr ? path : TIDEPOOL_BINARY_PATH;
}

inline std::string source_tree() {
  const char* path = std::getenv("TIDEPOOL_SOURCE_DIR");
  if (path == nullptr) throw std::runtime_error("TIDEPOOL_SOURCE_DIR is not set");
  return path;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// A server configuration on the example cluster and the given tenants file (the example's by
// default), with `extra` YAML lines appended. Its nodes take jobs without agents
// (simulate_unregistered_nodes): tests of the API alone.
inline std::string write_server_config(const TempDir& dir, const std::string& extra = "",
                                       const std::string& tenants = "") {
  const std::string config = dir.file("server.yaml");
  write_text(config,
             "cluster: " + source_tree() + "/data/clusters/example.yaml\n" + "tenants: " +
                 (tenants.empty() ? source_tree() + "/data/tenants/example.yaml" : tenants) + "\n" +
                 "database: " + dir.file("tidepool.db") +
                 "\nlisten: 127.0.0.1:0\nsimulate_unregistered_nodes: true\n" + extra);
  return config;
}

// Starts `args` (the program first) with stdout and stderr appended to `log_path`; its pid.
inline pid_t spawn_logged(std::vector<std::string> args, const std::string& log_path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(log, 1);
    ::dup2(log, 2);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Sends `sig` to `pid` (if it is > 0), waits for it and sets it to -1; its exit status, or -1.
inline int signal_and_reap(pid_t& pid, int sig) {
  if (pid <= 0) return -1;
  ::kill(pid, sig);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class ServerProcess {
 public:
  ServerProcess(const TempDir& dir, std::string config, std::vector<std::string> extra_args = {})
      : dir_(dir), config_(std::move(config)), extra_args_(std::move(extra_args)) {}
  ~ServerProcess() {
    if (pid_ > 0) kill_hard();
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Probe over HTTPS, trusting this certificate (the server runs with --tls-cert).
  void use_tls(std::string ca_cert) { ca_cert_ = std::move(ca_cert); }

  // Starts the server and waits until it answers /readyz; returns false if it exited or did not
  // become ready within 20 s (its log is in log()).
  bool start() {
    const std::string port_file = dir_.file("port");
    std::filesystem::remove(port_file);
    log_path_ = dir_.file("server.log");
    std::vector<std::string> args = {tidepool_binary(), "server",      "--config",
                                     config_,           "--port-file", port_file};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    pid_ = spawn_logged(std::move(args), log_path_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      const std::string text = read_text(port_file);
      if (!text.empty() && text.back() == '\n') {
        port_ = std::stoi(text);
        if (ready()) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // SIGTERM, then waits; returns the exit status (or -1).
  int terminate() { return signal_and_reap(pid_, SIGTERM); }
  void kill_hard() { signal_and_reap(pid_, SIGKILL); }

  [[nodiscard]] bool ready() const {
    if (!ca_cert_.empty()) {
      httplib::SSLClient client("127.0.0.1", port_);
      client.set_ca_cert_path(ca_cert_.c_str());
      auto res = client.Get("/readyz");
      return res && res->status == 200;
    }
    httplib::Client client("127.0.0.1", port_);
    auto res = client.Get("/readyz");
    return res && res->status == 200;
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string log() const { return read_text(log_path_); }
  // The first admin token, written by the server at its first start.
  [[nodiscard]] std::string admin_token() const {
    std::string text = read_text(dir_.file("tidepool.db.admin-token"));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  }

 private:
  const TempDir& dir_;
  std::string config_;
  std::vector<std::string> extra_args_;
  std::string ca_cert_;
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// A JSON client of one server with one token.
class ApiClient {
 public:
  ApiClient(int port, std::string token) : client_("127.0.0.1", port), token_(std::move(token)) {
    client_.set_read_timeout(60, 0);
  }

  struct Answer {
    int status = 0;  // 0: no answer (connection failed)
    nlohmann::json body;
  };

  Answer get(const std::string& path) { return answer(client_.Get(path.c_str(), headers())); }
  Answer del(const std::string& path) { return answer(client_.Delete(path.c_str(), headers())); }
  Answer post(const std::string& path, const std::string& body,
              const std::string& type = "application/json", const std::string& key = "") {
    auto h = headers();
    if (!key.empty()) h.emplace("Idempotency-Key", key);
    return answer(client_.Post(path.c_str(), h, body, type.c_str()));
  }
  Answer put(const std::string& path, const std::string& body) {
    return answer(client_.Put(path.c_str(), headers(), body, "application/json"));
  }

 private:
  httplib::Headers headers() const {
    httplib::Headers h;
    if (!token_.empty()) h.emplace("Authorization", "Bearer " + token_);
    return h;
  }
  static Answer answer(const httplib::Result& res) {
    if (!res) return {};
    return {res->status, nlohmann::json::parse(res->body, nullptr, false)};
  }

  httplib::Client client_;
  std::string token_;
};

}  // namespace tidepool::test_support
