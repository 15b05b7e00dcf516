#include "api/replica_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

Exposition exposition_of(std::string_view text) {
  auto exposition = parse_exposition(text);
  EXPECT_TRUE(exposition.has_value()) << exposition.error().message();
  return exposition.value_or(Exposition{});
}

// The error of a text that must not parse.
Error error_of(std::string_view text) {
  auto exposition = parse_exposition(text);
  EXPECT_FALSE(exposition.has_value()) << text;
  return exposition ? Error{} : exposition.error();
}

ReplicaScrape scrape_at(std::int64_t at_ms, std::string_view text) {
  return ReplicaScrape{at_ms, exposition_of(text)};
}

ReplicaMetricNames names_of(std::string_view name) { return replica_metric_preset(name).value(); }

// ---- Parsing ----

TEST(ReplicaMetricsParse, ReadsHelpTypeAndSamples) {
  const Exposition metrics = exposition_of(
      "# HELP http_requests_total The total number of HTTP requests.\n"
      "# TYPE http_requests_total counter\n"
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
      "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n"
      "\n"
      "# A comment, ignored.\n"
      "metric_without_timestamp_and_labels 12.47\n"
      "vllm:num_requests_running{model_name=\"m\"} 8.0\n");
  ASSERT_EQ(metrics.samples.size(), 4U);
  const MetricSample& first = metrics.samples[0];
  EXPECT_EQ(first.name, "http_requests_total");
  ASSERT_EQ(first.labels.size(), 2U);
  EXPECT_EQ(first.labels[0].name, "method");
  EXPECT_EQ(first.labels[0].value, "post");
  EXPECT_EQ(first.labels[1].name, "code");
  EXPECT_EQ(first.labels[1].value, "200");
  EXPECT_DOUBLE_EQ(first.value, 1027);
  EXPECT_EQ(first.timestamp_ms, 1395066363000);
  EXPECT_DOUBLE_EQ(metrics.samples[1].value, 3);
  EXPECT_TRUE(metrics.samples[2].labels.empty());
  EXPECT_DOUBLE_EQ(metrics.samples[2].value, 12.47);
  EXPECT_EQ(metrics.samples[2].timestamp_ms, std::nullopt);
  EXPECT_EQ(metrics.samples[3].name, "vllm:num_requests_running");
  EXPECT_EQ(metrics.types.at("http_requests_total"), MetricType::kCounter);
  EXPECT_EQ(metrics.help.at("http_requests_total"), "The total number of HTTP requests.");
}

TEST(ReplicaMetricsParse, UnescapesLabelValuesAndHelp) {
  const Exposition metrics = exposition_of(
      "# HELP msdos_file_access_time_seconds Escaped: \\\\ and \\n, kept: \\q\n"
      "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find file:\\n"
      "\\\"FILE.TXT\\\"\"} 1.458255915e9\n"
      "utf8{name=\"caf\xc3\xa9 \xe2\x9c\x93\"} 1\n");
  ASSERT_EQ(metrics.samples.size(), 2U);
  EXPECT_EQ(metrics.samples[0].labels[0].value, "C:\\DIR\\FILE.TXT");
  EXPECT_EQ(metrics.samples[0].labels[1].value, "Cannot find file:\n\"FILE.TXT\"");
  EXPECT_DOUBLE_EQ(metrics.samples[0].value, 1.458255915e9);
  EXPECT_EQ(metrics.help.at("msdos_file_access_time_seconds"), "Escaped: \\ and \n, kept: \\q");
  EXPECT_EQ(metrics.samples[1].labels[0].value, "caf\xc3\xa9 \xe2\x9c\x93");
}

TEST(ReplicaMetricsParse, ReadsSpecialValues) {
  const Exposition metrics =
      exposition_of("a +Inf\nb -Inf\nc NaN\nd Inf\ne nan\nf -1.5e-3\ng +2\nh -0\ni 1E3\nj .5\n");
  ASSERT_EQ(metrics.samples.size(), 10U);
  EXPECT_EQ(metrics.samples[0].value, kInf);
  EXPECT_EQ(metrics.samples[1].value, -kInf);
  EXPECT_TRUE(std::isnan(metrics.samples[2].value));
  EXPECT_EQ(metrics.samples[3].value, kInf);
  EXPECT_TRUE(std::isnan(metrics.samples[4].value));
  EXPECT_DOUBLE_EQ(metrics.samples[5].value, -0.0015);
  EXPECT_DOUBLE_EQ(metrics.samples[6].value, 2);
  EXPECT_DOUBLE_EQ(metrics.samples[7].value, 0);
  EXPECT_DOUBLE_EQ(metrics.samples[8].value, 1000);
  EXPECT_DOUBLE_EQ(metrics.samples[9].value, 0.5);
}

