#include "sim/shadow_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include "sim/shadow_measure.h"
#include "sim/tenants_from_trace.h"

namespace tidepool {
namespace {

enum ShadowEventKind : int { kEnd = 0, kPinnedStart = 1, kArrival = 2 };

struct ShadowEvent {
  Seconds time = 0;
  int kind = kArrival;
  std::uint32_t job = 0;
  friend auto operator<=>(const ShadowEvent&, const ShadowEvent&) = default;
};

// The job as the run needs it: its gang, its times relative to the first submit.
struct ShadowJob {
  Job job;
  Seconds submit = 0;
  std::optional<Seconds> observed_start;
  std::optional<Seconds> runtime;  // known only when it ended
  std::vector<NodeId> observed_nodes;
  bool chosen = false;
};

std::uint64_t fnv1a(std::uint64_t seed, std::string_view text) {
  std::uint64_t h = 14695981039346656037ULL ^ seed;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

// The gang of `job`: one task per node (those it ran on, else as many as it asked for).
Result<GangRequest> gang_of(const ObservedJob& job) {
  const int tasks =
      std::max<int>(1, job.nodes.empty() ? job.node_count : static_cast<int>(job.nodes.size()));
  if (job.gpus < 0) return fail("gpus", fmt::format("must not be negative, got {}", job.gpus));
  if (job.gpus % tasks != 0) {
    return fail("gpus", fmt::format("{} GPUs do not split evenly over {} nodes", job.gpus, tasks));
  }
  GangRequest gang;
  gang.task_count = tasks;
  gang.task.gpu_count = job.gpus / tasks;
  if (gang.task.gpu_count > kMaxGpusPerNode) {
    return fail("gpus", fmt::format("{} GPUs on one node; at most {}", gang.task.gpu_count,
                                    kMaxGpusPerNode));
  }
  gang.task.milli_per_gpu = gang.task.gpu_count > 0 ? kMilliPerGpu : 0;
  gang.task.milli_cpu = job.milli_cpu / tasks;
  gang.task.memory_mib = job.memory_mib / tasks;
  gang.topology.level = tasks == 1 ? TopologyLevel::kNode : TopologyLevel::kLeaf;
  gang.topology.strength = TopologyStrength::kPreferred;
  return gang;
}

// The tenants given, else tenants from the stream: one per tenant name, guaranteed a part of each
// model's capacity in proportion to its GPU time so far (sim/tenants_from_trace.h; a job not ended
// counts what it ran, at least a second).
Result<TenantBook> tenants_of(const Pool& pool, std::span<const ObservedJob> jobs, std::int64_t now,
                              const std::optional<TenantsSpec>& given) {
  if (given) return TenantBook::create(*given, pool.models());
  std::vector<PhillyJob> work;
  work.reserve(jobs.size());
  for (const ObservedJob& j : jobs) {
    Seconds ran = 1;
    if (j.start) ran = std::max<Seconds>(1, j.end.value_or(now) - *j.start);
    work.push_back(PhillyJob{j.id, 0, ran, j.gpus, j.tenant});
  }
  std::map<GpuModelId, std::int64_t> milli;
  for (const NodeSpec& n : pool.specs()) {
    if (n.gpu_count > 0) milli[n.model] += std::int64_t{n.gpu_count} * kMilliPerGpu;
  }
  std::vector<ModelCapacity> capacity;
  for (const auto& [model, m] : milli) capacity.push_back(ModelCapacity{model, m});
  auto tenants = derive_tenants_from_trace(work, capacity, "shadow");
  if (!tenants) return std::unexpected(tenants.error());
  return TenantBook::create(std::move(tenants->spec), pool.models());
}

class ShadowDriver {
 public:
  ShadowDriver(Scheduler scheduler, std::vector<ShadowJob> jobs)
      : sched_(std::move(scheduler)), jobs_(std::move(jobs)) {}

  Result<void> run();
  [[nodiscard]] const std::vector<std::vector<Assignment>>& places() const { return places_; }
  [[nodiscard]] const std::vector<std::optional<Seconds>>& starts() const { return starts_; }

 private:
  // Adopts a job not chosen on its observed nodes now; false when they lack room.
  bool adopt_pinned(std::uint32_t i, Seconds now);
  void started(std::uint32_t i, std::vector<Assignment> places, Seconds now);

  Scheduler sched_;
  std::vector<ShadowJob> jobs_;
  std::priority_queue<ShadowEvent, std::vector<ShadowEvent>, std::greater<>> events_;
  std::vector<std::vector<Assignment>> places_;
  std::vector<std::optional<Seconds>> starts_;
  std::set<std::uint32_t> waiting_pinned_;
};

bool ShadowDriver::adopt_pinned(std::uint32_t i, Seconds now) {
  const ShadowJob& j = jobs_[i];
  const Pool& pool = sched_.pool();
  std::vector<Assignment> places;
  std::map<NodeId, GpuSet> taken;
  for (const NodeId node : j.observed_nodes) {
    const NodeSpec& spec = pool.spec(node);
    const NodeState& state = pool.state(node);
    GpuSet gpus = 0;
    int need = j.job.gang.task.gpu_count;
    for (int g = 0; g < spec.gpu_count && need > 0; ++g) {
      if (state.free_milli[g] == kMilliPerGpu && !gpu_set_contains(taken[node], g)) {
        gpus |= GpuSet{1} << g;
        --need;
      }
    }
    if (need > 0) return false;
    taken[node] |= gpus;
    places.push_back(Assignment{node, gpus});
  }
  if (!sched_.adopt(j.job, places, now, now)) return false;
  started(i, std::move(places), now);
  return true;
}

void ShadowDriver::started(std::uint32_t i, std::vector<Assignment> places, Seconds now) {
  places_[i] = std::move(places);
  starts_[i] = now;
  if (jobs_[i].runtime) events_.push(ShadowEvent{now + *jobs_[i].runtime, kEnd, i});
}

Result<void> ShadowDriver::run() {
  places_.assign(jobs_.size(), {});
  starts_.assign(jobs_.size(), std::nullopt);
  for (std::uint32_t i = 0; i < jobs_.size(); ++i) {
    const ShadowJob& j = jobs_[i];
    if (j.chosen) {
      events_.push(ShadowEvent{j.submit, kArrival, i});
    } else if (j.observed_start) {
      events_.push(ShadowEvent{*j.observed_start, kPinnedStart, i});
    }
  }
  while (!events_.empty()) {
    const Seconds now = events_.top().time;
    bool ended = false;
    while (!events_.empty() && events_.top().time == now) {
      const ShadowEvent e = events_.top();
      events_.pop();
      const ShadowJob& j = jobs_[e.job];
      if (e.kind == kEnd) {
        if (auto ok = sched_.finish(j.job.id, now, j.runtime); !ok) {
          return fail("job " + std::to_string(e.job), ok.error().message());
        }
        ended = true;
      } else if (e.kind == kPinnedStart) {
        if (!adopt_pinned(e.job, now)) waiting_pinned_.insert(e.job);
      } else if (auto ok = sched_.submit(j.job, now); !ok) {
        return fail("job " + std::to_string(e.job), ok.error().message());
      }
    }
    if (ended) {
      for (auto it = waiting_pinned_.begin(); it != waiting_pinned_.end();) {
        it = adopt_pinned(*it, now) ? waiting_pinned_.erase(it) : std::next(it);
      }
    }
    const PassResult pass = sched_.pass(now);
    if (!pass.preempted.empty()) {
      return fail("policy", "preempted a job that may not be preempted (a scheduler bug)");
    }
    for (const StartedJob& s : pass.started) started(s.job.value, s.assignments, now);
  }
  return {};
}

std::vector<ShadowPlace> named_places(const Pool& pool, std::span<const Assignment> places) {
  std::vector<ShadowPlace> out;
  out.reserve(places.size());
  for (const Assignment& a : places) out.push_back(ShadowPlace{pool.spec(a.node).name, a.gpus});
  return out;
}

}  // namespace

bool in_share(const ShadowShare& share, const ObservedJob& job) {
  if (share.percent >= 100) return true;
  if (share.percent <= 0) return false;
  const std::string_view key = share.rule == ShareRule::kTenant ? job.tenant : job.id;
  return fnv1a(share.seed, key) % 10'000 < static_cast<std::uint64_t>(share.percent) * 100;
}

Result<ShadowRun> run_shadow(const ClusterSpec& cluster, std::span<const ObservedJob> jobs,
                             std::int64_t now, const ShadowSettings& settings) {
  auto config = scheduler_policy(settings.policy);
  if (!config) return std::unexpected(config.error());
  auto pool = Pool::create(cluster.models, cluster.topology, cluster.nodes);
  if (!pool) return std::unexpected(pool.error());
  if (auto ok = observed_time(now, "now"); !ok) return std::unexpected(ok.error());
  for (const ObservedJob& j : jobs) {
    if (auto ok = check_observed(j); !ok) {
      return fail("job " + j.id + " " + ok.error().field, ok.error().reason);
    }
  }
  ShadowRun run;
  run.now = now;
  run.first_submit = now;
  for (const ObservedJob& j : jobs) run.first_submit = std::min(run.first_submit, j.submit);
  const std::int64_t t0 = run.first_submit;
  std::map<std::string, NodeId, std::less<>> node_ids;
  for (int n = 0; n < pool->node_count(); ++n) {
    node_ids.emplace(pool->spec(NodeId{static_cast<std::uint32_t>(n)}).name,
                     NodeId{static_cast<std::uint32_t>(n)});
  }
  if (jobs.empty()) return run;
  auto book = tenants_of(*pool, jobs, now, settings.tenants);
  if (!book) return std::unexpected(book.error());

  // The jobs both runs place (cancelled ones are listed but placed by neither), and the measure's.
  std::vector<ShadowJob> placed;
  std::vector<std::size_t> input_of;  // placed index -> input index
  std::vector<ScheduledJob> observed;
  std::set<std::string> chosen_tenants;
  run.jobs.resize(jobs.size());
  std::vector<TaskShape> shapes;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const ObservedJob& o = jobs[i];
    const std::string field = "job " + o.id;
    ShadowJobResult& r = run.jobs[i];
    r.chosen = in_share(settings.share, o);
    if (o.cancelled) continue;
    if (o.submit > now) return fail(field, "submitted after the time of the observation");
    auto gang = gang_of(o);
    if (!gang) return fail(field + " " + gang.error().field, gang.error().reason);
    ShadowJob s;
    s.chosen = r.chosen;
    s.submit = o.submit - t0;
    if (o.start) {
      if (*o.start < o.submit) return fail(field, "started before it was submitted");
      s.observed_start = *o.start - t0;
      if (o.end) s.runtime = *o.end - *o.start;
      for (const std::string& name : o.nodes) {
        const auto it = node_ids.find(name);
        if (it == node_ids.end())
          return fail(field, "ran on '" + name + "', not a node of the pool");
        s.observed_nodes.push_back(it->second);
      }
      if (s.observed_nodes.empty()) return fail(field, "started, but on no node");
    }
    const auto tenant = book->find_tenant(o.tenant);
    if (!tenant) {
      return fail(field, "tenant '" + o.tenant + "' unknown" +
                             (settings.tenants ? ": it is not in the tenants file" : ""));
    }
    s.job.id = JobId{static_cast<std::uint32_t>(placed.size())};
    s.job.tenant = *tenant;
    s.job.queue = book->queues_of(*tenant).front();
    s.job.job_class = JobClass::kBatch;
    s.job.preemptible = false;
    s.job.submit_time = s.submit;
    s.job.gang = *gang;
    if (o.time_limit && *o.time_limit > 0) s.job.runtime_estimate = *o.time_limit;
    if (auto ok = validate_job(s.job); !ok) return fail(field, ok.error().message());
    for (int t = 0; t < gang->task_count; ++t) shapes.push_back(gang->task);
    if (r.chosen) {
      ++run.chosen;
      chosen_tenants.insert(o.tenant);
    }
    ScheduledJob m;
    m.submit = s.submit;
    m.start = s.observed_start;
    if (m.start && s.runtime) m.end = *m.start + *s.runtime;
    m.task = gang->task;
    for (const NodeId node : s.observed_nodes) m.places.push_back(Assignment{node, 0});
    m.compared = r.chosen;
    m.comm_key = placed.size();
    observed.push_back(std::move(m));
    placed.push_back(std::move(s));
    input_of.push_back(i);
  }
  run.chosen_tenants.assign(chosen_tenants.begin(), chosen_tenants.end());

