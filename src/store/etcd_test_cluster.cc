#include "store/etcd_test_cluster.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <utility>

#include "store/etcd/etcd_rpc.grpc.pb.h"
#include "store/etcd_store.h"

namespace tidepool::test_support {
namespace {

constexpr const char* kClusterField = "etcd test cluster";

std::string find_etcd() {
  const char* path = std::getenv("PATH");
  std::stringstream folders(path != nullptr ? path : "/usr/bin:/bin");
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    const std::filesystem::path candidate = std::filesystem::path(folder) / "etcd";
    if (!folder.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

std::string url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

}  // namespace

// Ports the kernel hands out for binding 0, all held until every one is chosen so they differ.
Result<std::vector<int>> free_ports(std::size_t count) {
  std::vector<int> sockets;
  std::vector<int> ports;
  Result<std::vector<int>> result;
  for (std::size_t i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      if (fd >= 0) ::close(fd);
      result = fail(kClusterField, "could not pick a free port on 127.0.0.1");
      break;
    }
    sockets.push_back(fd);
    ports.push_back(ntohs(address.sin_port));
  }
  for (const int fd : sockets) ::close(fd);
  if (!result) return result;
  return ports;
}

#if defined(__SANITIZE_THREAD__)
// gRPC and Abseil come from Debian's packages, built without ThreadSanitizer: it cannot see their
// own locks and atomics, so it reports races inside them that are not there. Suppressed for those
// libraries only; a race in Tidepool's code, the store's included, is still reported. One more:
// gRPC's shared_ptr releases bind to the test binary's instrumented copy of libstdc++'s
// _M_release_last_use (the executable's symbol interposes the library's), which then races with
// gRPC's uninstrumented writes to the same control block, with no Tidepool frame in the report.
extern "C" const char* __tsan_default_suppressions() {
  return "race:libabsl_*\n"
         "race:libgrpc*\n"
         "race:libgpr*\n"
         "race:_Sp_counted_base<*>::_M_release_last_use\n";
}
#endif

EtcdTestCluster::EtcdTestCluster(std::string binary, std::vector<Member> members)
    : binary_(std::move(binary)), members_(std::move(members)) {}

Result<std::unique_ptr<EtcdTestCluster>> EtcdTestCluster::start(int members,
                                                                std::chrono::milliseconds timeout) {
  return start(members, timeout, false);
}

Result<std::unique_ptr<EtcdTestCluster>> EtcdTestCluster::start_tls(
    int members, std::chrono::milliseconds timeout) {
  return start(members, timeout, true);
}

Result<std::unique_ptr<EtcdTestCluster>> EtcdTestCluster::start(int members,
                                                                std::chrono::milliseconds timeout,
                                                                bool tls) {
  std::string binary = find_etcd();
  if (binary.empty()) {
    return fail(kClusterField,
                "the etcd binary is not on PATH: run scripts/setup as root (it installs the "
                "Debian package etcd-server) to run the etcd store's tests");
  }
  if (members < 1) return fail(kClusterField, "a cluster needs at least one member");
  auto ports = free_ports(2 * static_cast<std::size_t>(members));
  if (!ports) return std::unexpected(ports.error());
  std::vector<Member> list;
  for (int i = 0; i < members; ++i) {
    list.push_back(Member{.name = "member-" + std::to_string(i),
                          .client_port = (*ports)[2 * static_cast<std::size_t>(i)],
                          .peer_port = (*ports)[2 * static_cast<std::size_t>(i) + 1]});
  }
  std::unique_ptr<EtcdTestCluster> cluster(new EtcdTestCluster(std::move(binary), std::move(list)));
  if (tls) {
    if (auto made = cluster->make_certificate(); !made) return std::unexpected(made.error());
  }
  // All members first: each waits for the others to form a quorum.
  for (Member& member : cluster->members_) {
    if (auto spawned = cluster->spawn(member, true); !spawned) {
      return std::unexpected(spawned.error());
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (Member& member : cluster->members_) {
    if (auto up = cluster->wait_until_answering(member, deadline); !up) {
      return std::unexpected(up.error());
    }
  }
  return cluster;
}

EtcdTestCluster::~EtcdTestCluster() {
  for (Member& member : members_) stop(member);
}

Result<void> EtcdTestCluster::make_certificate() {
  const EtcdTls tls{.ca_file = dir_.file("etcd.crt"),
                    .cert_file = dir_.file("etcd.crt"),
                    .key_file = dir_.file("etcd.key")};
  const std::string log = dir_.file("openssl.log");
  const std::string command = fmt::format(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
      "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout '{}' -out '{}' > '{}' 2>&1",
      tls.key_file, tls.cert_file, log);
  if (std::system(command.c_str()) != 0) {
    std::ifstream in(log);
    const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return fail(kClusterField,
                "the openssl command could not make a certificate (scripts/setup "
                "installs it): " +
                    said);
  }
  tls_ = tls;
  return {};
}

Result<std::size_t> EtcdTestCluster::raft_leader(std::chrono::milliseconds timeout) const {
  if (tls_) return fail(kClusterField, "raft_leader() asks plaintext clusters only");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::uint64_t> ids;  // each member's raft id
    std::uint64_t leader = 0;
    why.clear();
    for (const std::string& endpoint : endpoints()) {
      auto stub = etcdserverpb::Maintenance::NewStub(
          grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      etcdserverpb::StatusResponse status;
      const grpc::Status answered = stub->Status(&context, etcdserverpb::StatusRequest{}, &status);
      if (!answered.ok()) {
        why = endpoint + ": Status: " + answered.error_message();
      } else if (leader != 0 && status.leader() != leader) {
        why = "the members do not agree on their leader yet";
      }
      if (!why.empty()) break;
      leader = status.leader();
      ids.push_back(status.header().member_id());
    }
    const auto found = std::find(ids.begin(), ids.end(), leader);
    if (why.empty() && leader != 0 && found != ids.end()) {
      return static_cast<std::size_t>(found - ids.begin());
    }
    if (why.empty()) why = "no member leads";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return fail(kClusterField, "no raft leader that every member names: " + why);
}

std::string EtcdTestCluster::client_url(int port) const {
  return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port);
}

std::vector<std::string> EtcdTestCluster::endpoints() const {
  std::vector<std::string> endpoints;
  for (const Member& member : members_) {
    endpoints.push_back("127.0.0.1:" + std::to_string(member.client_port));
  }
  return endpoints;
}

Result<void> EtcdTestCluster::stop_member(std::size_t index) {
  if (index >= members_.size()) return fail(kClusterField, "no such member");
  stop(members_[index]);
  return {};
}

Result<void> EtcdTestCluster::pause_member(std::size_t index, bool paused) {
  if (index >= members_.size()) return fail(kClusterField, "no such member");
  const Member& member = members_[index];
  if (member.pid <= 0) return fail(kClusterField, member.name + " is not running");
  if (::kill(member.pid, paused ? SIGSTOP : SIGCONT) != 0) {
    return fail(kClusterField,
                fmt::format("cannot signal {}: {}", member.name, std::strerror(errno)));
  }
  return {};
}

Result<void> EtcdTestCluster::start_member(std::size_t index) {
  if (index >= members_.size()) return fail(kClusterField, "no such member");
  Member& member = members_[index];
  if (member.pid > 0) return fail(kClusterField, member.name + " is running");
  if (auto spawned = spawn(member, false); !spawned) return spawned;
  return wait_until_answering(member, std::chrono::steady_clock::now() + std::chrono::seconds(30));
}

Result<void> EtcdTestCluster::restart_member(std::size_t index) {
  if (auto stopped = stop_member(index); !stopped) return stopped;
  return start_member(index);
}

Result<void> EtcdTestCluster::spawn(Member& member, bool fresh) {
  std::string initial_cluster;
  for (const Member& other : members_) {
    if (!initial_cluster.empty()) initial_cluster += ',';
    initial_cluster += other.name + "=" + url(other.peer_port);
  }
  std::vector<std::string> arguments = {
      binary_,
      "--name=" + member.name,
      "--data-dir=" + dir_.file(member.name),
      "--listen-client-urls=" + client_url(member.client_port),
      "--advertise-client-urls=" + client_url(member.client_port),
      "--listen-peer-urls=" + url(member.peer_port),
      "--initial-advertise-peer-urls=" + url(member.peer_port),
      "--initial-cluster=" + initial_cluster,
      "--initial-cluster-state=" + std::string(fresh ? "new" : "existing"),
      "--initial-cluster-token=tidepool-test",
      "--logger=zap",
      "--log-outputs=stderr",
  };
  if (tls_) {
    arguments.insert(arguments.end(),
                     {"--cert-file=" + tls_->cert_file, "--key-file=" + tls_->key_file,
                      "--client-cert-auth", "--trusted-ca-file=" + tls_->ca_file});
  }
  std::vector<char*> argv;
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  const std::string log = dir_.file(member.name + ".log");
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) return fail(kClusterField, "could not create " + log);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec. The member dies with the test process.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (pid < 0) return fail(kClusterField, "fork failed for " + binary_);
  member.pid = pid;
  return {};
}

Result<void> EtcdTestCluster::wait_until_answering(Member& member,
                                                   std::chrono::steady_clock::time_point deadline) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(member.client_port);
  std::string last_error;
  auto pause = std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(member.pid, &status, WNOHANG) == member.pid) {
      member.pid = -1;  // reaped: never signal a PID that may now be another process's
      return fail(kClusterField, "etcd " + member.name + " exited while starting; its log ends:\n" +
                                     log_tail(member));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    EtcdStoreOptions options;
    options.endpoints = {endpoint};
    options.tls = tls_;
    options.prefix = "/tidepool-test-probe";
    options.dial_timeout = std::max(std::chrono::milliseconds(1), left);
    auto store = open_etcd_store(options);
    if (store) return {};
    last_error = store.error().message();
    // A refusal (no leader yet) comes back at once: back off a little before asking again.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  return fail(kClusterField, "etcd " + member.name + " did not answer in time (" + last_error +
                                 "); its log ends:\n" + log_tail(member));
}

void EtcdTestCluster::stop(Member& member) {
  if (member.pid <= 0) return;
  ::kill(member.pid, SIGTERM);
  ::kill(member.pid, SIGCONT);  // a paused member ends too
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  auto pause = std::chrono::milliseconds(5);
  while (::waitpid(member.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(member.pid, SIGKILL);
      ::waitpid(member.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  member.pid = -1;
}

std::string EtcdTestCluster::log_tail(const Member& member) const {
  std::ifstream in(dir_.file(member.name + ".log"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr std::size_t kTail = 3000;
  return text.size() > kTail ? text.substr(text.size() - kTail) : text;
}

}  // namespace tidepool::test_support
