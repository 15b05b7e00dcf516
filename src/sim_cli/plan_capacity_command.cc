#include "sim_cli/plan_capacity_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/client_session.h"
#include "config/duration_text.h"
#include "config/tenants_file.h"
#include "core/decimal_text.h"
#include "core/duration_format.h"
#include "core/scheduler.h"
#include "report/text_table.h"
#include "sim/capacity_search.h"
#include "sim/cluster_simulation.h"
#include "sim/philly_workload.h"
#include "sim/scaled_pool.h"
#include "sim_cli/pool_source.h"
#include "sim_cli/server_history.h"
#include "sim_cli/trace_source.h"

namespace tidepool {
namespace {

constexpr int kMaxThreads = 64;
// The longest target accepted (a year), so that it stays far from overflow.
constexpr Seconds kMaxTarget = Seconds{365} * kSecondsPerDay;
// The longest --since accepted (ten years), and the span taken without it.
constexpr Seconds kMaxSince = Seconds{3650} * kSecondsPerDay;
constexpr std::string_view kDefaultSince = "30d";
// The job ids listed in a message, at most.
constexpr std::size_t kListedIds = 10;

struct CapacityOptions {
  PoolSource pool;
  TraceSource trace;
  bool from_server = false;
  ClientFlags client;  // --server and --token of --from-server (its output flag unused)
  std::string since;   // empty: kDefaultSince
  std::string tenants;
  std::string target;
  std::string growth = "0";
  std::string policy = "tidepool";
  std::int64_t limit_jobs = 0;
  std::int64_t max_gpus = 0;
  int threads = 2;
  std::string output = "table";
};

// "0.2" or "20%" as parts per million, exactly (up to 6 decimals as a share).
Result<std::int64_t> parse_growth(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return fail("--growth", fmt::format("'{}' {}; expected a share of more load such as 0.2 or "
                                        "20% (0 to {})",
                                        text, why, kMaxGrowthPpm / 1'000'000));
  };
  std::string_view number = text;
  const bool percent = number.ends_with('%');
  if (percent) number.remove_suffix(1);
  const int decimals = percent ? 4 : 6;  // a percent is 10^4 ppm
  const auto ppm = read_decimal(number, {.places = decimals, .max = kMaxGrowthPpm});
  if (ppm) return *ppm;
  switch (ppm.error()) {
    case DecimalError::kNotANumber:
      return bad("is not a number");
    case DecimalError::kNegative:
      return bad("is negative");
    case DecimalError::kTooManyDecimals:
      return bad(fmt::format("has more than {} decimals", decimals));
    case DecimalError::kTooLarge:
      break;
  }
  return bad("is too large");
}

std::string queue_hours(double seconds) { return fmt::format("{:.2f}", seconds / 3600.0); }

std::string figures_text(const CapacityProbe& p) {
  return fmt::format(
      "p95 queue {} h, avg {} h, {}", queue_hours(static_cast<double>(p.summary.p95_queue_s)),
      queue_hours(p.summary.avg_queue_s),
      p.summary.never_started == 0 ? std::string("every job started")
                                   : fmt::format("{} jobs never started", p.summary.never_started));
}

std::string answer_text(const CapacitySearch& s, const std::string& target, std::int64_t max_gpus) {
  if (!s.answer) {
    return fmt::format("no pool up to {} GPUs ({} nodes, --max-gpus) meets p95 queue <= {}{}",
                       max_gpus, s.max_nodes, target,
                       s.below
                           ? fmt::format("; at {} GPUs: {}", s.below->gpus, figures_text(*s.below))
                           : std::string());
  }
  std::string text = fmt::format("smallest pool meeting p95 queue <= {}: {} GPUs ({}): {}", target,
                                 s.answer->gpus, s.answer->shape, figures_text(*s.answer));
  text += s.below ? fmt::format("; largest probed that misses: {} GPUs ({} nodes): {}",
                                s.below->gpus, s.below->nodes, figures_text(*s.below))
                  : std::string("; no smaller pool probed misses (one node meets it)");
  return text;
}

void print_capacity_table(const CapacitySearch& s, const std::string& target,
                          std::int64_t max_gpus) {
  TextTable table({"round", "nodes", "GPUs", "leaves", "p95 queue (h)", "avg queue (h)",
                   "never started", "meets", "wall (s)"});
  for (const CapacityProbe& p : s.probes) {
    table.add_row({std::to_string(p.round), std::to_string(p.nodes), std::to_string(p.gpus),
                   std::to_string(p.leaves),
                   queue_hours(static_cast<double>(p.summary.p95_queue_s)),
                   queue_hours(p.summary.avg_queue_s), std::to_string(p.summary.never_started),
                   p.meets ? "yes" : "no", fmt::format("{:.1f}", p.summary.wall_seconds)});
  }
  table.print(std::cout);
  std::cout << '\n' << answer_text(s, target, max_gpus) << '\n';
  const int rounds = s.probes.empty() ? 0 : s.probes.back().round;
  std::cout << fmt::format("search: {} probe{} in {} round{}, {:.1f} s wall\n", s.probes.size(),
                           s.probes.size() == 1 ? "" : "s", rounds, rounds == 1 ? "" : "s",
                           s.wall_seconds);
}

nlohmann::ordered_json probe_json(const CapacityProbe& p) {
  return {{"round", p.round},
          {"nodes", p.nodes},
          {"gpus", p.gpus},
          {"leaves", p.leaves},
          {"shape", p.shape},
          {"p95_queue_s", p.summary.p95_queue_s},
          {"avg_queue_s", p.summary.avg_queue_s},
          {"finished", p.summary.finished},
          {"never_started", p.summary.never_started},
          {"meets", p.meets},
          {"wall_s", p.summary.wall_seconds}};
}

void print_capacity_json(const CapacitySearch& s, const CapacityOptions& options, Seconds target,
                         std::int64_t growth_ppm, std::size_t jobs,
                         const nlohmann::ordered_json& source, std::int64_t template_gpus,
                         std::int64_t max_gpus) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["target_p95_queue_s"] = target;
  out["growth"] = static_cast<double>(growth_ppm) / 1e6;
  out["policy"] = options.policy;
  out["jobs"] = jobs;
  out["source"] = source;
  out["template_gpus"] = template_gpus;
  out["max_gpus"] = max_gpus;
  nlohmann::ordered_json probes = nlohmann::ordered_json::array();
  for (const CapacityProbe& p : s.probes) probes.push_back(probe_json(p));
  out["probes"] = std::move(probes);
  out["answer"] = s.answer ? probe_json(*s.answer) : nlohmann::ordered_json(nullptr);
  out["largest_missing"] = s.below ? probe_json(*s.below) : nlohmann::ordered_json(nullptr);
  out["summary"] = answer_text(s, format_duration(target), max_gpus);
  out["wall_s"] = s.wall_seconds;
  std::cout << out.dump(2) << '\n';
}

