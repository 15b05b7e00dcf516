#include "sim_cli/sim_run_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "config/duration_text.h"
#include "config/market_file.h"
#include "config/tenants_file.h"
#include "core/duration_format.h"
#include "core/policies/placement_policy.h"
#include "core/scheduler.h"
#include "core/split_text.h"
#include "core/tidal_window.h"
#include "report/text_table.h"
#include "sim/cluster_simulation.h"
#include "sim/inference_generator.h"
#include "sim/philly_trace.h"
#include "sim/philly_workload.h"
#include "sim/services_file.h"
#include "sim/sim_run_report.h"
#include "sim_cli/pool_source.h"
#include "sim_cli/trace_source.h"

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
  std::string services;
  std::string services_from;
  std::string until;
  std::vector<std::string> loans;
  std::int64_t limit_jobs = 0;
  Seconds horizon = 0;
  std::string market;
  std::string burst_threshold;
  std::string burst_sweep;
  std::string order;  // the lane order of policies with per-tenant lanes, when the tenants file
                      // names none
  std::string starvation_limit;
  std::string min_slice_run;
  std::string max_slice_loss;
  std::string gang_policy;
  std::string prewarm_lead = "10m";
  std::string prewarm_stage = "5m";
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

Result<std::vector<std::string>> parse_policies(const std::string& text) {
  const auto known = scheduler_policy_names();
  std::vector<std::string> policies;
  if (text == "all") {
    for (std::string_view name : known) policies.emplace_back(name);
    return policies;
  }
  for (const std::string_view part : split_text(text, ',')) {
    const std::string name(part);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return fail("--policy", fmt::format("unknown policy '{}'; known: {} (or all, or several "
                                          "joined by commas)",
                                          name, join(known)));
    }
    if (std::find(policies.begin(), policies.end(), name) != policies.end()) {
      return fail("--policy", fmt::format("policy '{}' is given twice", name));
    }
    policies.push_back(name);
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
  const auto start = parse_duration(parts[1], kMaxLoanSeconds);
  if (!start) return bad(fmt::format("start '{}' is not a time", parts[1]));
  const auto duration = parse_duration(parts[0], kMaxLoanSeconds);
  if (!duration) return bad(fmt::format("duration '{}' is not a time", parts[0]));
  if (*duration <= 0) return bad("the duration must be positive");
  loan.start = *start;
  loan.duration = *duration;
  return loan;
}

// Hours with 2 decimals.
std::string hours_text(double seconds) { return fmt::format("{:.2f}", seconds / 3600.0); }

// GPU-hours from milli-GPU-seconds, with 0 decimals.
std::string gpu_hours_text(std::int64_t milli_seconds) {
  return fmt::format("{:.0f}", static_cast<double>(milli_seconds) / (kMilliPerGpu * 3600.0));
}

// The cost rows of the side-by-side table (runs with a market only).
void add_cost_rows(TextTable& table, std::span<const ClusterSimRun> runs,
                   const std::string& currency) {
  const auto row = [&](std::string label, const auto& cell) {
    std::vector<std::string> cells = {std::move(label)};
    for (const ClusterSimRun& run : runs) cells.push_back(run.cost ? cell(*run.cost) : "-");
    table.add_row(std::move(cells));
  };
  using C = const SimCost&;
  row("useful GPU-hours", [](C c) { return gpu_hours_text(c.useful_milli_seconds); });
  row("charged (" + currency + ")", [](C c) { return money_text(c.charged); });
  row("lending credits (" + currency + ")", [](C c) { return money_text(c.credited); });
  row("charged per useful GPU-hour", [](C c) { return money_text(c.charged_per_useful_gpu_hour); });
  row("owned cost (" + currency + ")", [](C c) { return money_text(c.owned_cost); });
  row("burst jobs", [](C c) { return std::to_string(c.burst_jobs); });
  row("burst cost (" + currency + ")", [](C c) { return money_text(c.burst_cost); });
  row("total cost per useful GPU-hour",
      [](C c) { return money_text(c.total_per_useful_gpu_hour); });
  row("ledger balanced", [](C c) { return std::string(c.ledger_balanced ? "yes" : "NO"); });
}