TEST(ReplicaMetricsParse, IsLenientAboutLayout) {
  const Exposition metrics = exposition_of(
      "  #TYPE spaced gauge\r\n"
      "spaced { a = \"1\" , b=\"2\", } \t 3 \r\n"
      "empty_braces{} 4\n"
      "\t\n"
      "#\n"
      "# EOF\n"
      "last_line_without_newline 5");
  ASSERT_EQ(metrics.samples.size(), 3U);
  EXPECT_EQ(metrics.types.at("spaced"), MetricType::kGauge);
  ASSERT_EQ(metrics.samples[0].labels.size(), 2U);
  EXPECT_EQ(metrics.samples[0].labels[1].value, "2");
  EXPECT_DOUBLE_EQ(metrics.samples[0].value, 3);
  EXPECT_TRUE(metrics.samples[1].labels.empty());
  EXPECT_DOUBLE_EQ(metrics.samples[2].value, 5);
  EXPECT_TRUE(exposition_of("").samples.empty());
}

TEST(ReplicaMetricsParse, ReadsAHistogramAndASummary) {
  const Exposition metrics = exposition_of(
      "# TYPE latency_seconds histogram\n"
      "latency_seconds_bucket{le=\"0.05\"} 24054\n"
      "latency_seconds_bucket{le=\"1\"} 33444\n"
      "latency_seconds_bucket{le=\"+Inf\"} 144320\n"
      "latency_seconds_sum 53423\n"
      "latency_seconds_count 144320\n"
      "# TYPE rpc_duration_seconds summary\n"
      "rpc_duration_seconds{quantile=\"0.5\"} 4773\n"
      "rpc_duration_seconds_sum 1.7560473e+07\n"
      "rpc_duration_seconds_count 2693\n");
  EXPECT_EQ(metrics.samples.size(), 8U);
  EXPECT_EQ(metrics.types.at("latency_seconds"), MetricType::kHistogram);
  EXPECT_EQ(metrics.types.at("rpc_duration_seconds"), MetricType::kSummary);
}

TEST(ReplicaMetricsParse, ErrorsNameTheLineAndTheReason) {
  struct Case {
    std::string text;
    std::string line;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"ok 1\nbroken{a=\"1\" 2\n", "line 2", "expected ',' or '}'"},
      {"broken{a=\"1\",\n", "line 1", "no closing '}'"},
      {"broken{a=\"1}\n", "line 1", "no closing quote"},
      {"broken{a=1} 2\n", "line 1", "no quoted value"},
      {"broken{a} 2\n", "line 1", "has no '='"},
      {"broken{1a=\"x\"} 2\n", "line 1", "expected a label name"},
      {"broken{a:b=\"x\"} 2\n", "line 1", "has no '='"},
      {"broken{,} 2\n", "line 1", "expected a label name"},
      {"broken{a=\"\\t\"} 2\n", "line 1", "unknown escape \\t"},
      {"broken{a=\"1\",a=\"2\"} 2\n", "line 1", "label a appears twice"},
      {"broken{a=\"\xff\"} 2\n", "line 1", "not valid UTF-8"},
      {"broken{a=\"\xc0\xaf\"} 2\n", "line 1", "not valid UTF-8"},  // overlong '/'
      {"\n\nbroken\n", "line 3", "has no value"},
      {"broken 1,5\n", "line 1", "not a number"},
      {"broken 0x10\n", "line 1", "not a number"},
      {"broken ++1\n", "line 1", "not a number"},
      {"broken 1e999\n", "line 1", "not a number"},
      {"broken one\n", "line 1", "not a number"},
      {"broken 1 12.5\n", "line 1", "not a timestamp"},
      {"broken 1 12 13\n", "line 1", "unexpected text after the timestamp"},
      {"bro-ken 1\n", "line 1", "expected a blank or '{'"},
      {"9lives 1\n", "line 1", "expected a metric name"},
      {"{a=\"1\"} 1\n", "line 1", "expected a metric name"},
      {"# TYPE x gauge\n# TYPE x counter\n", "line 2", "a second TYPE line for x"},
      {"# TYPE x enum\n", "line 1", "unknown type \"enum\""},
      {"# TYPE x gauge extra\n", "line 1", "unexpected text after the type"},
      {"# TYPE\n", "line 1", "no valid metric name"},
      {"# HELP 1x text\n", "line 1", "no valid metric name"},
      {"# HELP x a\n# HELP x b\n", "line 2", "a second HELP line for x"},
      {"# HELP x \xff\n", "line 1", "not UTF-8"},
      {"x 1\n# TYPE x gauge\n", "line 2", "comes after its samples"},
      {"h_bucket{le=\"1\"} 1\n# TYPE h histogram\n", "line 2", "comes after its samples"},
      {"# TYPE h histogram\nh_bucket 1\n", "line 2", "no `le` label"},
      {"# TYPE h histogram\nh_bucket{le=\"fast\"} 1\n", "line 2", "no `le` label"},
      {"# TYPE h histogram\nh_bucket{le=\"NaN\"} 1\n", "line 2", "no `le` label"},
      {"x{a=\"1\",b=\"2\"} 1\nx{b=\"2\",a=\"1\"} 2\n", "line 2", "a second sample of x"},
      {"x 1\nx 2\n", "line 2", "a second sample of x"},
  };
  for (const Case& c : cases) {
    const Error error = error_of(c.text);
    EXPECT_EQ(error.field, c.line) << c.text;
    EXPECT_THAT(error.reason, HasSubstr(c.reason)) << c.text;
  }
}

