#include "cli/sim_run_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/pool_source.h"
#include "cli/trace_source.h"
#include "core/scheduler.h"
#include "core/tidal_window.h"
#include "sim/cluster_simulation.h"
#include "sim/inference_generator.h"
#include "sim/philly_trace.h"
#include "sim/philly_workload.h"
#include "sim/sim_run_report.h"
#include "sim/tenants_file.h"
#include "sim/text_table.h"

namespace tidepool {
namespace {

// The longest loan start or duration accepted (100 years), so sums stay far from overflow.
constexpr Seconds kMaxLoanSeconds = Seconds{100} * 365 * kSecondsPerDay;

struct RunOptions {
  PoolSource pool;
  TraceSource trace;
  std::string tenants;
  std::string policy;
  std::string out;
  std::uint64_t seed = 42;
  Seconds checkpoint_interval = 1800;
  std::vector<std::string> windows;
  std::string inference;
  std::string inference_tenant = "inference";
  std::vector<std::string> loans;
  std::int64_t limit_jobs = 0;
  Seconds horizon = 0;
};

// A loan as given on the command line, before its tenant is looked up.
struct LoanArg {
  std::string text;
  std::string tenant;
  int gpus = 0;
  Seconds start = 0;
  Seconds duration = 0;
};

std::string join(std::span<const std::string_view> names) {
  std::string text;
  for (std::string_view name : names) text += fmt::format("{}{}", text.empty() ? "" : ", ", name);
  return text;
}

// A whole non-negative decimal number, nothing else.
std::optional<std::int64_t> parse_count(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

// "90", "90s", "15m", "2h", "1d" as seconds.
std::optional<Seconds> parse_duration(std::string_view text) {
  Seconds unit = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = kSecondsPerDay;
        break;
      default:
        unit = 0;
    }
    if (unit != 0) text.remove_suffix(1);
    if (unit == 0) unit = 1;
  }
  const auto value = parse_count(text);
  if (!value || *value > kMaxLoanSeconds / unit) return std::nullopt;
  return *value * unit;
}

Result<std::vector<std::string>> parse_policies(const std::string& text) {
  const auto known = scheduler_policy_names();
  std::vector<std::string> policies;
  if (text == "all") {
    for (std::string_view name : known) policies.emplace_back(name);
    return policies;
  }
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string name = text.substr(begin, end - begin);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return fail("--policy", fmt::format("unknown policy '{}'; known: {} (or all, or several "
                                          "joined by commas)",
                                          name, join(known)));
    }
    if (std::find(policies.begin(), policies.end(), name) != policies.end()) {
      return fail("--policy", fmt::format("policy '{}' is given twice", name));
    }
    policies.push_back(name);
    begin = end + 1;
  }
  return policies;
}

// "peak[:trough]"; the trough defaults to peak / 8.
Result<std::pair<std::int64_t, std::int64_t>> parse_inference(const std::string& text) {
  const std::size_t colon = text.find(':');
  const auto peak = parse_count(std::string_view(text).substr(0, colon));
  const auto trough = colon == std::string::npos
                          ? std::optional<std::int64_t>(peak ? *peak / 8 : 0)
                          : parse_count(std::string_view(text).substr(colon + 1));
  if (!peak || !trough) {
    return fail("--inference", fmt::format("'{}' is not peak[:trough] in whole GPUs (e.g. 64 or "
                                           "64:8)",
                                           text));
  }
  return std::pair{*peak, *trough};
}