// Per service: its latency against the target, its replica-hours against the oracle's; per tenant:
// the training GPU-hours outside windows with the services against `without` them.
void print_services(std::string_view policy, const ClusterSimRun& run,
                    const ClusterSimRun& without) {
  std::cout << fmt::format("\nServices under {} (p95 from the M/M/c model of each tick)\n", policy);
  std::cout << fmt::format("{:<16} {:>10} {:>12} {:>14} {:>16} {:>10} {:>10} {:>12}\n", "service",
                           "target ms", "above (%)", "replica-h", "oracle replica-h", "x oracle",
                           "GPU-h", "most held");
  for (const SimServiceResult& s : run.services) {
    std::cout << fmt::format(
        "{:<16} {:>10} {:>12.3f} {:>14.1f} {:>16.1f} {:>10.3f} {:>10.1f} {:>12}\n", s.name,
        s.target_ms, 100.0 * s.above_target_share(), s.replica_hours, s.oracle_replica_hours,
        s.replica_hours_over_oracle(), s.gpu_hours, s.max_replicas_held);
  }
  std::cout << "\nTraining GPU-hours outside tidal windows, with the services and without\n";
  std::cout << fmt::format("{:<16} {:>14} {:>14} {:>10}\n", "tenant", "with", "without", "kept");
  const auto& with_hours = run.summary.tenant_training_gpu_hours_outside_windows;
  const auto& without_hours = without.summary.tenant_training_gpu_hours_outside_windows;
  double with_total = 0;
  double without_total = 0;
  for (std::size_t t = 0; t < with_hours.size() && t < without_hours.size(); ++t) {
    with_total += with_hours[t];
    without_total += without_hours[t];
    if (without_hours[t] <= 0) continue;
    std::cout << fmt::format("{:<16} {:>14.1f} {:>14.1f} {:>10.3f}\n", run.tenant_names[t],
                             with_hours[t], without_hours[t], with_hours[t] / without_hours[t]);
  }
  std::cout << fmt::format("{:<16} {:>14.1f} {:>14.1f} {:>10.3f}\n", "all", with_total,
                           without_total, without_total > 0 ? with_total / without_total : 0.0);
}

// Per tenant: charges / lending credits under each policy.
void print_tenant_costs(std::span<const std::string> policies, std::span<const ClusterSimRun> runs,
                        const std::string& currency) {
  if (runs.empty() || !runs.front().cost) return;
  std::vector<std::string> header = {"tenant: charged / credits (" + currency + ")"};
  header.insert(header.end(), policies.begin(), policies.end());
  TextTable table(std::move(header));
  for (std::size_t t = 0; t < runs.front().tenant_names.size(); ++t) {
    std::vector<std::string> cells = {runs.front().tenant_names[t]};
    for (const ClusterSimRun& run : runs) {
      const SimTenantCost c =
          run.cost && t < run.cost->tenants.size() ? run.cost->tenants[t] : SimTenantCost{};
      cells.push_back(fmt::format("{} / {}", money_text(c.charges), money_text(c.credits)));
    }
    table.add_row(std::move(cells));
  }
  std::cout << '\n';
  table.print(std::cout);
}