  auto scheduler = Scheduler::create(*pool, std::move(*book), std::move(*config));
  if (!scheduler) return std::unexpected(scheduler.error());
  ShadowDriver driver(std::move(*scheduler), placed);
  if (auto ok = driver.run(); !ok) return std::unexpected(ok.error());

  std::vector<ScheduledJob> tidepool = observed;
  for (std::size_t k = 0; k < placed.size(); ++k) {
    ScheduledJob& m = tidepool[k];
    m.start = driver.starts()[k];
    m.end =
        m.start && placed[k].runtime ? std::optional(*m.start + *placed[k].runtime) : std::nullopt;
    m.places = driver.places()[k];
  }
  const WorkloadProfile profile = WorkloadProfile::from_tasks(shapes);
  MeasuredSchedule seen = measure_schedule(*pool, observed, profile, settings.seed);
  MeasuredSchedule ours = measure_schedule(*pool, tidepool, profile, settings.seed);
  run.observed = seen.summary;
  run.tidepool = ours.summary;
  for (std::size_t k = 0; k < placed.size(); ++k) {
    ShadowJobResult& r = run.jobs[input_of[k]];
    const ObservedJob& o = jobs[input_of[k]];
    r.observed_start = o.start;
    r.observed_end = o.start ? o.end : std::nullopt;
    r.observed_places = named_places(*pool, seen.places[k]);
    if (driver.starts()[k]) {
      r.tidepool_start = *driver.starts()[k] + t0;
      if (placed[k].runtime) r.tidepool_end = *r.tidepool_start + *placed[k].runtime;
    }
    r.tidepool_places = named_places(*pool, driver.places()[k]);
    // A job not chosen that Tidepool's jobs held up started later than where it was observed.
    const ShadowJob& s = placed[k];
    if (!s.chosen && s.observed_start && driver.starts()[k] &&
        *driver.starts()[k] > *s.observed_start) {
      r.displaced_seconds = *driver.starts()[k] - *s.observed_start;
      ++run.displaced;
    }
  }
  return run;
}

}  // namespace tidepool