// "tenant:gpus:start:duration"; the tenant is everything before the last three fields.
Result<LoanArg> parse_loan(const std::string& text) {
  const auto bad = [&](std::string_view why) {
    return fail("--loan", fmt::format("'{}': {}; expected tenant:gpus:start:duration, e.g. "
                                      "search:64:2d:6h (times in seconds or with s/m/h/d)",
                                      text, why));
  };
  std::vector<std::string_view> parts;
  std::string_view rest = text;
  for (int i = 0; i < 3; ++i) {
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("too few fields");
    parts.push_back(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  LoanArg loan;
  loan.text = text;
  loan.tenant = std::string(rest);
  if (loan.tenant.empty()) return bad("the tenant is empty");
  const auto gpus = parse_count(parts[2]);
  if (!gpus || *gpus < 1 || *gpus > 1'000'000) return bad("gpus must be a whole number 1..1000000");
  loan.gpus = static_cast<int>(*gpus);
  const auto start = parse_duration(parts[1]);
  if (!start) return bad(fmt::format("start '{}' is not a time", parts[1]));
  const auto duration = parse_duration(parts[0]);
  if (!duration) return bad(fmt::format("duration '{}' is not a time", parts[0]));
  if (*duration <= 0) return bad("the duration must be positive");
  loan.start = *start;
  loan.duration = *duration;
  return loan;
}

// Hours with 2 decimals.
std::string hours(double seconds) { return fmt::format("{:.2f}", seconds / 3600.0); }

void print_table(std::span<const std::string> policies, std::span<const ClusterSimRun> runs) {
  std::vector<std::string> header = {"figure"};
  header.insert(header.end(), policies.begin(), policies.end());
  TextTable table(std::move(header));
  const auto row = [&](std::string label, const auto& cell) {
    std::vector<std::string> cells = {std::move(label)};
    for (const ClusterSimRun& run : runs) cells.push_back(cell(run.summary));
    table.add_row(std::move(cells));
  };
  using S = const SimSummary&;
  row("jobs", [](S s) { return std::to_string(s.jobs); });
  row("finished", [](S s) { return std::to_string(s.finished); });
  row("never started", [](S s) { return std::to_string(s.never_started); });
  row("avg queue (h)", [](S s) { return hours(s.avg_queue_s); });
  row("p50 queue (h)", [](S s) { return hours(static_cast<double>(s.p50_queue_s)); });
  row("p95 queue (h)", [](S s) { return hours(static_cast<double>(s.p95_queue_s)); });
  row("p99 queue (h)", [](S s) { return hours(static_cast<double>(s.p99_queue_s)); });
  row("avg JCT (h)", [](S s) { return hours(s.avg_jct_s); });
  row("makespan (h)", [](S s) { return hours(static_cast<double>(s.makespan_s)); });
  row("GPU allocation (%)", [](S s) { return fmt::format("{:.2f}", s.gpu_allocation_avg * 100); });
  row("comm overhead (%)", [](S s) { return fmt::format("{:.2f}", s.comm_overhead_share * 100); });
  row("est. MFU", [](S s) { return fmt::format("{:.3f}", s.est_mfu); });
  row("preemptions", [](S s) { return std::to_string(s.preemptions); });
  row("lost GPU-hours (%)",
      [](S s) { return fmt::format("{:.2f}", s.lost_gpu_hours_share * 100); });
  row("min tenant guarantee ratio", [](S s) {
    return s.min_guarantee_tenant.empty()
               ? fmt::format("{:.3f}", s.min_tenant_guarantee_ratio)
               : fmt::format("{:.3f} ({})", s.min_tenant_guarantee_ratio, s.min_guarantee_tenant);
  });
  row("runtime MAE (h): predictor",
      [](S s) { return hours(static_cast<double>(s.predictor_median_abs_error_s)); });
  row("runtime MAE (h): baseline",
      [](S s) { return hours(static_cast<double>(s.baseline_median_abs_error_s)); });
  row("backfilled", [](S s) { return std::to_string(s.backfilled); });
  const bool inference = std::any_of(runs.begin(), runs.end(), [](const ClusterSimRun& r) {
    return r.summary.inference_max_wait_in_window_s >= 0;
  });
  if (inference) {
    row("inference max wait in window (h)", [](S s) {
      return s.inference_max_wait_in_window_s < 0
                 ? std::string("-")
                 : hours(static_cast<double>(s.inference_max_wait_in_window_s));
    });
  }
  for (int k = 0; k < kPendingKinds; ++k) {
    row(fmt::format("pending (h): {}", pending_kind_name(static_cast<PendingKind>(k))), [k](S s) {
      return hours(static_cast<double>(s.pending_seconds[static_cast<std::size_t>(k)]));
    });
  }
  row("wall (s)", [](S s) { return fmt::format("{:.1f}", s.wall_seconds); });
  std::cout << '\n';
  table.print(std::cout);
}

Result<void> run_sim_run(const RunOptions& options) {
  if (options.checkpoint_interval < 0) {
    return fail("--checkpoint-interval", "must not be negative (0: no checkpoints)");
  }
  if (options.limit_jobs < 0) return fail("--limit-jobs", "must not be negative (0: all jobs)");
  if (options.horizon < 0) return fail("--horizon", "must not be negative (0: the last submit)");
  auto policies = parse_policies(options.policy);
  if (!policies) return std::unexpected(policies.error());
  std::vector<TidalWindow> windows;
  for (const std::string& text : options.windows) {
    auto window = parse_tidal_window(text);
    if (!window) return fail("--window", window.error().reason);
    windows.push_back(*window);
  }
  std::optional<std::pair<std::int64_t, std::int64_t>> inference;
  if (!options.inference.empty()) {
    auto parsed = parse_inference(options.inference);
    if (!parsed) return std::unexpected(parsed.error());
    inference = *parsed;
    if (options.inference_tenant.empty()) return fail("--inference-tenant", "must not be empty");
  }
  std::vector<LoanArg> loan_args;
  for (const std::string& text : options.loans) {
    auto loan = parse_loan(text);
    if (!loan) return std::unexpected(loan.error());
    loan_args.push_back(*loan);
  }

  // Pool and tenants share one model catalog: the tenants file may name models the pool lacks.
  auto cluster = load_pool_source(options.pool);
  if (!cluster) return std::unexpected(cluster.error());
  auto spec = load_tenants_yaml(options.tenants, cluster->models);
  if (!spec) return std::unexpected(spec.error());
  if (inference) {
    bool known = false;
    for (const OrgSpec& org : spec->orgs) {
      for (const TenantSpec& t : org.tenants) known = known || t.name == options.inference_tenant;
    }
    if (!known) {
      TenantSpec tenant;
      tenant.name = options.inference_tenant;
      spec->orgs.front().tenants.push_back(std::move(tenant));
    }
  }
  auto book = TenantBook::create(std::move(*spec), cluster->models);
  if (!book) return fail("--tenants", book.error().message());
  auto pool =
      Pool::create(cluster->models, std::move(cluster->topology), std::move(cluster->nodes));
  if (!pool) return std::unexpected(pool.error());

  auto trace = load_trace_source(options.trace);
  if (!trace) return std::unexpected(trace.error());
  PhillyWorkloadOptions workload_options;
  workload_options.checkpoint_interval = options.checkpoint_interval;
  auto workload = philly_workload(*trace, *book, workload_options);
  if (!workload) return fail("--jobs", workload.error().reason);
  if (options.limit_jobs > 0 && static_cast<std::size_t>(options.limit_jobs) < workload->size()) {
    workload->resize(static_cast<std::size_t>(options.limit_jobs));
  }
  const std::size_t trace_jobs = workload->size();
  const Seconds last_submit = workload->empty() ? 0 : workload->back().job.submit_time;
  const Seconds day_offset =
      ((trace->start_epoch % kSecondsPerDay) + kSecondsPerDay) % kSecondsPerDay;

  std::size_t replicas = 0;
  if (inference) {
    InferenceServiceSpec service;
    service.peak_gpus = inference->first;
    service.trough_gpus = inference->second;
    service.day_start = 8 * 3600;
    service.day_end = kSecondsPerDay;
    service.step = 600;
    service.start = 0;
    service.end = last_submit + kSecondsPerDay;
    service.day_offset = day_offset;
    service.seed = options.seed;
    auto generated = generate_inference_replicas(service);
    if (!generated) return fail("--inference", generated.error().message());
    const TenantId tenant = *book->find_tenant(options.inference_tenant);
    append_inference_replicas(*workload, *generated, tenant, book->queues_of(tenant).front(),
                              workload_options);
    replicas = generated->size();
  }

  std::vector<SimLoan> loans;
  for (const LoanArg& arg : loan_args) {
    const auto tenant = book->find_tenant(arg.tenant);
    if (!tenant) {
      std::string names;
      for (int t = 0; t < book->tenant_count(); ++t) {
        names += fmt::format("{}{}", t == 0 ? "" : ", ",
                             book->tenant_name(TenantId{static_cast<std::uint32_t>(t)}));
      }
      return fail("--loan", fmt::format("'{}': unknown tenant '{}'; the tenants are: {}", arg.text,
                                        arg.tenant, names));
    }
    if (pool->total_gpus() == 0) return fail("--loan", "the pool has no GPUs to lend");
    SimLoan loan;
    loan.tenant = *tenant;
    loan.model = GpuModelId{0};  // the pool's first GPU model
    loan.gpus = arg.gpus;
    loan.start = arg.start;
    loan.duration = arg.duration;
    loans.push_back(loan);
  }

  ClusterSimSettings settings;
  settings.seed = options.seed;
  settings.horizon = options.horizon;
  std::cerr << fmt::format(
      "run: {} jobs{} on {} nodes / {} GPUs, {} tenants, {} window(s), {} loan(s); policies {}\n",
      trace_jobs, replicas > 0 ? fmt::format(" + {} inference replicas", replicas) : "",
      pool->node_count(), pool->total_gpus(), book->tenant_count(), windows.size(), loans.size(),
      fmt::join(*policies, ", "));

  // Fractions (none in Philly) are placed by the fragmentation-aware policy, weighed against the
  // workload's own task shapes.
  std::vector<TaskShape> shapes;
  bool fractional = false;
  for (const SimJob& job : *workload) {
    shapes.push_back(job.job.gang.task);
    fractional = fractional || job.job.gang.task.is_fractional();
  }

  std::vector<ClusterSimRun> runs;
  for (const std::string& name : *policies) {
    auto config = scheduler_policy(name);
    if (!config) return fail("--policy", config.error().reason);
    config->windows = windows;
    config->day_offset = day_offset;
    if (fractional) config->typical_tasks = shapes;
    const auto begin = std::chrono::steady_clock::now();
    auto run = run_cluster_simulation(*pool, *book, *config, *workload, loans, settings);
    if (!run) {
      return fail(fmt::format("policy {}: {}", name, run.error().field), run.error().reason);
    }
    run->summary.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    auto folder = write_sim_run_report(options.out, name, *run, *workload, loans);
    if (!folder) return std::unexpected(folder.error());
    std::cerr << fmt::format("policy {}: {} jobs in {:.1f} s\n", name, run->jobs.size(),
                             run->summary.wall_seconds);
    runs.push_back(std::move(*run));
  }
  print_table(*policies, runs);
  std::cout << fmt::format(
      "\nWrote jobs.csv, timeline.csv and summary.json for {} polic{} to {}/\n", runs.size(),
      runs.size() == 1 ? "y" : "ies", options.out);
  return {};
}

}  // namespace

void add_sim_run_command(CLI::App& sim, int* exit_code) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = sim.add_subcommand(
      "run",
      "Multi-tenant experiment: a job trace arrives at its submit times and is scheduled by each "
      "policy in turn (quotas, preemption, topology, tidal windows, loans); writes jobs.csv, "
      "timeline.csv and summary.json per policy to <out>/<policy>/ and prints a side-by-side "
      "table");
  add_pool_options(*command, options->pool);
  add_trace_options(*command, options->trace);
  command
      ->add_option("--tenants", options->tenants,
                   "tenants file (YAML); every team (cluster) of the trace must be a tenant")
      ->required()
      ->check(CLI::ExistingFile);
  command
      ->add_option("--policy", options->policy,
                   "policy, several joined by commas, or all: " + join(scheduler_policy_names()))
      ->required();
  command
      ->add_option("--out", options->out,
                   "folder for <policy>/{jobs,timeline}.csv and "
                   "summary.json")
      ->required();
  command
      ->add_option("--seed", options->seed,
                   "seed of the jobs' communication profiles and of the inference service")
      ->capture_default_str();
  command
      ->add_option("--checkpoint-interval", options->checkpoint_interval,
                   "seconds between checkpoints of every trace job (0: none)")
      ->capture_default_str();
  command
      ->add_option("--window", options->windows,
                   "tidal window class:HH:MM-HH:MM:gpus (e.g. inference:08:00-24:00:64), "
                   "repeatable; applied to every policy")
      ->allow_extra_args(false);
  command->add_option("--inference", options->inference,
                      "run a diurnal inference service beside the trace: peak[:trough] GPUs "
                      "(trough default peak/8), day 08:00-24:00, 10-minute steps");
  command
      ->add_option("--inference-tenant", options->inference_tenant,
                   "tenant of the inference service (added to the first org if the tenants file "
                   "lacks it)")
      ->capture_default_str();
  command
      ->add_option(
          "--loan", options->loans,
          "emergency loan tenant:gpus:start:duration of the pool's first GPU model "
          "(times in seconds or with s/m/h/d; start counted from the trace's first submit), "
          "repeatable")
      ->allow_extra_args(false);
  command
      ->add_option("--limit-jobs", options->limit_jobs,
                   "only the first N jobs by submit time (0: all)")
      ->capture_default_str();
  command
      ->add_option("--horizon", options->horizon,
                   "seconds over which class GPU-hours are totalled (0: up to the last submit)")
      ->capture_default_str();
  command->callback([options, exit_code] {
    if (auto ok = run_sim_run(*options); !ok) {
      std::cerr << "error: " << ok.error().message() << '\n';
      *exit_code = 1;
    }
  });
}

}  // namespace tidepool
