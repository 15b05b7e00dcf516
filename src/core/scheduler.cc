#include "core/scheduler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <queue>
#include <set>

#include "core/policies/policy_factories.h"
#include "core/scheduler_pass_state.h"
#include "core/simple_placement.h"

namespace tidepool {
namespace {

constexpr std::array<std::string_view, 4> kPolicyNames = {"fifo-firstfit", "quota-borrow",
                                                          "tiresias", "tidepool"};
constexpr int kJobClasses = 4;

}  // namespace

namespace scheduler_detail {

std::int64_t count_whole_free_gpus(const Pool& pool, const ModelSet& models) {
  std::int64_t free = 0;
  for (int m = 0; m < pool.models().size(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    if (models.accepts(model)) free += pool.whole_free_gpus(model);
  }
  return free;
}

bool may_fit(const Pool& pool, const GangRequest& request) {
  const TaskShape& task = request.task;
  if (task.is_fractional() || task.is_mig() || !task.needs_gpu()) return true;
  const std::int64_t need = std::int64_t{request.task_count} * task.gpu_count;
  const bool one_node =
      request.topology.requires_level(TopologyLevel::kNode) || request.task_count == 1;
  if (one_node) {  // some node of an accepted model shows `need` whole free GPUs or more
    for (int m = 0; m < pool.models().size(); ++m) {
      const GpuModelId model{static_cast<std::uint32_t>(m)};
      if (!task.models.accepts(model)) continue;
      for (std::int64_t free = need; free <= kMaxGpusPerNode; ++free) {
        if (pool.nodes_with_whole_free(model, static_cast<int>(free)) > 0) return true;
      }
    }
    return false;
  }
  if (!request.topology.requires_level(TopologyLevel::kLeaf)) {
    return count_whole_free_gpus(pool, task.models) >= need;
  }
  std::vector<std::int64_t> leaf_free(pool.topology().leaves.size(), 0);
  for (int n = 0; n < pool.node_count(); ++n) {
    const NodeId node{static_cast<std::uint32_t>(n)};
    const NodeSpec& spec = pool.spec(node);
    if (task.models.accepts(spec.model))
      leaf_free[spec.leaf.value] += pool.state(node).whole_free_gpus;
  }
  return std::any_of(leaf_free.begin(), leaf_free.end(), [&](std::int64_t f) { return f >= need; });
}

}  // namespace scheduler_detail

using scheduler_detail::count_whole_free_gpus;
using scheduler_detail::may_fit;

std::span<const std::string_view> scheduler_policy_names() { return kPolicyNames; }

Result<SchedulerConfig> scheduler_policy(std::string_view name) {
  SchedulerConfig c;
  if (name == "fifo-firstfit") {
    // A plain Slurm partition with the builtin scheduler: strict FIFO, first fit, no topology.
    c.order = OrderRule::kFifo;
    c.head_of_line_blocking = true;
    c.placement = PlacementRule::kFirstFit;
    c.quotas = c.reclaim = c.priority_preemption = c.backfill = false;
  } else if (name == "quota-borrow") {
    // Kueue-like: per-tenant quotas with borrowing and reclaim, FIFO that skips jobs that do not
    // fit (BestEffortFIFO), best fit, no topology.
    c.order = OrderRule::kFifo;
    c.placement = PlacementRule::kBestFit;
    c.quotas = c.reclaim = true;
    c.priority_preemption = c.backfill = false;
  } else if (name == "tiresias") {
    // Tiresias: discretised 2D-LAS with preemption, consolidated placement, no quotas.
    c.order = OrderRule::kLeastAttained;
    c.placement = PlacementRule::kTopology;
    c.quotas = c.reclaim = c.priority_preemption = c.backfill = false;
    c.las_preemption = true;
  } else if (name == "tidepool") {
    // Everything: fair share, quotas with borrowing and reclaim, topology-aware gangs (FGD
    // choosing where compactness leaves a choice), EASY backfill with predicted runtimes, tidal
    // windows and loans.
    c.gang_policy = "fgd";
  } else {
    return fail("policy",
                fmt::format("unknown policy '{}'; known: {}", name, fmt::join(kPolicyNames, ", ")));
  }
  return c;
}

std::string_view preemption_cause_name(PreemptionCause cause) {
  switch (cause) {
    case PreemptionCause::kReclaim:
      return "reclaim";
    case PreemptionCause::kPriority:
      return "priority";
    case PreemptionCause::kLeastAttained:
      return "least-attained";
    case PreemptionCause::kDrain:
      return "drain";
    case PreemptionCause::kTimeSlice:
      return "time-slice";
  }
  return "reclaim";
}

Scheduler::Scheduler(Pool pool, TenantBook book, FairShareLedger ledger, RuntimePredictor predictor,
                     SchedulerConfig config, std::vector<std::unique_ptr<LaneOrder>> orders,
                     std::unique_ptr<PlacementPolicy> gang_policy)
    : pool_(std::move(pool)),
      book_(std::move(book)),
      ledger_(std::move(ledger)),
      predictor_(std::move(predictor)),
      config_(std::move(config)),
      orders_(std::move(orders)),
      gang_policy_(std::move(gang_policy)) {
  // One lane per tenant (merged in order during a pass), except under LAS (one lane). Under
  // kFifo every lane is in submission order; under fair share, in the tenant's order.
  lanes_.resize(config_.order != OrderRule::kLeastAttained
                    ? static_cast<std::size_t>(std::max(1, book_.tenant_count()))
                    : 1);
  lane_shapes_.resize(lanes_.size());
  for (std::size_t l = 0; l < lanes_.size(); ++l) {
    LaneOrderKind kind = LaneOrderKind::kFifo;
    if (config_.order == OrderRule::kFairShare) {
      kind = config_.lane_order;
      if (std::cmp_less(l, book_.tenant_count())) {
        kind = book_.order(TenantId{static_cast<std::uint32_t>(l)}).value_or(kind);
      }
    }
    lane_orders_.push_back(orders_[static_cast<std::size_t>(kind)].get());
  }
  tenant_usage_.assign(static_cast<std::size_t>(book_.tenant_count()), 0);
  tenant_pending_.assign(static_cast<std::size_t>(book_.tenant_count()), 0);
  tenant_running_.resize(static_cast<std::size_t>(book_.tenant_count()));
  tenant_checkpointing_.assign(static_cast<std::size_t>(book_.tenant_count()), 0);
  class_usage_.assign(kJobClasses, 0);
  if (!config_.typical_tasks.empty()) {
    fraction_policy_ = make_tidepool_policy(WorkloadProfile::from_tasks(config_.typical_tasks));
  }
  guaranteed_tasks_.assign(static_cast<std::size_t>(pool_.node_count()), 0);
  borrowed_tasks_.assign(static_cast<std::size_t>(pool_.node_count()), 0);
  free_of_guaranteed_.assign(static_cast<std::size_t>(pool_.node_count()), 1);
  free_of_borrowed_.assign(static_cast<std::size_t>(pool_.node_count()), 1);
}

Result<Scheduler> Scheduler::create(Pool pool, TenantBook book, SchedulerConfig config) {
  if (config.drain_lead < 0) return fail("drain_lead", "must not be negative");
  if (config.day_offset < 0 || config.day_offset >= kSecondsPerDay) {
    return fail("day_offset", "must be 0..86399 seconds after midnight");
  }
  if (config.starvation_limit < 0) return fail("starvation_limit", "must not be negative");
  if (config.min_slice_run < 0) return fail("min_slice_run", "must not be negative");
  if (config.max_slice_loss < 0) return fail("max_slice_loss", "must not be negative");
  if (config.max_starts_per_pass < 0) {
    return fail("max_starts_per_pass", "must not be negative (0: no limit)");
  }
  std::vector<std::unique_ptr<LaneOrder>> orders;
  for (std::size_t k = 0; k < lane_order_names().size(); ++k) {
    auto order = make_lane_order(static_cast<LaneOrderKind>(k),
                                 LaneOrderConfig{.las_thresholds = config.las_thresholds});
    if (!order) return std::unexpected(order.error());
    orders.push_back(std::move(*order));
  }
  for (const TidalWindow& w : config.windows) {
    if (auto ok = make_tidal_window(w); !ok) return std::unexpected(ok.error());
  }
  auto ledger = FairShareLedger::for_tenants(book, config.fair_share_half_life);
  if (!ledger) return std::unexpected(ledger.error());
  auto predictor = RuntimePredictor::create(config.predictor);
  if (!predictor) return std::unexpected(predictor.error());
  std::unique_ptr<PlacementPolicy> gang_policy;
  if (!config.gang_policy.empty()) {
    std::vector<TaskShape> typical = config.typical_tasks;
    if (typical.empty()) {  // not known: equal numbers of 1-, 2-, 4- and 8-GPU tasks
      for (int gpus = 1; gpus <= 8; gpus *= 2) {
        if (auto task = make_task_shape(gpus, kMilliPerGpu, 0, 0); task) typical.push_back(*task);
      }
    }
    auto made = make_placement_policy(config.gang_policy, WorkloadProfile::from_tasks(typical));
    if (!made) return fail("gang_policy", made.error().reason);
    gang_policy = std::move(*made);
  }
  return Scheduler(std::move(pool), std::move(book), std::move(*ledger), std::move(*predictor),
                   std::move(config), std::move(orders), std::move(gang_policy));
}

// --- Bookkeeping ---

void Scheduler::account_until(Seconds now) {
  if (now <= accounted_until_) return;
  for (int t = 0; t < book_.tenant_count(); ++t) {
    const std::int64_t milli = tenant_usage_[static_cast<std::size_t>(t)];
    if (milli > 0) {
      (void)ledger_.charge(TenantId{static_cast<std::uint32_t>(t)}, milli, accounted_until_, now);
    }
  }
  (void)ledger_.advance_to(now);
  accounted_until_ = now;
}

void Scheduler::close_reason(Entry& e, Seconds now) {
  const Seconds spent = std::max<Seconds>(0, now - e.reason_since);
  e.waited[static_cast<std::size_t>(e.reason.kind)] += spent;
  pending_total_[static_cast<std::size_t>(e.reason.kind)] += spent;
  e.reason_since = now;
}

void Scheduler::set_reason(Entry& e, Seconds now, PendingReason reason) {
  if (reason.text == e.reason.text && reason.kind == e.reason.kind) return;
  if (reason.kind != e.reason.kind) close_reason(e, now);
  e.reason = std::move(reason);
}

int Scheduler::las_level(std::int64_t attained) const {
  int level = 0;
  for (std::int64_t threshold : config_.las_thresholds) {
    if (attained < threshold) break;
    ++level;
  }
  return level;
}

LaneJob Scheduler::lane_job(const Entry& e, Seconds now) const {
  const std::int64_t gpus = std::max<std::int64_t>(1, whole_gpus(e.milli));
  const Seconds ran = e.phase == JobPhase::kRunning ? now - e.segment_start : 0;
  const Seconds remaining = std::max<Seconds>(60, predicted_remaining(e) - ran);
  return LaneJob{e.job.id, e.job.submit_time, gpus, e.attained + gpus * ran, remaining * gpus};
}

const LaneOrder& Scheduler::lane_order(const Entry& e) const { return *lane_orders_[e.lane]; }

LaneRank Scheduler::lane_rank(const Entry& e) const {
  if (e.promoted) return lane_order(e).rank(lane_job(e, e.pending_since));
  return {std::get<1>(e.key), std::get<2>(e.key)};
}

void Scheduler::enqueue(Entry& e) {
  const Job& j = e.job;
  e.phase = JobPhase::kPending;
  switch (config_.order) {
    case OrderRule::kFifo:
    case OrderRule::kFairShare: {
      e.lane = j.tenant.value < lanes_.size() ? j.tenant.value : 0;
      const LaneRank rank = e.promoted ? LaneRank{kPromotedBand, e.pending_since}
                                       : lane_order(e).rank(lane_job(e, e.pending_since));
      e.key = {-std::int64_t{j.priority_class}, rank.band, rank.value, j.id.value};
      if (!e.promoted && config_.starvation_limit > 0 &&
          lane_order(e).kind() != LaneOrderKind::kFifo) {
        unpromoted_.emplace(e.pending_since, j.id.value);
      }
      break;
    }
    case OrderRule::kLeastAttained:
      e.lane = 0;
      e.key = {las_level(e.attained), 0, j.submit_time, j.id.value};
      break;
  }
  lanes_[e.lane].insert(e.key);
  lane_shapes_[e.lane].add(j);
  ++pending_count_;
  if (e.job.tenant.value < tenant_pending_.size()) ++tenant_pending_[e.job.tenant.value];
}

void Scheduler::promote_starving(Seconds now) {
  while (!unpromoted_.empty() &&
         promoted_at(unpromoted_.begin()->first, now, config_.starvation_limit)) {
    Entry& e = entry(JobId{unpromoted_.begin()->second});
    dequeue(e);
    e.promoted = true;
    enqueue(e);
  }
}

void Scheduler::dequeue(Entry& e) {
  lanes_[e.lane].erase(e.key);
  lane_shapes_[e.lane].remove(e.job);
  unpromoted_.erase({e.pending_since, e.job.id.value});
  --pending_count_;
  if (e.job.tenant.value < tenant_pending_.size()) --tenant_pending_[e.job.tenant.value];
}

int Scheduler::pending_count(TenantId tenant) const {
  return tenant.value < tenant_pending_.size() ? tenant_pending_[tenant.value] : 0;
}

Seconds Scheduler::predicted_remaining(const Entry& e) const {
  return std::max<Seconds>(60, e.prediction.runtime - e.kept_seconds);
}

Seconds Scheduler::lost_if_preempted(const Entry& e, Seconds now) const {
  const Seconds run = now - e.segment_start;
  if (!e.job.checkpoint_interval) return run;
  return run % *e.job.checkpoint_interval;
}

std::int64_t Scheduler::whole_free_gpus(const ModelSet& models) const {
  return count_whole_free_gpus(pool_, models);
}

std::int64_t Scheduler::usage_milli(TenantId tenant) const {
  return tenant.value < tenant_usage_.size() ? tenant_usage_[tenant.value] : 0;
}

std::int64_t Scheduler::class_usage_milli(JobClass job_class) const {
  return class_usage_[static_cast<std::size_t>(job_class)];
}

std::optional<JobPhase> Scheduler::phase(JobId job) const {
  auto it = index_.find(job);
  if (it == index_.end()) return std::nullopt;
  return entries_[it->second]->phase;
}

const PendingReason* Scheduler::reason(JobId job) const {
  auto it = index_.find(job);
  if (it == index_.end() || entries_[it->second]->phase != JobPhase::kPending) return nullptr;
  return &entries_[it->second]->reason;
}

const PendingSeconds* Scheduler::pending_seconds(JobId job) const {
  auto it = index_.find(job);
  return it == index_.end() ? nullptr : &entries_[it->second]->waited;
}

std::optional<Seconds> Scheduler::reason_since(JobId job) const {
  auto it = index_.find(job);
  if (it == index_.end() || entries_[it->second]->phase != JobPhase::kPending) return std::nullopt;
  return entries_[it->second]->reason_since;
}

std::optional<Prediction> Scheduler::prediction(JobId job) const {
  auto it = index_.find(job);
  if (it == index_.end()) return std::nullopt;
  return entries_[it->second]->prediction;
}

// --- Events from outside ---

std::optional<std::int64_t> Scheduler::attained_gpu_seconds(JobId job, Seconds now) const {
  if (!index_.contains(job)) return std::nullopt;
  const Entry& e = entry(job);
  if (e.phase != JobPhase::kRunning) return e.attained;
  return lane_job(e, std::max(now, e.segment_start)).attained_gpu_seconds;
}

std::optional<LanePlace> Scheduler::lane_place(JobId job, Seconds now,
                                               std::size_t max_ahead) const {
  if (!index_.contains(job)) return std::nullopt;
  const Entry& e = entry(job);
  if (e.phase != JobPhase::kPending) return std::nullopt;
  const std::set<LaneKey>& lane = lanes_[e.lane];
  LanePlace place;
  place.lane_size = static_cast<int>(lane.size());
  place.order =
      config_.order == OrderRule::kLeastAttained ? std::string_view("las") : lane_order(e).name();
  place.promoted = e.promoted;
  place.attained_gpu_seconds = e.attained;
  place.rank = config_.order == OrderRule::kLeastAttained
                   ? fmt::format("LAS level {}", las_level(e.attained))
                   : lane_order(e).explain(lane_job(e, now));
  const auto at = lane.find(e.key);
  place.position = static_cast<int>(std::distance(lane.begin(), at)) + 1;
  for (auto it = at; it != lane.begin() && place.ahead.size() < max_ahead;) {
    --it;
    place.ahead.push_back(JobId{std::get<3>(*it)});
  }
  return place;
}

Result<void> Scheduler::submit(const Job& job, Seconds now) {
  if (auto valid = validate_job(job); !valid) return std::unexpected(valid.error());
  if (index_.contains(job.id)) {
    return fail("id", fmt::format("job {} was already submitted", job.id.value));
  }
  if (job.tenant.value >= tenant_usage_.size()) {
    return fail("tenant", fmt::format("unknown tenant #{}", job.tenant.value));
  }
  if (config_.quotas) {
    if (auto ok = validate_job_tenancy(job, book_); !ok) return std::unexpected(ok.error());
  }
  const std::int64_t milli = job.total_milli_gpu();
  auto prediction = predictor_.predict(RuntimeQuery{
      job.tenant,
      static_cast<int>(std::clamp<std::int64_t>(whole_gpus(milli), 1, kMaxPredictorGpus)),
      job.runtime_estimate});
  if (!prediction) return std::unexpected(prediction.error());
  account_until(now);
  Entry e;
  e.job = job;
  e.prediction = *prediction;
  e.milli = milli;
  e.reason_since = now;
  e.pending_since = now;
  index_.emplace(job.id, entries_.size());
  entries_.push_back(std::make_unique<Entry>(std::move(e)));
  enqueue(*entries_.back());
  fresh_.push_back(job.id);
  return {};
}

Result<std::size_t> Scheduler::slot_in_phase(JobId job, JobPhase phase) const {
  auto it = index_.find(job);
  if (it == index_.end()) return fail("job", fmt::format("unknown job {}", job.value));
  if (entries_[it->second]->phase != phase) {
    constexpr std::array<std::string_view, 3> kNot = {"is not pending", "is not running",
                                                      "has not ended"};
    return fail("job", fmt::format("job {} {}", job.value, kNot[static_cast<std::size_t>(phase)]));
  }
  return it->second;
}

Result<void> Scheduler::finish(JobId job, Seconds now, std::optional<Seconds> observed_runtime) {
  auto slot = slot_in_phase(job, JobPhase::kRunning);
  if (!slot) return std::unexpected(slot.error());
  Entry& e = *entries_[*slot];
  account_until(now);
  for (const Assignment& a : e.assignments) {
    if (auto ok = pool_.release(e.job.gang.task, a); !ok) return std::unexpected(ok.error());
  }
  count_tasks(e, -1);
  for (const ModelCharge& c : e.charges) (void)book_.refund(e.job.tenant, c.model, c.milli);
  tenant_usage_[e.job.tenant.value] -= e.milli;
  class_usage_[static_cast<std::size_t>(e.job.job_class)] -= e.milli;
  running_.erase(job);
  remove_running(e);
  e.phase = JobPhase::kDone;
  e.assignments.clear();
  e.charges.clear();
  if (observed_runtime) {
    (void)predictor_.observe(RuntimeObservation{
        e.job.tenant,
        static_cast<int>(std::clamp<std::int64_t>(whole_gpus(e.milli), 1, kMaxPredictorGpus)),
        e.job.runtime_estimate, std::clamp<Seconds>(*observed_runtime, 0, kMaxPredictedRuntime)});
  }
  return {};
}

Result<void> Scheduler::grant_loan(const Loan& loan, Seconds now) {
  if (loan.end <= now) return fail("end", "a loan must end after it is granted");
  if (loan.milli <= 0) return fail("milli", "a loan lends a positive amount");
  if (auto ok = book_.adjust_guarantee(loan.tenant, loan.model, loan.milli); !ok) {
    return std::unexpected(ok.error());
  }
  loans_.push_back(loan);
  return {};
}

Result<void> Scheduler::credit_attained(JobId job, std::int64_t gpu_seconds) {
  if (gpu_seconds < 0 || gpu_seconds > kMaxAttainedGpuSeconds) {
    return fail("attained_gpu_seconds",
                fmt::format("{} is not 0..{} GPU-seconds", gpu_seconds, kMaxAttainedGpuSeconds));
  }
  if (!index_.contains(job)) return fail("job", fmt::format("unknown job {}", job.value));
  Entry& e = entry(job);
  if (e.phase != JobPhase::kPending && e.phase != JobPhase::kRunning) {
    return fail("job", fmt::format("job {} is neither pending nor running", job.value));
  }
  if (e.phase == JobPhase::kPending) {
    dequeue(e);
    e.attained += gpu_seconds;
    enqueue(e);
  } else {
    e.attained += gpu_seconds;
  }
  return {};
}

Result<void> Scheduler::withdraw(JobId job, Seconds now) {
  auto slot = slot_in_phase(job, JobPhase::kPending);
  if (!slot) return std::unexpected(slot.error());
  Entry& e = *entries_[*slot];
  account_until(now);
  close_reason(e, now);
  dequeue(e);
  e.phase = JobPhase::kDone;
  return {};
}

Result<void> Scheduler::adopt(const Job& job, std::span<const Assignment> assignments,
                              Seconds started, Seconds now) {
  if (std::cmp_not_equal(assignments.size(), job.gang.task_count)) {
    return fail("assignments", fmt::format("job {} has {} tasks, {} assignments given",
                                           job.id.value, job.gang.task_count, assignments.size()));
  }
  if (started > now) return fail("started", "a job cannot have started after now");
  if (auto ok = submit(job, now); !ok) return ok;
  std::size_t placed = 0;
  for (; placed < assignments.size(); ++placed) {
    auto ok = pool_.allocate(job.gang.task, assignments[placed]);
    if (ok) continue;
    while (placed > 0) (void)pool_.release(job.gang.task, assignments[--placed]);
    Entry& e = entry(job.id);
    dequeue(e);
    fresh_.pop_back();
    index_.erase(job.id);
    entries_.pop_back();
    return ok;
  }
  Entry& e = entry(job.id);
  if (config_.quotas) {
    std::map<GpuModelId, std::int64_t> by_model;
    for (const Assignment& a : assignments) {
      by_model[pool_.spec(a.node).model] += job.gang.task.total_milli_gpu();
    }
    for (const auto& [model, milli] : by_model) {
      if (milli <= 0) continue;
      const Admission admission = book_.admit(job.tenant, model, milli);
      e.borrowing = e.borrowing || admission.kind != AdmissionKind::kWithinGuarantee;
      (void)book_.record_usage(job.tenant, model, milli);
      e.charges.push_back({model, milli});
    }
  }
  mark_running(e, {assignments.begin(), assignments.end()}, started, now);
  return {};
}

Result<void> Scheduler::forget(JobId job) {
  auto found = slot_in_phase(job, JobPhase::kDone);
  if (!found) return std::unexpected(found.error());
  const std::size_t slot = *found;
  index_.erase(job);
  if (slot + 1 != entries_.size()) {
    entries_[slot] = std::move(entries_.back());
    index_[entries_[slot]->job.id] = slot;
  }
  entries_.pop_back();
  std::erase(fresh_, job);
  return {};
}

Result<void> Scheduler::set_budget_exhausted(TenantId tenant, std::optional<std::string> reason) {
  if (tenant.value >= static_cast<std::uint32_t>(book_.tenant_count())) {
    return fail("tenant", fmt::format("unknown tenant id {}", tenant.value));
  }
  budget_exhausted_.resize(static_cast<std::size_t>(book_.tenant_count()));
  auto& slot = budget_exhausted_[tenant.value];
  if (!reason) {
    if (slot) budget_lifted_.insert(tenant);
    slot.reset();
  } else if (!slot || slot->message() != *reason) {
    slot = make_reason(PendingKind::kBudget, std::move(*reason));
  }
  return {};
}

bool Scheduler::budget_exhausted(TenantId tenant) const {
  return tenant.value < budget_exhausted_.size() && budget_exhausted_[tenant.value].has_value();
}

Result<void> Scheduler::set_node_schedulable(NodeId node, bool schedulable) {
  if (auto ok = pool_.set_schedulable(node, schedulable); !ok) return ok;
  return {};
}

std::optional<Seconds> Scheduler::next_wakeup(Seconds now) const {
  std::optional<Seconds> next;
  auto consider = [&](Seconds t) {
    if (t > now && (!next || t < *next)) next = t;
  };
  for (const Loan& loan : loans_) consider(loan.end);
  if (slice_wakeup_ && pending_count_ > 0) consider(*slice_wakeup_);
  for (const TidalWindow& w : config_.windows) {
    consider(next_window_change(w, now, config_.day_offset));
    const Seconds opens = next_window_open(w, now + 1, config_.day_offset);
    consider(opens - config_.drain_lead);
  }
  return next;
}

// --- The pass ---

void Scheduler::count_tasks(const Entry& e, int sign) {
  std::vector<int>& counts = e.borrowing ? borrowed_tasks_ : guaranteed_tasks_;
  std::vector<std::uint8_t>& free_of = e.borrowing ? free_of_borrowed_ : free_of_guaranteed_;
  int& nodes = e.borrowing ? nodes_with_borrowed_ : nodes_with_guaranteed_;
  for (const Assignment& a : e.assignments) {
    int& count = counts[a.node.value];
    if (count == 0) ++nodes;
    count += sign;
    if (count == 0) --nodes;
    free_of[a.node.value] = count == 0 ? 1 : 0;
  }
}

GangResult Scheduler::place(const Pool& pool, const Job& job, const GangRequest& request,
                            std::span<const std::uint8_t> allowed_nodes) const {
  if (job.replica_of) return place_replica_of_service(pool, job, request);
  switch (config_.placement) {
    case PlacementRule::kFirstFit:
      return place_gang_by_node_rule(pool, request, NodeRule::kFirstFit);
    case PlacementRule::kBestFit:
      return place_gang_by_node_rule(pool, request, NodeRule::kBestFit);
    case PlacementRule::kTopology:
      if (request.task.is_fractional()) {
        if (fraction_policy_) return place_gang(pool, request, *fraction_policy_, fraction_rng_);
        return place_gang_by_node_rule(pool, request, NodeRule::kBestFit);
      }
      if (gang_policy_) {
        return place_gang_by_policy(pool, request, allowed_nodes, *gang_policy_, gang_rng_);
      }
      return place_gang(pool, request, allowed_nodes);
  }
  return place_gang(pool, request);
}

GangResult Scheduler::place_replica_of_service(const Pool& pool, const Job& job,
                                               const GangRequest& request) const {
  std::vector<NodeId> replicas;
  for (const JobId id : running_) {
    const Entry& r = entry(id);
    if (r.job.replica_of && r.job.replica_of->service == job.replica_of->service &&
        r.job.tenant == job.tenant) {
      for (const Assignment& a : r.assignments) replicas.push_back(a.node);
    }
  }
  const auto assignment = place_replica(pool, request.task, replicas, job.replica_of->spread);
  if (!assignment) {
    return std::unexpected(
        Unplaceable{fmt::format("no node has room for the replica{}",
                                job.replica_of->spread.max_per_node > 0
                                    ? fmt::format(" with fewer than {} of the service's replicas",
                                                  job.replica_of->spread.max_per_node)
                                    : "")});
  }
  GangPlacement placement;
  placement.assignments = {*assignment};
  placement.span = gang_span(pool, placement.assignments);
  return placement;
}

void Scheduler::start(Entry& e, const GangPlacement& placement, Seconds now,
                      StartAdmission admission, std::int64_t borrowed, bool backfilled,
                      PassResult& out) {
  for (const Assignment& a : placement.assignments) {
    (void)pool_.allocate(e.job.gang.task, a);  // checked by the placement on this very pool
  }
  if (config_.quotas && admission != StartAdmission::kWindow) {
    std::map<GpuModelId, std::int64_t> by_model;
    for (const Assignment& a : placement.assignments) {
      by_model[pool_.spec(a.node).model] += e.job.gang.task.total_milli_gpu();
    }
    for (const auto& [model, milli] : by_model) {
      if (milli <= 0) continue;
      (void)book_.charge(e.job.tenant, model, milli);
      e.charges.push_back({model, milli});
    }
  }
  e.window_admitted = admission == StartAdmission::kWindow;
  e.borrowing = borrowed > 0;
  mark_running(e, placement.assignments, now, now);
  out.started.push_back(
      StartedJob{e.job.id, placement.assignments, placement.span, admission, borrowed, backfilled});
}

void Scheduler::mark_running(Entry& e, std::vector<Assignment> assignments, Seconds since,
                             Seconds now) {
  close_reason(e, now);
  dequeue(e);
  e.promoted = false;
  e.phase = JobPhase::kRunning;
  e.assignments = std::move(assignments);
  count_tasks(e, +1);
  e.segment_start = since;
  e.predicted_end = since + predicted_remaining(e);
  tenant_usage_[e.job.tenant.value] += e.milli;
  class_usage_[static_cast<std::size_t>(e.job.job_class)] += e.milli;
  running_.insert(e.job.id);
  add_running(e);
}

void Scheduler::add_running(const Entry& e) {
  tenant_running_[e.job.tenant.value].emplace(std::make_pair(e.job.priority_class, e.job.id.value),
                                              &e);
  if (e.job.preemptible && e.job.checkpoint_interval) ++tenant_checkpointing_[e.job.tenant.value];
}

void Scheduler::remove_running(const Entry& e) {
  if (tenant_running_[e.job.tenant.value].erase({e.job.priority_class, e.job.id.value}) > 0 &&
      e.job.preemptible && e.job.checkpoint_interval) {
    --tenant_checkpointing_[e.job.tenant.value];
  }
}

PreemptedJob Scheduler::preempt(Entry& e, Seconds now, PreemptionCause cause,
                                std::optional<JobId> beneficiary) {
  PreemptedJob p;
  p.job = e.job.id;
  p.cause = cause;
  p.beneficiary = beneficiary;
  p.segment_seconds = now - e.segment_start;
  const bool checkpoints = e.job.checkpoint_interval.has_value();
  if (cause == PreemptionCause::kDrain && checkpoints) {
    p.kept_seconds = p.segment_seconds;
  } else if (checkpoints) {
    p.kept_seconds = p.segment_seconds - p.segment_seconds % *e.job.checkpoint_interval;
  }
  const std::int64_t gpus = whole_gpus(e.milli);
  p.lost_gpu_seconds = (p.segment_seconds - p.kept_seconds) * gpus;
  count_tasks(e, -1);
  for (const Assignment& a : e.assignments) (void)pool_.release(e.job.gang.task, a);
  for (const ModelCharge& c : e.charges) (void)book_.refund(e.job.tenant, c.model, c.milli);
  tenant_usage_[e.job.tenant.value] -= e.milli;
  class_usage_[static_cast<std::size_t>(e.job.job_class)] -= e.milli;
  running_.erase(e.job.id);
  remove_running(e);
  e.assignments.clear();
  e.charges.clear();
  e.attained += gpus * p.segment_seconds;
  e.kept_seconds = checkpoints ? e.kept_seconds + p.kept_seconds : 0;
  e.reason = {};
  e.reason_since = now;
  e.pending_since = now;
  e.promoted = false;
  enqueue(e);
  fresh_.push_back(e.job.id);
  return p;
}

void Scheduler::return_loans(Seconds now, PassResult& out) {
  auto ended = std::stable_partition(loans_.begin(), loans_.end(),
                                     [&](const Loan& l) { return l.end > now; });
  for (auto it = ended; it != loans_.end(); ++it) {
    (void)book_.adjust_guarantee(it->tenant, it->model, -it->milli);
    out.loans_returned.push_back(*it);
  }
  loans_.erase(ended, loans_.end());
}

bool Scheduler::held_at_gate(Entry& e, Seconds now, PassState& state) {
  const Job& job = e.job;
  if (state.blocking) {
    set_reason(e, now, state.blocked_reason);
    return true;
  }
  if (auto it = state.tenant_blocked.find(job.tenant); it != state.tenant_blocked.end()) {
    set_reason(e, now, it->second);
    return true;
  }
  if (job.tenant.value < budget_exhausted_.size() && budget_exhausted_[job.tenant.value] &&
      job.priority_class < config_.budget_exempt_priority) {
    set_reason(e, now, *budget_exhausted_[job.tenant.value]);
    // A lane is in priority order: the tenant's later jobs are not critical either.
    if (lanes_.size() > 1 && e.lane == job.tenant.value) {
      state.lane_done[e.lane] = *budget_exhausted_[job.tenant.value];
    }
    return true;
  }
  return false;
}

void Scheduler::evaluate(Entry& e, Seconds now, PassState& state, PassResult& out) {
  if (held_at_gate(e, now, state)) return;
  const WindowVerdict window = window_verdict(e, now, state);
  const QuotaVerdict quota = admit_for_quota(e, window, now, state, out);
  if (quota.settled) return;
  const std::optional<PendingReason> unplaceable = try_to_place(e, quota, window, now, state, out);
  if (!unplaceable) return;
  wait_or_make_room(e, quota, window, *unplaceable, now, state, out);
}

PassResult Scheduler::pass(Seconds now) {
  PassResult out;
  account_until(now);
  promote_starving(now);
  // Loans are returned against the whole guarantees; then the open windows' GPUs are taken out
  // of every tenant's in proportion (TenantBook::hold_outside_quotas), so that reclaim gives a
  // tenant below what is left of its guarantee its share back from those above theirs.
  book_.hold_outside_quotas(0);
  return_loans(now, out);
  book_.hold_outside_quotas(window_held_milli(config_.windows, now, config_.day_offset));
  drain_for_windows(now, out);

  PassState state;
  waiting_for_room_.clear();
  find_windows_in_effect(now, state);

  // Walk the lanes in admission order. Under fair share, tenants are ranked by share once: the
  // ledger does not change during a pass.
  std::vector<int> rank(lanes_.size(), 0);
  if (config_.order == OrderRule::kFairShare) {
    std::vector<TenantId> tenants;
    for (std::size_t t = 0; t < lanes_.size(); ++t) {
      tenants.push_back(TenantId{static_cast<std::uint32_t>(t)});
    }
    std::sort(tenants.begin(), tenants.end(), [&](TenantId a, TenantId b) {
      const auto c = ledger_.compare_share(a, b);
      return c < 0 || (c == 0 && a < b);
    });
    for (std::size_t i = 0; i < tenants.size(); ++i) {
      const bool tied = i > 0 && ledger_.compare_share(tenants[i - 1], tenants[i]) == 0;
      rank[tenants[i].value] = tied ? rank[tenants[i - 1].value] : static_cast<int>(i);
    }
  }
  // The lanes' next jobs, the first in admission order on top: (priority, tenant rank, the lane's
  // rank, id) and the lane. A lane's next job stays its next while others are evaluated: only the
  // job evaluated starts, and preempted jobs are enqueued behind the walk or ahead of its next.
  using Head = std::pair<std::tuple<std::int64_t, int, std::int64_t, std::int64_t, std::uint32_t>,
                         std::size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  std::vector<std::set<LaneKey>::iterator> cursor;
  auto push_head = [&](std::size_t l) {
    if (cursor[l] == lanes_[l].end()) return;
    const LaneKey& k = *cursor[l];
    heads.push({{std::get<0>(k), rank[l], std::get<1>(k), std::get<2>(k), std::get<3>(k)}, l});
  };
  for (auto& lane : lanes_) cursor.push_back(lane.begin());
  for (std::size_t l = 0; l < lanes_.size(); ++l) push_head(l);
  state.lane_done.assign(lanes_.size(), std::nullopt);
  cut_short_ = false;
  const auto limit = static_cast<std::size_t>(std::max(0, config_.max_starts_per_pass));
  while (!heads.empty()) {
    if (limit > 0 && out.started.size() + out.preempted.size() >= limit) {
      cut_short_ = true;
      break;
    }
    const std::size_t best = heads.top().second;
    heads.pop();
    const JobId id{std::get<3>(*cursor[best])};
    ++cursor[best];
    Entry& e = entry(id);
    evaluate(e, now, state, out);
    if (e.phase == JobPhase::kPending && std::ssize(waiting_for_room_) < kMaxExpectedStarts &&
        (e.reason.kind == PendingKind::kCapacity || e.reason.kind == PendingKind::kTopology ||
         e.reason.kind == PendingKind::kReservation || e.reason.kind == PendingKind::kQuota)) {
      waiting_for_room_.push_back(id);
    }
    // A job held by its tenant's budget is the tenant's matter: it does not hold the line.
    if (config_.head_of_line_blocking && e.phase == JobPhase::kPending && !state.blocking &&
        e.reason.kind != PendingKind::kBudget) {
      state.blocking = id;
      state.blocked_reason =
          make_reason(PendingKind::kHeadOfLine,
                      fmt::format("behind job {}, first in the queue, which waits: {}", id.value,
                                  e.reason.message()));
    }
    if (state.blocking) break;
    if (state.lane_done[best]) cursor[best] = lanes_[best].end();
    push_head(best);
  }
  // Jobs the walk did not reach (behind a blocked queue or in a lane with nothing to start)
  // keep their reason; those new since the last pass get the reason of what holds them.
  for (JobId id : fresh_) {
    Entry& e = entry(id);
    if (e.phase != JobPhase::kPending || e.reason.kind != PendingKind::kNotConsidered) continue;
    if (state.blocking) {
      set_reason(e, now, state.blocked_reason);
    } else if (state.lane_done[e.lane]) {
      set_reason(e, now, *state.lane_done[e.lane]);
    }
  }
  // A pass cut short leaves the jobs it did not reach to the next, which is due at once.
  std::erase_if(fresh_, [&](JobId id) {
    const Entry& e = entry(id);
    return !cut_short_ || e.phase != JobPhase::kPending ||
           e.reason.kind != PendingKind::kNotConsidered;
  });
  slice_wakeup_ = state.slice_wakeup;
  // Jobs of a tenant whose budget was lifted that the walk did not reach still say "budget":
  // they get the reason of what holds them now.
  for (const TenantId tenant : budget_lifted_) {
    if (budget_exhausted(tenant)) continue;
    const std::size_t lane = lanes_.size() > 1 ? tenant.value : 0;
    if (lane >= lanes_.size()) continue;
    for (const LaneKey& key : lanes_[lane]) {
      Entry& e = entry(JobId{std::get<3>(key)});
      if (e.job.tenant != tenant || e.reason.kind != PendingKind::kBudget) continue;
      if (state.blocking) {
        set_reason(e, now, state.blocked_reason);
      } else if (state.lane_done[e.lane]) {
        set_reason(e, now, *state.lane_done[e.lane]);
      }
    }
  }
  budget_lifted_.clear();
  return out;
}

}  // namespace tidepool