TEST(ReplicaMetricsParse, ErrorsShowNoRawBytes) {
  const Error error = error_of("\x01\x7f\xfe\n\x1b[2J garbage");
  for (const char c : error.reason) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
  }
  // Names are quoted short too, however long they are.
  const std::string long_name(5'000, 'x');
  for (const std::string& text :
       {std::string(500, '-'), long_name + " 1,5", long_name + "{" + long_name + "=1} 1",
        long_name + " 1\n" + long_name + " 2", "# TYPE " + long_name + " gauge extra"}) {
    EXPECT_THAT(error_of(text).reason.size(), ::testing::Lt(200U));
  }
}

TEST(ReplicaMetricsParse, RefusesInputPastItsCaps) {
  EXPECT_THAT(error_of(std::string(kMaxExpositionBytes + 1, '\n')).reason,
              HasSubstr("larger than 8 MiB"));

  const Error long_line = error_of("ok 1\n" + std::string(kMaxExpositionLineBytes + 1, 'x'));
  EXPECT_EQ(long_line.field, "line 2");
  EXPECT_THAT(long_line.reason, HasSubstr("longer than 64 KiB"));
  EXPECT_TRUE(parse_exposition("# " + std::string(kMaxExpositionLineBytes - 2, 'x')).has_value());

  const Error lines = error_of(std::string(kMaxExpositionLines + 1, '\n'));
  EXPECT_EQ(lines.field, "line 100001");
  EXPECT_TRUE(parse_exposition(std::string(kMaxExpositionLines, '\n')).has_value());

  std::string series;
  for (std::size_t i = 0; i <= kMaxExpositionSeries; ++i) {
    series += "s{i=\"" + std::to_string(i) + "\"} 1\n";
  }
  const Error too_many = error_of(series);
  EXPECT_EQ(too_many.field, "line 20001");
  EXPECT_THAT(too_many.reason, HasSubstr("more than 20000 samples"));
  EXPECT_TRUE(parse_exposition(series.substr(0, series.rfind("s{"))).has_value());

  std::string labels = "l{";
  for (std::size_t i = 0; i <= kMaxLabelsPerSeries; ++i) {
    labels += "l" + std::to_string(i) + "=\"v\",";
  }
  EXPECT_THAT(error_of(labels + "} 1\n").reason, HasSubstr("more than 64 labels"));
}

TEST(ReplicaMetricsParse, WritesWhatItReadsBack) {
  const std::string text =
      "# HELP b Help with \\\\ and \\n.\n"
      "# TYPE b histogram\n"
      "b_bucket{le=\"0.5\",model_name=\"a\\\"b\\\\c\\nd\"} 3 -17\n"
      "b_bucket{le=\"+Inf\",model_name=\"a\\\"b\\\\c\\nd\"} 4\n"
      "nan NaN\n"
      "inf -Inf\n"
      "small 1e-300\n"
      "large 123456789012345680000\n"
      "negative_zero -0\n";
  const Exposition first = exposition_of(text);
  const std::string written = format_exposition(first);
  const Exposition second = exposition_of(written);
  EXPECT_EQ(format_exposition(second), written);
  ASSERT_EQ(second.samples.size(), first.samples.size());
  for (std::size_t i = 0; i < first.samples.size(); ++i) {
    const MetricSample& a = first.samples[i];
    const MetricSample& b = second.samples[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.labels.size(), b.labels.size());
    for (std::size_t k = 0; k < a.labels.size() && k < b.labels.size(); ++k) {
      EXPECT_EQ(a.labels[k].value, b.labels[k].value);
    }
    EXPECT_TRUE((std::isnan(a.value) && std::isnan(b.value)) || a.value == b.value) << a.name;
    EXPECT_EQ(std::signbit(a.value), std::signbit(b.value)) << a.name;
    EXPECT_EQ(a.timestamp_ms, b.timestamp_ms);
  }
  EXPECT_EQ(second.help.at("b"), "Help with \\ and \n.");
  EXPECT_EQ(second.types.at("b"), MetricType::kHistogram);
}