// The jobs to simulate, where they came from, and the epoch second of their time 0.
struct Workload {
  std::vector<SimJob> jobs;
  std::int64_t start_epoch = 0;
  nlohmann::ordered_json source;
};

// Exactly one source of jobs, and the flags of the other source left out; the --since span.
Result<Seconds> check_job_source(const CapacityOptions& options) {
  if (options.from_server && !options.trace.jobs.empty()) {
    return fail("--jobs", "give the jobs with --jobs TRACE or --from-server, not both");
  }
  if (!options.from_server) {
    if (options.trace.jobs.empty()) {
      return fail("--jobs",
                  "give the jobs with --jobs TRACE, or --from-server to take them from the "
                  "history of a running server");
    }
    if (!options.since.empty()) return fail("--since", "only with --from-server");
    if (!options.client.server.empty()) return fail("--server", "only with --from-server");
    if (!options.client.token.empty()) return fail("--token", "only with --from-server");
    return 0;
  }
  if (options.trace.format != "philly") return fail("--format", "only with --jobs");
  const std::string_view text = options.since.empty() ? kDefaultSince : options.since;
  const auto since = parse_duration(text, kMaxSince);
  if (!since) {
    return fail("--since", fmt::format("'{}' is not a time span up to 3650d (like 30d, 12h, "
                                       "3600; 0: the whole history)",
                                       text));
  }
  return *since;
}

