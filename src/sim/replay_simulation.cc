#include "sim/replay_simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/rng.h"

namespace tidepool {
namespace {

// Releases sort before arrivals at the same time, so that freed resources are there for the
// scan that follows the arrivals.
enum class PodEventKind : std::uint8_t { kRelease = 0, kArrival = 1 };

struct PodEvent {
  Seconds time = 0;
  PodEventKind kind = PodEventKind::kArrival;
  std::uint32_t pod = 0;

  friend auto operator<=>(const PodEvent&, const PodEvent&) = default;
};

// When a pod arrives and how long it runs once started (none: to the end of the replay).
struct PodPlan {
  Seconds arrival = 0;
  std::optional<Seconds> run_time;
};

Result<std::vector<PodPlan>> plan_pods(std::span<const PodRecord> pods) {
  std::vector<PodPlan> plans;
  plans.reserve(pods.size());
  for (const PodRecord& pod : pods) {
    const std::string field = fmt::format("pod '{}'", pod.name);
    if (!pod.creation_time) {
      return fail(field, "has no creation_time; the replay needs every pod's arrival time");
    }
    PodPlan plan{*pod.creation_time, std::nullopt};
    if (pod.deletion_time) {
      const Seconds from = pod.scheduled_time ? *pod.scheduled_time : *pod.creation_time;
      if (*pod.deletion_time < from) {
        return fail(field,
                    fmt::format("deletion_time {} is before its {} {}", *pod.deletion_time,
                                pod.scheduled_time ? "scheduled_time" : "creation_time", from));
      }
      plan.run_time = *pod.deletion_time - from;
    }
    plans.push_back(plan);
  }
  return plans;
}

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

class ReplayDriver {
 public:
  ReplayDriver(Pool pool, std::span<const PodRecord> pods, std::vector<PodPlan> plans,
               PlacementPolicy& policy, const WorkloadProfile& profile,
               const ReplaySettings& settings)
      : pool_(std::move(pool)),
        pods_(pods),
        plans_(std::move(plans)),
        policy_(policy),
        profile_(profile),
        interval_(settings.sample_interval),
        rng_(settings.seed) {}

  Result<ReplayRun> run();

 private:
  void take_samples_before(Seconds time);
  void advance_clock(Seconds time);
  void arrive(std::uint32_t pod);
  Result<void> start(std::uint32_t pod, const Assignment& where, Seconds now);
  Result<void> release(std::uint32_t pod);
  Result<void> scan_queue(Seconds now);
  bool fits_empty_pool(const TaskShape& shape);
  bool fits_any(const TaskShape& shape, std::span<const NodeId> nodes) const;
  bool fits_any(const TaskShape& shape) const;
  void refresh_fragment(NodeId node);

  Pool pool_;
  std::span<const PodRecord> pods_;
  std::vector<PodPlan> plans_;
  PlacementPolicy& policy_;
  const WorkloadProfile& profile_;
  Seconds interval_;
  Rng rng_;

  ReplayRun run_;
  std::priority_queue<PodEvent, std::vector<PodEvent>, std::greater<>> events_;
  std::vector<Assignment> assignments_;  // per pod, valid while it runs
  int running_ = 0;

  // Queued pods in arrival order. Those before fresh_from_ fitted nowhere at the last scan, so
  // since then only the nodes in freed_ (released on) can have become able to take them.
  std::vector<std::uint32_t> queue_;
  std::size_t fresh_from_ = 0;
  std::vector<NodeId> freed_;
  std::vector<bool> is_freed_;
  std::vector<bool> needs_full_check_;  // the policy declined it although a node fitted
  std::unordered_map<TaskShape, bool, TaskShapeHash> fits_empty_;
  std::vector<NodeState> empty_states_;

  std::vector<std::int64_t> node_fragment_;  // scaled_node_fragmentation per node
  std::int64_t fragment_ = 0;