// ---- Names ----

TEST(ReplicaMetricNames, PresetsNameTheServersMetrics) {
  const ReplicaMetricNames vllm = names_of("vllm");
  EXPECT_EQ(vllm.requests_waiting, "vllm:num_requests_waiting");
  EXPECT_EQ(vllm.requests_running, "vllm:num_requests_running");
  EXPECT_EQ(vllm.requests_completed, "vllm:request_success_total");
  EXPECT_EQ(vllm.latency_histogram, "vllm:e2e_request_latency_seconds");
  EXPECT_EQ(vllm.latency_sum, "vllm:e2e_request_latency_seconds_sum");
  EXPECT_EQ(vllm.latency_unit, TimeUnit::kSeconds);

  const ReplicaMetricNames triton = names_of("triton");
  EXPECT_EQ(triton.requests_waiting, "nv_inference_pending_request_count");
  EXPECT_EQ(triton.requests_running, "");
  EXPECT_EQ(triton.requests_completed, "nv_inference_request_success");
  EXPECT_EQ(triton.latency_sum, "nv_inference_request_duration_us");
  EXPECT_EQ(triton.queue_time_sum, "nv_inference_queue_duration_us");
  EXPECT_EQ(triton.latency_unit, TimeUnit::kMicroseconds);
  EXPECT_EQ(triton.latency_histogram, "");

  EXPECT_EQ(names_of("none").requests_waiting, "");
  const auto unknown = replica_metric_preset("tgi");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().field, "preset");
}

TEST(ReplicaMetricNames, EachNameCanBeOverridden) {
  const auto names = replica_metric_names(
      "triton", {{"latency_histogram", "nv_inference_first_response_histogram_ms"},
                 {"latency_histogram_unit", "ms"},
                 {"requests_running", "my:in_flight"},
                 {"queue_time_sum", ""}});
  ASSERT_TRUE(names.has_value()) << names.error().message();
  EXPECT_EQ(names->latency_histogram, "nv_inference_first_response_histogram_ms");
  EXPECT_EQ(names->latency_histogram_unit, TimeUnit::kMilliseconds);
  EXPECT_EQ(names->requests_running, "my:in_flight");
  EXPECT_EQ(names->queue_time_sum, "");
  EXPECT_EQ(names->requests_waiting, "nv_inference_pending_request_count");

  ReplicaMetricNames kept = names_of("vllm");
  const auto bad_name = set_replica_metric(kept, "requests_waiting", "has space");
  ASSERT_FALSE(bad_name.has_value());
  EXPECT_EQ(bad_name.error().field, "requests_waiting");
  EXPECT_EQ(kept.requests_waiting, "vllm:num_requests_waiting");
  EXPECT_EQ(set_replica_metric(kept, "latency_unit", "minutes").error().field, "latency_unit");
  EXPECT_EQ(set_replica_metric(kept, "gpu_temperature", "x").error().field, "gpu_temperature");
  EXPECT_EQ(replica_metric_names("vllm", {{"requests_running", "1x"}}).error().field,
            "requests_running");
}

// ---- Figures ----

// A vLLM replica, as its documented metrics look, 15 s apart. Over the interval 100 requests
// finished (80 stopped, 20 at their length limit); their latency buckets rose by 5, 20, 50, 70,
// 85, 93, 98, 100 (cumulative, le 0.3 .. 5) and 100 (+Inf); their latency sum by 110.5 s; their
// queue time sum by 1.5 s.
constexpr std::string_view kVllmBefore =
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 2.0\n"
    "# TYPE vllm:num_requests_waiting gauge\n"
    "vllm:num_requests_waiting{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.0\n"
    "# TYPE vllm:request_success_total counter\n"
    "vllm:request_success_total{finished_reason=\"stop\",model_name=\"meta-llama/"
    "Llama-3.1-8B-Instruct\"} 45.0\n"
    "vllm:request_success_total{finished_reason=\"length\",model_name=\"meta-llama/"
    "Llama-3.1-8B-Instruct\"} 5.0\n"
    "# TYPE vllm:e2e_request_latency_seconds histogram\n"
    "vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} 40.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"0.3\",model_name=\"m\"} 10.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"0.5\",model_name=\"m\"} 20.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"0.8\",model_name=\"m\"} 30.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"1.0\",model_name=\"m\"} 40.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"1.5\",model_name=\"m\"} 45.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"2.0\",model_name=\"m\"} 48.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"2.5\",model_name=\"m\"} 50.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"5.0\",model_name=\"m\"} 50.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 50.0\n"
    "vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 50.0\n"
    "# TYPE vllm:e2e_request_latency_seconds_created gauge\n"
    "vllm:e2e_request_latency_seconds_created{model_name=\"m\"} 1.7e+09\n"
    "# TYPE vllm:request_queue_time_seconds histogram\n"
    "vllm:request_queue_time_seconds_sum{model_name=\"m\"} 2.0\n"
    "vllm:request_queue_time_seconds_count{model_name=\"m\"} 50.0\n";