std::string ids_text(std::span<const std::int64_t> ids) {
  std::string text;
  for (std::size_t i = 0; i < ids.size() && i < kListedIds; ++i) {
    text += fmt::format("{}{}", i == 0 ? "" : ", ", ids[i]);
  }
  if (ids.size() > kListedIds) text += fmt::format(" and {} more", ids.size() - kListedIds);
  return text;
}

Result<Workload> trace_workload(const TraceSource& source, const TenantBook& book) {
  auto trace = load_trace_source(source);
  if (!trace) return std::unexpected(trace.error());
  auto jobs = philly_workload(*trace, book, PhillyWorkloadOptions{});
  if (!jobs) return fail("--jobs", jobs.error().reason);
  return Workload{std::move(*jobs),
                  trace->start_epoch,
                  {{"kind", "trace"}, {"jobs", source.jobs}, {"format", source.format}}};
}

// The jobs the server at --server (or its other sources) holds, submitted in the last `since`
// seconds (0: all); what was counted and what was left out is said on stderr.
Result<Workload> server_workload(const CapacityOptions& options, Seconds since,
                                 const TenantBook& book, const GpuModelCatalog& models) {
  auto client = open_client(options.client);
  if (!client) return std::unexpected(client.error());
  auto reply = client->get_jobs({});
  if (!reply) return std::unexpected(reply.error());
  const std::int64_t now_ms = wall_clock_ms();
  const HistoryWindow window{now_ms, since == 0 ? 0 : now_ms - since * 1000};
  auto history = read_server_history(*reply, window);
  const auto bad_reply = [&](const Error& e) {
    return fail("--from-server",
                fmt::format("the jobs of the server at {}: {}", client->server(), e.message()));
  };
  if (!history) return bad_reply(history.error());
  const std::string span =
      since == 0 ? std::string() : fmt::format(" submitted in the last {}", format_duration(since));
  const auto never_ran = std::count_if(history->jobs.begin(), history->jobs.end(),
                                       [](const HistoryJob& job) { return !job.ran; });
  const auto running = std::count_if(history->jobs.begin(), history->jobs.end(),
                                     [](const HistoryJob& job) { return job.running; });
  std::string left_out;
  if (history->before_window > 0) {
    left_out += fmt::format("; {} older job{} left out (--since)", history->before_window,
                            history->before_window == 1 ? "" : "s");
  }
  if (!history->unknown_runtime.empty()) {
    left_out += fmt::format(
        "; {} job{} left out: never ran, no runtime_estimate or max_runtime (job{} {})",
        history->unknown_runtime.size(), history->unknown_runtime.size() == 1 ? "" : "s",
        history->unknown_runtime.size() == 1 ? "" : "s", ids_text(history->unknown_runtime));
  }
  if (history->jobs.empty()) {
    return fail("--from-server", fmt::format("the server at {} has no job to plan from{}{}",
                                             client->server(), span, left_out));
  }
  std::cerr << fmt::format(
      "plan capacity: {} jobs of the server at {}{}, {} still running (run time up to now), {} "
      "never ran (run time from runtime_estimate, else max_runtime){}\n",
      history->jobs.size(), client->server(), span, running, never_ran, left_out);
  auto jobs = history_workload(*history, book, models);
  if (!jobs) return bad_reply(jobs.error());
  return Workload{std::move(*jobs),
                  history->start_ms / 1000,
                  {{"kind", "server"},
                   {"server", client->server()},
                   {"since_s", since},
                   {"running", running},
                   {"never_ran", never_ran},
                   {"older", history->before_window},
                   {"unknown_runtime", history->unknown_runtime}}};
}

