// The scheduler: the multi-tenant brain that the simulator and the server both drive. It owns the
// pool, the tenants' quota book, the fair-share ledger, the runtime predictor and every job it was
// given, and decides, one pass at a time, which pending jobs start where and which running jobs
// are preempted for them. Pure: no I/O, threads or clock; the caller passes the time.
//
// A pass (Scheduler::pass), with the policy's rules switched on or off by SchedulerConfig:
//   1. Bookkeeping: fair-share usage is charged up to now; loans past their end are returned (the
//      tenant's guarantee goes back down).
//   2. Tidal windows: while a window is open, its class's protected GPUs that its jobs do not use
//      are kept free. If fewer are free, running preemptible jobs of other classes are drained:
//      they checkpoint on notice (no work lost) and stop; lowest priority, then the most recently
//      started first. In the drain lead before a window opens, no job of another class starts on
//      the protected capacity unless it is predicted to end before the window opens.
//   3. Pending jobs are taken in the policy's order (kFifo: priority, submit time, id;
//      kFairShare: priority, the tenants' decayed weighted fair share (queue_order.h), then the
//      tenant's lane order (core/lane_order.h: fifo, las or srpt, per tenant or lane_order by
//      default), then id; kLeastAttained: Tiresias' discretised 2D-LAS level, then submit time,
//      then id). Except under kLeastAttained, each tenant's jobs form a lane kept in order, and the
//      lanes are merged during the pass. Aging: a job of a lane ordered other than fifo that has
//      waited starvation_limit is promoted ahead of its lane and holds it (as quota_head_patience
//      does for fifo lanes, below), and may slice its own tenant's jobs whatever their rank. For
//      each job:
//        - window: what must stay free beside the job (over the windows open now, or in their
//          drain lead for a job predicted to run into them, the protected GPUs their classes do
//          not use) is its hold; if fewer whole GPUs are free than the job plus the hold, it does
//          not start on free capacity (kWindow), though preemption below may still make room for
//          both. A job of the window's class within the protected amount is admitted by the window
//          itself (not charged to its tenant's quota);
//        - quota (if on): TenantBook::admit must admit it, within guarantee or by borrowing
//          (kQuota with the book's reason). A tenant below its guarantee whose job needs more
//          than it may borrow can still start it if reclaim (below) frees room in the pool and in
//          the book. A job refused for quota for quota_head_patience or longer holds back the
//          later jobs of its tenant in this pass, so that small jobs do not starve a large one of
//          the same tenant. A tenant at or above its guarantee with nothing to borrow ends its
//          lane for the pass (all its jobs would be refused alike), and so does a refused job
//          that asks for no more than any later job of its lane and may slice no less
//          (no_later_job_easier): the later jobs would be refused too (both rules take it that
//          the rest of the pass does not free quota for the tenant);
//        - placement by the policy's rule (place_gang with the topology objective, where
//          gang_policy, if set, decides what the objective leaves open; or first/best fit
//          without topology). With segregate_borrowed, borrowed work is first tried on nodes
//          without guaranteed work and guaranteed work on nodes without borrowed work, so that
//          reclaim can empty whole nodes (HiveD keeps opportunistic work apart likewise). If it
//          fits and starting it would not delay the reservation of the head job (EASY backfill,
//          below), it starts now;
//        - if it does not fit, preemption may make room: reclaim (part of the job is within its
//          tenant's guarantee: running jobs of other tenants that borrow), priority (preemptible
//          jobs of a lower priority class), least-attained (Tiresias: jobs of a higher LAS
//          level) and time slicing (time_slicing, under a lane order that slices: checkpointing
//          jobs that ran min_slice_run since their start and would lose at most max_slice_loss
//          (else the pass wakes at their next checkpoint), of the job's own tenant or of a tenant
//          that borrows, that the job's lane order ranks clearly behind it, LaneOrder::may_slice;
//          a job refused for quota tries it too, the book then admitting it once they are
//          gone). Victims are whole gangs, never jobs started in this pass, tried in order (jobs
//          of borrowing tenants first, then lower priority, then least work lost since their last
//          checkpoint, then most attained service, then id; for a gang that must sit on one
//          node, node by node, the nodes that free the most GPUs first; for a gang of multi-GPU
//          tasks over several nodes, the same leaf by leaf) until the job fits on the pool
//          without them; victims not needed after all are then kept running. Reclaim (and
//          slicing of another tenant's job) takes from a tenant only while it borrows, and
//          leaves it below its guarantee only for a job of a claimant below its guarantee (a job
//          that straddles the guarantee included: an 8-GPU gang of a tenant 6.5 GPUs short), by
//          less than the claimant's shortfall and at most 1/20 of its own guarantee: each reclaim
//          lowers the larger shortfall of the two, so reclaims cannot go round in circles. Only if
//          the job then fits are the victims preempted (they return to pending) and the job
//          started, in the same pass;
//        - otherwise it waits with the reason (kCapacity or kTopology with the placement's
//          numbers). With backfill on, the first such job gets the reservation: the earliest time
//          at which it fits when running jobs end at their predicted ends, and the place it would
//          take then. A later job may start only if it is predicted to end by then or uses none of
//          that place (kReservation otherwise). With head-of-line blocking (strict FIFO) nothing
//          after the first waiting job starts (kHeadOfLine).
//   4. Reasons: every job the pass reaches gets its current reason; jobs it does not reach (after
//      a head-of-line block, or in a lane that ended) keep theirs, and those new since the last
//      pass get the reason of what holds them. Time spent waiting is totalled per reason.
//
// Lost work: a job preempted with a checkpoint interval c keeps floor(run / c) x c of a segment
// of `run` seconds and loses the rest; without one it loses the whole segment (it restarts from
// scratch); a drained job loses nothing. Lost GPU-seconds = lost seconds x the job's GPUs.
//
// Everything is deterministic: the same calls give the same passes, bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/gang_placement.h"
#include "core/ids.h"
#include "core/job.h"
#include "core/lane_order.h"
#include "core/lane_shapes.h"
#include "core/pending_reason.h"
#include "core/pool.h"
#include "core/prewarm.h"
#include "core/queue_order.h"
#include "core/rng.h"
#include "core/runtime_predictor.h"
#include "core/tenants.h"
#include "core/tidal_window.h"