void print_run_table(std::span<const std::string> policies, std::span<const ClusterSimRun> runs,
                     const std::string& currency) {
  std::vector<std::string> header = {"figure"};
  header.insert(header.end(), policies.begin(), policies.end());
  TextTable table(std::move(header));
  const auto row = [&](std::string label, const auto& cell) {
    std::vector<std::string> cells = {std::move(label)};
    for (const ClusterSimRun& run : runs) cells.push_back(cell(run.summary));
    table.add_row(std::move(cells));
  };
  using S = const SimSummary&;
  // Queueing and JCT beside their ratio to tiresias' in the same run, when it is one of the runs.
  const auto baseline = std::find(policies.begin(), policies.end(), "tiresias");
  const auto ratio_row = [&](std::string label, double (*figure)(S)) {
    std::vector<std::string> cells = {std::move(label)};
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const double value = figure(runs[i].summary);
      std::string cell = hours_text(value);
      if (baseline != policies.end() && policies[i] != *baseline) {
        const double base =
            figure(runs[static_cast<std::size_t>(baseline - policies.begin())].summary);
        cell += base > 0 ? fmt::format(" ({:.2f}x)", value / base) : std::string(" (-)");
      }
      cells.push_back(std::move(cell));
    }
    table.add_row(std::move(cells));
  };
  row("jobs", [](S s) { return std::to_string(s.jobs); });
  row("finished", [](S s) { return std::to_string(s.finished); });
  row("never started", [](S s) { return std::to_string(s.never_started); });
  ratio_row("avg queue (h)", [](S s) { return s.avg_queue_s; });
  row("p50 queue (h)", [](S s) { return hours_text(static_cast<double>(s.p50_queue_s)); });
  ratio_row("p95 queue (h)", [](S s) { return static_cast<double>(s.p95_queue_s); });
  ratio_row("p99 queue (h)", [](S s) { return static_cast<double>(s.p99_queue_s); });
  ratio_row("longest wait (h)", [](S s) { return static_cast<double>(s.max_queue_s); });
  ratio_row("avg JCT (h)", [](S s) { return s.avg_jct_s; });
  row("makespan (h)", [](S s) { return hours_text(static_cast<double>(s.makespan_s)); });
  row("GPU allocation (%)", [](S s) { return fmt::format("{:.2f}", s.gpu_allocation_avg * 100); });
  row("comm overhead (%)", [](S s) { return fmt::format("{:.2f}", s.comm_overhead_share * 100); });
  row("est. MFU", [](S s) { return fmt::format("{:.3f}", s.est_mfu); });
  row("est. MFU with advice: accumulation", [](S s) {
    return fmt::format("{:.3f} ({} jobs)", s.est_mfu_advised_accumulate, s.jobs_advised_accumulate);
  });
  row("est. MFU with advice: compact", [](S s) {
    return fmt::format("{:.3f} ({} jobs)", s.est_mfu_advised_compact, s.jobs_advised_compact);
  });
  row("est. MFU with advice: both",
      [](S s) { return fmt::format("{:.3f}", s.est_mfu_advised_both); });
  row("pre-warmed starts (%)", [](S s) {
    return fmt::format("{:.1f} ({} of {})",
                       s.starts > 0 ? 100.0 * s.prewarmed_starts / s.starts : 0.0,
                       s.prewarmed_starts, s.starts);
  });
  row("pre-warmed of starts that waited the lead (%)", [](S s) {
    return fmt::format(
        "{:.1f} ({} of {})",
        s.starts_after_lead > 0 ? 100.0 * s.prewarmed_starts_after_lead / s.starts_after_lead : 0.0,
        s.prewarmed_starts_after_lead, s.starts_after_lead);
  });
  row("start delay saved (s/start)",
      [](S s) { return fmt::format("{:.1f}", s.start_delay_saved_avg_s); });
  row("start delay saved (GPU-h)",
      [](S s) { return fmt::format("{:.0f}", s.start_delay_saved_gpu_hours); });
  row("preemptions", [](S s) { return std::to_string(s.preemptions); });
  row("lost GPU-hours (%)",
      [](S s) { return fmt::format("{:.2f}", s.lost_gpu_hours_share * 100); });
  row("min tenant guarantee ratio", [](S s) {
    return s.min_guarantee_tenant.empty()
               ? fmt::format("{:.3f}", s.min_tenant_guarantee_ratio)
               : fmt::format("{:.3f} ({})", s.min_tenant_guarantee_ratio, s.min_guarantee_tenant);
  });
  row("runtime MAE (h): predictor",
      [](S s) { return hours_text(static_cast<double>(s.predictor_median_abs_error_s)); });
  row("runtime MAE (h): baseline",
      [](S s) { return hours_text(static_cast<double>(s.baseline_median_abs_error_s)); });
  row("backfilled", [](S s) { return std::to_string(s.backfilled); });
  const bool inference = std::any_of(runs.begin(), runs.end(), [](const ClusterSimRun& r) {
    return r.summary.inference_max_wait_in_window_s >= 0;
  });
  if (inference) {
    row("inference max wait in window (h)", [](S s) {
      return s.inference_max_wait_in_window_s < 0
                 ? std::string("-")
                 : hours_text(static_cast<double>(s.inference_max_wait_in_window_s));
    });
  }
  for (int k = 0; k < kPendingKinds; ++k) {
    row(fmt::format("pending (h): {}", pending_kind_name(static_cast<PendingKind>(k))), [k](S s) {
      return hours_text(static_cast<double>(s.pending_seconds[static_cast<std::size_t>(k)]));
    });
  }
  if (std::any_of(runs.begin(), runs.end(), [](const ClusterSimRun& r) { return r.cost; })) {
    add_cost_rows(table, runs, currency);
  }
  row("wall (s)", [](S s) { return fmt::format("{:.1f}", s.wall_seconds); });
  std::cout << '\n';
  table.print(std::cout);
}

