#include "agent/replica_scraper.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <string_view>

#include "agent/system_reason.h"
#include "api/http_response.h"
#include "api/owned_fd.h"

namespace tidepool {
namespace {

// Milliseconds left until `deadline`, at least 0.
int left_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

// Waits until `fd` is ready for `events` or `deadline` passes; false when it passed.
bool wait_for(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd waiting{.fd = fd, .events = events, .revents = 0};
    const int ready = ::poll(&waiting, 1, left_ms(deadline));
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

// Of the samples of `metrics`, only those of the metrics `names` reads (a name, or one with a
// suffix: a histogram's _bucket): all that the next scrape's figures need of this one.
Exposition named_only(Exposition metrics, const ReplicaMetricNames& names) {
  const std::array<const std::string*, 8> named{&names.requests_waiting,   &names.requests_running,
                                                &names.requests_completed, &names.latency_sum,
                                                &names.latency_count,      &names.latency_histogram,
                                                &names.queue_time_sum,     &names.queue_time_count};
  std::erase_if(metrics.samples, [&](const MetricSample& sample) {
    return std::ranges::none_of(named, [&](const std::string* name) {
      return !name->empty() && sample.name.starts_with(*name);
    });
  });
  metrics.help.clear();
  return metrics;
}

}  // namespace

Result<std::string> read_replica_metrics_file(const std::string& path, int owner_uid) {
  const auto refuse = [&](const std::string& why) -> Result<std::string> {
    return fail("metrics_file", fmt::format("{}: {}", path, why));
  };
  if (!path.starts_with('/')) return refuse("not an absolute path");
  // O_PATH opens nothing: a device is not opened (which may do something) nor a FIFO waited on
  // before the checks below; O_NOFOLLOW: a link in the last component is itself what is checked.
  const OwnedFd where(::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (where.get() < 0) return refuse(system_reason(errno));
  struct stat info {};
  if (::fstat(where.get(), &info) != 0) return refuse(system_reason(errno));
  if (S_ISLNK(info.st_mode)) return refuse("a symbolic link, which is not followed");
  if (!S_ISREG(info.st_mode)) return refuse("not a regular file");
  if (owner_uid >= 0 && info.st_uid != static_cast<uid_t>(owner_uid)) {
    return refuse(
        fmt::format("owned by uid {}, not by the replica's uid {}", info.st_uid, owner_uid));
  }
  if (static_cast<std::uint64_t>(info.st_size) > kMaxExpositionBytes) {
    return refuse(fmt::format("{} bytes, more than the {} MiB a scrape may hold", info.st_size,
                              kMaxExpositionBytes >> 20));
  }
  // The very file checked, opened for reading through its descriptor.
  const OwnedFd file(::open(fmt::format("/proc/self/fd/{}", where.get()).c_str(),
                            O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) return refuse("cannot be reopened to read: " + system_reason(errno));
  std::string text(static_cast<std::size_t>(info.st_size) + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(file.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(system_reason(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
    if (got == text.size() && text.size() <= kMaxExpositionBytes) {
      text.resize(std::min(text.size() * 2, kMaxExpositionBytes + 1), '\0');  // it grew
    }
  }
  if (got > kMaxExpositionBytes) {
    return refuse(fmt::format("grew past the {} MiB a scrape may hold", kMaxExpositionBytes >> 20));
  }
  text.resize(got);
  return text;
}

Result<std::string> get_replica_metrics(int port, std::chrono::milliseconds timeout) {
  const auto refuse = [&](const std::string& why) -> Result<std::string> {
    return fail("port", fmt::format("http://127.0.0.1:{}/metrics: {}", port, why));
  };
  if (port < 1 || port > 65'535) return refuse("not a port");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const OwnedFd socket(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (socket.get() < 0) return refuse(system_reason(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    if (errno != EINPROGRESS) return refuse(system_reason(errno));
    if (!wait_for(socket.get(), POLLOUT, deadline)) return refuse("no connection in time");
    int error = 0;
    socklen_t size = sizeof(error);
    if (::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
    if (error != 0) return refuse(system_reason(error));
  }
  const std::string request = fmt::format(
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/plain;version=0.0.4\r\n"
      "User-Agent: tidepool-agent\r\nConnection: close\r\n\r\n",
      port);
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n =
        ::send(socket.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return refuse(system_reason(errno));
    }
    if (!wait_for(socket.get(), POLLOUT, deadline)) {
      return refuse("the request could not be sent in time");
    }
  }
  // What the reply may take: its head, and the body with some room for chunked coding's framing.
  constexpr std::size_t kMaxReplyBytes = kMaxExpositionBytes + kMaxResponseHeaderBytes;
  std::string received;
  std::array<char, 64 * 1024> buffer{};
  // The reply is parsed when what came doubled since the last try (or at the end), so that a
  // large one is not parsed again at every read; the replica closes the connection after it.
  std::size_t parse_at = 0;
  std::optional<HttpResponse> response;
  bool at_end = false;
  for (;;) {
    const bool ready = wait_for(socket.get(), POLLIN, deadline);
    ssize_t n = 0;
    if (ready) {
      n = ::recv(socket.get(), buffer.data(), buffer.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n < 0) return refuse(system_reason(errno));
      received.append(buffer.data(), static_cast<std::size_t>(n));
      at_end = n == 0;
      if (received.size() > kMaxReplyBytes) {
        return refuse(fmt::format("the reply is larger than the {} MiB a scrape may hold",
                                  kMaxExpositionBytes >> 20));
      }
    }
    if (!ready || at_end || received.size() >= parse_at) {
      auto parsed = parse_http_response(received, at_end);
      if (!parsed) return refuse(parsed.error().reason);
      if (*parsed) {
        response = std::move((*parsed)->response);
        break;
      }
      if (at_end) return refuse("the connection closed before the whole reply");
      if (!ready) return refuse(fmt::format("no whole reply within {} ms", timeout.count()));
      parse_at = received.size() * 2;
    }
  }
  if (response->status != 200) return refuse(fmt::format("HTTP status {}", response->status));
  if (response->body.size() > kMaxExpositionBytes) {
    return refuse(fmt::format("the body is larger than the {} MiB a scrape may hold",
                              kMaxExpositionBytes >> 20));
  }
  return std::move(response->body);
}

Result<std::string> fetch_replica_metrics(const ReplicaAssignment& replica, int task_uid) {
  if (!replica.metrics_file.empty()) {
    return read_replica_metrics_file(replica.metrics_file, task_uid);
  }
  if (replica.port > 0) return get_replica_metrics(replica.port, kReplicaScrapeTimeout);
  return fail("replica", "neither a metrics file nor a port to read");
}

void ReplicaScraper::scrape(std::int64_t job, std::int64_t run, const ReplicaAssignment& replica,
                            int task_uid, std::int64_t now_ms) {
  Replica& known = replicas_[{job, run}];
  known.figures = {};
  if (replica.metrics_file.empty() && replica.port <= 0) return;  // nothing to read
  auto names = replica_metric_names(replica.metrics_preset, replica.metric_names);
  if (!names) return failed(job, run, known, names.error());
  auto text = fetch_(replica, task_uid);
  if (!text) return failed(job, run, known, text.error());
  auto metrics = parse_exposition(*text);
  if (!metrics) {
    // The field is the line of the exposition; its reason shows no more than a short excerpt.
    return failed(job, run, known, Error{.field = "metrics", .reason = metrics.error().message()});
  }
  ReplicaScrape current{.taken_at_ms = now_ms, .metrics = std::move(*metrics)};
  known.figures = known.previous ? extract_replica_figures(*names, *known.previous, current)
                                 : extract_replica_figures(*names, current);
  current.metrics = named_only(std::move(current.metrics), *names);
  known.previous = std::move(current);
  if (!known.failure.empty()) {
    log_(fmt::format("job {} run {}: the replica's metrics are read again", job, run));
    known.failure.clear();
  }
}

void ReplicaScraper::failed(std::int64_t job, std::int64_t run, Replica& replica,
                            const Error& error) {
  replica.figures = {};
  const std::string why = error.message();
  if (why == replica.failure) return;
  replica.failure = why;
  log_(
      fmt::format("job {} run {}: the replica's metrics cannot be read ({}); it is reported "
                  "without figures until they can",
                  job, run, why));
}

std::vector<ReplicaReport> ReplicaScraper::reports() const {
  std::vector<ReplicaReport> out;
  out.reserve(replicas_.size());
  for (const auto& [key, replica] : replicas_) {
    out.push_back(ReplicaReport{.job = key.first, .run = key.second, .figures = replica.figures});
  }
  return out;
}

void ReplicaScraper::forget(std::int64_t job, std::int64_t run) { replicas_.erase({job, run}); }

std::vector<std::pair<std::int64_t, std::int64_t>> ReplicaScraper::known() const {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  out.reserve(replicas_.size());
  for (const auto& [key, replica] : replicas_) out.push_back(key);
  return out;
}

}  // namespace tidepool