namespace tidepool {

enum class OrderRule : std::uint8_t { kFifo, kFairShare, kLeastAttained };
enum class PlacementRule : std::uint8_t { kFirstFit, kBestFit, kTopology };

struct SchedulerConfig {
  OrderRule order = OrderRule::kFairShare;
  bool head_of_line_blocking = false;
  PlacementRule placement = PlacementRule::kTopology;
  bool quotas = true;
  bool reclaim = true;
  bool priority_preemption = true;
  bool backfill = true;
  bool las_preemption = false;
  // Attained-service thresholds of the LAS levels, GPU-seconds, ascending (level i holds jobs
  // below threshold i; past the last: the last level).
  std::vector<std::int64_t> las_thresholds = {3600, 36000};
  std::vector<TidalWindow> windows;
  Seconds day_offset = 0;  // time of day of time 0, seconds after midnight
  Seconds drain_lead = 1800;
  // Place borrowed work on nodes without guaranteed work and the other way round, when possible,
  // so that reclaim can empty whole nodes (HiveD keeps opportunistic work apart the same way).
  bool segregate_borrowed = true;
  // A job refused for quota this long holds back its tenant's later jobs (see the pass); under a
  // lane order other than fifo, a promoted job does instead (starvation_limit).
  Seconds quota_head_patience = 1800;
  // The order inside each tenant's lane when the tenants file names none (core/lane_order.h).
  // Under kLeastAttained (one global lane) it is not used.
  LaneOrderKind lane_order = LaneOrderKind::kLeastAttained;
  // Aging: a job waiting this long in a lane ordered other than fifo is promoted ahead of its
  // lane's other jobs, its lane waits for it, and it may stop its own tenant's sliceable jobs
  // (0: never). Shorter limits bound waits tighter at the cost of more preemptions and lost work
  // (whole Philly trace on 512 GPUs: 24h loses 3.5% of GPU-hours, 48h 2.9%, 96h 2.4%).
  Seconds starvation_limit = 48 * 3600;
  // Time slicing inside a tenant (orders that slice): a running job may be stopped for its own
  // tenant's waiting work that ranks ahead, once it has run this long since it last started.
  bool time_slicing = true;
  Seconds min_slice_run = 1800;
  // ... and only when it would lose at most this much work (its run since its last checkpoint);
  // otherwise the slice waits for the job's next checkpoint (a pass is due then, next_wakeup).
  // Whole Philly trace on 512 GPUs: 10 minutes loses 1.8% of GPU-hours (any point of the
  // checkpoint interval: 2.9%; 5 minutes: 1.5%, with longer queues).
  Seconds max_slice_loss = 600;
  // The most jobs one pass starts and preempts together (0: no limit, the simulator's default).
  // The walk stops there and the jobs after it wait for the next pass, which is due at once
  // (cut_short); Slurm's sched_max_job_start does the same. The server derives it from its
  // store's transaction limit, so that what a pass changes fits in one commit.
  int max_starts_per_pass = 0;
  // Jobs of this priority class or above are critical: they start even when their tenant's
  // budget is exhausted.
  int budget_exempt_priority = 1000;
  Seconds fair_share_half_life = kDefaultFairShareHalfLife;
  RuntimePredictorConfig predictor;
  // The task shapes of the workload (FGD's typical tasks): a task with a GPU fraction is placed by
  // the fragmentation-aware Tidepool policy weighed against them (kTopology only). Empty: by best
  // fit.
  std::vector<TaskShape> typical_tasks;
  // A placement policy (make_placement_policy's names: "fgd", "best-fit", ...) that also places
  // whole-GPU gangs where the topology objective leaves a choice (place_gang_by_policy, kTopology
  // only), weighed against typical_tasks (or, when they are not known, equal numbers of 1-, 2-,
  // 4- and 8-GPU tasks). Empty: the gang planner alone. The tidepool policy's: "fgd".
  std::string gang_policy;
};

// The policies of `tidepool sim run`: "fifo-firstfit", "quota-borrow", "tiresias", "tidepool".
std::span<const std::string_view> scheduler_policy_names();
Result<SchedulerConfig> scheduler_policy(std::string_view name);

enum class JobPhase : std::uint8_t { kPending, kRunning, kDone };
enum class PreemptionCause : std::uint8_t {
  kReclaim,
  kPriority,
  kLeastAttained,
  kDrain,
  kTimeSlice,  // for waiting work of the same tenant that ranks ahead (lane_order.h)
};
std::string_view preemption_cause_name(PreemptionCause cause);

// How a started job was admitted.
enum class StartAdmission : std::uint8_t { kNoQuota, kWithinGuarantee, kBorrowing, kWindow };

struct StartedJob {
  JobId job;
  std::vector<Assignment> assignments;
  GangSpan span;
  StartAdmission admission = StartAdmission::kNoQuota;
  std::int64_t borrowed_milli = 0;  // the part above the tenant's guarantee
  bool backfilled = false;          // started while an earlier job held the reservation
};

struct PreemptedJob {
  JobId job;
  PreemptionCause cause = PreemptionCause::kReclaim;
  std::optional<JobId> beneficiary;  // the job it made room for (none for drains)
  Seconds segment_seconds = 0;       // how long it ran since its last start
  Seconds kept_seconds = 0;          // of those, saved by a checkpoint
  std::int64_t lost_gpu_seconds = 0;
};

// An emergency loan: `milli` of `model` added to `tenant`'s guarantee over [start, end).
struct Loan {
  TenantId tenant;
  GpuModelId model;
  std::int64_t milli = 0;
  Seconds start = 0;
  Seconds end = 0;
};

struct PassResult {
  // A job is preempted at most once per pass, and only if it did not start in the same pass; a
  // preempted job may start again later in the pass. Apply preemptions first, then starts.
  std::vector<PreemptedJob> preempted;
  std::vector<StartedJob> started;
  std::vector<Loan> loans_returned;
};

// Where a pending job stands in its lane, for a user asking why it waits.
// The most service one job may be credited with (Scheduler::credit_attained): a century of a
// 100,000-GPU pool; more is a corrupt record, not service.
inline constexpr std::int64_t kMaxAttainedGpuSeconds = std::int64_t{100'000} * 100 * 365 * 86'400;

struct LanePlace {
  int position = 0;        // 1: the first the next pass considers
  int lane_size = 0;       // pending jobs in the lane
  std::string_view order;  // the lane's order, "fifo", "las" or "srpt"
  bool promoted = false;   // waited starvation_limit: ahead of every job not promoted
  std::int64_t attained_gpu_seconds = 0;
  std::string rank;          // what its rank rests on, from the order
  std::vector<JobId> ahead;  // the nearest jobs ahead of it, nearest first
};

class Scheduler;
namespace scheduler_detail {
// Tests only (core/scheduler_pass_state.h): see there.
void find_room_naively(Scheduler& scheduler);
}  // namespace scheduler_detail

class Scheduler {
 public:
  static Result<Scheduler> create(Pool pool, TenantBook book, SchedulerConfig config);

  // Adds a pending job (validated; tenant and queue known when quotas are on; id unused).
  Result<void> submit(const Job& job, Seconds now);
  // A running job ended (finished, failed or stopped): its resources return. `observed_runtime`,
  // when given, teaches the runtime predictor.
  Result<void> finish(JobId job, Seconds now, std::optional<Seconds> observed_runtime);
  // Grants a loan from now to loan.end (> now); it is returned by the first pass at or after its
  // end.
  Result<void> grant_loan(const Loan& loan, Seconds now);

  // Takes back a pending job (cancelled before it started); it is done.
  Result<void> withdraw(JobId job, Seconds now);
  // Adds a job that already runs at `assignments` since `started` (a server restoring its state
  // after a restart): its resources are taken and charged to its tenant even past its quota, so
  // that the scheduler's view matches what runs. Fails, changing nothing, if the job is invalid or
  // known, or a task does not fit where it runs.
  Result<void> adopt(const Job& job, std::span<const Assignment> assignments, Seconds started,
                     Seconds now);
  // Adds `gpu_seconds` of service the job received before this scheduler knew it (a server's
  // earlier runs of it, kept over a restart or a requeue) to its attained service, and ranks it
  // again if it waits. Fails, changing nothing, for a job neither pending nor running, or a
  // negative or implausible amount.
  Result<void> credit_attained(JobId job, std::int64_t gpu_seconds);
  // Forgets a done job (a server that keeps jobs outside the scheduler calls it once a job has
  // ended, so that memory does not grow with the history).
  Result<void> forget(JobId job);
  // Budgets (core/budget.h): while `reason` is set, the tenant's pending jobs below
  // budget_exempt_priority wait with kBudget and that text; nullopt lifts it. The caller decides
  // from the ledger (the scheduler keeps no money). Fails for an unknown tenant.
  Result<void> set_budget_exhausted(TenantId tenant, std::optional<std::string> reason);
  [[nodiscard]] bool budget_exhausted(TenantId tenant) const;

  // Cordons a node (drained, or down) or makes it schedulable again; see Pool::set_schedulable.
  // Its running jobs keep running.
  Result<void> set_node_schedulable(NodeId node, bool schedulable);

  PassResult pass(Seconds now);
  // Whether the last pass stopped at max_starts_per_pass before its walk was done: another pass
  // has work at once.
  [[nodiscard]] bool cut_short() const { return cut_short_; }

  // The next time after `now` at which a pass has something new to do without any event from
  // outside (a window opens, closes or enters its drain lead; a loan ends); nullopt if none.
  [[nodiscard]] std::optional<Seconds> next_wakeup(Seconds now) const;

  [[nodiscard]] const Pool& pool() const { return pool_; }
  [[nodiscard]] const TenantBook& book() const { return book_; }
  [[nodiscard]] const SchedulerConfig& config() const { return config_; }
  [[nodiscard]] const FairShareLedger& ledger() const { return ledger_; }
  [[nodiscard]] int pending_count() const { return pending_count_; }
  // Pending jobs of one tenant (0 for a tenant the book lacks, as when quotas are off).
  [[nodiscard]] int pending_count(TenantId tenant) const;
  [[nodiscard]] int running_count() const { return static_cast<int>(running_.size()); }
  // Milli-GPUs held by the tenant's running jobs (all models).
  [[nodiscard]] std::int64_t usage_milli(TenantId tenant) const;
  // Milli-GPUs held by running jobs of the class.
  [[nodiscard]] std::int64_t class_usage_milli(JobClass job_class) const;

  [[nodiscard]] std::optional<JobPhase> phase(JobId job) const;
  // The current reason of a pending job (kNotConsidered before its first pass).
  [[nodiscard]] const PendingReason* reason(JobId job) const;
  // Seconds the job has spent pending, per reason, up to its last reason change.
  [[nodiscard]] const PendingSeconds* pending_seconds(JobId job) const;
  // When a pending job's current reason began (the time after pending_seconds' last count).
  [[nodiscard]] std::optional<Seconds> reason_since(JobId job) const;
  // The prediction made when the job was submitted.
  [[nodiscard]] std::optional<Prediction> prediction(JobId job) const;
  // GPU-seconds of service the job has received, its current run counted to `now`.
  [[nodiscard]] std::optional<std::int64_t> attained_gpu_seconds(JobId job, Seconds now) const;
  // A pending job's place in its lane (the jobs of its tenant, or of the whole pool under LAS,
  // in the order a pass considers them); nullopt unless the job is pending.
  [[nodiscard]] std::optional<LanePlace> lane_place(JobId job, Seconds now,
                                                    std::size_t max_ahead = 3) const;
  // A rough estimate of when a pending job starts: the first predicted end of a running job (as
  // reservations count them) by which enough GPUs of the models it accepts are free for it and
  // for the jobs ahead of it in its lane that could take them; `now` when they are free now.
  // Quotas, topology and other lanes are left out: it says when room is expected, not a promise.
  // nullopt when the job is not pending, or the running jobs' ends never free enough.
  [[nodiscard]] std::optional<Seconds> estimated_start(JobId job, Seconds now) const;
  // The starts expected within `horizon` of `now`, for pre-warming (core/prewarm.h): the jobs the
  // last pass left waiting for room or quota and still pending, per tenant in the order it
  // considered them. The running jobs end at their predicted ends (one past it at any moment)
  // on a copy of the pool; after each end, each tenant's next jobs are placed there by the
  // scheduler's placement while they fit (one that does not fit holds its tenant's later jobs),
  // a job that waited for quota only in what its tenant's own ended jobs freed. At most
  // `max_jobs`, soonest first. It says where room is expected, not a promise; it draws nothing,
  // so the schedule is the same whether it is asked or not.
  [[nodiscard]] std::vector<ExpectedStart> expected_starts(Seconds now, Seconds horizon,
                                                           int max_jobs) const;
  // Pending time of all jobs per reason, up to each job's last reason change.
  [[nodiscard]] const PendingSeconds& pending_seconds_total() const { return pending_total_; }

 private:
  // (priority, band, value, id) in a tenant's lane; (LAS level, 0, submit, id) in the global one.
  using LaneKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::uint32_t>;
  struct ModelCharge {
    GpuModelId model;
    std::int64_t milli = 0;
  };
  struct Entry {
    Job job;
    JobPhase phase = JobPhase::kPending;
    Prediction prediction;
    std::int64_t milli = 0;  // the gang's milli-GPUs
    // pending
    PendingReason reason;
    Seconds reason_since = 0;
    Seconds pending_since = 0;  // since its submission or its last preemption
    PendingSeconds waited{};
    LaneKey key{};
    std::size_t lane = 0;
    bool promoted = false;  // waited starvation_limit (see lane_order.h)
    // running
    std::vector<Assignment> assignments;
    std::vector<ModelCharge> charges;
    bool window_admitted = false;
    bool borrowing = false;
    Seconds segment_start = 0;
    Seconds kept_seconds = 0;   // run time saved by checkpoints, over all segments
    std::int64_t attained = 0;  // GPU-seconds of service before the current segment
    Seconds predicted_end = 0;
  };
  struct Reservation {
    JobId job;
    Seconds start = 0;
    Pool shadow;  // the pool at `start` with the reserved job placed
    PendingReason reason;
  };
  struct PassState;
  struct RoomCandidate;
  struct RoomCandidates;
  struct RunningView;
  struct RunningIndex;
  struct RoomArrangement;
  struct RoomObtainable;
  struct WindowVerdict;
  struct QuotaVerdict;

  Scheduler(Pool pool, TenantBook book, FairShareLedger ledger, RuntimePredictor predictor,
            SchedulerConfig config, std::vector<std::unique_ptr<LaneOrder>> orders,
            std::unique_ptr<PlacementPolicy> gang_policy);

  Entry& entry(JobId job) { return *entries_[index_.at(job)]; }
  // The entry slot of a known job in `phase`; an error naming the job otherwise.
  [[nodiscard]] Result<std::size_t> slot_in_phase(JobId job, JobPhase phase) const;
  const Entry& entry(JobId job) const { return *entries_[index_.at(job)]; }
  void account_until(Seconds now);
  void set_reason(Entry& e, Seconds now, PendingReason reason);
  void close_reason(Entry& e, Seconds now);
  void enqueue(Entry& e);
  void dequeue(Entry& e);
  [[nodiscard]] int las_level(std::int64_t attained) const;
  // The job as its lane's order sees it now (attained service counted to now when running).
  [[nodiscard]] LaneJob lane_job(const Entry& e, Seconds now) const;
  [[nodiscard]] const LaneOrder& lane_order(const Entry& e) const;
  // A pending job's own rank in its lane (promoted or not).
  [[nodiscard]] LaneRank lane_rank(const Entry& e) const;
  // The running jobs as making room sees them in this pass, in the order victims are taken (found
  // once per pass and change of the running jobs).
  const std::vector<RunningView>& running_view(Seconds now, PassState& state) const;
  // Where in the running view room candidates can be (found once per change of the view).
  const RunningIndex& running_index(Seconds now, PassState& state) const;
  // The positions in the running view of the jobs that may be room candidates or slice victims
  // for `e` (all of them when the index cannot tell), in view order, into `at`.
  void possible_victims(const Entry& e, bool reclaim, bool slicing, Seconds now, PassState& state,
                        std::vector<std::uint32_t>& at) const;
  // Whether possible_victims may find any for `e`, told without the running view (a superset:
  // false only when it would find none), so that a pass with nothing to take builds no view.
  [[nodiscard]] bool may_find_victims(const Entry& e, bool reclaim, bool slicing) const;
  // Per tenant and model, whether the tenant borrows the model now.
  [[nodiscard]] std::vector<bool> borrowing_models() const;
  // Jobs were started, and `preempted` preempted, in this pass: what the pass found of the
  // running jobs is brought up to date (O(candidate kinds x log candidates) per job preempted,
  // unless a tenant started or stopped borrowing a model: then found anew when next asked for).
  void running_changed(PassState& state, std::span<const JobId> preempted = {}) const;
  // Whether any preemption rule may take running job `v` for a job like `e` (a superset: the
  // tenant's own, those of tenants that borrow, lower priorities under priority preemption; every
  // job under LAS preemption).
  [[nodiscard]] bool may_be_victim(const RunningView& v, const Entry& e) const;
  // Time slicing: running job `v` may be stopped for waiting job `e` when both hold.
  // may_be_sliced: v is of e's tenant, or of a tenant that borrows (RunningView::borrowing),
  // checkpoints, ran min_slice_run and would lose at most max_slice_loss; when only the last two
  // fail, the pass wakes when they will hold (state.slice_wakeup).
  [[nodiscard]] bool may_be_sliced(const RunningView& v, TenantId tenant, Seconds now,
                                   PassState& state) const;
  // The first time at or after `now` at which running job `v` has run min_slice_run and would
  // lose at most max_slice_loss if stopped.
  [[nodiscard]] Seconds sliceable_from(const Entry& v, Seconds now) const;
  // slice_rank_allows, the rank part: a promoted job may stop its own tenant's sliceable jobs
  // whatever their rank; otherwise only jobs clearly behind it (LaneOrder::may_slice).
  [[nodiscard]] bool slice_rank_allows(const Entry& e, TenantId running_tenant,
                                       const LaneJob& running) const;
  void promote_starving(Seconds now);
  // The predicted runtime less what checkpoints already saved, at least a minute.
  [[nodiscard]] Seconds predicted_remaining(const Entry& e) const;
  [[nodiscard]] Seconds lost_if_preempted(const Entry& e, Seconds now) const;
  // Where the policy's rule places `request` on `pool`: with `allowed_nodes` (kTopology, whole
  // GPUs), only on the nodes flagged there.
  // Where `job` would run on `pool` as `request` asks: a service's replica with its spread rule
  // (away from the service's running replicas), any other job with the configured placement.
  [[nodiscard]] GangResult place(const Pool& pool, const Job& job, const GangRequest& request,
                                 std::span<const std::uint8_t> allowed_nodes = {}) const;
  [[nodiscard]] GangResult place_replica_of_service(const Pool& pool, const Job& job,
                                                    const GangRequest& request) const;
  void start(Entry& e, const GangPlacement& placement, Seconds now, StartAdmission admission,
             std::int64_t borrowed, bool backfilled, PassResult& out);
  // The job's bookkeeping as running at `assignments` since `since` (resources and charges taken).
  void mark_running(Entry& e, std::vector<Assignment> assignments, Seconds since, Seconds now);
  PreemptedJob preempt(Entry& e, Seconds now, PreemptionCause cause,
                       std::optional<JobId> beneficiary);
  // The windows open now or in their drain lead, into state.windows.
  void find_windows_in_effect(Seconds now, PassState& state) const;
  // What must stay free beside `e` for the windows in effect (the protected GPUs of every window
  // it would run into, less what their classes use), whether a window admits it, and why it waits.
  [[nodiscard]] WindowVerdict window_verdict(const Entry& e, Seconds now, PassState& state) const;
  void drain_for_windows(Seconds now, PassResult& out);
  void return_loans(Seconds now, PassResult& out);
  std::optional<Reservation> reserve(const Entry& e, const GangRequest& request, Seconds now);
  // The running jobs (end, id) by predicted end, soonest first, as reservations count on them.
  [[nodiscard]] std::vector<std::tuple<Seconds, std::uint32_t>> running_by_predicted_end(
      Seconds now) const;
  // Victims, in the order preempted, and where the job then goes.
  using Room = std::pair<std::vector<JobId>, GangPlacement>;
  // Victims that make `request` fit, and its placement on the pool without them.
  std::optional<std::pair<std::vector<JobId>, GangPlacement>> make_room(
      const Entry& e, const GangRequest& request, bool reclaim, bool admit_after, std::int64_t hold,
      Seconds now, PassState& state);
  // The shortest prefix of `order` whose jobs, gone, make room for `request` (in the pool, and in
  // the book with `admit_after`), less the victims it does not need, and the placement then.
  // Victims are tried on the pool itself (victims_until_fits_in_place) when each would go back
  // as it was (restorable), on copies of it otherwise.
  std::optional<std::pair<std::vector<JobId>, GangPlacement>> victims_until_fits(
      const Entry& e, const GangRequest& request, const std::vector<std::uint32_t>& order,
      bool admit_after, std::int64_t hold);
  std::optional<Room> victims_until_fits_in_place(const Entry& e, const GangRequest& request,
                                                  const std::vector<const Entry*>& order,
                                                  bool admit_after, std::int64_t hold);
  // Whether running job `v`, released from the pool for a trial, goes back as it was: it holds no
  // MIG instance and runs on schedulable nodes only (a cordoned node takes no task back).
  [[nodiscard]] bool restorable(const Entry& v) const;
  // Takes a restorable running job's tasks out of the pool for a trial, and puts them back.
  void release_for_trial(const Entry& v);
  void restore_after_trial(const Entry& v);
  // Whether reclaim's limits let make_room take running job `v` (a candidate, stopped for its own
  // tenant's work if `slice`) for `e`, whose tenant is `shortfall` milli-GPUs below its guarantee
  // on the models it accepts, given what the same attempt took before, per tenant, in `taken`
  // (updated when it takes `v`).
  [[nodiscard]] bool may_take(const Entry& e, const Entry& v, bool slice, std::int64_t shortfall,
                              std::vector<std::int64_t>& taken) const;
  // Whether placement draws nothing from a random generator (every rule but a gang policy that
  // does not place among nodes, core/policies/placement_policy.h): it then depends on the pool's
  // state alone, and for one task it finds a node whenever some node fits the task.
  [[nodiscard]] bool places_without_draws() const;
  // make_room for one task of whole GPUs, where placement draws nothing and no book decides
  // (victims_until_fits' answer, found on the pool itself): victims are released from the pool in
  // order until the task fits, then restored; only the candidates walked cost, not the others or
  // a copy of the pool. nullopt when it cannot be found so (a victim on a cordoned node, or a MIG
  // task, would not go back as it was): make_room then asks victims_until_fits.
  std::optional<std::optional<Room>> room_in_place(const Entry& e, const GangRequest& request,
                                                   RoomCandidates& found, std::int64_t shortfall,
                                                   bool admit_after, std::int64_t hold);
  // The first candidate left at or after position `at` (found.sorted.size() if none).
  static std::uint32_t next_left(RoomCandidates& found, std::uint32_t at);
  // Drops the candidates whose views are gone, for the answers that read every candidate.
  static void compact_candidates(RoomCandidates& found);
  // What each node and leaf would have free without the candidates (found once per candidates).
  const RoomObtainable& obtainable(RoomCandidates& found) const;
  // The candidates arranged node by node, or leaf by leaf (found once per candidates).
  const RoomArrangement& arrangement(RoomCandidates& found, bool by_leaf) const;
  // The running jobs make_room may take for `e`, sorted, found once per pass and kind of job.
  RoomCandidates& room_candidates(const Entry& e, bool reclaim, Seconds now,
                                  PassState& state) const;
  // Whether time slicing applies to the lane of `e`, and whether a running job may be sliced
  // for it now.
  [[nodiscard]] bool slices(const Entry& e) const;
  [[nodiscard]] bool has_slice_victim(const Entry& e, Seconds now, PassState& state) const;
  // Whether, `e` being refused for quota, none of its lane's later jobs can start in this pass:
  // `e` is one task that asks for no more of any resource than each task of the lane's jobs, takes
  // every GPU model of the pool, needs no NVLink domain, is of the lane's lowest priority (so the
  // later jobs rank no better and may slice no more) and has nothing held beside it for windows,
  // and no later job is of a window's class.
  [[nodiscard]] bool no_later_job_easier(const Entry& e, std::int64_t hold,
                                         const PassState& state) const;
  // Whether `e`, refused for quota, holds back its lane's later jobs (see the pass).
  [[nodiscard]] bool holds_lane(const Entry& e, Seconds now) const;
  // If it does, its tenant's later jobs wait behind it in this pass (quota refused `refused`).
  void hold_lane_if_due(const Entry& e, Seconds now, const PendingReason& refused,
                        PassState& state);
  // Preempts the victims make_room finds for `e` and starts it; false (remembered for the pass)
  // if there are none. With `admit_after` the admission is decided once the victims are gone.
  bool preempt_for(Entry& e, const GangRequest& request, bool reclaim, bool admit_after,
                   std::int64_t hold, StartAdmission admission, std::int64_t borrowed, Seconds now,
                   PassState& state, PassResult& out);
  // One waiting job in the walk, stage by stage (see the pass above): the gates, the windows
  // (window_verdict), quota admission, placement now, then making room or waiting.
  void evaluate(Entry& e, Seconds now, PassState& state, PassResult& out);
  // Gates: the job waits behind a blocked queue, its tenant's held lane or its tenant's budget
  // (true, its reason set).
  bool held_at_gate(Entry& e, Seconds now, PassState& state);
  // Quota admission (scheduler_admission.cc): on which models and how the book admits the job;
  // a job refused (or started by slicing its own tenant's work) is settled here.
  QuotaVerdict admit_for_quota(Entry& e, const WindowVerdict& window, Seconds now, PassState& state,
                               PassResult& out);
  // Placement (scheduler_placement.cc): starts the job where it fits now unless that would delay
  // the reservation (then it waits behind it); nullopt when so settled, otherwise why it does not
  // fit now.
  std::optional<PendingReason> try_to_place(Entry& e, const QuotaVerdict& quota,
                                            const WindowVerdict& window, Seconds now,
                                            PassState& state, PassResult& out);
  // The job did not fit (`unplaceable`): preemption may make room; otherwise it waits, may end
  // its lane for the pass, and the first such job may get the reservation.
  void wait_or_make_room(Entry& e, const QuotaVerdict& quota, const WindowVerdict& window,
                         const PendingReason& unplaceable, Seconds now, PassState& state,
                         PassResult& out);
  [[nodiscard]] std::int64_t whole_free_gpus(const ModelSet& models) const;
  void count_tasks(const Entry& e, int sign);
  // A job starts or stops running: its tenant's running jobs (tenant_running_) and those of them
  // the time slicer may stop for a checkpoint (tenant_checkpointing_).
  void add_running(const Entry& e);
  void remove_running(const Entry& e);
  // "08:00" for a time; midnight as "24:00" (the end of a day).
  [[nodiscard]] std::string time_of_day_text(Seconds t) const;

  Pool pool_;
  TenantBook book_;
  FairShareLedger ledger_;
  RuntimePredictor predictor_;
  // Jobs the last pass left waiting for room, in the order it considered them (expected_starts).
  std::vector<JobId> waiting_for_room_;
  SchedulerConfig config_;
  std::vector<std::unique_ptr<Entry>> entries_;  // an entry stays where it is until forgotten
  std::unordered_map<JobId, std::size_t> index_;
  std::vector<LaneShapes> lane_shapes_;        // per lane, what its jobs ask for at least
  std::vector<std::set<LaneKey>> lanes_;       // pending jobs; one lane per tenant under fair share
  std::vector<const LaneOrder*> lane_orders_;  // per lane
  std::vector<std::unique_ptr<LaneOrder>> orders_;          // one per LaneOrderKind
  std::set<std::pair<Seconds, std::uint32_t>> unpromoted_;  // (waiting since, id), to age
  std::set<JobId> running_;
  // Running jobs per tenant, by (priority class, id).
  std::vector<std::map<std::pair<int, std::uint32_t>, const Entry*>> tenant_running_;
  std::vector<int> tenant_checkpointing_;   // running, preemptible and checkpointing, per tenant
  std::vector<std::int64_t> tenant_usage_;  // milli-GPUs, per tenant
  std::vector<int> tenant_pending_;         // pending jobs, per tenant
  std::vector<std::int64_t> class_usage_;   // milli-GPUs, per JobClass
  std::vector<std::optional<PendingReason>> budget_exhausted_;  // per tenant
  std::set<TenantId> budget_lifted_;                            // since the last pass
  std::vector<Loan> loans_;
  // Running tasks per node admitted within guarantee, and by borrowing (segregate_borrowed).
  std::vector<int> guaranteed_tasks_;
  std::vector<int> borrowed_tasks_;
  // Per node, 1 while it runs no such task: the nodes segregation allows the other kind.
  std::vector<std::uint8_t> free_of_guaranteed_;
  std::vector<std::uint8_t> free_of_borrowed_;
  // Nodes with any such task (so that placement knows without a look at every node whether
  // segregation allows every node, or none).
  int nodes_with_guaranteed_ = 0;
  int nodes_with_borrowed_ = 0;
  std::vector<JobId> fresh_;  // submitted or requeued since the last pass
  bool cut_short_ = false;    // the last pass stopped at max_starts_per_pass
  std::unique_ptr<PlacementPolicy> fraction_policy_;
  mutable Rng fraction_rng_{0};
  std::unique_ptr<PlacementPolicy> gang_policy_;  // SchedulerConfig::gang_policy
  mutable Rng gang_rng_{0};
  PendingSeconds pending_total_{};
  // When a job that the last pass could not slice yet (min_slice_run, max_slice_loss) may be.
  std::optional<Seconds> slice_wakeup_;
  int pending_count_ = 0;
  Seconds accounted_until_ = 0;
  // The reference answer of making room (scheduler_detail::find_room_naively).
  bool room_naively_ = false;
  friend void scheduler_detail::find_room_naively(Scheduler& scheduler);
};

}  // namespace tidepool