// One row per burst threshold of the sweep: the queueing / cost trade-off of one policy.
void print_burst_sweep(const std::string& policy, std::span<const std::string> labels,
                       std::span<const ClusterSimRun> runs, const std::string& currency) {
  TextTable table({"burst threshold", "p95 queue (h)", "avg queue (h)", "burst jobs",
                   "rented GPU-h", "burst cost (" + currency + ")", "owned cost (" + currency + ")",
                   "total cost (" + currency + ")", "total per useful GPU-h"});
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const SimSummary& s = runs[i].summary;
    const SimCost c = runs[i].cost.value_or(SimCost{});
    table.add_row({labels[i], hours_text(static_cast<double>(s.p95_queue_s)),
                   hours_text(s.avg_queue_s), std::to_string(c.burst_jobs),
                   gpu_hours_text(c.burst_milli_seconds), money_text(c.burst_cost),
                   money_text(c.owned_cost), money_text(c.total_cost),
                   money_text(c.total_per_useful_gpu_hour)});
  }
  std::cout << fmt::format("\nBurst sweep, policy {}:\n", policy);
  table.print(std::cout);
}

// --order, --starvation-limit, --min-slice-run and --max-slice-loss over a policy's defaults.
Result<void> apply_queueing_options(const RunOptions& options, SchedulerConfig& config) {
  if (!options.order.empty()) {
    auto kind = parse_lane_order(options.order);
    if (!kind) return fail("--order", kind.error().reason);
    if (config.order == OrderRule::kFairShare) config.lane_order = *kind;
  }
  // Per flag: what "off" sets, and the least duration accepted.
  constexpr Seconds kNoLimit = std::numeric_limits<Seconds>::max() / 4;
  for (auto [text, target, flag, off, least] :
       {std::tuple{&options.starvation_limit, &config.starvation_limit, "--starvation-limit",
                   Seconds{0}, Seconds{1}},
        std::tuple{&options.min_slice_run, &config.min_slice_run, "--min-slice-run", Seconds{0},
                   Seconds{1}},
        std::tuple{&options.max_slice_loss, &config.max_slice_loss, "--max-slice-loss", kNoLimit,
                   Seconds{0}}}) {
    if (text->empty()) continue;
    if (*text == "off") {
      *target = off;
      if (target == &config.min_slice_run) config.time_slicing = false;
      continue;
    }
    auto seconds = parse_duration(*text, kMaxLoanSeconds);
    if (!seconds || *seconds < least) {
      return fail(flag, fmt::format("expected a duration such as 8h{}, or off; got '{}'",
                                    least == 0 ? ", 0" : "", *text));
    }
    *target = *seconds;
  }
  return {};
}

