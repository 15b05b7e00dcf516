// The scheduler's private pass-time types and helpers, shared by the files that implement
// Scheduler, a file per stage of the pass: scheduler.cc (the pass, its gates and the
// bookkeeping), scheduler_windows.cc (tidal windows), scheduler_admission.cc (quota admission),
// scheduler_placement.cc (placement, reservation and backfill), scheduler_make_room.cc (making
// room by preemption, or waiting). Not part of the core's interface: include it only from those
// files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/gang_placement.h"
#include "core/pool.h"
#include "core/scheduler.h"

namespace tidepool {
namespace scheduler_detail {

// Whole free GPUs on the nodes of `pool` whose model `models` accepts.
std::int64_t count_whole_free_gpus(const Pool& pool, const ModelSet& models);

// A cheap necessary condition for `request` to fit `pool`: enough whole free GPUs of its models
// on one node (when it must sit on one node), under one leaf (when it must sit under one leaf),
// or in the pool. Placement is only tried when it holds.
bool may_fit(const Pool& pool, const GangRequest& request);

// Tests only: `scheduler` makes room the plain way from now on, the reference that the pass's
// answers must equal: the running view and the room candidates found anew after every start and
// preemption, and victims always tried on copies of the pool rather than on the pool itself
// (room_in_place, victims_until_fits_in_place).
void find_room_naively(Scheduler& scheduler);

}  // namespace scheduler_detail

// A running job that make_room may take, in the order it takes them: borrowing tenants first,
// lower priority, least work lost since the last checkpoint, most attained service, id.
struct Scheduler::RoomCandidate {
  bool not_borrowing;
  int priority;
  std::int64_t lost;
  std::int64_t neg_attained;
  std::uint32_t id;
  bool slice;  // stopped for its own tenant's work (time slicing)
  auto operator<=>(const RoomCandidate&) const = default;
  // The same order, spelled out so that sorting compares inline.
  friend bool operator<(const RoomCandidate& a, const RoomCandidate& b) {
    if (a.not_borrowing != b.not_borrowing) return b.not_borrowing;
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.lost != b.lost) return a.lost < b.lost;
    if (a.neg_attained != b.neg_attained) return a.neg_attained < b.neg_attained;
    if (a.id != b.id) return a.id < b.id;
    return !a.slice && b.slice;
  }
};

// A running job as making room sees it during a pass.
struct Scheduler::RunningView {
  const Entry* entry = nullptr;
  RoomCandidate candidate{};  // its place in the order of victims (slice: false)
  // Of its entry, at hand (making room reads them for every view).
  TenantId tenant;
  bool preemptible = false;
  std::int64_t gpus = 0;  // whole GPUs
  // A view holds no job started in this pass.
  bool borrowing = false;       // its tenant borrows a model it holds
  bool tenant_borrows = false;  // its tenant borrows some model
  LaneJob job;                  // as its lane's order sees it now
  int las_level = 0;            // of its attained service now (under LAS preemption)
  // Time slicing: when it may be sliced (now or later: sliceable_from); none if never.
  std::optional<Seconds> sliceable_from;
  // Preempted in this pass: no longer a victim. A view is marked rather than erased, so that the
  // positions the index and the room candidates hold stay valid while the view only loses jobs.
  bool gone = false;
};

// Where in the pass's running view the jobs that making room may take can be (positions in the
// view, increasing): no other view is a room candidate or a slice victim, unless LAS preemption
// or priority preemption of a job of a lower class than `least_priority` may take any job. Found
// once per view: positions of views gone since stay listed (readers skip them), and
// `least_priority` may then be lower than that of the views left (a superset still).
struct Scheduler::RunningIndex {
  std::vector<std::uint32_t> borrowing;  // preemptible, of a tenant that borrows a model it holds
  std::map<TenantId, std::vector<std::uint32_t>> own_sliceable;  // per tenant: may be sliced
  std::optional<int> least_priority;                             // of the preemptible jobs
};

// Whole GPUs that would be free on each node, and under each leaf, without the room candidates.
struct Scheduler::RoomObtainable {
  std::vector<std::int64_t> node;
  std::vector<std::int64_t> leaf;
};

// Room candidates arranged for a gang that needs a node (or a leaf) cleared: node by node (leaf
// by leaf), the nodes (leaves) that would free the most GPUs first, each node's in candidate
// order.
struct Scheduler::RoomArrangement {
  std::vector<RoomCandidate> candidates;
  std::vector<std::uint32_t> leaves;  // by leaf: the leaves, in the candidates' order
};