Result<void> run_plan_capacity(const CapacityOptions& options) {
  if (options.output != "table" && options.output != "json") {
    return fail("--output",
                fmt::format("unknown format '{}'; expected table or json", options.output));
  }
  const auto target = parse_duration(options.target, kMaxTarget);
  if (!target || *target <= 0) {
    return fail(
        "--target-p95-queue",
        fmt::format("'{}' is not a positive time up to 365d (like 1h, 90m, 3600)", options.target));
  }
  auto growth = parse_growth(options.growth);
  if (!growth) return std::unexpected(growth.error());
  const auto since = check_job_source(options);
  if (!since) return std::unexpected(since.error());
  if (options.limit_jobs < 0) return fail("--limit-jobs", "must not be negative (0: all jobs)");
  if (options.max_gpus < 0) return fail("--max-gpus", "must not be negative (0: 16x the template)");
  if (options.threads < 1 || options.threads > kMaxThreads) {
    return fail("--threads", fmt::format("must be 1..{}, got {}", kMaxThreads, options.threads));
  }
  auto config = scheduler_policy(options.policy);
  if (!config) return fail("--policy", config.error().reason);

  auto cluster = load_pool_source(options.pool);
  if (!cluster) return std::unexpected(cluster.error());
  const auto template_nodes = static_cast<std::int64_t>(cluster->nodes.size());
  const std::int64_t template_gpus = gpus_of_scaled(*cluster, template_nodes);
  if (template_gpus == 0) return fail("--cluster", "the template pool has no GPUs");
  const std::int64_t max_gpus = options.max_gpus > 0 ? options.max_gpus : 16 * template_gpus;
  // The most nodes within max_gpus (gpus_of grows with the node count).
  std::int64_t lo = 0;
  std::int64_t hi = kMaxClusterNodes;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (gpus_of_scaled(*cluster, mid) <= max_gpus) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int max_nodes = static_cast<int>(lo);
  if (max_nodes < 1) {
    return fail("--max-gpus", fmt::format("{} is less than one node of the template ({} GPUs)",
                                          max_gpus, gpus_of_scaled(*cluster, 1)));
  }

  auto spec = load_tenants_yaml(options.tenants, cluster->models);
  if (!spec) return std::unexpected(spec.error());
  auto book = TenantBook::create(*spec, cluster->models);
  if (!book) return fail("--tenants", book.error().message());
  auto source = options.from_server ? server_workload(options, *since, *book, cluster->models)
                                    : trace_workload(options.trace, *book);
  if (!source) return std::unexpected(source.error());
  std::vector<SimJob>& workload = source->jobs;
  if (options.limit_jobs > 0 && static_cast<std::size_t>(options.limit_jobs) < workload.size()) {
    workload.resize(static_cast<std::size_t>(options.limit_jobs));
  }
  if (auto ok = compress_submit_times(workload, *growth); !ok) {
    return fail("--growth", ok.error().reason);
  }
  config->day_offset = ((source->start_epoch % kSecondsPerDay) + kSecondsPerDay) % kSecondsPerDay;
  // Fractions (none in Philly) are placed weighed against the workload's own task shapes.
  if (std::any_of(workload.begin(), workload.end(),
                  [](const SimJob& job) { return job.job.gang.task.is_fractional(); })) {
    for (const SimJob& job : workload) config->typical_tasks.push_back(job.job.gang.task);
  }

  CapacityInputs in;
  in.pattern = &*cluster;
  in.tenants = &*spec;
  in.template_gpus = gpus_per_model(*cluster);
  in.config = &*config;
  in.workload = workload;
  in.target = *target;
  const int start = static_cast<int>(std::min<std::int64_t>(template_nodes, max_nodes));
  const std::string target_text = format_duration(*target);
  std::cerr << fmt::format(
      "plan capacity: {} jobs{}, policy {}, target p95 queue <= {}; template {} nodes / {} GPUs, "
      "search up to {} nodes / {} GPUs, {} thread{}\n",
      workload.size(),
      *growth == 0 ? ""
                   : fmt::format(" (load +{}%: submits compressed by 1/{})",
                                 static_cast<double>(*growth) / 1e4,
                                 1.0 + static_cast<double>(*growth) / 1e6),
      options.policy, target_text, template_nodes, template_gpus, max_nodes,
      gpus_of_scaled(*cluster, max_nodes), options.threads, options.threads == 1 ? "" : "s");
  const auto progress = [](const CapacityProbe& probe) {
    std::cerr << fmt::format(
        "round {}: {} ({} GPUs): p95 queue {:.2f} h, {} never started: {} ({:.1f} s)\n",
        probe.round, probe.shape, probe.gpus, probe.summary.p95_queue_s / 3600.0,
        probe.summary.never_started, probe.meets ? "meets" : "misses", probe.summary.wall_seconds);
  };
  auto result = search_capacity(in, start, max_nodes, options.threads, progress);
  if (!result) return std::unexpected(result.error());
  if (options.output == "json") {
    print_capacity_json(*result, options, *target, *growth, workload.size(), source->source,
                        template_gpus, max_gpus);
  } else {
    print_capacity_table(*result, target_text, max_gpus);
  }
  return {};
}

}  // namespace

