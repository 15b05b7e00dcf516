#include "sim/cluster_simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include "core/burst.h"
#include "core/efficiency_model.h"
#include "core/rng.h"
#include "core/runtime_predictor.h"
#include "core/service_replicas.h"
#include "core/tidal_window.h"
#include "sim/replay_simulation.h"

namespace tidepool {
namespace {

// The figures of a set of waits (sorted here).
TenantQueueing queueing_of(std::vector<Seconds>& waits) {
  TenantQueueing q;
  std::sort(waits.begin(), waits.end());
  q.jobs = static_cast<int>(waits.size());
  if (waits.empty()) return q;
  long double total = 0;
  for (Seconds w : waits) total += w;
  q.avg_s = static_cast<double>(total / waits.size());
  q.p95_s = nearest_rank_percentile(waits, 95);
  q.p99_s = nearest_rank_percentile(waits, 99);
  q.max_s = waits.back();
  return q;
}

__extension__ using Int128 = __int128;

enum ClusterEventKind : int {
  kFinish = 0,
  kLoanStart = 1,
  kArrival = 2,
  kWakeup = 3,
  kBurstFinish = 4,
  kReplicaStop = 5,  // a drained replica stops
  kServiceTick = 6
};

// A spot job interrupted this often runs out its last segment uninterrupted (bounds the model).
constexpr int kMaxSpotInterruptions = 100;

struct ClusterEvent {
  Seconds time = 0;
  int kind = kWakeup;
  std::uint32_t index = 0;       // job id, loan index or service index
  std::uint32_t generation = 0;  // finishes: the job's segment it ends

  friend auto operator<=>(const ClusterEvent&, const ClusterEvent&) = default;
};

// Where one job stands in the simulation (the truth the scheduler does not see).
struct JobTrack {
  Seconds progress = 0;  // ideal seconds of work saved (by checkpoints or done)
  std::uint32_t generation = 0;
  bool running = false;
  Seconds segment_start = 0;
  PlacementEfficiency efficiency;
  AdvisedMfu advised;  // of the current segment
  bool multi_gpu = false;
  int gpus = 0;
  Seconds ran = 0;  // wall seconds run, all segments
  Seconds pending_since = 0;
  double comm_gpu_seconds = 0;
  double mfu_gpu_seconds = 0;
  // MFU x GPU-seconds under each advice (AdvisedMfu's accumulate, compact, both).
  double advised_accumulate_gpu_seconds = 0;
  double advised_compact_gpu_seconds = 0;
  double advised_both_gpu_seconds = 0;
  bool advised_accumulate = false;  // some segment was given that advice
  bool advised_compact = false;
  std::optional<SimLoan> loan;
  // On rented capacity: the offer, when it was sent there, the seconds rented and interruptions.
  std::optional<std::size_t> burst_offer;
  Seconds burst_from = 0;
  Seconds rented_seconds = 0;
  int interruptions = 0;
  std::optional<std::uint32_t> service;  // a replica of this service: runs until stopped
  std::optional<Seconds> draining_until;
};

// A service as the simulation runs it.
struct ServiceRun {
  Autoscaler scaler;
  Rng rng;
  std::vector<std::uint32_t> replicas;  // job ids, live and draining
  std::vector<std::uint32_t> all;       // every replica it ever had
  SimServiceResult result;
};

// Work done in `wall` seconds at the placement's slowdown (inverse of scale_runtime), floored.
Seconds ideal_work(Seconds wall, const PlacementEfficiency& e) {
  const std::int64_t actual = e.actual.total_us();
  const std::int64_t ideal = e.ideal.total_us();
  if (actual <= 0 || ideal <= 0 || actual <= ideal) return wall;
  return static_cast<Seconds>(static_cast<Int128>(wall) * ideal / actual);
}

class Simulation {
 public:
  Simulation(Scheduler scheduler, const SchedulerConfig& config, std::span<const SimJob> workload,
             std::span<const SimLoan> loans, const ClusterSimSettings& settings)
      : sched_(std::move(scheduler)),
        config_(config),
        workload_(workload.begin(), workload.end()),
        loans_(loans.begin(), loans.end()),
        settings_(settings),
        prewarm_(settings.prewarm.planner) {}

  Result<ClusterSimRun> run();

 private:
  Result<void> submit_loan(std::size_t k, Seconds now);
  void integrate(Seconds from, Seconds to);
  void sample(Seconds time);
  // Applies a pass; `warm` holds how each of its starts stood with its pre-warm.
  void apply(const PassResult& pass, const std::vector<PrewarmedStart>& warm, Seconds now);
  void stop_segment(JobTrack& track, SimJobResult& result, Seconds now);
  // Counts a start against its pre-warm (SimPrewarmSettings).
  void count_prewarm(const StartedJob& s, const PrewarmedStart& warm, Seconds now);
  Seconds wait_in_window(const SimJob& job, Seconds start) const;
  void summarise(Seconds end);
  [[nodiscard]] bool bursting() const { return market_ && settings_.market->burst.has_value(); }
  // Sends jobs that waited past the burst threshold to rented capacity (core/burst.h).
  void burst(Seconds now);
  // The simulated rental of `job` on `offer` from now: start-up delays, spot interruptions.
  void rent(std::uint32_t job, std::size_t offer, Seconds now);
  void finish_burst(std::uint32_t job, Seconds now);
  // A service's tick: the replicas report, the autoscaler decides, the plan is carried out.
  // True when replicas were submitted or stopped (a pass is due).
  Result<bool> service_tick(std::uint32_t service, Seconds now);
  Result<void> submit_replica(std::uint32_t service, Seconds now);
  // Stops a replica now: withdrawn if pending, finished if placed; out of its service's list.
  Result<void> stop_replica(std::uint32_t job, Seconds now);
  [[nodiscard]] ReplicaPhase replica_phase(std::uint32_t job, Seconds now) const;
  // Running jobs of the training class, per tenant.
  void count_training(const Job& job, int sign) {
    if (job.job_class == JobClass::kTraining) {
      training_milli_[job.tenant.value] += sign * job.total_milli_gpu();
    }
  }
  // Runs a market hook and keeps its first error.
  void market_hook(Result<void> result) {
    if (!result && market_status_) market_status_ = std::unexpected(result.error());
  }