constexpr std::string_view kVllmAfter =
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 8.0\n"
    "# TYPE vllm:num_requests_waiting gauge\n"
    "vllm:num_requests_waiting{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 3.0\n"
    "# TYPE vllm:request_success_total counter\n"
    "vllm:request_success_total{finished_reason=\"stop\",model_name=\"meta-llama/"
    "Llama-3.1-8B-Instruct\"} 125.0\n"
    "vllm:request_success_total{finished_reason=\"length\",model_name=\"meta-llama/"
    "Llama-3.1-8B-Instruct\"} 25.0\n"
    "# TYPE vllm:e2e_request_latency_seconds histogram\n"
    "vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} 150.5\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"0.3\",model_name=\"m\"} 15.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"0.5\",model_name=\"m\"} 40.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"0.8\",model_name=\"m\"} 80.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"1.0\",model_name=\"m\"} 110.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"1.5\",model_name=\"m\"} 130.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"2.0\",model_name=\"m\"} 141.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"2.5\",model_name=\"m\"} 148.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"5.0\",model_name=\"m\"} 150.0\n"
    "vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 150.0\n"
    "vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 150.0\n"
    "# TYPE vllm:request_queue_time_seconds histogram\n"
    "vllm:request_queue_time_seconds_sum{model_name=\"m\"} 3.5\n"
    "vllm:request_queue_time_seconds_count{model_name=\"m\"} 150.0\n";

