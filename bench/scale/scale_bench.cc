// bench/scale: the scale of one leader. Plays a pool's agents and its users against a running
// `tidepool server` (bench/scale/run.sh starts it on a three-member etcd) and measures how the
// leader holds up: heartbeat answer latency, scheduling pass time, store commit time, and the
// server's CPU and memory.
//
// It reads the pool's nodes from the cluster file the server was started with (config/
// cluster_file.h, the server's own reader) and then, agents and users all on one thread with
// Boost.Asio coroutines:
//   1. creates an agent token per node (POST /v1/tokens, --setup-clients at once);
//   2. registers every node with its own token and its own kept-alive connection, as
//      `tidepool agent` does (POST /v1/nodes/{name}/register: 8 devices, its leaf and spine), and
//      from then on has each agent send a heartbeat every --period (api/agent_wire.h: running
//      jobs, healthy GPUs, one GpuReading per GPU), the agents' beats spread evenly over the
//      period. Each agent reports the jobs its last heartbeat reply assigned to it;
//   3. with --pending capacity (the default), fills the pool first: one 8-GPU job per node
//      (tenant "prod", job arrays of --array-size), and waits until every one runs; with
//      --pending quota, fills nothing;
//   4. submits --jobs one-GPU jobs that stay pending (arrays of --array-size, each with an
//      Idempotency-Key, one submission at a time): with capacity, of "prod", for GPUs (the pool
//      is full); with quota, of tenant "backlog", whose quota is one GPU and which may not borrow.
//      After each tenth of them it reads /metrics and the server's memory: the mean pass time
//      and RSS as the backlog grows;
//   5. lets --settle seconds pass, then measures for --window seconds: every heartbeat sent in
//      the window and its answer latency (from the request's first byte written to the reply's
//      last byte read), the delta of the server's histograms over the window (pass time, commit
//      time, the server's own heartbeat handling time), a GET /healthz every 50 ms from another
//      thread (answered by the server's I/O threads without its loop), the CPU time of the
//      server, of the etcd members given by --etcd-pids, of the bench and of the whole machine
//      (/proc/PID/stat, /proc/stat), and the server's VmRSS and VmHWM (/proc/PID/status).
// Prints the figures and, with --json FILE, writes them.
//
// Each agent keeps one connection open, as the agent does; the agents' connections come from
// several loopback addresses (127.1.x.y), --agents-per-address each, so that the server's limit
// of connections per peer address (256) holds as it would for agents on their own machines.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/agent_wire.h"
#include "config/cluster_file.h"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;
using tidepool::ClusterSpec;
using tidepool::LeafSpec;
using tidepool::NodeSpec;

double ms_between(Clock::time_point from, Clock::time_point to) { return Ms(to - from).count(); }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// --- the server process, from /proc ---

// CPU seconds (user + system) of process `pid` so far; 0 if it cannot be read.
double process_cpu_seconds(int pid) {
  const std::string text = read_text(fmt::format("/proc/{}/stat", pid));
  // The fields after the command name (which may hold spaces) start after its closing
  // parenthesis; utime and stime are the 14th and 15th fields.
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

// A /proc/PID/status figure in KiB ("VmRSS", "VmHWM"); 0 if absent.
double status_kib(int pid, const std::string& key) {
  std::istringstream lines(read_text(fmt::format("/proc/{}/status", pid)));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with(key + ":")) return std::stod(line.substr(key.size() + 1));
  }
  return 0;
}

// The machine's CPU seconds so far, busy (user, nice, system, irq, softirq, steal) and in all,
// from the first line of /proc/stat.
std::pair<double, double> machine_cpu_seconds() {
  std::istringstream fields(read_text("/proc/stat"));
  std::string cpu;
  fields >> cpu;
  double busy = 0;
  double all = 0;
  double ticks = 0;
  for (int i = 0; i < 8 && fields >> ticks; ++i) {
    all += ticks;
    if (i != 3 && i != 4) busy += ticks;  // not idle, not iowait
  }
  const auto hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return {busy / hz, all / hz};
}

// The 1-minute load average.
double load_average() {
  std::istringstream fields(read_text("/proc/loadavg"));
  double load = 0;
  fields >> load;
  return load;
}

double self_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// --- the server's /metrics ---

// Every sample of the Prometheus text format: "name{labels}" -> value.
using Samples = std::map<std::string, double>;

Samples parse_metrics(const std::string& text) {
  Samples out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    try {
      out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
      // Not a number ("NaN" parses; anything else is skipped).
    }
  }
  return out;
}

double sample(const Samples& s, const std::string& key) {
  const auto it = s.find(key);
  return it == s.end() ? 0 : it->second;
}

// One histogram's change between two readings: its buckets (upper bound -> cumulative count),
// count and sum. `labels` are the histogram's own labels before "le", e.g. `route="/x",`.
struct HistogramDelta {
  std::vector<std::pair<double, double>> buckets;
  double count = 0;
  double sum = 0;

  // The q-quantile as Prometheus' histogram_quantile estimates it (linear within the bucket);
  // past the last finite bound, that bound. 0 when empty.
  [[nodiscard]] double quantile(double q) const {
    if (count <= 0 || buckets.empty()) return 0;
    const double rank = q * count;
    double lower = 0;
    double below = 0;
    for (const auto& [bound, cumulative] : buckets) {
      if (cumulative >= rank) {
        if (std::isinf(bound)) return lower;
        const double in_bucket = cumulative - below;
        return in_bucket <= 0 ? bound : lower + (bound - lower) * (rank - below) / in_bucket;
      }
      lower = std::isinf(bound) ? lower : bound;
      below = cumulative;
    }
    return lower;
  }
  [[nodiscard]] double mean() const { return count > 0 ? sum / count : 0; }
  // The upper bound of the bucket holding the largest observation (+Inf past the last bound).
  [[nodiscard]] double max_bound() const {
    double last = 0;
    for (const auto& [bound, cumulative] : buckets) {
      if (cumulative >= count) return bound;
      last = bound;
    }
    return last;
  }
};