// "off" or a duration, for --burst-threshold and each entry of --burst-sweep.
Result<std::optional<Seconds>> parse_threshold(std::string_view text, const std::string& flag) {
  if (text == "off") return std::optional<Seconds>();
  const auto seconds = parse_duration(text, kMaxLoanSeconds);
  if (!seconds || *seconds <= 0) {
    return fail(flag, fmt::format("'{}' is not a positive time (like 90m, 2h) or off", text));
  }
  return std::optional<Seconds>(*seconds);
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
  std::vector<ServiceEntry> services;
  if (!options.services.empty()) {
    auto loaded = load_services_yaml(options.services, cluster->models);
    if (!loaded) return fail("--services", loaded.error().message());
    services = std::move(*loaded);
  }
  // The tenants of generated work, added to the first org when the tenants file lacks them.
  std::vector<std::string> added_tenants;
  if (inference) added_tenants.push_back(options.inference_tenant);
  for (const ServiceEntry& service : services) added_tenants.push_back(service.tenant);
  for (const std::string& name : added_tenants) {
    bool known = false;
    for (const OrgSpec& org : spec->orgs) {
      for (const TenantSpec& t : org.tenants) known = known || t.name == name;
    }
    if (!known) {
      TenantSpec tenant;
      tenant.name = name;
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
  // Times from the trace's first submit (sim time 0).
  const auto trace_time = [](const std::string& text, const char* flag) -> Result<Seconds> {
    if (text.empty()) return Seconds{0};
    auto seconds = parse_duration(text, kMaxLoanSeconds);
    if (!seconds) return fail(flag, seconds.error().reason);
    return *seconds;
  };
  auto until = trace_time(options.until, "--until");
  if (!until) return std::unexpected(until.error());
  if (*until > 0) {
    // The jobs are in submit order: keep those submitted before `until`.
    const auto first_after =
        std::find_if(workload->begin(), workload->end(),
                     [&](const SimJob& job) { return job.job.submit_time >= *until; });
    workload->erase(first_after, workload->end());
  }
  auto services_from = trace_time(options.services_from, "--services-from");
  if (!services_from) return std::unexpected(services_from.error());
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
  for (const auto& [text, target, flag] :
       {std::tuple{&options.prewarm_lead, &settings.prewarm.planner.lead, "--prewarm-lead"},
        std::tuple{&options.prewarm_stage, &settings.prewarm.stage_seconds, "--prewarm-stage"}}) {
    const auto seconds = parse_duration(*text, kMaxLoanSeconds);
    if (!seconds) {
      return fail(flag, fmt::format("expected a duration such as 10m or 0; got '{}'", *text));
    }
    *target = *seconds;
  }
  settings.prewarm.planner.horizon = 2 * settings.prewarm.planner.lead;
  if (auto ok = validate(settings.prewarm.planner); !ok) {
    return fail("--prewarm-lead", ok.error().message());
  }
  settings.horizon = options.horizon;
  const Seconds services_end = options.horizon > 0 ? options.horizon
                               : *until > 0        ? *until
                                                   : std::max<Seconds>(last_submit, 1);
  if (!services.empty()) {
    if (*services_from >= services_end) {
      return fail("--services-from",
                  fmt::format("{} is not before the services' end {} (--horizon, --until or the "
                              "last submit)",
                              format_duration(*services_from), format_duration(services_end)));
    }
    settings.measure_from = *services_from;
    if (settings.horizon == 0) settings.horizon = services_end;
  }
  for (std::size_t k = 0; k < services.size(); ++k) {
    SimServiceSpec service = services[k].spec;
    service.tenant = *book->find_tenant(services[k].tenant);
    service.queue = book->queues_of(service.tenant).front();
    service.rate.day_offset = day_offset;
    service.start = *services_from;
    service.end = services_end;
    service.seed = options.seed + k;
    settings.services.push_back(std::move(service));
  }
  std::string currency = "credits";
  // Burst thresholds to run (nullopt: no bursting); one entry without --burst-sweep.
  std::vector<std::optional<Seconds>> thresholds = {std::nullopt};
  std::vector<std::string> threshold_labels = {"off"};
  if (!options.market.empty()) {
    auto market = load_market_yaml(options.market);
    if (!market) return fail("--market", market.error().message());
    std::vector<std::string> skipped;
    auto market_settings =
        sim_market_settings(*market, pool->models(), *book, trace->start_epoch, skipped);
    if (!market_settings) return fail("--market", market_settings.error().message());
    if (!skipped.empty()) {
      std::cerr << fmt::format("note: --market: budgets of tenants not in --tenants ignored: {}\n",
                               fmt::join(skipped, ", "));
    }
    auto offers = burst_offers_for(*market, pool->models());
    if (!offers) return fail("--market", offers.error().message());
    market_settings->offers = std::move(*offers);
    currency = market->currency;
    if (market->burst_threshold) thresholds = {*market->burst_threshold};
    if (!options.burst_threshold.empty()) {
      auto threshold = parse_threshold(options.burst_threshold, "--burst-threshold");
      if (!threshold) return std::unexpected(threshold.error());
      thresholds = {*threshold};
    }
    if (!options.burst_sweep.empty()) {
      thresholds.clear();
      std::string_view rest = options.burst_sweep;
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        auto threshold = parse_threshold(rest.substr(0, comma), "--burst-sweep");
        if (!threshold) return std::unexpected(threshold.error());
        thresholds.push_back(*threshold);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    }
    threshold_labels.clear();
    for (const auto& t : thresholds) {
      threshold_labels.push_back(t ? format_duration(*t) : std::string("off"));
    }
    if (market_settings->offers.empty() &&
        std::any_of(thresholds.begin(), thresholds.end(), [](const auto& t) { return t; })) {
      return fail("--market", "bursting needs offers: the market file has no burst.providers");
    }
    settings.market = std::move(*market_settings);
  } else if (!options.burst_threshold.empty() || !options.burst_sweep.empty()) {
    return fail(options.burst_sweep.empty() ? "--burst-threshold" : "--burst-sweep",
                "bursting needs --market (the offers and their prices)");
  }
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
  std::vector<std::string> folders;
  const bool sweep = thresholds.size() > 1;
  for (const std::string& name : *policies) {
    auto config = scheduler_policy(name);
    if (!config) return fail("--policy", config.error().reason);
    config->windows = windows;
    config->day_offset = day_offset;
    if (auto ok = apply_queueing_options(options, *config); !ok) return ok;
    if (fractional) config->typical_tasks = shapes;
    if (options.gang_policy == "none") {
      config->gang_policy.clear();
    } else if (!options.gang_policy.empty()) {
      auto known = find_placement_policy(options.gang_policy);
      if (!known) return fail("--gang-policy", known.error().reason + ", or none");
      config->gang_policy = std::string(known->name);
    }
    if (!config->gang_policy.empty()) config->typical_tasks = shapes;
    std::vector<ClusterSimRun> swept;
    for (std::size_t k = 0; k < thresholds.size(); ++k) {
      if (settings.market) {
        settings.market->burst.reset();
        if (thresholds[k]) settings.market->burst = BurstPolicy{.threshold = *thresholds[k]};
      }
      const std::string folder_name =
          sweep ? fmt::format("{}-burst-{}", name, threshold_labels[k]) : name;
      const auto begin = std::chrono::steady_clock::now();
      auto run = run_cluster_simulation(*pool, *book, *config, *workload, loans, settings);
      if (!run) {
        return fail(fmt::format("policy {}: {}", folder_name, run.error().field),
                    run.error().reason);
      }
      run->summary.wall_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      auto folder = write_sim_run_report(options.out, folder_name, *run, *workload, loans);
      if (!folder) return std::unexpected(folder.error());
      std::cerr << fmt::format("policy {}: {} jobs in {:.1f} s\n", folder_name, run->jobs.size(),
                               run->summary.wall_seconds);
      if (!settings.services.empty()) {
        ClusterSimSettings without = settings;
        without.services.clear();
        auto baseline = run_cluster_simulation(*pool, *book, *config, *workload, loans, without);
        if (!baseline) {
          return fail(
              fmt::format("policy {} without services: {}", folder_name, baseline.error().field),
              baseline.error().reason);
        }
        print_services(folder_name, *run, *baseline);
      }
      folders.push_back(folder_name);
      if (sweep) {
        swept.push_back(std::move(*run));
      } else {
        runs.push_back(std::move(*run));
      }
    }
    if (sweep) print_burst_sweep(name, threshold_labels, swept, currency);
  }
  if (!sweep) {
    print_run_table(*policies, runs, currency);
    print_tenant_costs(*policies, runs, currency);
  }
  std::cout << fmt::format(
      "\nWrote jobs.csv, timeline.csv{} and summary.json for {} run{} to {}/\n",
      settings.market ? ", costs.csv" : "", folders.size(), folders.size() == 1 ? "" : "s",
      options.out);
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
      ->add_option("--prewarm-lead", options->prewarm_lead,
                   "call the pre-warm hook of a job this long before its predicted start (e.g. "
                   "10m); starts are expected up to twice as far ahead")
      ->capture_default_str();
  command
      ->add_option("--prewarm-stage", options->prewarm_stage,
                   "the staging model: a start waits this long for its data unless it was "
                   "pre-warmed (e.g. 5m: 300 GB at 1 GB/s)")
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
      ->add_option("--services", options->services,
                   "inference services to run beside the trace (YAML: replicas, p95 target, "
                   "autoscaling, request rate), from --services-from to --horizon, --until or "
                   "the last submit. Writes services.csv and compares training with a run "
                   "without them")
      ->check(CLI::ExistingFile);
  command->add_option("--services-from", options->services_from,
                      "start the services this long after the trace's first submit (e.g. 30d; "
                      "training outside windows is compared from then on)");
  command->add_option("--until", options->until,
                      "only the jobs submitted within this long of the trace's first submit "
                      "(e.g. 37d)");
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
      ->add_option("--market", options->market,
                   "market file (YAML: GPU costs, prices, budgets, burst offers); charges every "
                   "job at the price in force and reports cost per tenant and per useful "
                   "GPU-hour")
      ->check(CLI::ExistingFile);
  command->add_option("--burst-threshold", options->burst_threshold,
                      "send jobs that waited this long (e.g. 2h) to the market file's burst "
                      "offers, or off (default: the market file's burst.threshold)");
  command->add_option("--burst-sweep", options->burst_sweep,
                      "run each policy once per threshold (e.g. off,30m,1h,2h,4h,8h) and print "
                      "the queueing / cost trade-off");
  command->add_option("--order", options->order,
                      "order of each tenant's own jobs where the tenants file names none: fifo, "
                      "las or srpt (default: the policy's; tidepool: las)");
  command->add_option("--starvation-limit", options->starvation_limit,
                      "promote a job ahead of its tenant's others once it has waited this long "
                      "(e.g. 8h), or off (default: the policy's)");
  command->add_option("--min-slice-run", options->min_slice_run,
                      "time slicing: the least a job runs after each start before its tenant's "
                      "shorter work may stop it (e.g. 30m), or off for no slicing (default: the "
                      "policy's)");
  command->add_option("--max-slice-loss", options->max_slice_loss,
                      "time slicing: the most work since its last checkpoint a job may lose when "
                      "sliced (e.g. 5m; 0: only at a checkpoint; off: any); a slice otherwise "
                      "waits for the job's next checkpoint (default: the policy's)");
  command->add_option("--gang-policy", options->gang_policy,
                      "also place whole-GPU jobs with this placement policy (e.g. fgd, "
                      "best-fit, as `tidepool sim pack` lists them) wherever the topology-aware "
                      "gang placement leaves a choice, or none for the gang placement alone "
                      "(default: the policy's; tidepool: fgd)");
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
