#include "sim_cli/sim_replay_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "report/text_table.h"
#include "sim/openb_trace.h"
#include "sim/replay_simulation.h"
#include "sim_cli/pool_source.h"

namespace tidepool {
namespace {

namespace fs = std::filesystem;

struct ReplayOptions {
  PoolSource pool;
  std::string pods;
  std::string policy = "tidepool";
  std::uint64_t seed = 42;
  Seconds interval = 3600;
  std::string out;
};

// Minutes below an hour, hours above: queueing delays span both.
std::string duration_text(Seconds seconds) {
  if (seconds < 3600) return fmt::format("{:.1f} min", static_cast<double>(seconds) / 60.0);
  return fmt::format("{:.1f} h", static_cast<double>(seconds) / 3600.0);
}

std::string_view outcome_text(PodOutcome outcome) {
  switch (outcome) {
    case PodOutcome::kStarted:
      return "started";
    case PodOutcome::kWaiting:
      return "waiting";
    case PodOutcome::kRejected:
      return "rejected";
  }
  return "";
}

void write_timeline(std::ostream& out, const ReplayRun& run) {
  out << "time,gpu_allocated_percent,cpu_allocated_percent,gpu_fragmented_percent,queued,"
         "running\n";
  for (const ReplaySample& s : run.samples) {
    out << fmt::format("{},{:.4f},{:.4f},{:.4f},{},{}\n", s.time, s.allocated_gpu_percent,
                       s.allocated_cpu_percent, s.fragmented_gpu_percent, s.queued, s.running);
  }
}

void write_queueing(std::ostream& out, const ReplayRun& run, std::span<const PodRecord> pods,
                    const Pool& pool) {
  out << "name,arrival,start,delay,node,status\n";
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const ReplayPodResult& r = run.pods[i];
    const auto delay = r.delay();
    out << fmt::format("{},{},{},{},{},{}\n", pods[i].name, r.arrival,
                       r.start ? std::to_string(*r.start) : "", delay ? std::to_string(*delay) : "",
                       r.node ? pool.spec(*r.node).name : "", outcome_text(r.outcome));
  }
}

void print_replay_summary(const ReplayRun& run, std::string_view policy, int pod_count) {
  TextTable table({"policy", "pods", "started", "waiting at end", "rejected", "delay p50",
                   "delay p95", "delay p99", "delay max", "mean GPU alloc"});
  table.add_row({std::string(policy), std::to_string(pod_count), std::to_string(run.started),
                 std::to_string(run.waiting_at_end), std::to_string(run.rejected),
                 duration_text(run.delay.p50), duration_text(run.delay.p95),
                 duration_text(run.delay.p99), duration_text(run.delay.max),
                 fmt::format("{:.2f}%", run.mean_gpu_percent)});
  std::cout << '\n';
  table.print(std::cout);
  std::cout << fmt::format(
      "\nOver {:.1f} days of trace time: {:.0f} GPU-hours allocated, mean CPU allocation {:.2f}%, "
      "mean queueing delay {} over {} started pods\n",
      static_cast<double>(run.end_time - run.start_time) / 86400.0, run.gpu_hours_allocated,
      run.mean_cpu_percent, duration_text(static_cast<Seconds>(run.delay.mean)), run.delay.count);
}

Result<void> run_sim_replay(const ReplayOptions& options) {
  if (options.interval <= 0) return fail("--interval", "must be a positive number of seconds");
  auto policy_info = find_placement_policy(options.policy);
  if (!policy_info) return fail("--policy", policy_info.error().reason);

  auto cluster = load_pool_source(options.pool);
  if (!cluster) return std::unexpected(cluster.error());
  auto pods = load_openb_pods(options.pods, cluster->models);
  if (!pods) return std::unexpected(pods.error());
  auto pool = Pool::create(std::move(cluster->models), std::move(cluster->topology),
                           std::move(cluster->nodes));
  if (!pool) return std::unexpected(pool.error());

  std::vector<TaskShape> shapes;
  shapes.reserve(pods->size());
  for (const PodRecord& pod : *pods) shapes.push_back(pod.shape);
  const WorkloadProfile profile = WorkloadProfile::from_tasks(shapes);
  auto policy = make_placement_policy(policy_info->name, profile);
  if (!policy) return fail("--policy", policy.error().reason);

  std::cerr << fmt::format("replay: {} pods on {} nodes / {} GPUs, policy {}\n", pods->size(),
                           pool->node_count(), pool->total_gpus(), policy_info->name);
  ReplaySettings settings;
  settings.seed = options.seed;
  settings.sample_interval = options.interval;
  auto run = run_replay(*pool, *pods, **policy, profile, settings);
  if (!run) return std::unexpected(run.error());

  std::error_code error;
  fs::create_directories(options.out, error);
  if (error) return fail("--out", "cannot create folder '" + options.out + "': " + error.message());
  const fs::path timeline = fs::path(options.out) / "timeline.csv";
  const fs::path queueing = fs::path(options.out) / "queueing.csv";
  {
    std::ofstream out(timeline);
    write_timeline(out, *run);
    if (!out) return fail("--out", "cannot write '" + timeline.string() + "'");
  }
  {
    std::ofstream out(queueing);
    write_queueing(out, *run, *pods, *pool);
    if (!out) return fail("--out", "cannot write '" + queueing.string() + "'");
  }
  print_replay_summary(*run, policy_info->name, static_cast<int>(pods->size()));
  std::cout << "\nWrote " << timeline.string() << " and " << queueing.string() << '\n';
  return {};
}

}  // namespace

void add_sim_replay_command(CLI::App& sim, int* exit_code) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* replay = sim.add_subcommand(
      "replay",
      "Replay of a pod list in trace time: pods arrive at their creation time, wait in a FIFO "
      "queue until they fit (no head-of-line blocking) and leave after their recorded run time; "
      "writes timeline.csv and queueing.csv");
  add_pool_options(*replay, options->pool);
  replay
      ->add_option("--pods", options->pods,
                   "pod list with creation_time, deletion_time and scheduled_time (openb format)")
      ->required()
      ->check(CLI::ExistingFile);
  replay
      ->add_option("--policy", options->policy,
                   "policy name or label (random, dot-product, gpu-clustering, gpu-packing, "
                   "best-fit, fgd, tidepool)")
      ->capture_default_str();
  replay->add_option("--seed", options->seed, "seed of the policy's random choices")
      ->capture_default_str();
  replay->add_option("--interval", options->interval, "seconds of trace time between samples")
      ->capture_default_str();
  replay->add_option("--out", options->out, "folder for timeline.csv and queueing.csv")->required();
  replay->callback([options, exit_code] {
    if (auto ok = run_sim_replay(*options); !ok) {
      std::cerr << "error: " << ok.error().message() << '\n';
      *exit_code = 1;
    }
  });
}

}  // namespace tidepool