HistogramDelta histogram_delta(const Samples& before, const Samples& after, const std::string& name,
                               const std::string& labels = "") {
  HistogramDelta d;
  const std::string prefix = name + "_bucket{" + labels + "le=\"";
  for (auto it = after.lower_bound(prefix); it != after.end() && it->first.starts_with(prefix);
       ++it) {
    const std::string le = it->first.substr(prefix.size(), it->first.size() - prefix.size() - 2);
    const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le);
    d.buckets.emplace_back(bound, it->second - sample(before, it->first));
  }
  std::ranges::sort(d.buckets);
  const std::string suffix = labels.empty() ? "" : "{" + labels.substr(0, labels.size() - 1) + "}";
  d.count = sample(after, name + "_count" + suffix) - sample(before, name + "_count" + suffix);
  d.sum = sample(after, name + "_sum" + suffix) - sample(before, name + "_sum" + suffix);
  return d;
}

// --- statistics of the client's own measurements ---

double percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, index == 0 ? 0 : index - 1)];
}

struct BeatStats {
  std::vector<double> latency_ms;  // answered beats
  std::int64_t sent = 0;
  std::int64_t answered = 0;  // 200
  std::int64_t refused = 0;   // another status
  std::int64_t failed = 0;    // no answer (connection refused or closed, timeout)
  std::int64_t late = 0;      // sent more than 10 ms after its slot (the previous beat was slow)
  std::map<std::string, std::int64_t> errors;

  [[nodiscard]] nlohmann::json to_json() {
    std::ranges::sort(latency_ms);
    const double sum = std::accumulate(latency_ms.begin(), latency_ms.end(), 0.0);
    return {{"sent", sent},
            {"answered", answered},
            {"refused", refused},
            {"failed", failed},
            {"late", late},
            {"p50_ms", percentile(latency_ms, 0.50)},
            {"p90_ms", percentile(latency_ms, 0.90)},
            {"p99_ms", percentile(latency_ms, 0.99)},
            {"p999_ms", percentile(latency_ms, 0.999)},
            {"max_ms", latency_ms.empty() ? 0 : latency_ms.back()},
            {"mean_ms", latency_ms.empty() ? 0 : sum / static_cast<double>(latency_ms.size())},
            {"errors", errors}};
  }
};

// --- HTTP/1.1 over one kept-alive connection ---

struct Answer {
  int status = 0;  // 0: no answer
  std::string body;
  std::string error;  // why there was no answer
};

class Connection {
 public:
  Connection(asio::io_context& io, tcp::endpoint server, asio::ip::address local)
      : socket_(io), timer_(io), server_(server), local_(local) {}

  // Sends `head` (request line and fields, ending in an empty line) and `body`; reconnects first
  // if the connection was closed. The whole exchange must end within `timeout`.
  awaitable<Answer> request(const std::string& head, const std::string& body,
                            std::chrono::milliseconds timeout) {
    const std::uint64_t mine = ++generation_;
    timer_.expires_after(timeout);
    timer_.async_wait([this, mine](error_code ec) {
      if (!ec && generation_ == mine) close();
    });
    const bool reused = socket_.is_open();
    Answer answer = co_await exchange(head, body);
    if (answer.status == 0 && reused && !answer_started_ && generation_ == mine) {
      // The server closed the kept-alive connection while it was idle (it did not read the
      // request): sent again on a new one, as HTTP clients do.
      close();
      answer = co_await exchange(head, body);
    }
    ++generation_;  // a timer already due no longer closes the connection
    timer_.cancel();
    if (answer.status == 0) close();
    co_return answer;
  }