// The candidates of one kind of waiting job, found once per running view: while the view only
// loses jobs (preempted), so do the candidates, in the same order. A candidate whose view is gone
// stays in `sorted` and `views` until an answer needs them compact (compact_candidates); `count`
// and `offered` are of those left.
struct Scheduler::RoomCandidates {
  std::vector<RoomCandidate> sorted;
  std::vector<const RunningView*> views;  // of each candidate (the pass's running view)
  std::size_t count = 0;                  // candidates left
  std::int64_t offered = 0;               // their whole GPUs
  // Per position, a position at or before the next candidate left (path-compressed, so that a
  // walk skips gone candidates in amortised constant time): the position itself while it is left.
  std::vector<std::uint32_t> next_left;
  // Found when first asked for, and again after each change of the pool.
  std::optional<RoomObtainable> obtainable;
  std::optional<RoomArrangement> by_node;
  std::optional<RoomArrangement> by_leaf;
};

// What the windows in effect ask of a waiting job (Scheduler::window_verdict).
struct Scheduler::WindowVerdict {
  bool admitted = false;   // of a window's class, within what the window protects
  std::int64_t hold = 0;   // whole GPUs to leave free beside it
  bool hold_open = false;  // some of the hold is of a window open now (not in its drain lead)
  std::optional<PendingReason> reason;  // when fewer are free than the job and the hold
};

// What the quota stage decided for a waiting job (Scheduler::admit_for_quota).
struct Scheduler::QuotaVerdict {
  bool settled = false;  // started by slicing, or waits for quota (its reason set)
  GangRequest request;   // the job's gang, on the models the book admits it on
  StartAdmission admission = StartAdmission::kNoQuota;
  std::int64_t borrowed = 0;  // milli-GPUs above the tenant's guarantee
  bool within_guarantee = false;
  // Refused for the part above the guarantee: it may start only if reclaim makes room in the
  // pool and in the book.
  std::optional<PendingReason> refused;
};

// What one pass knows beyond the scheduler's state.
struct Scheduler::PassState {
  std::map<std::tuple<std::uint32_t, std::uint64_t, bool, std::int64_t>,
           std::pair<std::vector<Admission>, PendingReason>>
      admissions;  // cleared when the book changes
  std::map<std::tuple<int, TaskShape, std::uint8_t, std::uint8_t>, PendingReason>
      unplaceable;  // cleared when capacity is freed
  // Single-task shapes (and whether the job borrows) that found no room on the nodes
  // segregate_borrowed keeps them to: as the pool only fills and those nodes only get fewer
  // until capacity is freed, they would find none again (cleared with `unplaceable`).
  std::set<std::tuple<int, TaskShape, std::uint8_t, std::uint8_t, bool>> not_kept_apart;
  std::set<std::tuple<std::uint32_t, int, TaskShape, int, std::int64_t, bool, bool, int, bool,
                      std::int64_t, std::int64_t, std::uint8_t, std::uint8_t>>
      no_room;  // make_room failures (see preempt_for)
  // Per tenant, the running jobs that may be sliced for its waiting jobs: the rank, by its lane's
  // order, of the one ranked last (nullopt: none), and whether one is its own; cleared when jobs
  // start or stop.
  struct SliceVictims {
    std::optional<LaneRank> last;
    bool own = false;
  };
  std::map<TenantId, SliceVictims> slice_victims;
  // make_room's candidates per (tenant, priority, reclaim, LAS level, slicing, promoted, slice
  // class).
  std::map<std::tuple<std::uint32_t, int, bool, int, bool, bool, std::int64_t, std::int64_t>,
           RoomCandidates>
      room_candidates;
  // The running jobs as making room sees them (Scheduler::running_view), and which tenants
  // borrowed which models when it was found (per tenant, per model).
  std::optional<std::vector<RunningView>> running_view;
  // Job id -> position in the view, found when the view first loses a job.
  std::unordered_map<std::uint32_t, std::uint32_t> view_at;
  std::vector<bool> view_borrowing;
  std::optional<RunningIndex> running_index;    // of running_view, found when first asked for
  std::vector<std::uint32_t> possible_victims;  // Scheduler::possible_victims' answer, reused
  std::optional<Reservation> reservation;
  std::optional<Seconds> slice_wakeup;               // see may_be_sliced
  std::map<TenantId, PendingReason> tenant_blocked;  // tenants whose quota head waits
  // Lanes with nothing more to start in this pass, and the reason their new jobs get.
  std::vector<std::optional<PendingReason>> lane_done;
  std::map<std::pair<std::size_t, std::int64_t>, PendingReason> window_reasons;
  std::optional<JobId> blocking;  // head-of-line: the first job that waits
  PendingReason blocked_reason;
  struct Window {
    const TidalWindow* window = nullptr;
    bool open = false;
    Seconds opens_at = 0;   // when closed: the next opening
    Seconds closes_at = 0;  // when open
  };
  std::vector<Window> windows;
};

}  // namespace tidepool
