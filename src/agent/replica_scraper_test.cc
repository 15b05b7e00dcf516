#include "agent/replica_scraper.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "api/test_http_server.h"
#include "testing/temp_dir.h"

namespace tidepool {
namespace {

namespace fs = std::filesystem;
using test_support::http_reply;
using test_support::ScriptedServer;
using test_support::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// A vLLM replica's metrics: `waiting` and `running` requests now, `finished` requests so far and
// `latency_s` seconds spent on them, of which `fast` took at most 0.1 s and the rest at most 1 s.
std::string vllm_metrics(int waiting, int running, int finished, double latency_s, int fast) {
  return fmt::format(
      "# HELP vllm:num_requests_waiting Requests waiting to be processed.\n"
      "# TYPE vllm:num_requests_waiting gauge\n"
      "vllm:num_requests_waiting{{model_name=\"llama\"}} {}\n"
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{{model_name=\"llama\"}} {}\n"
      "# TYPE vllm:request_success_total counter\n"
      "vllm:request_success_total{{finished_reason=\"stop\"}} {}\n"
      "# TYPE vllm:e2e_request_latency_seconds histogram\n"
      "vllm:e2e_request_latency_seconds_bucket{{le=\"0.1\"}} {}\n"
      "vllm:e2e_request_latency_seconds_bucket{{le=\"1.0\"}} {}\n"
      "vllm:e2e_request_latency_seconds_bucket{{le=\"+Inf\"}} {}\n"
      "vllm:e2e_request_latency_seconds_sum {}\n"
      "vllm:e2e_request_latency_seconds_count {}\n"
      "# TYPE vllm:gpu_cache_usage_perc gauge\n"
      "vllm:gpu_cache_usage_perc 0.5\n",
      waiting, running, finished, fast, finished, finished, latency_s, finished);
}

ReplicaAssignment vllm_replica() {
  return ReplicaAssignment{
      .service = 7, .port = 8001, .metrics_file = "", .metrics_preset = "vllm", .metric_names = {}};
}

// A scraper whose fetch gives the texts queued in `texts` (an Error when it is empty) and records
// what it was asked; its log lines go to `lines`.
struct FakeReplicas {
  std::deque<Result<std::string>> texts;
  std::vector<std::pair<ReplicaAssignment, int>> asked;
  std::vector<std::string> lines;
  ReplicaScraper scraper{[this](const ReplicaAssignment& replica, int uid) -> Result<std::string> {
                           asked.emplace_back(replica, uid);
                           if (texts.empty()) return fail("port", "nothing queued");
                           Result<std::string> next = std::move(texts.front());
                           texts.pop_front();
                           return next;
                         },
                         [this](const std::string& line) { lines.push_back(line); }};
};

ReplicaFigures figures_of(const ReplicaScraper& scraper, std::int64_t job, std::int64_t run) {
  for (const ReplicaReport& report : scraper.reports()) {
    if (report.job == job && report.run == run) return report.figures;
  }
  ADD_FAILURE() << "no report of job " << job << " run " << run;
  return {};
}

TEST(ReplicaScraperTest, TwoScrapesGiveRatesAndLatencies) {
  FakeReplicas fake;
  const std::string first = vllm_metrics(2, 4, 1000, 150.0, 500);
  const std::string second = vllm_metrics(3, 5, 1100, 168.0, 540);
  fake.texts = {first, second};

  fake.scraper.scrape(31, 1, vllm_replica(), 61'031, 5000);
  ASSERT_THAT(fake.asked, SizeIs(1));
  EXPECT_EQ(fake.asked[0].first, vllm_replica());
  EXPECT_EQ(fake.asked[0].second, 61'031);
  // The first scrape: the gauges alone.
  ReplicaFigures gauges;
  gauges.requests_waiting_milli = 2000;
  gauges.requests_in_flight_milli = 4000;
  EXPECT_EQ(figures_of(fake.scraper, 31, 1), gauges);

  fake.scraper.scrape(31, 1, vllm_replica(), 61'031, 15'000);
  const ReplicaFigures figures = figures_of(fake.scraper, 31, 1);
  // 100 requests in 10 s, 18 s of latency among them: 180 ms each, 1.8 in the replica on average.
  EXPECT_EQ(figures.requests_waiting_milli, 3000);
  EXPECT_EQ(figures.requests_in_flight_milli, 5000);
  EXPECT_EQ(figures.requests_per_s_milli, 10'000);
  EXPECT_EQ(figures.mean_latency_ms, 180);
  EXPECT_EQ(figures.mean_concurrency_milli, 1800);
  EXPECT_FALSE(figures.mean_queue_time_ms.has_value());  // not exposed
  ASSERT_TRUE(figures.p95_latency_ms.has_value());
  // What extract_replica_figures gives for the whole of both scrapes: the scraper keeps of the
  // first only what the names read, and that is all the figures need.
  const ReplicaMetricNames names = replica_metric_preset("vllm").value();
  EXPECT_EQ(figures,
            extract_replica_figures(names, ReplicaScrape{5000, parse_exposition(first).value()},
                                    ReplicaScrape{15'000, parse_exposition(second).value()}));
  EXPECT_THAT(fake.lines, IsEmpty());
  EXPECT_THAT(fake.scraper.reports(), ElementsAre(ReplicaReport{31, 1, figures}));
}

TEST(ReplicaScraperTest, ABadExpositionGivesNoFiguresAndOneLogLine) {
  FakeReplicas fake;
  fake.texts = {vllm_metrics(0, 1, 100, 10.0, 100), std::string("vllm:num_requests_waiting two\n"),
                std::string("vllm:num_requests_waiting two\n"), vllm_metrics(1, 1, 300, 50.0, 300)};
  fake.scraper.scrape(31, 1, vllm_replica(), -1, 0);
  fake.scraper.scrape(31, 1, vllm_replica(), -1, 10'000);
  EXPECT_EQ(figures_of(fake.scraper, 31, 1), ReplicaFigures{});
  ASSERT_THAT(fake.lines, SizeIs(1));
  EXPECT_THAT(fake.lines[0], HasSubstr("job 31 run 1"));
  EXPECT_THAT(fake.lines[0], HasSubstr("line 1"));
  // The same failure again is not logged again.
  fake.scraper.scrape(31, 1, vllm_replica(), -1, 20'000);
  EXPECT_THAT(fake.lines, SizeIs(1));
  EXPECT_EQ(figures_of(fake.scraper, 31, 1), ReplicaFigures{});
  // Read again: the rates cover the interval since the last scrape that could be read.
  fake.scraper.scrape(31, 1, vllm_replica(), -1, 40'000);
  ASSERT_THAT(fake.lines, SizeIs(2));
  EXPECT_THAT(fake.lines[1], HasSubstr("read again"));
  const ReplicaFigures figures = figures_of(fake.scraper, 31, 1);
  EXPECT_EQ(figures.requests_per_s_milli, 5000);  // 200 requests in 40 s
  EXPECT_EQ(figures.mean_latency_ms, 200);        // 40 s over 200 requests
}

TEST(ReplicaScraperTest, AFailedFetchIsLoggedOncePerReason) {
  FakeReplicas fake;
  fake.texts = {fail("port", "connection refused"), fail("port", "connection refused"),
                fail("port", "no whole reply within 500 ms")};
  for (int i = 0; i < 3; ++i) fake.scraper.scrape(31, 1, vllm_replica(), -1, i * 1000);
  ASSERT_THAT(fake.lines, SizeIs(2));
  EXPECT_THAT(fake.lines[0], HasSubstr("connection refused"));
  EXPECT_THAT(fake.lines[1], HasSubstr("no whole reply"));
  // Still reported, without figures.
  EXPECT_THAT(fake.scraper.reports(), ElementsAre(ReplicaReport{31, 1, {}}));
  // Each replica's failures are its own.
  fake.texts = {fail("port", "connection refused")};
  fake.scraper.scrape(32, 0, vllm_replica(), -1, 3000);
  EXPECT_THAT(fake.lines, SizeIs(3));
}

TEST(ReplicaScraperTest, UnusableMetricNamesAreLoggedAndNothingIsFetched) {
  FakeReplicas fake;
  ReplicaAssignment replica = vllm_replica();
  replica.metrics_preset = "sglang";
  fake.scraper.scrape(31, 1, replica, -1, 0);
  EXPECT_THAT(fake.asked, IsEmpty());
  ASSERT_THAT(fake.lines, SizeIs(1));
  EXPECT_THAT(fake.lines[0], HasSubstr("preset"));
  replica = vllm_replica();
  replica.metric_names = {{"requests_running", "not a name"}};
  fake.scraper.scrape(32, 1, replica, -1, 0);
  EXPECT_THAT(fake.asked, IsEmpty());
  EXPECT_THAT(fake.lines, SizeIs(2));
}

TEST(ReplicaScraperTest, AReplicaWithNothingToReadIsReportedWithoutFigures) {
  FakeReplicas fake;
  ReplicaAssignment replica = vllm_replica();
  replica.port = 0;
  fake.scraper.scrape(31, 1, replica, -1, 0);
  EXPECT_THAT(fake.asked, IsEmpty());
  EXPECT_THAT(fake.lines, IsEmpty());
  EXPECT_THAT(fake.scraper.reports(), ElementsAre(ReplicaReport{31, 1, {}}));
}

TEST(ReplicaScraperTest, ForgetDropsTheReplicaAndItsPreviousScrape) {
  FakeReplicas fake;
  fake.texts = {vllm_metrics(0, 1, 100, 10.0, 100), vllm_metrics(0, 2, 100, 10.0, 100),
                vllm_metrics(0, 3, 200, 20.0, 200)};
  fake.scraper.scrape(32, 0, vllm_replica(), -1, 0);
  fake.scraper.scrape(31, 2, vllm_replica(), -1, 0);
  using Key = std::pair<std::int64_t, std::int64_t>;
  EXPECT_THAT(fake.scraper.known(), ElementsAre(Key{31, 2}, Key{32, 0}));
  EXPECT_THAT(fake.scraper.reports(), SizeIs(2));
  EXPECT_EQ(fake.scraper.reports()[0].job, 31);  // by job and run
  fake.scraper.forget(32, 0);
  fake.scraper.forget(99, 1);  // not known: nothing happens
  EXPECT_THAT(fake.scraper.known(), ElementsAre(Key{31, 2}));
  ASSERT_THAT(fake.scraper.reports(), SizeIs(1));
  // Scraped again, it starts afresh: the gauges alone.
  fake.scraper.scrape(32, 0, vllm_replica(), -1, 10'000);
  EXPECT_EQ(figures_of(fake.scraper, 32, 0).requests_in_flight_milli, 3000);
  EXPECT_FALSE(figures_of(fake.scraper, 32, 0).requests_per_s_milli.has_value());
}

// --- the file a replica writes ---

class ReplicaMetricsFileTest : public ::testing::Test {
 protected:
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.file(name)) << text;
  }
  static std::string refused(const std::string& path, int owner_uid = -1) {
    auto read = read_replica_metrics_file(path, owner_uid);
    if (read) return "accepted";
    EXPECT_EQ(read.error().field, "metrics_file");
    return read.error().reason;
  }

  TempDir dir_;
};

TEST_F(ReplicaMetricsFileTest, ReadsARegularFileOfTheReplicasUid) {
  const std::string text = vllm_metrics(1, 2, 3, 4.0, 3);
  write("m.prom", text);
  EXPECT_EQ(read_replica_metrics_file(dir_.file("m.prom"), -1).value(), text);
  EXPECT_EQ(read_replica_metrics_file(dir_.file("m.prom"), static_cast<int>(::geteuid())).value(),
            text);
  write("empty.prom", "");
  EXPECT_EQ(read_replica_metrics_file(dir_.file("empty.prom"), -1).value(), "");
  // The same through fetch_replica_metrics, which prefers the file to the port.
  ReplicaAssignment replica = vllm_replica();
  replica.metrics_file = dir_.file("m.prom");
  replica.port = test_support::refusing_port();
  EXPECT_EQ(fetch_replica_metrics(replica, -1).value(), text);
}

TEST_F(ReplicaMetricsFileTest, RefusesLinksOtherFilesAndTooMuch) {
  write("m.prom", "x 1\n");
  fs::create_symlink(dir_.file("m.prom"), dir_.file("link.prom"));
  EXPECT_THAT(refused(dir_.file("link.prom")), HasSubstr("symbolic link"));
  fs::create_directory(dir_.file("folder"));
  EXPECT_THAT(refused(dir_.file("folder")), HasSubstr("not a regular file"));
  // A FIFO would block a reader: it is refused before it is opened for reading.
  ASSERT_EQ(::mkfifo(dir_.file("fifo").c_str(), 0600), 0);
  EXPECT_THAT(refused(dir_.file("fifo")), HasSubstr("not a regular file"));
  EXPECT_THAT(refused("/dev/null"), HasSubstr("not a regular file"));
  // Another uid's file, when the replica runs as a uid of its own.
  const int other = static_cast<int>(::geteuid()) + 1;
  EXPECT_THAT(refused(dir_.file("m.prom"), other),
              HasSubstr(fmt::format("not by the replica's uid {}", other)));
  // Larger than a scrape may be (a sparse file: no disk used).
  {
    std::ofstream(dir_.file("big.prom")).put('x');
    fs::resize_file(dir_.file("big.prom"), kMaxExpositionBytes + 1);
  }
  EXPECT_THAT(refused(dir_.file("big.prom")), HasSubstr("more than the 8 MiB"));
  fs::resize_file(dir_.file("big.prom"), kMaxExpositionBytes);
  EXPECT_EQ(refused(dir_.file("big.prom")), "accepted");
  EXPECT_THAT(refused(dir_.file("missing.prom")), HasSubstr("No such file"));
  EXPECT_THAT(refused("m.prom"), HasSubstr("not an absolute path"));
}

// --- the replica's endpoint ---

TEST(ReplicaMetricsHttpTest, GetsTheBodyOfMetrics) {
  const std::string text = vllm_metrics(1, 2, 3, 4.0, 3);
  ScriptedServer server(1, [&](const std::string&, int) { return http_reply(200, text); });
  EXPECT_EQ(get_replica_metrics(server.port(), std::chrono::milliseconds(2000)).value(), text);
  ASSERT_THAT(server.requests(), SizeIs(1));
  EXPECT_THAT(server.requests()[0], ::testing::StartsWith("GET /metrics HTTP/1.1\r\n"));
  ReplicaAssignment replica = vllm_replica();
  replica.port = server.port();
  EXPECT_EQ(fetch_replica_metrics(replica, -1).value(), text);
  replica.port = 0;
  EXPECT_EQ(fetch_replica_metrics(replica, -1).error().field, "replica");
}

TEST(ReplicaMetricsHttpTest, AKeptAliveOrChunkedReplyIsReadWithoutWaitingForTheClose) {
  // The server keeps the connection open after its reply (it waits for a second request).
  ScriptedServer kept(2, [](const std::string&, int) {
    return std::string(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nx 1\n\r\n0\r\n\r\n");
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(get_replica_metrics(kept.port(), std::chrono::milliseconds(5000)).value(), "x 1\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(ReplicaMetricsHttpTest, RefusesAnotherStatusASlowReplicaAndTooLargeABody) {
  ScriptedServer broken(1, [](const std::string&, int) { return http_reply(503, "loading"); });
  auto got = get_replica_metrics(broken.port(), std::chrono::milliseconds(2000));
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().field, "port");
  EXPECT_THAT(got.error().reason, HasSubstr("HTTP status 503"));

  got = get_replica_metrics(test_support::refusing_port(), std::chrono::milliseconds(2000));
  ASSERT_FALSE(got.has_value());
  EXPECT_THAT(got.error().reason, HasSubstr("refused"));

  ScriptedServer slow(1, [](const std::string&, int) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    return http_reply(200, "x 1\n");
  });
  const auto start = std::chrono::steady_clock::now();
  got = get_replica_metrics(slow.port(), std::chrono::milliseconds(200));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(800));
  ASSERT_FALSE(got.has_value());
  EXPECT_THAT(got.error().reason, HasSubstr("no whole reply within 200 ms"));

  for (std::size_t size : {kMaxExpositionBytes + 1, kMaxExpositionBytes + 1024 * 1024}) {
    ScriptedServer large(
        1, [&](const std::string&, int) { return http_reply(200, std::string(size, '#')); });
    got = get_replica_metrics(large.port(), std::chrono::milliseconds(5000));
    ASSERT_FALSE(got.has_value()) << size;
    EXPECT_THAT(got.error().reason, HasSubstr("larger than the 8 MiB")) << size;
  }
  EXPECT_EQ(get_replica_metrics(0, std::chrono::milliseconds(100)).error().reason,
            "http://127.0.0.1:0/metrics: not a port");
}

}  // namespace
}  // namespace tidepool