  void close() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  awaitable<Answer> exchange(const std::string& head, const std::string& body) {
    error_code ec;
    if (!socket_.is_open()) {
      socket_.open(tcp::v4(), ec);
      if (!ec) socket_.bind(tcp::endpoint(local_, 0), ec);
      if (ec) co_return Answer{0, {}, "bind: " + ec.message()};
      co_await socket_.async_connect(server_, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return Answer{0, {}, "connect: " + ec.message()};
      socket_.set_option(tcp::no_delay(true), ec);
      buffer_.clear();
    }
    const std::array<asio::const_buffer, 2> out = {asio::buffer(head), asio::buffer(body)};
    co_await asio::async_write(socket_, out, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return Answer{0, {}, "write: " + ec.message()};
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{1} << 30);
    answer_started_ = false;
    co_await http::async_read(socket_, buffer_, parser,
                              asio::redirect_error(asio::use_awaitable, ec));
    answer_started_ = parser.got_some();
    if (ec) co_return Answer{0, {}, "read: " + ec.message()};
    http::response<http::string_body> res = parser.release();
    if (!res.keep_alive()) close();
    co_return Answer{static_cast<int>(res.result_int()), std::move(res.body()), {}};
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  tcp::endpoint server_;
  asio::ip::address local_;
  boost::beast::flat_buffer buffer_;
  std::uint64_t generation_ = 0;
  bool answer_started_ = false;  // the last exchange read some of an answer
};

std::string request_head(const std::string& method, const std::string& target,
                         const std::string& token, std::size_t body_bytes,
                         const std::string& extra = "") {
  std::string head = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!token.empty()) head += "Authorization: Bearer " + token + "\r\n";
  if (body_bytes > 0) {
    head += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", body_bytes);
  }
  return head + extra + "\r\n";
}

// Waits for a number of coroutines to end.
class Latch {
 public:
  Latch(asio::io_context& io, std::int64_t count) : timer_(io), count_(count) {
    timer_.expires_at(Clock::time_point::max());
  }
  void count_down() {
    if (--count_ == 0) timer_.cancel();
  }
  awaitable<void> wait() {
    while (count_ > 0) {
      error_code ec;
      co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

 private:
  asio::steady_timer timer_;
  std::int64_t count_;
};

awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(d);
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// GET /healthz every `interval` on its own thread and connection, measured while `measuring`:
// the server answers it on its I/O threads without the loop, so its latency tells the time
// spent in the network and the I/O threads from the heartbeats' time in the loop.
class Probe {
 public:
  Probe(tcp::endpoint server, std::chrono::milliseconds interval)
      : server_(server), interval_(interval) {
    thread_ = std::thread([this] {
      asio::co_spawn(io_, loop(), asio::detached);
      io_.run();
    });
  }
  ~Probe() { stop(); }
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  void measure(bool on) { measuring_ = on; }
  // Stops the thread; the latencies are then this thread's to read.
  BeatStats& stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    return stats_;
  }

 private:
  awaitable<void> loop() {
    Connection connection(io_, server_, asio::ip::make_address("127.0.0.1"));
    const std::string head = request_head("GET", "/healthz", "", 0);
    asio::steady_timer timer(io_);
    while (!stopping_) {
      timer.expires_after(interval_);
      error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      const bool counted = measuring_;
      const Clock::time_point sent = Clock::now();
      const Answer answer = co_await connection.request(head, "", std::chrono::seconds(10));
      if (!counted) continue;
      ++stats_.sent;
      if (answer.status == 200) {
        ++stats_.answered;
        stats_.latency_ms.push_back(ms_between(sent, Clock::now()));
      } else {
        ++stats_.failed;
      }
    }
    connection.close();
  }

  asio::io_context io_{1};
  tcp::endpoint server_;
  std::chrono::milliseconds interval_;
  std::atomic<bool> measuring_{false};
  std::atomic<bool> stopping_{false};
  BeatStats stats_;
  std::thread thread_;
};

// --- the bench ---

struct Options {
  std::string server = "127.0.0.1:8470";
  std::string cluster_file;
  std::string admin_token_file;
  int server_pid = 0;
  std::vector<int> etcd_pids;
  int jobs = 100'000;
  std::string pending = "capacity";
  int array_size = 1000;
  double period_s = 2;
  double window_s = 60;
  double settle_s = 4;
  int setup_clients = 32;
  int agents_per_address = 200;
  int max_agents = 0;  // 0: every node of the cluster file
  int timeout_ms = 10'000;
  bool check_replies = false;
  std::string json_out;
  std::string perf_out;  // perf record of the server over the window, if set
};

struct Agent {
  std::string node;
  std::string leaf;
  std::string spine;
  std::string model;
  int gpus = 0;
  std::string token;
  std::unique_ptr<Connection> connection;
  std::unique_ptr<asio::steady_timer> timer;  // the next beat
  std::string running_jobs;  // "12,13": the job ids of the last reply, as the agent reports them
  Clock::duration offset{};  // where in the period its beats fall
};

struct Phase {
  std::string name;
  double seconds = 0;
  double rss_mib = 0;
};

class Bench {
 public:
  Bench(Options options, ClusterSpec cluster) : options_(std::move(options)) {
    const auto colon = options_.server.rfind(':');
    server_ =
        tcp::endpoint(asio::ip::make_address(options_.server.substr(0, colon)),
                      static_cast<unsigned short>(std::stoi(options_.server.substr(colon + 1))));
    admin_token_ = read_text(options_.admin_token_file);
    while (!admin_token_.empty() && std::isspace(static_cast<unsigned char>(admin_token_.back()))) {
      admin_token_.pop_back();
    }
    const std::size_t count =
        options_.max_agents > 0
            ? std::min<std::size_t>(cluster.nodes.size(),
                                    static_cast<std::size_t>(options_.max_agents))
            : cluster.nodes.size();
    period_ = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options_.period_s));
    for (std::size_t i = 0; i < count; ++i) {
      const NodeSpec& n = cluster.nodes[i];
      const LeafSpec& leaf = cluster.topology.leaves[n.leaf.value];
      Agent a;
      a.node = n.name;
      a.leaf = leaf.name;
      a.spine = cluster.topology.spines[leaf.spine.value].name;
      a.model = n.gpu_count > 0 ? cluster.models.name(n.model) : "";
      a.gpus = n.gpu_count;
      // 127.1.x.y: agents_per_address agents per address.
      const std::size_t address = i / static_cast<std::size_t>(options_.agents_per_address);
      const auto local =
          asio::ip::make_address_v4(fmt::format("127.1.{}.{}", address / 250, address % 250 + 1));
      a.connection = std::make_unique<Connection>(io_, server_, local);
      a.timer = std::make_unique<asio::steady_timer>(io_);
      a.offset = period_ * static_cast<std::int64_t>(i) / static_cast<std::int64_t>(count);
      agents_.push_back(std::move(a));
    }
    for (int v = 0; v < kBodyVariants; ++v) gpu_variants_.push_back(gpu_readings(v));
  }