void add_plan_capacity_command(CLI::App& plan, int* exit_code) {
  auto options = std::make_shared<CapacityOptions>();
  CLI::App* command = plan.add_subcommand(
      "capacity",
      "The smallest pool that keeps the p95 queueing time of a job trace (or of a server's job "
      "history) under a target, found by simulation: the template pool grown or shrunk in whole "
      "nodes (tenants' quotas scaled with it), searched by doubling then bisection with probes "
      "run in parallel");
  add_pool_options(*command, options->pool);
  add_trace_options(*command, options->trace, /*jobs_required=*/false);
  command->add_flag(
      "--from-server", options->from_server,
      "take the jobs from the history of a running server (GET /v1/jobs) instead of --jobs: each "
      "job's spec, submitted at its submission time, running as long as it actually ran");
  command->add_option("--since", options->since,
                      "with --from-server: only the jobs submitted in this last span, e.g. 30d, "
                      "12h (0: the whole history; default 30d)");
  add_client_flags(*command, options->client);
  command
      ->add_option("--tenants", options->tenants,
                   "tenants file (YAML); every team (cluster) of the trace, and every tenant and "
                   "queue of the server's jobs, must be in it; quotas are scaled with the pool, "
                   "each tenant keeping its share")
      ->required()
      ->check(CLI::ExistingFile);
  command
      ->add_option("--target-p95-queue", options->target,
                   "the p95 queueing time to stay under, e.g. 1h, 90m, 3600 (seconds)")
      ->required();
  command
      ->add_option("--growth", options->growth,
                   "more load than the trace: 0.2 or 20% for 20% more (submit times divided by "
                   "1.2; durations kept)")
      ->capture_default_str();
  command
      ->add_option("--policy", options->policy,
                   "scheduling policy of every probe (fifo-firstfit, quota-borrow, tiresias, "
                   "tidepool)")
      ->capture_default_str();
  command
      ->add_option("--limit-jobs", options->limit_jobs,
                   "only the first N jobs by submit time (0: all)")
      ->capture_default_str();
  command
      ->add_option("--max-gpus", options->max_gpus,
                   "largest pool to try, in GPUs (0: 16x the template)")
      ->capture_default_str();
  command
      ->add_option("--threads", options->threads,
                   "probes simulated at once, each on its own thread")
      ->capture_default_str();
  command->add_option("-o,--output", options->output, "output format: table or json")
      ->capture_default_str();
  command->footer(
      "Example: tidepool plan capacity --cluster data/clusters/philly-512.yaml "
      "--jobs philly-2017-09-10.csv --tenants data/tenants/philly-2017-09-10.yaml "
      "--target-p95-queue 1h --growth 0.2\n"
      "From a server: tidepool plan capacity --cluster data/clusters/example.yaml --tenants "
      "data/tenants/example.yaml --from-server --since 30d --target-p95-queue 1h\n"
      "Prints every probed pool (nodes, GPUs, p95 and avg queueing, jobs never started) and the "
      "smallest pool meeting the target, with the largest probed pool that misses it. A probe "
      "where some job never starts misses. Assumes queueing falls as the pool grows.\n"
      "With --from-server the jobs are those the token sees (an admin token: every tenant's), "
      "submitted in the --since span; a job's run time is the sum of its runs (a running job's "
      "up to now); a job that never ran counts with its runtime_estimate, else its max_runtime, "
      "else it is left out (said on stderr). " +
      connection_help());
  command->callback([options, exit_code] {
    if (auto ok = run_plan_capacity(*options); !ok) {
      std::cerr << "error: " << ok.error().message() << '\n';
      *exit_code = 1;
    }
  });
}

}  // namespace tidepool