  Seconds clock_ = 0;
  Seconds next_sample_ = 0;
  bool samples_done_ = false;
  std::int64_t milli_gpu_seconds_ = 0;
  std::int64_t milli_cpu_seconds_ = 0;
};

Result<ReplayRun> ReplayDriver::run() {
  const auto pod_count = static_cast<std::uint32_t>(pods_.size());
  if (pod_count > 0) {
    run_.start_time = plans_[0].arrival;
    run_.end_time = plans_[0].arrival;
    for (std::uint32_t i = 0; i < pod_count; ++i) {
      run_.start_time = std::min(run_.start_time, plans_[i].arrival);
      run_.end_time = std::max(
          {run_.end_time, plans_[i].arrival, pods_[i].deletion_time.value_or(plans_[i].arrival)});
    }
  }
  run_.pods.resize(pod_count);
  for (std::uint32_t i = 0; i < pod_count; ++i) {
    run_.pods[i].arrival = plans_[i].arrival;
    events_.push({plans_[i].arrival, PodEventKind::kArrival, i});
  }
  assignments_.resize(pod_count);
  needs_full_check_.assign(pod_count, false);
  is_freed_.assign(static_cast<std::size_t>(pool_.node_count()), false);
  node_fragment_.resize(static_cast<std::size_t>(pool_.node_count()));
  for (std::uint32_t n = 0; n < node_fragment_.size(); ++n) {
    empty_states_.push_back(empty_state(pool_.spec(NodeId{n})));
    refresh_fragment(NodeId{n});
  }
  clock_ = run_.start_time;
  next_sample_ = run_.start_time;

  const Seconds end = run_.end_time;
  while (!events_.empty() && events_.top().time <= end) {
    const Seconds now = events_.top().time;
    take_samples_before(now);
    advance_clock(now);
    while (!events_.empty() && events_.top().time == now) {
      const PodEvent event = events_.top();
      events_.pop();
      if (event.kind == PodEventKind::kRelease) {
        if (auto ok = release(event.pod); !ok) return std::unexpected(ok.error());
      } else {
        arrive(event.pod);
      }
    }
    // Pods started now with a run time of 0 release at `now`: the next round takes them.
    if (auto ok = scan_queue(now); !ok) return std::unexpected(ok.error());
  }
  take_samples_before(end + 1);
  advance_clock(end);

  std::vector<Seconds> delays;
  for (const ReplayPodResult& pod : run_.pods) {
    if (pod.outcome == PodOutcome::kStarted) delays.push_back(*pod.delay());
  }
  run_.started = static_cast<int>(delays.size());
  run_.waiting_at_end = static_cast<int>(queue_.size());
  run_.delay = delay_stats(std::move(delays));

  const double span = static_cast<double>(end - run_.start_time);
  run_.gpu_hours_allocated = static_cast<double>(milli_gpu_seconds_) / kMilliPerGpu / 3600.0;
  if (span > 0) {
    run_.mean_gpu_percent = percent(static_cast<double>(milli_gpu_seconds_) / span,
                                    static_cast<double>(pool_.capacity_milli_gpu()));
    run_.mean_cpu_percent = percent(static_cast<double>(milli_cpu_seconds_) / span,
                                    static_cast<double>(pool_.capacity_milli_cpu()));
  } else if (!run_.samples.empty()) {  // a replay of one instant: its allocation then
    run_.mean_gpu_percent = run_.samples.back().allocated_gpu_percent;
    run_.mean_cpu_percent = run_.samples.back().allocated_cpu_percent;
  }
  run_.pool_at_end = std::move(pool_);
  return std::move(run_);
}

void ReplayDriver::take_samples_before(Seconds time) {
  const auto gpu_capacity = static_cast<double>(pool_.capacity_milli_gpu());
  const double per_count =
      profile_.total_count() > 0 ? 1.0 / static_cast<double>(profile_.total_count()) : 0.0;
  while (!samples_done_ && next_sample_ < time) {
    ReplaySample sample;
    sample.time = next_sample_;
    sample.allocated_milli_gpu = pool_.allocated_milli_gpu();
    sample.allocated_milli_cpu = pool_.allocated_milli_cpu();
    sample.allocated_gpu_percent =
        percent(static_cast<double>(sample.allocated_milli_gpu), gpu_capacity);
    sample.allocated_cpu_percent = percent(static_cast<double>(sample.allocated_milli_cpu),
                                           static_cast<double>(pool_.capacity_milli_cpu()));
    sample.fragmented_gpu_percent =
        percent(static_cast<double>(fragment_) * per_count, gpu_capacity);
    sample.queued = static_cast<int>(queue_.size());
    sample.running = running_;
    run_.samples.push_back(sample);
    const Seconds end = run_.end_time;
    if (next_sample_ == end) {
      samples_done_ = true;
    } else {
      next_sample_ = interval_ >= end - next_sample_ ? end : next_sample_ + interval_;
    }
  }
}

void ReplayDriver::advance_clock(Seconds time) {
  const Seconds elapsed = time - clock_;
  milli_gpu_seconds_ += pool_.allocated_milli_gpu() * elapsed;
  milli_cpu_seconds_ += pool_.allocated_milli_cpu() * elapsed;
  clock_ = time;
}

void ReplayDriver::arrive(std::uint32_t pod) {
  ++run_.arrived;
  if (!fits_empty_pool(pods_[pod].shape)) {
    run_.pods[pod].outcome = PodOutcome::kRejected;
    ++run_.rejected;
    return;
  }
  queue_.push_back(pod);
}

Result<void> ReplayDriver::start(std::uint32_t pod, const Assignment& where, Seconds now) {
  if (auto ok = pool_.allocate(pods_[pod].shape, where); !ok) {
    return fail(fmt::format("policy '{}'", policy_.name()),
                fmt::format("proposed a place the pool refuses for pod '{}': {}", pods_[pod].name,
                            ok.error().message()));
  }
  refresh_fragment(where.node);
  ReplayPodResult& result = run_.pods[pod];
  result.outcome = PodOutcome::kStarted;
  result.start = now;
  result.node = where.node;
  assignments_[pod] = where;
  ++running_;
  const std::optional<Seconds> run_time = plans_[pod].run_time;
  if (run_time && *run_time <= run_.end_time - now) {
    events_.push({now + *run_time, PodEventKind::kRelease, pod});
  }
  return {};
}

Result<void> ReplayDriver::release(std::uint32_t pod) {
  const Assignment& where = assignments_[pod];
  if (auto ok = pool_.release(pods_[pod].shape, where); !ok) {
    return fail(fmt::format("pod '{}'", pods_[pod].name),
                "its release was refused: " + ok.error().message());
  }
  refresh_fragment(where.node);
  --running_;
  if (!is_freed_[where.node.value]) {
    is_freed_[where.node.value] = true;
    freed_.push_back(where.node);
  }
  return {};
}

Result<void> ReplayDriver::scan_queue(Seconds now) {
  if (freed_.empty() && fresh_from_ == queue_.size()) return {};  // nothing can have changed
  // Within one scan the pool only fills up, so a shape that fits nowhere stays so.
  std::unordered_set<TaskShape, TaskShapeHash> fits_nowhere;
  std::vector<std::uint32_t> waiting;
  waiting.reserve(queue_.size());
  for (std::size_t i = 0; i < queue_.size(); ++i) {
    const std::uint32_t pod = queue_[i];
    const TaskShape& shape = pods_[pod].shape;
    bool fits_now = false;
    if (!fits_nowhere.contains(shape)) {
      fits_now =
          i >= fresh_from_ || needs_full_check_[pod] ? fits_any(shape) : fits_any(shape, freed_);
      if (!fits_now) fits_nowhere.insert(shape);
    }
    if (fits_now) {
      if (PlacementResult where = policy_.place(pool_, shape, rng_)) {
        if (auto ok = start(pod, *where, now); !ok) return ok;
        continue;
      }
      needs_full_check_[pod] = true;
    }
    waiting.push_back(pod);
  }
  queue_ = std::move(waiting);
  fresh_from_ = queue_.size();
  for (NodeId node : freed_) is_freed_[node.value] = false;
  freed_.clear();
  return {};
}

bool ReplayDriver::fits_empty_pool(const TaskShape& shape) {
  auto [it, inserted] = fits_empty_.try_emplace(shape, false);
  if (inserted) {
    for (std::uint32_t n = 0; n < empty_states_.size() && !it->second; ++n) {
      it->second = fits(pool_.spec(NodeId{n}), empty_states_[n], shape);
    }
  }
  return it->second;
}

bool ReplayDriver::fits_any(const TaskShape& shape, std::span<const NodeId> nodes) const {
  return std::any_of(nodes.begin(), nodes.end(),
                     [&](NodeId node) { return fits(pool_.spec(node), pool_.state(node), shape); });
}

bool ReplayDriver::fits_any(const TaskShape& shape) const {
  const auto specs = pool_.specs();
  const auto states = pool_.states();
  for (std::size_t n = 0; n < specs.size(); ++n) {
    if (fits(specs[n], states[n], shape)) return true;
  }
  return false;
}

void ReplayDriver::refresh_fragment(NodeId node) {
  const std::int64_t now = scaled_node_fragmentation(pool_.spec(node), pool_.state(node), profile_);
  fragment_ += now - node_fragment_[node.value];
  node_fragment_[node.value] = now;
}

}  // namespace

Result<ReplayRun> run_replay(Pool pool, std::span<const PodRecord> pods, PlacementPolicy& policy,
                             const WorkloadProfile& profile, const ReplaySettings& settings) {
  if (settings.sample_interval <= 0) {
    return fail("sample interval",
                fmt::format("must be positive, got {}", settings.sample_interval));
  }
  auto plans = plan_pods(pods);
  if (!plans) return std::unexpected(plans.error());
  return ReplayDriver(std::move(pool), pods, std::move(*plans), policy, profile, settings).run();
}

Seconds nearest_rank_percentile(std::span<const Seconds> sorted, int percent) {
  const auto n = static_cast<std::int64_t>(sorted.size());
  const std::int64_t rank = std::max<std::int64_t>(1, (percent * n + 99) / 100);
  return sorted[static_cast<std::size_t>(std::min(rank, n) - 1)];
}

DelayStats delay_stats(std::vector<Seconds> delays) {
  DelayStats stats;
  if (delays.empty()) return stats;
  std::sort(delays.begin(), delays.end());
  stats.count = static_cast<int>(delays.size());
  stats.p50 = nearest_rank_percentile(delays, 50);
  stats.p90 = nearest_rank_percentile(delays, 90);
  stats.p95 = nearest_rank_percentile(delays, 95);
  stats.p99 = nearest_rank_percentile(delays, 99);
  stats.max = delays.back();
  const Seconds sum = std::accumulate(delays.begin(), delays.end(), Seconds{0});
  stats.mean = static_cast<double>(sum) / static_cast<double>(delays.size());
  return stats;
}

}  // namespace tidepool