  int run() {
    int status = 1;
    asio::co_spawn(io_, control(), [&](const std::exception_ptr& e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& what) {
          fmt::print(stderr, "scale bench: {}\n", what.what());
        }
      } else {
        status = result_status_;
      }
      // The agents end their loops; run() returns once nothing is left to do.
      stopping_ = true;
      for (Agent& a : agents_) {
        a.connection->close();
        a.timer->cancel();
      }
      if (admin_) admin_->close();
    });
    io_.run();
    return status;
  }

 private:
  static constexpr int kBodyVariants = 16;

  // The GPUs' samples of one heartbeat: busy H100s, a little different from variant to variant.
  [[nodiscard]] std::string gpu_readings(int variant) const {
    tidepool::NodeHeartbeat beat;
    for (int g = 0; g < 8; ++g) {
      beat.gpus.push_back(tidepool::GpuReading{
          .index = g,
          .model = "H100",
          .utilization_percent = 85 + (variant * 7 + g * 3) % 15,
          .memory_used_mib = 60'000 + (variant * 131 + g * 977) % 15'000,
          .memory_total_mib = 81'559,
          .power_milliwatts = 550'000 + (variant * 3'301 + g * 7'919) % 120'000,
          .temperature_celsius = 60 + (variant + g) % 15,
          .throttle_reasons = 0,
          .ecc_errors_uncorrected = 0});
    }
    return tidepool::node_heartbeat_to_json(beat)["gpus"].dump();
  }

  [[nodiscard]] std::string registration(const Agent& a, std::size_t index) const {
    tidepool::NodeRegistration r{
        .gpu_model = a.model,
        .gpus = a.gpus,
        .cpu_milli = 96'000,
        .memory_mib = 1'048'576,
        .agent_version = "scale-bench",
        .hostname = a.node,
        .address = fmt::format("10.{}.{}.{}", index / 65536 % 256, index / 256 % 256, index % 256),
        .leaf = a.leaf,
        .spine = a.spine,
        .devices = {}};
    for (int g = 0; g < a.gpus; ++g) {
      std::vector<int> peers;
      for (int p = 0; p < a.gpus; ++p) {
        if (p != g) peers.push_back(p);
      }
      r.devices.push_back(
          tidepool::GpuDevice{.index = g,
                              .uuid = fmt::format("GPU-{:08x}-{:04x}", index, g),
                              .model = a.model,
                              .memory_mib = 81'559,
                              .pci_bus_id = fmt::format("0000:{:02x}:00.0", 0x18 + g * 0x10),
                              .numa_node = g / 4,
                              .nvlink_peers = std::move(peers)});
    }
    return tidepool::node_registration_to_json(r).dump();
  }

  // The admin's requests, on one kept-alive connection (a new one after a failure).
  awaitable<Answer> admin_request(const std::string& method, const std::string& target,
                                  const std::string& body = "", const std::string& extra = "") {
    if (!admin_) {
      admin_ = std::make_unique<Connection>(io_, server_, asio::ip::make_address("127.0.0.1"));
    }
    co_return co_await admin_->request(
        request_head(method, target, admin_token_, body.size(), extra), body,
        std::chrono::milliseconds(std::max(options_.timeout_ms, 60'000)));
  }

  // Runs `work(i, connection)` for i in 0..count-1, `clients` at a time, each client with its own
  // connection; false from work stops the client and fails the whole.
  awaitable<bool> for_all(std::size_t count, int clients,
                          std::function<awaitable<bool>(std::size_t, Connection&)> work) {
    auto next = std::make_shared<std::size_t>(0);
    auto ok = std::make_shared<bool>(true);
    const int n = static_cast<int>(std::min<std::size_t>(count, static_cast<std::size_t>(clients)));
    Latch done(io_, n);
    for (int c = 0; c < n; ++c) {
      asio::co_spawn(
          io_,
          [&, next, ok]() -> awaitable<void> {
            Connection connection(io_, server_, asio::ip::make_address("127.0.0.1"));
            while (*ok && *next < count) {
              const std::size_t i = (*next)++;
              if (!co_await work(i, connection)) *ok = false;
            }
            connection.close();
            done.count_down();
          },
          asio::detached);
    }
    co_await done.wait();
    co_return *ok;
  }

  // --- the agents ---

  awaitable<bool> register_agent(std::size_t i) {
    Agent& a = agents_[i];
    const std::string body = registration(a, i);
    const std::string head =
        request_head("POST", "/v1/nodes/" + a.node + "/register", a.token, body.size());
    for (int attempt = 0; attempt < 5; ++attempt) {
      const Answer answer = co_await a.connection->request(
          head, body, std::chrono::milliseconds(options_.timeout_ms));
      if (answer.status == 200 || answer.status == 201) {
        co_return true;
      }
      if (answer.status != 0 && answer.status != 503) {
        fmt::print(stderr, "registering {}: {} {}\n", a.node, answer.status, answer.body);
        co_return false;
      }
      co_await sleep_for(std::chrono::milliseconds(500));
    }
    fmt::print(stderr, "registering {}: no answer\n", a.node);
    co_return false;
  }

  // The ids of the reply's "jobs" (nlohmann writes keys in order: "jobs" is the last list before
  // "node"), as the agent would report them in its next beat.
  static std::string reply_jobs(const std::string& body) {
    const auto at = body.rfind("\"jobs\":[");
    if (at == std::string::npos) return {};
    const auto start = at + 8;
    const auto end = body.find(']', start);
    return end == std::string::npos ? std::string() : body.substr(start, end - start);
  }

  awaitable<void> beat(std::size_t i) {
    Agent& a = agents_[i];
    asio::steady_timer& timer = *a.timer;
    // The beats of every agent fall on one schedule: epoch + offset + k x period.
    Clock::time_point next = epoch_ + a.offset;
    while (next < Clock::now()) next += period_;
    std::uint64_t k = i;
    while (!stopping_) {
      timer.expires_at(next);
      error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopping_) break;
      const std::string body =
          fmt::format(R"({{"running_jobs":[{}],"healthy_gpus":{},"gpus":{}}})", a.running_jobs,
                      a.gpus, gpu_variants_[k++ % kBodyVariants]);
      const std::string head =
          request_head("POST", "/v1/nodes/" + a.node + "/heartbeat", a.token, body.size());
      const bool in_window = measuring_;
      const Clock::time_point sent = Clock::now();
      const bool late = sent - next > std::chrono::milliseconds(10);
      Answer answer = co_await a.connection->request(
          head, body, std::chrono::milliseconds(options_.timeout_ms));
      const Clock::time_point answered = Clock::now();
      BeatStats& stats = in_window ? window_ : outside_;
      ++stats.sent;
      if (late) ++stats.late;
      if (answer.status == 200) {
        ++stats.answered;
        stats.latency_ms.push_back(ms_between(sent, answered));
        if (options_.check_replies) {
          auto reply = tidepool::heartbeat_reply_from_json(
              nlohmann::json::parse(answer.body, nullptr, false));
          if (!reply) ++stats.errors["reply not understood: " + reply.error().message()];
        }
        a.running_jobs = reply_jobs(answer.body);
      } else if (answer.status != 0) {
        ++stats.refused;
        ++stats.errors[fmt::format("status {}", answer.status)];
      } else {
        ++stats.failed;
        ++stats.errors[answer.error];
      }
      next += period_;
      // A beat that took longer than the period: the next goes at once, as the agent's does.
      if (next < Clock::now()) next = Clock::now();
    }
  }

  // --- the user's side ---

  awaitable<std::optional<nlohmann::json>> get_json(const std::string& target) {
    const Answer answer = co_await admin_request("GET", target);
    if (answer.status != 200) {
      fmt::print(stderr, "GET {}: {} {}{}\n", target, answer.status, answer.body, answer.error);
      co_return std::nullopt;
    }
    co_return nlohmann::json::parse(answer.body, nullptr, false);
  }

  awaitable<Samples> metrics() {
    const Answer answer = co_await admin_request("GET", "/metrics");
    if (answer.status != 200) throw std::runtime_error("GET /metrics failed: " + answer.error);
    co_return parse_metrics(answer.body);
  }

  // Pending and running jobs of a tenant, from GET /v1/queues.
  awaitable<std::pair<std::int64_t, std::int64_t>> queue_counts(const std::string& tenant) {
    std::pair<std::int64_t, std::int64_t> out{-1, -1};
    auto body = co_await get_json("/v1/queues");
    if (!body || !body->contains("queues")) co_return out;
    out = {0, 0};
    for (const auto& q : (*body)["queues"]) {
      if (q.value("tenant", "") != tenant) continue;
      out.first += q.value("pending", std::int64_t{0});
      out.second += q.value("running", std::int64_t{0});
    }
    co_return out;
  }

  // Submits `count` jobs as arrays, one submission at a time; `after_each(submitted)` after each.
  awaitable<bool> submit_arrays(const std::string& what, const std::string& tenant, int count,
                                int gpus, const std::string& runtime,
                                const std::function<awaitable<void>(int)>& after_each) {
    int submitted = 0;
    for (int k = 0; submitted < count; ++k) {
      const int size = std::min(options_.array_size, count - submitted);
      const std::string body = nlohmann::json{{"name", fmt::format("{}-{}", what, k)},
                                              {"tenant", tenant},
                                              {"gpus_per_task", gpus},
                                              {"runtime_estimate", runtime},
                                              {"command", {"sleep", "infinity"}},
                                              {"array", fmt::format("0-{}", size - 1)}}
                                   .dump();
      const std::string key = fmt::format("Idempotency-Key: scale-{}-{}\r\n", what, k);
      bool done = false;
      for (int attempt = 0; attempt < 5 && !done; ++attempt) {
        const Answer answer = co_await admin_request("POST", "/v1/jobs", body, key);
        if (answer.status == 200 || answer.status == 201) {
          done = true;
        } else if (answer.status != 0 && answer.status != 503) {
          fmt::print(stderr, "submitting {} array {}: {} {}\n", what, k, answer.status,
                     answer.body);
          co_return false;
        } else {
          co_await sleep_for(std::chrono::milliseconds(500));  // sent again with the same key
        }
      }
      if (!done) {
        fmt::print(stderr, "submitting {} array {}: no answer\n", what, k);
        co_return false;
      }
      submitted += size;
      if (after_each) co_await after_each(submitted);
    }
    co_return true;
  }

  // Waits until `tenant` has `pending` pending and `running` running jobs (-1: any).
  awaitable<bool> await_queue(const std::string& tenant, std::int64_t pending, std::int64_t running,
                              std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::pair<std::int64_t, std::int64_t> seen;
    while (Clock::now() < deadline) {
      seen = co_await queue_counts(tenant);
      if ((pending < 0 || seen.first == pending) && (running < 0 || seen.second == running)) {
        co_return true;
      }
      co_await sleep_for(std::chrono::milliseconds(500));
    }
    fmt::print(stderr, "tenant {}: {} pending and {} running after {} s; expected {} and {}\n",
               tenant, seen.first, seen.second, limit.count(), pending, running);
    co_return false;
  }

  // perf record of the server's stacks over the window (it ends with the window).
  pid_t start_perf() const {
    std::vector<std::string> words = {"perf",
                                      "record",
                                      "-q",
                                      "-F",
                                      "499",
                                      "-g",
                                      "-p",
                                      std::to_string(options_.server_pid),
                                      "-o",
                                      options_.perf_out,
                                      "--",
                                      "sleep",
                                      fmt::format("{:.0f}", options_.window_s)};
    std::vector<char*> args;
    for (std::string& word : words) args.push_back(word.data());
    args.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawnp(&pid, "perf", nullptr, nullptr, args.data(), environ) != 0) {
      fmt::print(stderr, "perf could not be started; the window goes on without it\n");
      return -1;
    }
    return pid;
  }

  double rss_mib() const { return status_kib(options_.server_pid, "VmRSS") / 1024; }

  void phase(const std::string& name, Clock::time_point since) {
    phases_.push_back(Phase{name, ms_between(since, Clock::now()) / 1000, rss_mib()});
    fmt::print("  {:<34} {:7.1f} s   server RSS {:7.1f} MiB\n", name, phases_.back().seconds,
               phases_.back().rss_mib);
    std::fflush(stdout);
  }

  awaitable<void> control() {
    const std::size_t n = agents_.size();
    const bool capacity = options_.pending == "capacity";
    const std::string backlog_tenant = capacity ? "prod" : "backlog";
    epoch_ = Clock::now();
    fmt::print(
        "scale bench: {} agents ({} GPUs each), {} pending jobs (for {}), a beat every {} s\n", n,
        agents_.empty() ? 0 : agents_.front().gpus, options_.jobs, options_.pending,
        options_.period_s);
    phases_.push_back(Phase{"start", 0, rss_mib()});

    // 1. Agent tokens.
    auto t = Clock::now();
    const bool tokens = co_await for_all(
        n, options_.setup_clients, [this](std::size_t i, Connection& c) -> awaitable<bool> {
          const std::string body =
              nlohmann::json{{"role", "agent"}, {"node", agents_[i].node}}.dump();
          for (int attempt = 0; attempt < 5; ++attempt) {
            const Answer answer =
                co_await c.request(request_head("POST", "/v1/tokens", admin_token_, body.size()),
                                   body, std::chrono::milliseconds(60'000));
            if (answer.status == 201 || answer.status == 200) {
              agents_[i].token =
                  nlohmann::json::parse(answer.body, nullptr, false).value("secret", "");
              co_return !agents_[i].token.empty();
            }
            if (answer.status != 0 && answer.status != 503) {
              fmt::print(stderr, "token for {}: {} {}\n", agents_[i].node, answer.status,
                         answer.body);
              co_return false;
            }
          }
          co_return false;
        });
    if (!tokens) throw std::runtime_error("creating the agent tokens failed");
    phase(fmt::format("{} agent tokens", n), t);

    // 2. Registration; each agent beats from then on.
    t = Clock::now();
    const bool registered = co_await for_all(n, std::max(options_.setup_clients, 64),
                                             [this](std::size_t i, Connection&) -> awaitable<bool> {
                                               if (!co_await register_agent(i)) co_return false;
                                               asio::co_spawn(io_, beat(i), asio::detached);
                                               co_return true;
                                             });
    if (!registered) throw std::runtime_error("registering the agents failed");
    phase(fmt::format("{} agents registered", n), t);
    co_await sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(period_));

    // 3. The pool filled: one whole-node job per node.
    if (capacity) {
      t = Clock::now();
      if (!co_await submit_arrays("fill", "prod", static_cast<int>(n), agents_.front().gpus, "30d",
                                  nullptr) ||
          !co_await await_queue("prod", 0, static_cast<std::int64_t>(n),
                                std::chrono::seconds(300))) {
        throw std::runtime_error("filling the pool failed");
      }
      phase(fmt::format("pool filled: {} jobs running", n), t);
    }
    // Pass time with nothing pending (the tick's passes).
    const Samples idle_before = co_await metrics();
    co_await sleep_for(std::chrono::milliseconds(static_cast<int>(1000 * options_.settle_s)));
    const Samples idle_after = co_await metrics();
    const HistogramDelta idle_passes =
        histogram_delta(idle_before, idle_after, "tidepool_scheduler_pass_duration_seconds");

    // 4. The backlog, with the pass time and memory after each tenth.
    t = Clock::now();
    const double rss_before_backlog = rss_mib();
    Samples last = co_await metrics();
    int next_mark = std::max(1, options_.jobs / 10);
    const bool submitted = co_await submit_arrays(
        "backlog", backlog_tenant, options_.jobs, 1, "1h", [&](int so_far) -> awaitable<void> {
          if (so_far < next_mark && so_far < options_.jobs) co_return;
          next_mark += std::max(1, options_.jobs / 10);
          const Samples now = co_await metrics();
          const HistogramDelta passes =
              histogram_delta(last, now, "tidepool_scheduler_pass_duration_seconds");
          last = now;
          growth_.push_back({{"pending", so_far},
                             {"passes", passes.count},
                             {"pass_mean_ms", 1000 * passes.mean()},
                             {"rss_mib", rss_mib()}});
        });
    // With quota, the backlog's first job runs on the tenant's one GPU.
    const std::int64_t expected_pending = capacity ? options_.jobs : std::max(0, options_.jobs - 1);
    if (!submitted ||
        !co_await await_queue(backlog_tenant, expected_pending, -1, std::chrono::seconds(300))) {
      throw std::runtime_error("submitting the backlog failed");
    }
    const double rss_after_backlog = rss_mib();
    phase(fmt::format("{} jobs pending", options_.jobs), t);
    co_await sleep_for(std::chrono::milliseconds(static_cast<int>(1000 * options_.settle_s)));

    // 5. The measured window.
    const Samples before = co_await metrics();
    const double cpu_before = process_cpu_seconds(options_.server_pid);
    std::vector<double> etcd_before;
    for (int pid : options_.etcd_pids) etcd_before.push_back(process_cpu_seconds(pid));
    const double self_before = self_cpu_seconds();
    const auto [machine_busy_before, machine_all_before] = machine_cpu_seconds();
    const double load_before = load_average();
    Probe probe(server_, std::chrono::milliseconds(50));
    window_start_ = Clock::now();
    measuring_ = true;
    probe.measure(true);
    pid_t perf = -1;
    if (!options_.perf_out.empty()) perf = start_perf();
    std::vector<double> rss_samples;
    const auto window_end = window_start_ + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(options_.window_s));
    while (Clock::now() < window_end) {
      co_await sleep_for(std::chrono::milliseconds(1000));
      rss_samples.push_back(rss_mib());
    }
    measuring_ = false;  // beats sent from now on are not counted in the window
    probe.measure(false);
    if (perf > 0) {
      int status = 0;
      ::waitpid(perf, &status, 0);
    }
    const double wall = ms_between(window_start_, Clock::now()) / 1000;
    const double cpu = process_cpu_seconds(options_.server_pid) - cpu_before;
    double etcd_cpu = 0;
    for (std::size_t e = 0; e < options_.etcd_pids.size(); ++e) {
      etcd_cpu += process_cpu_seconds(options_.etcd_pids[e]) - etcd_before[e];
    }
    const double self_cpu = self_cpu_seconds() - self_before;
    const auto [machine_busy_after, machine_all_after] = machine_cpu_seconds();
    const double load_after = load_average();
    // Cores: the machine's CPU time over its wall time; what the others ran is what is left
    // after the server, etcd and the bench.
    const double cores = (machine_all_after - machine_all_before) / wall;
    const double machine_busy = machine_busy_after - machine_busy_before;
    const double others_cpu = std::max(0.0, machine_busy - cpu - etcd_cpu - self_cpu);
    // The answers of the window's last beats.
    co_await sleep_for(std::chrono::milliseconds(std::min(options_.timeout_ms, 3000)));
    const Samples after = co_await metrics();
    const auto [pending_end, running_end] = co_await queue_counts(backlog_tenant);

    const HistogramDelta passes =
        histogram_delta(before, after, "tidepool_scheduler_pass_duration_seconds");
    const HistogramDelta commits = histogram_delta(before, after, "tidepool_store_commit_seconds");
    const HistogramDelta served =
        histogram_delta(before, after, "tidepool_http_request_duration_seconds",
                        "route=\"/v1/nodes/{name}/heartbeat\",");
    const auto counter = [&](const std::string& key) {
      return sample(after, key) - sample(before, key);
    };
    const double commits_failed = counter("tidepool_store_commit_failures_total");
    const double preempted = sample(after, "tidepool_job_transitions_total{state=\"preempted\"}");
    const double node_failures = sample(after, "tidepool_node_failures_total");

    nlohmann::json window = window_.to_json();
    nlohmann::json healthz = probe.stop().to_json();
    nlohmann::json outside = outside_.to_json();
    const double server_rss = rss_mib();
    const double server_hwm = status_kib(options_.server_pid, "VmHWM") / 1024;
    const double jobs_total = static_cast<double>(options_.jobs) + (capacity ? n : 0);
    nlohmann::json out{
        {"agents", n},
        {"gpus_per_node", agents_.empty() ? 0 : agents_.front().gpus},
        {"pending_jobs", options_.jobs},
        {"pending_for", options_.pending},
        {"running_jobs", capacity ? n : 1},
        {"period_s", options_.period_s},
        {"window_s", wall},
        {"heartbeats", window},
        {"heartbeats_outside_window", outside},
        {"healthz", healthz},
        {"beats_per_second", static_cast<double>(window_.sent) / wall},
        {"server_heartbeat_ms",
         {{"count", served.count},
          {"p50", 1000 * served.quantile(0.5)},
          {"p99", 1000 * served.quantile(0.99)},
          {"mean", 1000 * served.mean()}}},
        {"pass_ms",
         {{"count", passes.count},
          {"p50", 1000 * passes.quantile(0.5)},
          {"p99", 1000 * passes.quantile(0.99)},
          {"mean", 1000 * passes.mean()},
          {"max_bucket", 1000 * passes.max_bound()}}},
        {"pass_ms_nothing_pending",
         {{"count", idle_passes.count},
          {"p50", 1000 * idle_passes.quantile(0.5)},
          {"mean", 1000 * idle_passes.mean()}}},
        {"commit_ms",
         {{"count", commits.count},
          {"per_second", commits.count / wall},
          {"p50", 1000 * commits.quantile(0.5)},
          {"p99", 1000 * commits.quantile(0.99)},
          {"mean", 1000 * commits.mean()}}},
        {"commit_failures", commits_failed},
        {"preemptions_total", preempted},
        {"node_failures_total", node_failures},
        {"pending_at_end", pending_end},
        {"running_at_end", running_end},
        {"server_cpu_percent", 100 * cpu / wall},
        {"etcd_cpu_percent", 100 * etcd_cpu / wall},
        {"bench_cpu_percent", 100 * self_cpu / wall},
        {"machine_cores", cores},
        {"machine_busy_percent", 100 * machine_busy / wall},
        {"other_processes_cpu_percent", 100 * others_cpu / wall},
        {"load_average", {load_before, load_after}},
        {"server_rss_mib", server_rss},
        {"server_rss_max_in_window_mib",
         rss_samples.empty() ? server_rss : std::ranges::max(rss_samples)},
        {"server_hwm_mib", server_hwm},
        {"rss_per_pending_job_kib",
         options_.jobs > 0 ? 1024 * (rss_after_backlog - rss_before_backlog) / options_.jobs : 0},
        {"jobs_total", jobs_total},
        {"growth", growth_},
        {"phases", nlohmann::json::array()}};
    for (const Phase& p : phases_) {
      out["phases"].push_back({{"phase", p.name}, {"seconds", p.seconds}, {"rss_mib", p.rss_mib}});
    }

    fmt::print(
        "  window {:.0f} s: {} beats ({:.0f}/s), {} answered, {} refused, {} failed, {} late\n",
        wall, window_.sent, static_cast<double>(window_.sent) / wall, window_.answered,
        window_.refused, window_.failed, window_.late);
    fmt::print(
        "  heartbeat answer: p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms (in the server, from its "
        "histogram: p50 {:.1f} ms, p99 {:.1f} ms)\n",
        window["p50_ms"].get<double>(), window["p99_ms"].get<double>(),
        window["max_ms"].get<double>(), 1000 * served.quantile(0.5), 1000 * served.quantile(0.99));
    fmt::print(
        "  GET /healthz meanwhile (I/O threads only, every 50 ms): p50 {:.1f} ms, p99 {:.1f} "
        "ms, max {:.1f} ms\n",
        healthz["p50_ms"].get<double>(), healthz["p99_ms"].get<double>(),
        healthz["max_ms"].get<double>());
    fmt::print(
        "  pass: {:.0f} in the window, p50 {:.1f} ms, p99 {:.1f} ms, mean {:.1f} ms "
        "(nothing pending: mean {:.1f} ms)\n",
        passes.count, 1000 * passes.quantile(0.5), 1000 * passes.quantile(0.99),
        1000 * passes.mean(), 1000 * idle_passes.mean());
    fmt::print("  commit: {:.0f} ({:.1f}/s), p50 {:.1f} ms, p99 {:.1f} ms; {} failed\n",
               commits.count, commits.count / wall, 1000 * commits.quantile(0.5),
               1000 * commits.quantile(0.99), commits_failed);
    fmt::print(
        "  server CPU {:.0f}% of a core, RSS {:.0f} MiB (peak {:.0f} MiB); etcd CPU {:.0f}%, "
        "bench CPU {:.0f}%\n",
        100 * cpu / wall, server_rss, server_hwm, 100 * etcd_cpu / wall, 100 * self_cpu / wall);
    fmt::print(
        "  machine: {:.0f}% busy of {:.0f} cores' {:.0f}%, {:.0f}% of it other processes'; "
        "load average {:.1f} -> {:.1f}\n",
        100 * machine_busy / wall, cores, 100 * cores, 100 * others_cpu / wall, load_before,
        load_after);
    if (!window_.errors.empty()) {
      for (const auto& [what, count] : window_.errors)
        fmt::print("  beat error: {} x{}\n", what, count);
    }
    if (!options_.json_out.empty()) {
      std::ofstream file(options_.json_out, std::ios::trunc);
      file << out.dump(2) << "\n";
    }
    result_status_ = 0;
  }

  Options options_;
  asio::io_context io_{1};
  tcp::endpoint server_;
  std::string admin_token_;
  std::unique_ptr<Connection> admin_;
  std::vector<Agent> agents_;
  std::vector<std::string> gpu_variants_;
  Clock::duration period_{};
  Clock::time_point epoch_;
  Clock::time_point window_start_;
  bool measuring_ = false;
  bool stopping_ = false;
  BeatStats window_;
  BeatStats outside_;
  std::vector<Phase> phases_;
  nlohmann::json growth_ = nlohmann::json::array();
  int result_status_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Tidepool scale bench: agents heartbeating and a pending backlog against one leader");
  Options o;
  app.add_option("--server", o.server, "The server's host:port")->required();
  app.add_option("--cluster", o.cluster_file, "The server's cluster file (its nodes get agents)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--admin-token-file", o.admin_token_file, "The server's first admin token")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--server-pid", o.server_pid, "The server's process id (CPU and memory)")
      ->required();
  app.add_option("--etcd-pids", o.etcd_pids, "The etcd members' process ids (their CPU)")
      ->delimiter(',');
  app.add_option("--jobs", o.jobs, "Jobs kept pending")->check(CLI::Range(0, 10'000'000));
  app.add_option("--pending", o.pending,
                 "Why they stay pending: capacity (the pool filled first by one 8-GPU job per "
                 "node) or quota (their tenant's quota is one GPU)")
      ->check(CLI::IsMember({"capacity", "quota"}));
  app.add_option("--array-size", o.array_size, "Jobs per submission (a job array)")
      ->check(CLI::Range(1, 10'000));
  app.add_option("--period", o.period_s, "Seconds between an agent's heartbeats")
      ->check(CLI::Range(0.05, 60.0));
  app.add_option("--window", o.window_s, "Seconds measured")->check(CLI::Range(1.0, 3600.0));
  app.add_option("--settle", o.settle_s, "Seconds before the window (and of idle passes)")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--setup-clients", o.setup_clients, "Concurrent requests while setting up")
      ->check(CLI::Range(1, 1024));
  app.add_option("--agents-per-address", o.agents_per_address,
                 "Agents' connections per loopback source address (the server allows 256)")
      ->check(CLI::Range(1, 256));
  app.add_option("--max-agents", o.max_agents, "Agents for the first N nodes only (0: all)");
  app.add_option("--timeout-ms", o.timeout_ms, "A heartbeat's deadline, as the agent's 10 s")
      ->check(CLI::Range(100, 600'000));
  app.add_flag("--check-replies", o.check_replies,
               "Read every heartbeat reply with the agent's reader (costs the bench CPU)");
  app.add_option("--json", o.json_out, "Write the figures to this JSON file");
  app.add_option("--perf", o.perf_out, "Record the server with perf over the window to this file");
  CLI11_PARSE(app, argc, argv);

  auto cluster = tidepool::load_cluster_yaml(o.cluster_file);
  if (!cluster) {
    fmt::print(stderr, "scale bench: {}\n", cluster.error().message());
    return 2;
  }
  Bench bench(std::move(o), std::move(*cluster));
  return bench.run();
}
