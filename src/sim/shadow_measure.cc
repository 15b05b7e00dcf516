#include "sim/shadow_measure.h"

#include <algorithm>
#include <tuple>

#include "core/efficiency_model.h"
#include "sim/replay_simulation.h"

namespace tidepool {
namespace {

// The node's lowest-numbered whole free GPUs, `count` of them (0 when it has fewer).
GpuSet lowest_free_gpus(const Pool& pool, NodeId node, int count) {
  const NodeSpec& spec = pool.spec(node);
  const NodeState& state = pool.state(node);
  GpuSet gpus = 0;
  for (int g = 0; g < spec.gpu_count && count > 0; ++g) {
    if (state.free_milli[g] == kMilliPerGpu) {
      gpus |= GpuSet{1} << g;
      --count;
    }
  }
  return count == 0 ? gpus : 0;
}

// The pool's time integrals: allocated milli-GPUs and FGD fragmentation, kept per node so that an
// event costs the nodes it changes.
class PoolIntegrals {
 public:
  PoolIntegrals(const Pool& pool, const WorkloadProfile& profile)
      : profile_(profile), node_fragment_(static_cast<std::size_t>(pool.node_count()), 0) {
    for (int n = 0; n < pool.node_count(); ++n)
      changed(pool, NodeId{static_cast<std::uint32_t>(n)});
  }
  void changed(const Pool& pool, NodeId node) {
    if (profile_.total_count() == 0) return;
    std::int64_t& f = node_fragment_[node.value];
    fragment_ -= f;
    f = scaled_node_fragmentation(pool.spec(node), pool.state(node), profile_);
    fragment_ += f;
  }
  // Adds the state of the pool from `from` to `to` (clipped to `until`).
  void advance(const Pool& pool, Seconds from, Seconds to, Seconds until) {
    to = std::min(to, until);
    if (to <= from) return;
    const auto dt = static_cast<long double>(to - from);
    allocated_ += static_cast<long double>(pool.allocated_milli_gpu()) * dt;
    if (profile_.total_count() > 0) {
      fragmented_ += static_cast<long double>(fragment_) /
                     static_cast<long double>(profile_.total_count()) * dt;
    }
  }
  [[nodiscard]] long double allocated() const { return allocated_; }
  [[nodiscard]] long double fragmented() const { return fragmented_; }

 private:
  const WorkloadProfile& profile_;
  std::vector<std::int64_t> node_fragment_;
  std::int64_t fragment_ = 0;
  long double allocated_ = 0;
  long double fragmented_ = 0;
};

}  // namespace

MeasuredSchedule measure_schedule(const Pool& empty, std::span<const ScheduledJob> jobs,
                                  const WorkloadProfile& profile, std::uint64_t seed) {
  MeasuredSchedule out;
  out.places.resize(jobs.size());
  Pool pool = empty;
  // The makespan: first submit (0) to the last known end of a compared job.
  Seconds makespan = 0;
  for (const ScheduledJob& j : jobs) {
    if (j.compared && j.start && j.end) makespan = std::max(makespan, *j.end);
  }
  // (time, kind, job). Times are whole seconds, so jobs shorter than a second start and end at
  // one time, and which of a second's events came first is not known. At one time: ends of jobs
  // that started earlier, then jobs that start and end at it (each taken and given back at
  // once: it ran beside the jobs that span the second), then starts. Every state this passes
  // through is one the schedule was in, so a schedule that never shared a GPU never conflicts.
  enum Kind : int { kEnd = 0, kBlip = 1, kStart = 2 };
  std::vector<std::tuple<Seconds, int, std::size_t>> events;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].start) continue;
    const Seconds start = *jobs[i].start;
    if (jobs[i].end && *jobs[i].end <= start) {
      events.emplace_back(start, kBlip, i);
      continue;
    }
    events.emplace_back(start, kStart, i);
    if (jobs[i].end) events.emplace_back(*jobs[i].end, kEnd, i);
  }
  std::sort(events.begin(), events.end());
  PoolIntegrals integrals(pool, profile);
  ShadowSummary& s = out.summary;
  std::vector<Seconds> waits;
  long double slowdown_total = 0;
  long double comm_total = 0;
  long double nodes_total = 0;
  Seconds last = 0;
  for (const auto& [time, kind, i] : events) {
    integrals.advance(pool, last, time, makespan);
    last = std::max(last, time);
    const ScheduledJob& j = jobs[i];
    std::vector<Assignment>& held = out.places[i];
    if (kind == kEnd) {
      for (const Assignment& a : held) {
        (void)pool.release(j.task, a);
        integrals.changed(pool, a.node);
      }
      continue;
    }
    bool fits = true;
    for (const Assignment& place : j.places) {
      Assignment a = place;
      if (a.gpus == 0 && j.task.gpu_count > 0) {
        a.gpus = lowest_free_gpus(pool, a.node, j.task.gpu_count);
      }
      if (!pool.allocate(j.task, a)) {
        fits = false;
        break;
      }
      held.push_back(a);
    }
    if (!fits) {
      for (const Assignment& a : held) (void)pool.release(j.task, a);
      held.clear();
      if (j.compared) ++s.conflicts;
      continue;
    }
    if (kind == kBlip) {
      for (const Assignment& a : held) (void)pool.release(j.task, a);
    }
    for (const Assignment& a : held) integrals.changed(pool, a.node);
    if (!j.compared) continue;
    ++s.started;
    waits.push_back(*j.start - j.submit);
    const int gpus = j.task.gpu_count * static_cast<int>(held.size());
    if (gpus < 2) continue;
    ++s.multi_gpu_jobs;
    const RingSpan ring = ring_span(pool, held);
    nodes_total += ring.span.nodes;
    if (ring.span.nodes > 1) ++s.multi_node_jobs;
    const PlacementEfficiency e =
        placement_efficiency(draw_comm_profile(seed, j.comm_key), pool, held);
    slowdown_total += e.slowdown();
    comm_total += e.comm_share();
  }
  integrals.advance(pool, last, makespan, makespan);
  for (const ScheduledJob& j : jobs) s.jobs += j.compared ? 1 : 0;
  const DelayStats delay = delay_stats(waits);
  s.wait_mean_s = delay.mean;
  s.wait_p50_s = delay.p50;
  s.wait_p95_s = delay.p95;
  s.wait_max_s = delay.max;
  s.makespan_s = makespan;
  if (makespan > 0 && pool.capacity_milli_gpu() > 0) {
    const long double capacity = static_cast<long double>(pool.capacity_milli_gpu()) * makespan;
    s.gpu_allocation_percent = static_cast<double>(100 * integrals.allocated() / capacity);
    s.fragmentation_percent = static_cast<double>(100 * integrals.fragmented() / capacity);
  }
  if (s.multi_gpu_jobs > 0) {
    s.nodes_per_multi_gpu_job = static_cast<double>(nodes_total / s.multi_gpu_jobs);
    s.slowdown_mean = static_cast<double>(slowdown_total / s.multi_gpu_jobs);
    s.comm_share_mean = static_cast<double>(comm_total / s.multi_gpu_jobs);
  }
  return out;
}

}  // namespace tidepool