TEST(ReplicaFigures, FromTwoVllmScrapes) {
  const ReplicaFigures figures = extract_replica_figures(
      names_of("vllm"), scrape_at(10'000, kVllmBefore), scrape_at(25'000, kVllmAfter));
  EXPECT_EQ(figures.requests_waiting_milli, 3'000);
  EXPECT_EQ(figures.requests_in_flight_milli, 8'000);
  EXPECT_EQ(figures.requests_per_s_milli, 6'667);  // 100 requests / 15 s
  EXPECT_EQ(figures.mean_latency_ms, 1'105);       // 110.5 s / 100
  // Rank 0.95 x 100 = 95 falls in (2.0, 2.5], which holds 98 - 93 = 5 of the interval's
  // observations: 2.0 + 0.5 x (95 - 93) / 5 = 2.2 s.
  EXPECT_EQ(figures.p95_latency_ms, 2'200);
  EXPECT_EQ(figures.mean_queue_time_ms, 15);         // 1.5 s / 100
  EXPECT_EQ(figures.mean_concurrency_milli, 7'367);  // 110.5 s of latency in 15 s
}

TEST(ReplicaFigures, TheFirstScrapeGivesTheGaugesOnly) {
  const ReplicaFigures figures =
      extract_replica_figures(names_of("vllm"), scrape_at(0, kVllmAfter));
  EXPECT_EQ(figures.requests_waiting_milli, 3'000);
  EXPECT_EQ(figures.requests_in_flight_milli, 8'000);
  EXPECT_EQ(figures.requests_per_s_milli, std::nullopt);
  EXPECT_EQ(figures.p95_latency_ms, std::nullopt);

  // Scrapes out of order or at the same time: no interval.
  const ReplicaFigures same_time = extract_replica_figures(
      names_of("vllm"), scrape_at(25'000, kVllmBefore), scrape_at(25'000, kVllmAfter));
  EXPECT_EQ(same_time.requests_waiting_milli, 3'000);
  EXPECT_EQ(same_time.requests_per_s_milli, std::nullopt);
  EXPECT_EQ(same_time.mean_latency_ms, std::nullopt);
}

// A Triton server with two models, 10 s apart: the figures add up over the models. 800 requests
// finished (600 + 200), their request time rose by 7 000 000 us, their queue time by 2 000 000 us.
TEST(ReplicaFigures, FromTwoTritonScrapesSummedOverModels) {
  const std::string_view before =
      "# HELP nv_inference_request_success Number of successful inference requests\n"
      "# TYPE nv_inference_request_success counter\n"
      "nv_inference_request_success{model=\"resnet\",version=\"1\"} 1000\n"
      "nv_inference_request_success{model=\"bert\",version=\"1\"} 200\n"
      "# TYPE nv_inference_request_duration_us counter\n"
      "nv_inference_request_duration_us{model=\"resnet\",version=\"1\"} 5000000\n"
      "nv_inference_request_duration_us{model=\"bert\",version=\"1\"} 4000000\n"
      "# TYPE nv_inference_queue_duration_us counter\n"
      "nv_inference_queue_duration_us{model=\"resnet\",version=\"1\"} 100000\n"
      "nv_inference_queue_duration_us{model=\"bert\",version=\"1\"} 50000\n"
      "# TYPE nv_inference_pending_request_count gauge\n"
      "nv_inference_pending_request_count{model=\"resnet\",version=\"1\"} 0\n"
      "nv_inference_pending_request_count{model=\"bert\",version=\"1\"} 0\n";
  const std::string_view after =
      "# TYPE nv_inference_request_success counter\n"
      "nv_inference_request_success{model=\"resnet\",version=\"1\"} 1600\n"
      "nv_inference_request_success{model=\"bert\",version=\"1\"} 400\n"
      "# TYPE nv_inference_request_duration_us counter\n"
      "nv_inference_request_duration_us{model=\"resnet\",version=\"1\"} 8000000\n"
      "nv_inference_request_duration_us{model=\"bert\",version=\"1\"} 8000000\n"
      "# TYPE nv_inference_queue_duration_us counter\n"
      "nv_inference_queue_duration_us{model=\"resnet\",version=\"1\"} 1300000\n"
      "nv_inference_queue_duration_us{model=\"bert\",version=\"1\"} 850000\n"
      "# TYPE nv_inference_pending_request_count gauge\n"
      "nv_inference_pending_request_count{model=\"resnet\",version=\"1\"} 4\n"
      "nv_inference_pending_request_count{model=\"bert\",version=\"1\"} 2\n"
      "# TYPE nv_gpu_utilization gauge\n"
      "nv_gpu_utilization{gpu_uuid=\"GPU-1\"} 0.93\n";
  const ReplicaFigures figures =
      extract_replica_figures(names_of("triton"), scrape_at(0, before), scrape_at(10'000, after));
  EXPECT_EQ(figures.requests_waiting_milli, 6'000);
  EXPECT_EQ(figures.requests_in_flight_milli, std::nullopt);  // Triton has no such gauge
  EXPECT_EQ(figures.requests_per_s_milli, 80'000);            // 800 / 10 s
  EXPECT_EQ(figures.mean_latency_ms, 9);                      // 8750 us, rounded
  EXPECT_EQ(figures.mean_queue_time_ms, 3);                   // 2500 us, half rounded up
  EXPECT_EQ(figures.p95_latency_ms, std::nullopt);            // no histogram named
  EXPECT_EQ(figures.mean_concurrency_milli, 700);             // 7 s of requests in 10 s
}

TEST(ReplicaFigures, ACounterThatFellWasReset) {
  // The replica restarted between the scrapes: the counters began again from 0, so their
  // increase is their new value (Prometheus' rule), not a negative difference.
  const ReplicaFigures figures = extract_replica_figures(
      names_of("triton"),
      scrape_at(0, "nv_inference_request_success 1000\nnv_inference_request_duration_us 9000000\n"),
      scrape_at(10'000,
                "nv_inference_request_success 30\nnv_inference_request_duration_us 600000\n"));
  EXPECT_EQ(figures.requests_per_s_milli, 3'000);  // 30 / 10 s
  EXPECT_EQ(figures.mean_latency_ms, 20);          // 600 000 us / 30

  // One series reset, the other not: each is counted on its own, then summed.
  const ReplicaFigures mixed =
      extract_replica_figures(names_of("triton"),
                              scrape_at(0,
                                        "nv_inference_request_success{model=\"a\"} 500\n"
                                        "nv_inference_request_success{model=\"b\"} 100\n"),
                              scrape_at(1'000,
                                        "nv_inference_request_success{model=\"a\"} 7\n"
                                        "nv_inference_request_success{model=\"b\"} 103\n"));
  EXPECT_EQ(mixed.requests_per_s_milli, 10'000);  // (7 + 3) / 1 s
}

TEST(ReplicaFigures, ASeriesNewSinceThePreviousScrapeRoseFromZero) {
  const ReplicaFigures figures = extract_replica_figures(
      names_of("vllm"), scrape_at(0, "vllm:request_success_total{finished_reason=\"stop\"} 10\n"),
      scrape_at(2'000,
                "vllm:request_success_total{finished_reason=\"stop\"} 14\n"
                "vllm:request_success_total{finished_reason=\"abort\"} 2\n"));
  EXPECT_EQ(figures.requests_per_s_milli, 3'000);  // (4 + 2) / 2 s
}

TEST(ReplicaFigures, MissingMetricsAreAbsentNotErrors) {
  const ReplicaFigures nothing = extract_replica_figures(names_of("vllm"), scrape_at(0, ""),
                                                         scrape_at(5'000, "other_metric 1\n"));
  EXPECT_EQ(nothing.requests_waiting_milli, std::nullopt);
  EXPECT_EQ(nothing.requests_in_flight_milli, std::nullopt);
  EXPECT_EQ(nothing.requests_per_s_milli, std::nullopt);
  EXPECT_EQ(nothing.mean_latency_ms, std::nullopt);
  EXPECT_EQ(nothing.p95_latency_ms, std::nullopt);
  EXPECT_EQ(nothing.mean_queue_time_ms, std::nullopt);
  EXPECT_EQ(nothing.mean_concurrency_milli, std::nullopt);

  // Named nothing: nothing read, even where the replica exposes it.
  const ReplicaFigures unnamed = extract_replica_figures(
      names_of("none"), scrape_at(0, kVllmBefore), scrape_at(1'000, kVllmAfter));
  EXPECT_EQ(unnamed.requests_waiting_milli, std::nullopt);
  EXPECT_EQ(unnamed.requests_per_s_milli, std::nullopt);

  // No request finished over the interval: the rate is 0, the latencies unknown.
  const ReplicaFigures idle = extract_replica_figures(names_of("vllm"), scrape_at(0, kVllmAfter),
                                                      scrape_at(15'000, kVllmAfter));
  EXPECT_EQ(idle.requests_per_s_milli, 0);
  EXPECT_EQ(idle.mean_latency_ms, std::nullopt);
  EXPECT_EQ(idle.p95_latency_ms, std::nullopt);
  EXPECT_EQ(idle.mean_concurrency_milli, 0);
}

TEST(ReplicaFigures, ValuesThatAreNoCountAreAbsent) {
  const ReplicaFigures figures = extract_replica_figures(
      names_of("vllm"),
      scrape_at(0, "vllm:num_requests_waiting -1\nvllm:num_requests_running NaN\n"));
  EXPECT_EQ(figures.requests_waiting_milli, std::nullopt);
  EXPECT_EQ(figures.requests_in_flight_milli, std::nullopt);
  const ReplicaFigures huge =
      extract_replica_figures(names_of("vllm"), scrape_at(0, "vllm:num_requests_waiting 1e300\n"));
  EXPECT_EQ(huge.requests_waiting_milli, std::nullopt);
}

TEST(ReplicaFigures, TheP95SumsBucketsOverLabelSetsByBound) {
  // Two models, the same bounds written two ways ("1" and "1.0"): summed by bound, as
  // sum by (le) does. Increases: le=1: 10 + 10, le=2: 20 + 18, +Inf: 20 + 20. Rank 0.95 x 40 =
  // 38 in (1, 2], which holds 38 - 20 = 18: 1 + 1 x (38 - 20) / 18 = 2 s.
  const ReplicaMetricNames names =
      replica_metric_names("none", {{"latency_histogram", "lat"}}).value();
  const ReplicaFigures figures = extract_replica_figures(
      names, scrape_at(0, ""),
      scrape_at(1'000,
                "lat_bucket{m=\"a\",le=\"1\"} 10\nlat_bucket{m=\"a\",le=\"2\"} 20\n"
                "lat_bucket{m=\"a\",le=\"+Inf\"} 20\n"
                "lat_bucket{m=\"b\",le=\"1.0\"} 10\nlat_bucket{m=\"b\",le=\"2.0\"} 18\n"
                "lat_bucket{m=\"b\",le=\"+Inf\"} 20\n"));
  EXPECT_EQ(figures.p95_latency_ms, 2'000);

  // A bucket without a bound spoils the histogram: no p95.
  const ReplicaFigures broken = extract_replica_figures(
      names, scrape_at(0, ""), scrape_at(1'000, "lat_bucket{le=\"1\"} 1\nlat_bucket 2\n"));
  EXPECT_EQ(broken.p95_latency_ms, std::nullopt);
}

TEST(ReplicaFigures, UnitsConvertToMilliseconds) {
  const ReplicaMetricNames names = replica_metric_names("none", {{"latency_histogram", "ttfr_ms"},
                                                                 {"latency_histogram_unit", "ms"},
                                                                 {"latency_sum", "lat_us_total"},
                                                                 {"latency_count", "done_total"},
                                                                 {"latency_unit", "us"}})
                                       .value();
  // Buckets 100 ms: 8, 500 ms: 30, 2000 ms: 40, +Inf: 40; rank 0.95 x 40 = 38 in (500, 2000],
  // holding 10: 500 + 1500 x (38 - 30) / 10 = 1700 ms.
  const ReplicaFigures figures = extract_replica_figures(
      names, scrape_at(0, ""),
      scrape_at(1'000,
                "ttfr_ms_bucket{le=\"100\"} 8\nttfr_ms_bucket{le=\"500\"} 30\n"
                "ttfr_ms_bucket{le=\"2000\"} 40\nttfr_ms_bucket{le=\"+Inf\"} 40\n"
                "lat_us_total 1500\ndone_total 3\n"));
  EXPECT_EQ(figures.p95_latency_ms, 1'700);
  EXPECT_EQ(figures.mean_latency_ms, 1);  // 500 us
}

// ---- histogram_quantile ----

TEST(HistogramQuantile, InterpolatesLinearlyWithinTheBucket) {
  // (0, 6], (0.5, 11], (1, 14], (+Inf, 19]: rank 9.5 in (0, 0.5], holding 5 from 6:
  // 0 + 0.5 x 3.5 / 5 = 0.35.
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, {{0, 6}, {0.5, 11}, {1, 14}, {kInf, 19}}), 0.35);
  // The lowest bucket starts at 0: rank 2 of 4 in (0, 10] -> 5.
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, {{10, 4}, {kInf, 4}}), 5);
  // In any order.
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, {{kInf, 19}, {1, 14}, {0.5, 11}, {0, 6}}), 0.35);
}

TEST(HistogramQuantile, FollowsPrometheusAtTheEdges) {
  // A rank in the +Inf bucket: the highest finite bound.
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.95, {{1, 5}, {2, 9}, {kInf, 100}}), 2);
  // A lowest bucket bounded at or below 0: its bound.
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, {{-1, 10}, {kInf, 10}}), -1);
  // Counts that fall are raised to the one before: 10, 10, 20, 20; rank 15 in (2, 3] -> 2.5
  // (unraised, 2 + 11 / 16).
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.75, {{1, 10}, {2, 4}, {3, 20}, {kInf, 20}}), 2.5);
  // Rank 10 of 20 with (1, 10], (2, 10]: the first bucket that reaches it.
  EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, {{1, 10}, {2, 10}, {kInf, 20}}), 1);
  EXPECT_DOUBLE_EQ(*histogram_quantile(1, {{1, 10}, {2, 20}, {kInf, 20}}), 2);
  EXPECT_DOUBLE_EQ(*histogram_quantile(0, {{1, 0}, {2, 20}, {kInf, 20}}), 1);

  EXPECT_EQ(histogram_quantile(0.5, {{1, 1}, {2, 2}}), std::nullopt);     // no +Inf bucket
  EXPECT_EQ(histogram_quantile(0.5, {{kInf, 3}}), std::nullopt);          // one bucket
  EXPECT_EQ(histogram_quantile(0.5, {{1, 0}, {kInf, 0}}), std::nullopt);  // no observations
  EXPECT_EQ(histogram_quantile(0.5, {}), std::nullopt);
  EXPECT_EQ(histogram_quantile(1.5, {{1, 1}, {kInf, 2}}), std::nullopt);
  EXPECT_EQ(histogram_quantile(-0.1, {{1, 1}, {kInf, 2}}), std::nullopt);
  EXPECT_EQ(histogram_quantile(std::nan(""), {{1, 1}, {kInf, 2}}), std::nullopt);
  EXPECT_EQ(histogram_quantile(0.5, {{std::nan(""), 1}, {kInf, 2}}), std::nullopt);
  EXPECT_EQ(histogram_quantile(0.5, {{1, std::nan("")}, {kInf, 2}}), std::nullopt);
  EXPECT_EQ(histogram_quantile(0.5, {{1, kInf}, {kInf, kInf}}), std::nullopt);
  EXPECT_EQ(histogram_quantile(0.9, {{-kInf, 1}, {5, 3}, {kInf, 3}}), std::nullopt);
}

}  // namespace
}  // namespace tidepool