  Scheduler sched_;
  SchedulerConfig config_;
  std::vector<SimJob> workload_;  // the trace's jobs, then one job per loan
  std::vector<SimLoan> loans_;
  ClusterSimSettings settings_;
  std::size_t trace_jobs_ = 0;
  std::vector<JobTrack> tracks_;
  ClusterSimRun run_;
  std::priority_queue<ClusterEvent, std::vector<ClusterEvent>, std::greater<>> events_;
  std::set<Seconds> wakeups_;
  std::vector<std::int64_t> pending_milli_;  // per tenant
  // Integrals over time.
  long double allocated_milli_seconds_ = 0;
  std::vector<long double> wanted_, received_;  // per tenant, milli-GPU-seconds
  std::vector<long double> class_milli_seconds_;
  Seconds horizon_ = 0;
  std::optional<SimMarket> market_;
  std::set<std::pair<Seconds, std::uint32_t>> waiting_;  // (pending since, job) when bursting
  std::vector<std::int64_t> rented_;                     // GPUs in use per burst offer
  Result<void> market_status_;                           // the first error of the market's hooks
  PredictorErrors errors_;
  TenantMeanBaseline baseline_;
  std::vector<ServiceRun> services_;
  std::vector<std::int64_t> training_milli_;   // per tenant
  std::vector<long double> training_outside_;  // per tenant, milli-GPU-seconds
  PrewarmPlanner prewarm_;
  long double prewarm_saved_s_ = 0;            // start delay saved, summed over starts
  long double prewarm_saved_gpu_seconds_ = 0;  // ... times the GPUs of each start
};

Result<void> Simulation::submit_loan(std::size_t k, Seconds now) {
  const SimLoan& loan = loans_[k];
  const JobId id{static_cast<std::uint32_t>(trace_jobs_ + k)};
  Loan grant{loan.tenant, loan.model, std::int64_t{loan.gpus} * kMilliPerGpu, now,
             now + loan.duration};
  if (auto ok = sched_.grant_loan(grant, now); !ok) {
    return fail("loan " + std::to_string(k + 1), ok.error().message());
  }
  if (auto ok = sched_.submit(workload_[id.value].job, now); !ok) {
    return fail("loan " + std::to_string(k + 1), ok.error().message());
  }
  run_.jobs[id.value].predicted_runtime = sched_.prediction(id)->runtime;
  pending_milli_[loan.tenant.value] += workload_[id.value].job.total_milli_gpu();
  tracks_[id.value].pending_since = now;
  return {};
}

void Simulation::integrate(Seconds from, Seconds to) {
  if (to <= from) return;
  const auto dt = static_cast<long double>(to - from);
  allocated_milli_seconds_ += static_cast<long double>(sched_.pool().allocated_milli_gpu()) * dt;
  const TenantBook& book = sched_.book();
  // An open window's GPUs are its class's own guarantee: the book holds them out of the
  // tenants' (TenantBook::hold_outside_quotas), which are measured against what is left.
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId id{static_cast<std::uint32_t>(t)};
    const std::int64_t guaranteed = book.guaranteed_total(id);
    const std::int64_t used = sched_.usage_milli(id);
    const std::int64_t want = std::min(used + pending_milli_[t], guaranteed);
    wanted_[t] += static_cast<long double>(want) * dt;
    received_[t] += static_cast<long double>(std::min(used, want)) * dt;
  }
  const Seconds h_to = std::min(to, horizon_);
  if (h_to > from) {
    for (int c = 0; c < 4; ++c) {
      class_milli_seconds_[c] +=
          static_cast<long double>(sched_.class_usage_milli(static_cast<JobClass>(c))) *
          static_cast<long double>(h_to - from);
    }
    // Windows open and close at events (the scheduler wakes for them): one test per interval.
    const bool in_window =
        std::any_of(config_.windows.begin(), config_.windows.end(),
                    [&](const TidalWindow& w) { return window_open(w, from, config_.day_offset); });
    const Seconds m_from = std::max(from, settings_.measure_from);
    if (!in_window && h_to > m_from) {
      for (std::size_t t = 0; t < training_milli_.size(); ++t) {
        training_outside_[t] +=
            static_cast<long double>(training_milli_[t]) * static_cast<long double>(h_to - m_from);
      }
    }
  }
}

void Simulation::sample(Seconds time) {
  SimSample s;
  s.time = time;
  for (int t = 0; t < sched_.book().tenant_count(); ++t) {
    s.tenant_milli.push_back(sched_.usage_milli(TenantId{static_cast<std::uint32_t>(t)}));
  }
  const Pool& pool = sched_.pool();
  s.allocated_milli = pool.allocated_milli_gpu();
  s.queued = sched_.pending_count();
  s.running = sched_.running_count();
  const FreeGpuCount free = count_free_gpus(pool);
  s.free_gpus = free.free;
  s.fragmented_gpus = free.fragmented;
  run_.samples.push_back(std::move(s));
}

void Simulation::count_prewarm(const StartedJob& s, const PrewarmedStart& warm, Seconds now) {
  SimSummary& summary = run_.summary;
  ++summary.starts;
  const bool waited = now - tracks_[s.job.value].pending_since >= settings_.prewarm.planner.lead;
  if (waited) ++summary.starts_after_lead;
  if (!warm.prewarmed) return;
  ++summary.prewarmed_starts;
  if (waited) ++summary.prewarmed_starts_after_lead;
  const Seconds stage = settings_.prewarm.stage_seconds;
  if (warm.lead >= stage) ++summary.fully_staged_starts;
  const Seconds saved = std::min(warm.lead, stage);
  prewarm_saved_s_ += saved;
  prewarm_saved_gpu_seconds_ +=
      static_cast<long double>(saved) * whole_gpus(workload_[s.job.value].job.total_milli_gpu());
}

void Simulation::stop_segment(JobTrack& track, SimJobResult& result, Seconds now) {
  const Seconds wall = now - track.segment_start;
  const std::int64_t gpu_seconds = wall * track.gpus;
  result.gpu_seconds += gpu_seconds;
  track.ran += wall;
  track.comm_gpu_seconds += static_cast<double>(gpu_seconds) * track.efficiency.comm_share();
  track.mfu_gpu_seconds += static_cast<double>(gpu_seconds) * track.efficiency.est_mfu();
  track.advised_accumulate_gpu_seconds +=
      static_cast<double>(gpu_seconds) * track.advised.accumulate;
  track.advised_compact_gpu_seconds += static_cast<double>(gpu_seconds) * track.advised.compact;
  track.advised_both_gpu_seconds += static_cast<double>(gpu_seconds) * track.advised.both;
  track.running = false;
  ++track.generation;
}

Seconds Simulation::wait_in_window(const SimJob& sj, Seconds start) const {
  Seconds worst = -1;
  for (const TidalWindow& w : config_.windows) {
    if (w.job_class != sj.job.job_class) continue;
    const Seconds submit = sj.job.submit_time;
    const Seconds from = window_open(w, submit, config_.day_offset)
                             ? submit
                             : next_window_open(w, submit, config_.day_offset);
    if (start <= from) {
      worst = std::max<Seconds>(worst, 0);
      continue;
    }
    const Seconds closes = next_window_close(w, from, config_.day_offset);
    worst = std::max(worst, std::min(start, closes) - from);
  }
  return worst;
}

void Simulation::apply(const PassResult& pass, const std::vector<PrewarmedStart>& warm,
                       Seconds now) {
  for (const PreemptedJob& p : pass.preempted) {
    JobTrack& track = tracks_[p.job.value];
    SimJobResult& result = run_.jobs[p.job.value];
    const Seconds remaining =
        std::max<Seconds>(0, workload_[p.job.value].duration - track.progress);
    track.progress += std::min(remaining, ideal_work(p.kept_seconds, track.efficiency));
    stop_segment(track, result, now);
    if (market_) market_hook(market_->stop(p.job, now));
    count_training(workload_[p.job.value].job, -1);
    ++result.preemptions;
    result.lost_gpu_seconds += p.lost_gpu_seconds;
    track.pending_since = now;
    if (bursting()) waiting_.emplace(now, p.job.value);
    pending_milli_[workload_[p.job.value].job.tenant.value] +=
        workload_[p.job.value].job.total_milli_gpu();
  }
  for (std::size_t k = 0; k < pass.started.size(); ++k) {
    const StartedJob& s = pass.started[k];
    const SimJob& sj = workload_[s.job.value];
    JobTrack& track = tracks_[s.job.value];
    SimJobResult& result = run_.jobs[s.job.value];
    result.queue_seconds += now - track.pending_since;
    pending_milli_[sj.job.tenant.value] -= sj.job.total_milli_gpu();
    waiting_.erase({track.pending_since, s.job.value});
    if (!result.first_start) {
      result.first_start = now;
      result.backfilled = s.backfilled;
      if (const Seconds w = wait_in_window(sj, now); w >= 0) {
        run_.summary.inference_max_wait_in_window_s =
            std::max(run_.summary.inference_max_wait_in_window_s, w);
      }
    }
    track.running = true;
    track.segment_start = now;
    count_training(sj.job, +1);
    count_prewarm(s, warm[k], now);
    if (market_) {
      market_hook(market_->start(sj.job, s.assignments, sched_.pool(),
                                 track.loan ? PriceClass::kEmergency : price_class_of(sj.job),
                                 now));
    }
    track.gpus = static_cast<int>(whole_gpus(sj.job.total_milli_gpu()));
    track.multi_gpu = track.gpus > 1;
    if (track.multi_gpu) {
      const JobCommProfile profile = draw_comm_profile(settings_.seed, s.job.value);
      // The spans once, for the placement's efficiency and for the advice.
      const LinkSpeeds& links = sched_.pool().topology().links;
      const RingSpan ring = ring_span(sched_.pool(), s.assignments);
      const RingSpan ideal = ideal_ring_span(sched_.pool(), ring.gpus);
      track.efficiency = placement_efficiency(profile, links, ring, ideal);
      track.advised = advised_mfu(profile, AdvicePlacement{ring, ideal, links}, settings_.advice);
      track.advised_accumulate |= track.advised.accumulate > track.advised.now;
      track.advised_compact |= track.advised.compact > track.advised.now;
    } else {
      track.efficiency = PlacementEfficiency{};
      track.efficiency.actual.compute_us = track.efficiency.ideal.compute_us = 1;
      const double mfu = track.efficiency.est_mfu();
      track.advised = AdvisedMfu{mfu, mfu, mfu, mfu};
    }
    result.nodes = s.span.nodes;
    result.leaves = s.span.leaves;
    result.slowdown = track.efficiency.slowdown();
    if (track.service) continue;  // a replica runs until its service stops it
    const Seconds remaining = std::max<Seconds>(0, sj.duration - track.progress);
    Seconds wall = scale_runtime(remaining, track.efficiency);
    if (sj.job.caps.max_runtime)
      wall = std::min(wall, std::max<Seconds>(0, *sj.job.caps.max_runtime - track.ran));
    if (track.loan)
      wall = std::min(wall, std::max<Seconds>(0, track.loan->start + track.loan->duration - now));
    events_.push({now + wall, kFinish, s.job.value, track.generation});
  }
}

void Simulation::burst(Seconds now) {
  const BurstPolicy& policy = *settings_.market->burst;
  // The jobs waiting past the threshold (waiting_ is oldest first), but a loan's milestone job,
  // which runs on its loan.
  std::vector<WaitingJob> waiting;
  for (auto it = waiting_.begin(); it != waiting_.end() && it->first <= now - policy.threshold;
       ++it) {
    if (!tracks_[it->second].loan) waiting.push_back({&workload_[it->second].job, now - it->first});
  }
  const std::vector<BurstCandidate> candidates = burst_candidates(waiting, sched_, policy);
  if (candidates.empty()) return;
  const BurstChoice choice = choose_bursts(candidates, settings_.market->offers, rented_,
                                           market_->remaining_budgets(now), policy);
  for (const BurstDecision& d : choice.decisions) {
    const std::uint32_t i = d.job.value;
    JobTrack& track = tracks_[i];
    if (auto ok = sched_.withdraw(d.job, now); !ok) {
      market_hook(std::unexpected(ok.error()));
      continue;
    }
    waiting_.erase({track.pending_since, i});
    prewarm_.forget(d.job);
    pending_milli_[workload_[i].job.tenant.value] -= workload_[i].job.total_milli_gpu();
    rent(i, d.offer, now);
  }
}

void Simulation::rent(std::uint32_t i, std::size_t offer_index, Seconds now) {
  const SimJob& sj = workload_[i];
  const BurstOffer& offer = settings_.market->offers[offer_index];
  JobTrack& track = tracks_[i];
  SimJobResult& result = run_.jobs[i];
  const std::int64_t gpus = rented_gpus(sj.job);
  result.queue_seconds += now - track.pending_since + offer.startup_delay;
  if (!result.first_start) result.first_start = now + offer.startup_delay;
  track.burst_offer = offer_index;
  track.burst_from = now;
  track.running = true;
  // Rented nodes hold the whole gang in one place: the job runs at its ideal speed. A spot
  // segment is interrupted in each hour it runs with the offer's chance, at a uniform second of
  // that hour; the job keeps the work to its last checkpoint and starts again after the delay.
  Rng rng(settings_.seed ^ (0x9e3779b97f4a7c15ULL * (std::uint64_t{i} + 1)));
  Seconds remaining = std::max<Seconds>(0, sj.duration - track.progress);
  Seconds t = now;
  while (true) {
    t += offer.startup_delay;
    track.rented_seconds += offer.startup_delay;
    std::optional<Seconds> cut;
    if (offer.spot && offer.interruption_per_hour > 0 &&
        track.interruptions < kMaxSpotInterruptions) {
      for (Seconds hour = 0; hour < remaining && !cut; hour += 3600) {
        if (static_cast<Ppm>(rng.below(kPpmOne)) < offer.interruption_per_hour) {
          const Seconds at = hour + static_cast<Seconds>(rng.below(3600));
          if (at < remaining) cut = at;
        }
      }
    }
    if (!cut) {
      t += remaining;
      track.rented_seconds += remaining;
      break;
    }
    const Seconds interval = sj.job.checkpoint_interval.value_or(0);
    const Seconds kept = interval > 0 ? *cut / interval * interval : 0;
    track.progress += kept;
    remaining -= kept;
    t += *cut;
    track.rented_seconds += *cut;
    ++track.interruptions;
    result.lost_gpu_seconds += (*cut - kept) * gpus;
  }
  rented_[offer_index] += gpus;
  events_.push({t, kBurstFinish, i, 0});
}

void Simulation::finish_burst(std::uint32_t i, Seconds now) {
  JobTrack& track = tracks_[i];
  const SimJob& sj = workload_[i];
  SimJobResult& result = run_.jobs[i];
  const std::int64_t gpus = rented_gpus(sj.job);
  rented_[*track.burst_offer] -= gpus;
  track.running = false;
  track.progress = sj.duration;
  result.end = now;
  result.preemptions += track.interruptions;
  market_->add_useful(sj.job.total_milli_gpu(), sj.duration);
  market_hook(market_->charge_burst(sj.job, *track.burst_offer, track.burst_from, now, gpus,
                                    track.rented_seconds, track.interruptions));
}

Result<ClusterSimRun> Simulation::run() {
  trace_jobs_ = workload_.size();
  for (std::size_t i = 0; i < workload_.size(); ++i) {
    if (workload_[i].job.id.value != i) {
      return fail("jobs", fmt::format("job {} ('{}') is not indexed by its id",
                                      workload_[i].job.id.value, workload_[i].name));
    }
    if (workload_[i].duration < 0) {
      return fail("jobs", fmt::format("job '{}' has a negative duration", workload_[i].name));
    }
  }
  // One milestone job per loan.
  for (std::size_t k = 0; k < loans_.size(); ++k) {
    const SimLoan& loan = loans_[k];
    if (loan.gpus <= 0 || loan.duration <= 0 || loan.start < 0) {
      return fail("loans", fmt::format("loan {} needs positive GPUs and duration", k + 1));
    }
    if (loan.tenant.value >= static_cast<std::uint32_t>(sched_.book().tenant_count())) {
      return fail("loans", fmt::format("loan {} names an unknown tenant", k + 1));
    }
    SimJob sj;
    sj.name = fmt::format("loan-{}", k + 1);
    sj.duration = loan.duration;
    Job& job = sj.job;
    job.id = JobId{static_cast<std::uint32_t>(workload_.size())};
    job.tenant = loan.tenant;
    job.queue = sched_.book().queues_of(loan.tenant).front();
    job.priority_class = loan.priority;
    job.preemptible = false;
    job.submit_time = loan.start;
    job.runtime_estimate = loan.duration;
    job.caps.max_runtime = loan.duration;
    const int per_task = loan.gpus % 8 == 0 ? 8 : 1;
    job.gang.task_count = loan.gpus / per_task;
    auto shape = make_task_shape(per_task, kMilliPerGpu, 4000 * per_task, 32768 * per_task,
                                 ModelSet::only(loan.model));
    if (!shape) return fail("loans", shape.error().message());
    job.gang.task = *shape;
    job.gang.topology = {TopologyLevel::kLeaf, TopologyStrength::kPreferred};
    workload_.push_back(std::move(sj));
  }

  const std::size_t n = workload_.size();
  tracks_.assign(n, JobTrack{});
  run_.jobs.assign(n, SimJobResult{});
  const int tenants = sched_.book().tenant_count();
  pending_milli_.assign(static_cast<std::size_t>(tenants), 0);
  wanted_.assign(static_cast<std::size_t>(tenants), 0);
  received_.assign(static_cast<std::size_t>(tenants), 0);
  class_milli_seconds_.assign(4, 0);
  training_milli_.assign(static_cast<std::size_t>(tenants), 0);
  training_outside_.assign(static_cast<std::size_t>(tenants), 0);
  for (std::size_t k = 0; k < settings_.services.size(); ++k) {
    const SimServiceSpec& spec = settings_.services[k];
    const std::string field = "service " + spec.name;
    if (spec.tenant.value >= static_cast<std::uint32_t>(tenants)) {
      return fail(field, "names an unknown tenant");
    }
    if (spec.tick <= 0 || spec.start < 0 || spec.end <= spec.start || !(spec.service_s > 0) ||
        spec.drain < 0) {
      return fail(field,
                  "needs a positive tick and service time, a start before its end, and no "
                  "negative drain");
    }
    auto scaler = make_autoscaler_spec(spec.scaler);
    if (!scaler) return fail(field + " " + scaler.error().field, scaler.error().reason);
    ServiceRun service{
        Autoscaler(*scaler), Rng(spec.seed ^ (0xa24baed4963ee407ULL * (k + 1))), {}, {}, {}};
    service.result.name = spec.name;
    service.result.target_ms = spec.scaler.target;
    services_.push_back(std::move(service));
    events_.push({spec.start, kServiceTick, static_cast<std::uint32_t>(k), 0});
  }
  for (int t = 0; t < tenants; ++t) {
    run_.tenant_names.push_back(sched_.book().tenant_name(TenantId{static_cast<std::uint32_t>(t)}));
  }
  Seconds last_submit = 0;
  for (std::size_t i = 0; i < trace_jobs_; ++i) {
    run_.jobs[i].id = workload_[i].job.id;
    events_.push({workload_[i].job.submit_time, kArrival, static_cast<std::uint32_t>(i), 0});
    last_submit = std::max(last_submit, workload_[i].job.submit_time);
  }
  for (std::size_t k = 0; k < loans_.size(); ++k) {
    const std::size_t id = trace_jobs_ + k;
    run_.jobs[id].id = workload_[id].job.id;
    tracks_[id].loan = loans_[k];
    events_.push({loans_[k].start, kLoanStart, static_cast<std::uint32_t>(k), 0});
  }
  horizon_ = settings_.horizon > 0 ? settings_.horizon : last_submit;
  run_.summary.inference_max_wait_in_window_s = -1;

  Seconds now = events_.empty() ? 0 : events_.top().time;
  Seconds next_sample = now;
  if (settings_.market) {
    auto market = SimMarket::create(*settings_.market, sched_.pool(), sched_.book(), now);
    if (!market) return fail("market", market.error().message());
    market_.emplace(std::move(*market));
    rented_.assign(settings_.market->offers.size(), 0);
  }
  int idle_wakeups = 0;
  std::size_t arrivals_left = trace_jobs_ + loans_.size();
  while (!events_.empty()) {
    const Seconds t = events_.top().time;
    while (next_sample < t) {
      integrate(now, next_sample);
      now = std::max(now, next_sample);
      sample(next_sample);
      next_sample += settings_.sample_interval;
    }
    integrate(now, t);
    now = t;
    if (market_) market_hook(market_->advance(t, sched_.pool(), sched_));
    bool outside_event = false;
    bool woken = false;
    while (!events_.empty() && events_.top().time == t) {
      const ClusterEvent e = events_.top();
      events_.pop();
      switch (e.kind) {
        case kFinish: {
          JobTrack& track = tracks_[e.index];
          if (!track.running || track.generation != e.generation) break;
          SimJobResult& result = run_.jobs[e.index];
          const SimJob& sj = workload_[e.index];
          if (market_) {
            const Seconds done =
                std::min(sj.duration,
                         track.progress + ideal_work(t - track.segment_start, track.efficiency));
            market_->add_useful(sj.job.total_milli_gpu(), done);
            market_hook(market_->stop(sj.job.id, t));
          }
          stop_segment(track, result, t);
          count_training(sj.job, -1);
          result.end = t;
          const bool trace_job = e.index < trace_jobs_;
          if (auto ok = sched_.finish(
                  sj.job.id, t, trace_job ? std::optional<Seconds>(sj.duration) : std::nullopt);
              !ok) {
            return fail("jobs", fmt::format("job '{}': {}", sj.name, ok.error().message()));
          }
          if (trace_job) {
            const Seconds predicted = run_.jobs[e.index].predicted_runtime;
            errors_.record(std::min(predicted, kMaxPredictedRuntime),
                           baseline_.predict(sj.job.tenant),
                           std::min(sj.duration, kMaxPredictedRuntime));
            (void)baseline_.observe(sj.job.tenant, std::min(sj.duration, kMaxPredictedRuntime));
          }
          outside_event = true;
          break;
        }
        case kLoanStart:
          if (auto ok = submit_loan(e.index, t); !ok) return std::unexpected(ok.error());
          --arrivals_left;
          outside_event = true;
          break;
        case kArrival: {
          const SimJob& sj = workload_[e.index];
          if (auto ok = sched_.submit(sj.job, t); !ok) {
            return fail("jobs", fmt::format("job '{}': {}", sj.name, ok.error().message()));
          }
          run_.jobs[e.index].predicted_runtime = sched_.prediction(sj.job.id)->runtime;
          pending_milli_[sj.job.tenant.value] += sj.job.total_milli_gpu();
          tracks_[e.index].pending_since = t;
          if (bursting()) waiting_.emplace(t, e.index);
          --arrivals_left;
          outside_event = true;
          break;
        }
        case kWakeup:
          wakeups_.erase(t);
          woken = true;
          break;
        case kBurstFinish:
          finish_burst(e.index, t);
          outside_event = true;
          break;
        case kReplicaStop:
          if (tracks_[e.index].draining_until == t) {
            if (auto ok = stop_replica(e.index, t); !ok) return std::unexpected(ok.error());
            outside_event = true;
          }
          break;
        case kServiceTick: {
          auto changed = service_tick(e.index, t);
          if (!changed) return std::unexpected(changed.error());
          outside_event = outside_event || *changed;
          break;
        }
      }
    }
    // Only finishes that were superseded (their jobs were preempted since): nothing changed, and
    // a pass would decide what the last one did.
    if (!outside_event && !woken) continue;
    const PassResult pass = sched_.pass(t);
    // Pre-warming as the server does it: the calls that fell due since the last pass (dated
    // then), the pass's starts, new expectations when due.
    // The next event: the next time the simulation looks (a server would look every refresh).
    const std::optional<Seconds> next_look =
        events_.empty() ? std::nullopt : std::optional<Seconds>(events_.top().time);
    const PrewarmPass warm = prewarm_after_pass(prewarm_, sched_, pass, t, next_look);
    run_.summary.prewarm_calls += static_cast<int>(warm.calls.size());
    apply(pass, warm.started, t);
    if (bursting()) {
      burst(t);
      // Wake up when the longest-waiting job reaches the threshold.
      if (!waiting_.empty()) {
        const Seconds due = waiting_.begin()->first + settings_.market->burst->threshold;
        if (due > t && !wakeups_.contains(due)) {
          wakeups_.insert(due);
          events_.push({due, kWakeup, 0, 0});
        }
      }
    }
    for (const Loan& loan : pass.loans_returned) {
      for (std::size_t k = 0; k < loans_.size(); ++k) {
        const std::size_t id = trace_jobs_ + k;
        if (loans_[k].start + loans_[k].duration != loan.end || loans_[k].tenant != loan.tenant) {
          continue;
        }
        SimLoanResult r;
        r.loan = loans_[k];
        r.job = JobId{static_cast<std::uint32_t>(id)};
        if (run_.jobs[id].first_start)
          r.served_after = *run_.jobs[id].first_start - loans_[k].start;
        r.end = t;
        r.held_after_end_milli = tracks_[id].running ? workload_[id].job.total_milli_gpu() : 0;
        run_.summary.loans.push_back(r);
      }
    }
    // Keep waking the scheduler for windows and loans while anything can still happen.
    const bool busy = arrivals_left > 0 || sched_.running_count() > 0;
    idle_wakeups = (outside_event || !pass.started.empty()) ? 0 : idle_wakeups + 1;
    if (busy || (sched_.pending_count() > 0 && idle_wakeups < 8)) {
      if (auto next = sched_.next_wakeup(t); next && !wakeups_.contains(*next)) {
        wakeups_.insert(*next);
        events_.push({*next, kWakeup, 0, 0});
      }
    } else if (!busy && sched_.pending_count() == 0) {
      // Nothing left: drop the remaining wakeups.
      while (!events_.empty() && events_.top().kind == kWakeup) events_.pop();
    }
  }
  sample(now);
  summarise(now);
  run_.replica_jobs.assign(
      workload_.begin() + static_cast<std::ptrdiff_t>(trace_jobs_ + loans_.size()),
      workload_.end());
  for (ServiceRun& service : services_) {
    for (const std::uint32_t id : service.all) {
      service.result.replica_hours += static_cast<double>(tracks_[id].ran) / 3600.0;
      service.result.gpu_hours += static_cast<double>(tracks_[id].ran) *
                                  static_cast<double>(workload_[id].job.total_milli_gpu()) /
                                  (kMilliPerGpu * 3600.0);
    }
    run_.services.push_back(std::move(service.result));
  }
  if (market_) {
    market_hook(market_->advance(now, sched_.pool(), sched_));
    if (!market_status_) return fail("market", market_status_.error().message());
    auto cost = market_->finish(now);
    if (!cost) return fail("market", cost.error().message());
    run_.cost = std::move(*cost);
  }
  return std::move(run_);
}

ReplicaPhase Simulation::replica_phase(std::uint32_t job, Seconds now) const {
  const JobTrack& track = tracks_[job];
  if (track.draining_until) return ReplicaPhase::kDraining;
  if (!track.running) return ReplicaPhase::kPending;
  const Seconds startup = settings_.services[*track.service].scaler.lead;
  return now >= track.segment_start + startup ? ReplicaPhase::kReady : ReplicaPhase::kStarting;
}

Result<void> Simulation::submit_replica(std::uint32_t k, Seconds now) {
  const SimServiceSpec& spec = settings_.services[k];
  ServiceRun& service = services_[k];
  SimJob sj;
  sj.name = fmt::format("{}-{}", spec.name, service.all.size() + 1);
  Job& job = sj.job;
  job.id = JobId{static_cast<std::uint32_t>(workload_.size())};
  job.tenant = spec.tenant;
  job.queue = spec.queue;
  job.job_class = JobClass::kInference;
  job.priority_class = spec.priority;
  job.preemptible = false;
  job.submit_time = now;
  job.gang.task_count = 1;
  job.gang.task = spec.replica;
  job.gang.topology = {TopologyLevel::kNode, TopologyStrength::kPreferred};
  job.replica_of = ReplicaOf{k, spec.spread};
  if (auto ok = sched_.submit(job, now); !ok)
    return fail("service " + spec.name, ok.error().message());
  const std::uint32_t id = job.id.value;
  pending_milli_[job.tenant.value] += job.total_milli_gpu();
  workload_.push_back(std::move(sj));
  JobTrack track;
  track.service = k;
  track.pending_since = now;
  tracks_.push_back(std::move(track));
  SimJobResult result;
  result.id = JobId{id};
  result.predicted_runtime = sched_.prediction(JobId{id})->runtime;
  run_.jobs.push_back(std::move(result));
  service.replicas.push_back(id);
  service.all.push_back(id);
  return {};
}

Result<void> Simulation::stop_replica(std::uint32_t i, Seconds now) {
  JobTrack& track = tracks_[i];
  const SimJob& sj = workload_[i];
  SimJobResult& result = run_.jobs[i];
  if (track.running) {
    if (market_) {
      market_->add_useful(sj.job.total_milli_gpu(), now - track.segment_start);
      market_hook(market_->stop(sj.job.id, now));
    }
    stop_segment(track, result, now);
    if (auto ok = sched_.finish(sj.job.id, now, std::nullopt); !ok) {
      return fail("service replica " + sj.name, ok.error().message());
    }
  } else {
    if (auto ok = sched_.withdraw(sj.job.id, now); !ok) {
      return fail("service replica " + sj.name, ok.error().message());
    }
    result.queue_seconds += now - track.pending_since;
    pending_milli_[sj.job.tenant.value] -= sj.job.total_milli_gpu();
    prewarm_.forget(sj.job.id);
  }
  result.end = now;
  track.draining_until.reset();
  std::vector<std::uint32_t>& replicas = services_[*track.service].replicas;
  replicas.erase(std::remove(replicas.begin(), replicas.end(), i), replicas.end());
  return {};
}

Result<bool> Simulation::service_tick(std::uint32_t k, Seconds now) {
  const SimServiceSpec& spec = settings_.services[k];
  ServiceRun& service = services_[k];
  if (now >= spec.end) {
    const std::vector<std::uint32_t> replicas = service.replicas;
    for (const std::uint32_t id : replicas) {
      if (auto ok = stop_replica(id, now); !ok) return std::unexpected(ok.error());
    }
    return !replicas.empty();
  }
  std::vector<ReplicaView> views;
  int ready = 0;
  int held = 0;
  for (const std::uint32_t id : service.replicas) {
    const ReplicaPhase phase = replica_phase(id, now);
    views.push_back({id, phase, workload_[id].job.submit_time});
    ready += phase == ReplicaPhase::kReady ? 1 : 0;
    held += tracks_[id].running ? 1 : 0;
  }
  const double rate = rate_at(spec.rate, now);
  const Seconds length = std::min(spec.tick, spec.end - now);
  ServiceTick tick;
  tick.time = now;
  tick.rate = rate;
  tick.ready = ready;
  tick.p95_ms = service_p95_ms(spec, rate, ready);
  tick.oracle = oracle_replicas(spec, rate);
  SimServiceResult& result = service.result;
  result.seconds += length;
  if (!tick.p95_ms || *tick.p95_ms > spec.scaler.target) result.seconds_above_target += length;
  result.oracle_replica_hours += static_cast<double>(tick.oracle * length) / 3600.0;
  result.max_replicas_held = std::max(result.max_replicas_held, held);

  service.scaler.observe(observe_service(spec, now, rate, ready, service.rng));
  const int live = live_replicas(views);
  const ScaleDecision decision = service.scaler.decide(now, live);
  tick.wanted = decision.wanted;
  if (decision.wanted != live) {
    ++result.decisions;
    result.last_reason = decision.reason;
  }
  const ReplicaPlan plan = plan_replicas(views, decision.wanted);
  for (int n = 0; n < plan.add; ++n) {
    if (auto ok = submit_replica(k, now); !ok) return std::unexpected(ok.error());
  }
  for (const auto* ids : {&plan.withdraw, &plan.stop}) {
    for (const std::uint32_t id : *ids) {
      if (auto ok = stop_replica(id, now); !ok) return std::unexpected(ok.error());
    }
  }
  for (const std::uint32_t id : plan.drain) {
    tracks_[id].draining_until = now + spec.drain;
    events_.push({now + spec.drain, kReplicaStop, id, 0});
  }
  tick.live = live + plan.add -
              static_cast<int>(plan.withdraw.size() + plan.stop.size() + plan.drain.size());
  result.ticks.push_back(tick);
  events_.push({now + length, kServiceTick, k, 0});
  return plan.add > 0 || !plan.withdraw.empty() || !plan.stop.empty();
}

void Simulation::summarise(Seconds end) {
  SimSummary& s = run_.summary;
  // Generated work (inference replicas, loan jobs) is reported apart from the trace's jobs.
  auto from_trace = [&](std::size_t i) {
    return i < trace_jobs_ && workload_[i].job.job_class != JobClass::kInference;
  };
  std::vector<Seconds> queues;
  std::vector<std::vector<Seconds>> tenant_queues(
      static_cast<std::size_t>(sched_.book().tenant_count()));
  long double jct = 0;
  long double gpu_seconds = 0, lost = 0, comm = 0, multi = 0, mfu = 0;
  long double mfu_accumulate = 0, mfu_compact = 0, mfu_both = 0;
  Seconds first_submit = workload_.empty() ? 0 : workload_.front().job.submit_time;
  for (std::size_t i = 0; i < workload_.size(); ++i) {
    SimJobResult& r = run_.jobs[i];
    const JobTrack& track = tracks_[i];
    const SimJob& sj = workload_[i];
    first_submit = std::min(first_submit, sj.job.submit_time);
    if (!r.end && track.pending_since >= 0 && !track.running) {
      r.queue_seconds += end - track.pending_since;
    }
    const PendingSeconds* waited = sched_.pending_seconds(sj.job.id);
    if (waited) {
      const auto longest = std::max_element(waited->begin(), waited->end());
      if (*longest > 0) r.main_reason = static_cast<PendingKind>(longest - waited->begin());
    }
    const double g = static_cast<double>(r.gpu_seconds);
    r.comm_share = g > 0 ? track.comm_gpu_seconds / g : 0;
    r.est_mfu = g > 0 ? track.mfu_gpu_seconds / g : 0;
    gpu_seconds += r.gpu_seconds;
    lost += r.lost_gpu_seconds;
    mfu += track.mfu_gpu_seconds;
    mfu_accumulate += track.advised_accumulate_gpu_seconds;
    mfu_compact += track.advised_compact_gpu_seconds;
    mfu_both += track.advised_both_gpu_seconds;
    if (track.gpus > 1) {
      multi += r.gpu_seconds;
      comm += track.comm_gpu_seconds;
    }
    s.preemptions += r.preemptions;
    if (!from_trace(i)) continue;
    ++s.jobs;
    if (track.advised_accumulate) ++s.jobs_advised_accumulate;
    if (track.advised_compact) ++s.jobs_advised_compact;
    if (!r.first_start) ++s.never_started;
    if (r.backfilled) ++s.backfilled;
    if (r.end) {
      ++s.finished;
      queues.push_back(r.queue_seconds);
      if (sj.job.tenant.value < tenant_queues.size()) {
        tenant_queues[sj.job.tenant.value].push_back(r.queue_seconds);
      }
      jct += *r.end - sj.job.submit_time;
    }
  }
  const TenantQueueing all = queueing_of(queues);
  s.avg_queue_s = all.avg_s;
  s.p95_queue_s = all.p95_s;
  s.p99_queue_s = all.p99_s;
  s.max_queue_s = all.max_s;
  if (!queues.empty()) {
    s.p50_queue_s = nearest_rank_percentile(queues, 50);
    s.avg_jct_s = static_cast<double>(jct / queues.size());
  }
  for (std::vector<Seconds>& waits : tenant_queues) s.tenant_queueing.push_back(queueing_of(waits));
  s.makespan_s = end - first_submit;
  const long double capacity = static_cast<long double>(sched_.pool().capacity_milli_gpu());
  if (s.makespan_s > 0 && capacity > 0) {
    s.gpu_allocation_avg =
        static_cast<double>(allocated_milli_seconds_ / (capacity * s.makespan_s));
  }
  s.comm_overhead_share = multi > 0 ? static_cast<double>(comm / multi) : 0;
  s.est_mfu = gpu_seconds > 0 ? static_cast<double>(mfu / gpu_seconds) : 0;
  if (s.starts > 0) s.start_delay_saved_avg_s = static_cast<double>(prewarm_saved_s_ / s.starts);
  s.start_delay_saved_gpu_hours = static_cast<double>(prewarm_saved_gpu_seconds_ / 3600);
  if (gpu_seconds > 0) {
    s.est_mfu_advised_accumulate = static_cast<double>(mfu_accumulate / gpu_seconds);
    s.est_mfu_advised_compact = static_cast<double>(mfu_compact / gpu_seconds);
    s.est_mfu_advised_both = static_cast<double>(mfu_both / gpu_seconds);
  }
  s.lost_gpu_hours_share = gpu_seconds > 0 ? static_cast<double>(lost / gpu_seconds) : 0;
  s.min_tenant_guarantee_ratio = 1.0;
  for (std::size_t t = 0; t < wanted_.size(); ++t) {
    const double ratio = wanted_[t] > 0 ? static_cast<double>(received_[t] / wanted_[t]) : 1.0;
    s.tenant_guarantee_ratio.push_back(ratio);
    if (wanted_[t] > 0 &&
        (s.min_guarantee_tenant.empty() || ratio < s.min_tenant_guarantee_ratio)) {
      s.min_tenant_guarantee_ratio = ratio;
      s.min_guarantee_tenant = run_.tenant_names[t];
    }
  }
  s.predictor_median_abs_error_s = errors_.median_abs_error();
  s.baseline_median_abs_error_s = errors_.baseline_median_abs_error();
  s.pending_seconds = sched_.pending_seconds_total();
  for (const long double milli_seconds : training_outside_) {
    s.tenant_training_gpu_hours_outside_windows.push_back(
        static_cast<double>(milli_seconds / (kMilliPerGpu * 3600.0L)));
  }
  s.class_gpu_hours_in_horizon.assign(4, 0.0);
  for (int c = 0; c < 4; ++c) {
    s.class_gpu_hours_in_horizon[c] =
        static_cast<double>(class_milli_seconds_[c] / (kMilliPerGpu * 3600.0L));
  }
}

}  // namespace

Result<ClusterSimRun> run_cluster_simulation(Pool pool, TenantBook book,
                                             const SchedulerConfig& config,
                                             std::span<const SimJob> workload,
                                             std::span<const SimLoan> loans,
                                             const ClusterSimSettings& settings) {
  if (settings.sample_interval <= 0) return fail("sample_interval", "must be positive");
  auto scheduler = Scheduler::create(std::move(pool), std::move(book), config);
  if (!scheduler) return std::unexpected(scheduler.error());
  Simulation sim(std::move(*scheduler), config, workload, loans, settings);
  return sim.run();
}

}  // namespace tidepool
