// Making room by preemption (the pass's preemption stage, see scheduler.h): which running jobs may
// be taken for a waiting one (reclaim, priority, least attained service, time slicing), in what
// order, and the fewest of them after which it fits.
#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "core/policies/placement_policy.h"
#include "core/scheduler.h"
#include "core/scheduler_pass_state.h"

namespace tidepool {
namespace {

using scheduler_detail::count_whole_free_gpus;
using scheduler_detail::may_fit;

// Reclaim may leave a borrowing tenant below its guarantee by at most 1/this of it (see make_room).
constexpr std::int64_t kReclaimSlackDivisor = 20;
// Of the victims chosen, at most this many (the last but one first) are tried back (see
// victims_until_fits).
constexpr std::size_t kPruneLimit = 16;

}  // namespace

namespace scheduler_detail {

void find_room_naively(Scheduler& scheduler) { scheduler.room_naively_ = true; }

}  // namespace scheduler_detail

std::vector<bool> Scheduler::borrowing_models() const {
  std::vector<bool> borrowing;
  if (!config_.quotas) return borrowing;
  const int models = book_.model_count();
  borrowing.reserve(static_cast<std::size_t>(book_.tenant_count()) *
                    static_cast<std::size_t>(models));
  for (int t = 0; t < book_.tenant_count(); ++t) {
    for (int m = 0; m < models; ++m) {
      borrowing.push_back(book_.borrowed(TenantId{static_cast<std::uint32_t>(t)},
                                         GpuModelId{static_cast<std::uint32_t>(m)}) > 0);
    }
  }
  return borrowing;
}

const std::vector<Scheduler::RunningView>& Scheduler::running_view(Seconds now,
                                                                   PassState& state) const {
  if (state.running_view) return *state.running_view;
  std::vector<RunningView>& view = state.running_view.emplace();
  state.view_borrowing = borrowing_models();
  const auto models = static_cast<std::size_t>(book_.model_count());
  auto borrows = [&](TenantId tenant, GpuModelId model) {
    const std::size_t at = tenant.value * models + model.value;
    return at < state.view_borrowing.size() && state.view_borrowing[at];
  };
  // The victim order first (each job's place in it), then each job's view, in that order.
  std::vector<std::pair<RoomCandidate, const Entry*>> keys;
  keys.reserve(running_.size());
  for (const auto& of_tenant : tenant_running_) {
    for (const auto& [key, v] : of_tenant) {
      // Never a job started in this pass: victims are taken before the starts they enable, and
      // it may not be sliced either.
      if (v->segment_start == now) continue;
      const TenantId tenant = v->job.tenant;
      const bool borrowing =
          std::any_of(v->charges.begin(), v->charges.end(),
                      [&](const ModelCharge& c) { return borrows(tenant, c.model); });
      keys.emplace_back(
          RoomCandidate{!borrowing, v->job.priority_class,
                        lost_if_preempted(*v, now) * whole_gpus(v->milli),
                        -lane_job(*v, now).attained_gpu_seconds, v->job.id.value, false},
          v);
    }
  }
  std::sort(keys.begin(), keys.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::int8_t> tenant_borrows(tenant_running_.size(), -1);  // found when first asked
  view.reserve(keys.size());
  for (const auto& [candidate, v] : keys) {
    RunningView& r = view.emplace_back();
    r.entry = v;
    r.candidate = candidate;
    r.tenant = v->job.tenant;
    r.preemptible = v->job.preemptible;
    r.gpus = whole_gpus(v->milli);
    r.borrowing = !candidate.not_borrowing;
    std::int8_t& any = tenant_borrows[v->job.tenant.value];
    if (any < 0) {
      any = 0;
      for (std::size_t m = 0; m < models; ++m) {
        if (borrows(v->job.tenant, GpuModelId{static_cast<std::uint32_t>(m)})) any = 1;
      }
    }
    r.tenant_borrows = any == 1;
    r.job = lane_job(*v, now);
    if (config_.las_preemption) {
      r.las_level = las_level(v->attained + whole_gpus(v->milli) * (now - v->segment_start));
    }
    // Only work that checkpoints, after its minimum run and close after a checkpoint.
    if (config_.time_slicing && lanes_.size() > 1 && v->job.preemptible &&
        v->job.checkpoint_interval) {
      r.sliceable_from = sliceable_from(*v, now);
    }
  }
  return view;
}

bool Scheduler::may_find_victims(const Entry& e, bool reclaim, bool slicing) const {
  if (config_.las_preemption) return true;
  // A job of a lower class runs (each tenant's running jobs are in priority order).
  if (config_.priority_preemption &&
      std::any_of(tenant_running_.begin(), tenant_running_.end(), [&](const auto& of_tenant) {
        return !of_tenant.empty() && of_tenant.begin()->first.first < e.job.priority_class;
      })) {
    return true;
  }
  // A tenant that borrows runs jobs.
  if ((reclaim || slicing) && config_.quotas) {
    for (std::size_t t = 0; t < tenant_running_.size(); ++t) {
      if (tenant_running_[t].empty()) continue;
      for (int m = 0; m < book_.model_count(); ++m) {
        if (book_.borrowed(TenantId{static_cast<std::uint32_t>(t)},
                           GpuModelId{static_cast<std::uint32_t>(m)}) > 0) {
          return true;
        }
      }
    }
  }
  // The tenant runs a job that checkpoints.
  if (!slicing || !config_.time_slicing || lanes_.size() <= 1 ||
      e.job.tenant.value >= tenant_running_.size()) {
    return false;
  }
  return tenant_checkpointing_[e.job.tenant.value] > 0;
}

const Scheduler::RunningIndex& Scheduler::running_index(Seconds now, PassState& state) const {
  const std::vector<RunningView>& view = running_view(now, state);
  if (state.running_index) return *state.running_index;
  RunningIndex& index = state.running_index.emplace();
  for (std::size_t i = 0; i < view.size(); ++i) {
    const RunningView& v = view[i];
    if (!v.preemptible) continue;
    const auto at = static_cast<std::uint32_t>(i);
    if (v.borrowing) {
      index.borrowing.push_back(at);
    } else if (v.sliceable_from) {
      index.own_sliceable[v.tenant].push_back(at);
    }
    if (!index.least_priority || v.candidate.priority < *index.least_priority) {
      index.least_priority = v.candidate.priority;
    }
  }
  return index;
}

void Scheduler::possible_victims(const Entry& e, bool reclaim, bool slicing, Seconds now,
                                 PassState& state, std::vector<std::uint32_t>& at) const {
  const RunningIndex& index = running_index(now, state);
  at.clear();
  // Any job may be taken under LAS preemption, and any of a lower class under priority
  // preemption; otherwise only a borrowing tenant's (reclaim, slicing) or the tenant's own
  // (slicing).
  const std::vector<RunningView>& view = *state.running_view;
  if (config_.las_preemption || (config_.priority_preemption && index.least_priority &&
                                 *index.least_priority < e.job.priority_class)) {
    at.reserve(view.size());
    for (std::size_t i = 0; i < view.size(); ++i) {
      if (!view[i].gone) at.push_back(static_cast<std::uint32_t>(i));
    }
    return;
  }
  const std::vector<std::uint32_t> none;
  const std::vector<std::uint32_t>& borrowing = reclaim || slicing ? index.borrowing : none;
  const auto own = slicing ? index.own_sliceable.find(e.job.tenant) : index.own_sliceable.end();
  const std::vector<std::uint32_t>& sliceable =
      own == index.own_sliceable.end() ? none : own->second;
  at.reserve(borrowing.size() + sliceable.size());
  std::merge(borrowing.begin(), borrowing.end(), sliceable.begin(), sliceable.end(),
             std::back_inserter(at));
  std::erase_if(at, [&](std::uint32_t i) { return view[i].gone; });
}

void Scheduler::running_changed(PassState& state, std::span<const JobId> preempted) const {
  state.slice_victims.clear();
  // What a view holds of a job does not change during a pass, except whether its tenant
  // borrows: while no tenant starts or stops borrowing a model, the view only loses the jobs
  // preempted (a job started in this pass is never in it), and so do the room candidates, which
  // are found from the view alone. Otherwise both are found anew.
  if (room_naively_ || !state.running_view || borrowing_models() != state.view_borrowing) {
    state.room_candidates.clear();
    state.running_index.reset();
    state.running_view.reset();
    if (!state.view_at.empty()) state.view_at = {};  // (clear() would keep the buckets)
    return;
  }
  // Where each job is in the view, found when the view first loses one.
  if (!preempted.empty() && state.view_at.empty()) {
    const std::vector<RunningView>& view = *state.running_view;
    state.view_at.reserve(view.size());
    for (std::size_t i = 0; i < view.size(); ++i) {
      state.view_at.emplace(view[i].entry->job.id.value, static_cast<std::uint32_t>(i));
    }
  }
  for (const JobId id : preempted) {
    const auto at = state.view_at.find(id.value);
    if (at == state.view_at.end()) continue;
    RunningView& v = (*state.running_view)[at->second];
    if (v.gone) continue;
    v.gone = true;
    // The same order without the last tie (slice, which differs between kinds of job: ids
    // are unique).
    auto before = [](const RoomCandidate& a, const RoomCandidate& b) {
      return std::tie(a.not_borrowing, a.priority, a.lost, a.neg_attained, a.id) <
             std::tie(b.not_borrowing, b.priority, b.lost, b.neg_attained, b.id);
    };
    for (auto& [kind, found] : state.room_candidates) {
      const auto it =
          std::lower_bound(found.sorted.begin(), found.sorted.end(), v.candidate, before);
      if (it == found.sorted.end() || it->id != v.candidate.id) continue;
      --found.count;
      found.offered -= v.gpus;
    }
  }
  // What the pool has free changed.
  for (auto& [kind, found] : state.room_candidates) {
    found.obtainable.reset();
    found.by_node.reset();
    found.by_leaf.reset();
  }
}

std::uint32_t Scheduler::next_left(RoomCandidates& found, std::uint32_t at) {
  const auto size = static_cast<std::uint32_t>(found.sorted.size());
  std::uint32_t left = at;
  while (left < size && found.views[left]->gone) left = std::max(left + 1, found.next_left[left]);
  for (std::uint32_t i = at; i < left;) {
    const std::uint32_t next = std::max(i + 1, found.next_left[i]);
    found.next_left[i] = left;
    i = next;
  }
  return left;
}

void Scheduler::compact_candidates(RoomCandidates& found) {
  if (found.count == found.sorted.size()) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < found.sorted.size(); ++i) {
    if (found.views[i]->gone) continue;
    found.sorted[kept] = found.sorted[i];
    found.views[kept] = found.views[i];
    ++kept;
  }
  found.sorted.resize(kept);
  found.views.resize(kept);
  found.next_left.resize(kept);
  for (std::size_t i = 0; i < kept; ++i) found.next_left[i] = static_cast<std::uint32_t>(i);
}

bool Scheduler::may_be_victim(const RunningView& v, const Entry& e) const {
  if (config_.las_preemption || tenant_running_.empty()) return true;
  return v.tenant == e.job.tenant || v.tenant_borrows ||
         (config_.priority_preemption && v.candidate.priority < e.job.priority_class);
}

bool Scheduler::may_be_sliced(const RunningView& v, TenantId tenant, Seconds now,
                              PassState& state) const {
  // Only of the same tenant or of one that borrows (make_room then takes no more than it
  // borrows).
  if (!v.sliceable_from || (v.tenant != tenant && !v.borrowing)) return false;
  if (*v.sliceable_from == now) return true;
  if (!state.slice_wakeup || *v.sliceable_from < *state.slice_wakeup) {
    state.slice_wakeup = v.sliceable_from;
  }
  return false;
}

Seconds Scheduler::sliceable_from(const Entry& v, Seconds now) const {
  const Seconds t = std::max(now, v.segment_start + config_.min_slice_run);
  const Seconds interval = v.job.checkpoint_interval.value_or(0);
  if (interval <= config_.max_slice_loss) return t;
  const Seconds since = lost_if_preempted(v, t);  // run since the last checkpoint at t
  return since <= config_.max_slice_loss ? t : t + (interval - since);
}

bool Scheduler::slice_rank_allows(const Entry& e, TenantId running_tenant,
                                  const LaneJob& running) const {
  const LaneOrder& order = lane_order(e);
  if (e.promoted && running_tenant == e.job.tenant) return order.sliceable(running);
  return order.may_slice(running, lane_rank(e));
}

Scheduler::RoomCandidates& Scheduler::room_candidates(const Entry& e, bool reclaim, Seconds now,
                                                      PassState& state) const {
  const int level = config_.las_preemption ? las_level(e.attained) : 0;
  const bool slicing = slices(e);
  const LaneRank slice_class = slicing ? lane_order(e).slice_class(lane_rank(e)) : LaneRank{};
  auto [it, fresh] = state.room_candidates.try_emplace(
      std::make_tuple(e.job.tenant.value, e.job.priority_class, reclaim, level, slicing, e.promoted,
                      slice_class.band, slice_class.value));
  RoomCandidates& found = it->second;
  if (!fresh || !may_find_victims(e, reclaim, slicing)) return found;
  // Waiting jobs of one slice class may stop the same running jobs (lane_order.h). The view is
  // in candidate order, and so are the candidates.
  const std::vector<RunningView>& view = running_view(now, state);
  std::vector<std::uint32_t>& possible = state.possible_victims;
  possible_victims(e, reclaim, slicing, now, state, possible);
  found.sorted.reserve(possible.size());
  found.views.reserve(possible.size());
  for (std::uint32_t at : possible) {
    const RunningView& v = view[at];
    if (!may_be_victim(v, e) || !v.preemptible) continue;
    const bool by_reclaim = reclaim && v.borrowing && v.tenant != e.job.tenant;
    const bool by_priority =
        config_.priority_preemption && v.candidate.priority < e.job.priority_class;
    const bool by_las = config_.las_preemption && v.las_level > level;
    const bool by_slice = slicing && may_be_sliced(v, e.job.tenant, now, state) &&
                          slice_rank_allows(e, v.tenant, v.job);
    if (!by_reclaim && !by_priority && !by_las && !by_slice) continue;
    RoomCandidate c = v.candidate;
    c.slice = by_slice && v.tenant == e.job.tenant && !by_priority && !by_las;
    found.sorted.push_back(c);
    found.views.push_back(&v);
    found.offered += v.gpus;
  }
  found.count = found.sorted.size();
  found.next_left.resize(found.count);
  for (std::size_t i = 0; i < found.count; ++i) found.next_left[i] = static_cast<std::uint32_t>(i);
  return found;
}

const Scheduler::RoomObtainable& Scheduler::obtainable(RoomCandidates& found) const {
  if (found.obtainable) return *found.obtainable;
  RoomObtainable& o = found.obtainable.emplace();
  o.node.assign(static_cast<std::size_t>(pool_.node_count()), 0);
  o.leaf.assign(pool_.topology().leaves.size(), 0);
  for (int n = 0; n < pool_.node_count(); ++n) {
    o.node[n] = pool_.state(NodeId{static_cast<std::uint32_t>(n)}).whole_free_gpus;
  }
  for (const RunningView* v : found.views) {
    for (const Assignment& at : v->entry->assignments)
      o.node[at.node.value] += gpu_set_size(at.gpus);
  }
  for (int n = 0; n < pool_.node_count(); ++n) {
    o.leaf[pool_.spec(NodeId{static_cast<std::uint32_t>(n)}).leaf.value] += o.node[n];
  }
  return o;
}

const Scheduler::RoomArrangement& Scheduler::arrangement(RoomCandidates& found,
                                                         bool by_leaf) const {
  std::optional<RoomArrangement>& cached = by_leaf ? found.by_leaf : found.by_node;
  if (cached) return *cached;
  const RoomObtainable& o = obtainable(found);
  RoomArrangement& a = cached.emplace();
  // The nodes that hold candidates, in arrangement order; then the candidates node by node, each
  // node's in candidate order (a counting sort by the node's place).
  const std::size_t count = found.sorted.size();
  std::vector<std::uint32_t> node_of(count);
  std::vector<std::uint32_t> nodes;
  std::vector<std::int32_t> place(static_cast<std::size_t>(pool_.node_count()), -1);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t node = found.views[i]->entry->assignments.front().node.value;
    node_of[i] = node;
    if (place[node] < 0) {
      place[node] = 0;
      nodes.push_back(node);
    }
  }
  auto leaf_of = [&](std::uint32_t node) { return pool_.spec(NodeId{node}).leaf.value; };
  using Key = std::tuple<std::int64_t, std::uint32_t, std::int64_t, std::uint32_t>;
  auto key = [&](std::uint32_t node) {
    const std::uint32_t leaf = by_leaf ? leaf_of(node) : 0;
    return Key{by_leaf ? -o.leaf[leaf] : 0, leaf, -o.node[node], node};
  };
  std::sort(nodes.begin(), nodes.end(),
            [&](std::uint32_t x, std::uint32_t y) { return key(x) < key(y); });
  std::vector<std::uint32_t> first(nodes.size() + 1, 0);  // each node's first slot
  for (std::size_t r = 0; r < nodes.size(); ++r) place[nodes[r]] = static_cast<std::int32_t>(r);
  for (std::size_t i = 0; i < count; ++i) ++first[static_cast<std::size_t>(place[node_of[i]]) + 1];
  for (std::size_t r = 1; r < first.size(); ++r) first[r] += first[r - 1];
  a.candidates.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    a.candidates[first[static_cast<std::size_t>(place[node_of[i]])]++] = found.sorted[i];
  }
  if (by_leaf) {
    for (std::uint32_t node : nodes) {
      const std::uint32_t leaf = leaf_of(node);
      if (a.leaves.empty() || a.leaves.back() != leaf) a.leaves.push_back(leaf);
    }
  }
  return a;
}

std::optional<std::pair<std::vector<JobId>, GangPlacement>> Scheduler::make_room(
    const Entry& e, const GangRequest& request, bool reclaim, bool admit_after, std::int64_t hold,
    Seconds now, PassState& state) {
  RoomCandidates& found = room_candidates(e, reclaim, now, state);
  if (found.count == 0) return std::nullopt;
  if (whole_free_gpus(request.task.models) + found.offered < whole_gpus(e.milli) + hold) {
    return std::nullopt;
  }
  // Reclaim takes from a tenant while it borrows, and never leaves it further below its
  // guarantee than the job's tenant is now: every reclaim lowers the largest shortfall of the two,
  // so reclaims cannot chase each other in circles.
  std::int64_t shortfall = 0;  // the job's tenant: guarantee - usage, over the models it accepts
  for (int m = 0; m < book_.model_count(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    if (!request.task.models.accepts(model)) continue;
    shortfall += book_.guaranteed(e.job.tenant, model) - book_.usage(e.job.tenant, model);
  }
  // A gang that must sit on one node needs a node cleared: take the victims node by node, the
  // nodes that free the most GPUs first, each node's victims in candidate order. A gang of
  // multi-GPU tasks over several nodes needs whole nodes close together: the same, leaf by leaf,
  // the leaves that free the most GPUs first.
  const bool one_node = request.topology.requires_level(TopologyLevel::kNode) ||
                        (request.task_count == 1 && request.task.gpu_count > 1);
  const bool by_leaf = !one_node && request.task.gpu_count > 1;
  if (!one_node && !by_leaf && !room_naively_) {
    if (auto room = room_in_place(e, request, found, shortfall, admit_after, hold)) return *room;
  }
  compact_candidates(found);
  std::vector<std::uint32_t> holding_leaves;  // by_leaf: leaves that might hold the whole gang
  const std::vector<RoomCandidate>* arranged = &found.sorted;
  if (one_node || by_leaf) {
    const RoomObtainable& o = obtainable(found);
    std::int64_t most_on_a_node = 0;  // of a model the job accepts
    for (int n = 0; n < pool_.node_count(); ++n) {
      if (request.task.models.accepts(pool_.spec(NodeId{static_cast<std::uint32_t>(n)}).model)) {
        most_on_a_node = std::max(most_on_a_node, o.node[n]);
      }
    }
    // No node would hold the gang even with every candidate on it gone.
    if (one_node && !request.task.is_fractional() &&
        most_on_a_node < std::int64_t{request.task_count} * request.task.gpu_count) {
      return std::nullopt;
    }
    const RoomArrangement& a = arrangement(found, by_leaf);
    arranged = &a.candidates;
    for (std::uint32_t leaf : a.leaves) {
      if (by_leaf && o.leaf[leaf] >= whole_gpus(e.milli)) {
        holding_leaves.push_back(leaf);  // the roomiest first
      }
    }
  }
  const std::vector<RoomCandidate>& candidates = *arranged;
  // The candidates of `among` that may be taken, in order.
  auto takeable = [&](const std::vector<RoomCandidate>& among) {
    std::vector<std::uint32_t> order;
    order.reserve(among.size());
    std::vector<std::int64_t> taken(static_cast<std::size_t>(book_.tenant_count()), 0);
    for (const RoomCandidate& c : among) {
      if (may_take(e, entry(JobId{c.id}), c.slice, shortfall, taken)) order.push_back(c.id);
    }
    return order;
  };
  const std::vector<std::uint32_t> order = takeable(candidates);
  if (order.empty()) return std::nullopt;

  // A gang that one leaf could hold is tried in such leaves first, the roomiest first (that
  // leaf's victims only, the gang required within it), so that the room made for it is compact
  // (HiveD and Tiresias place gangs within a leaf for the same reason); anywhere otherwise.
  if (!request.topology.requires_level(TopologyLevel::kLeaf)) {
    GangRequest compact = request;
    compact.topology = {TopologyLevel::kLeaf, TopologyStrength::kRequired};
    for (std::uint32_t leaf : holding_leaves) {
      std::vector<RoomCandidate> of_leaf;
      for (const RoomCandidate& c : candidates) {
        const Entry& v = entry(JobId{c.id});
        if (std::all_of(v.assignments.begin(), v.assignments.end(), [&](const Assignment& a) {
              return pool_.spec(a.node).leaf.value == leaf;
            })) {
          of_leaf.push_back(c);
        }
      }
      const std::vector<std::uint32_t> in_leaf = takeable(of_leaf);
      if (in_leaf.empty()) continue;
      if (auto room = victims_until_fits(e, compact, in_leaf, admit_after, hold)) return room;
    }
  }
  return victims_until_fits(e, request, order, admit_after, hold);
}

bool Scheduler::may_take(const Entry& e, const Entry& v, bool slice, std::int64_t shortfall,
                         std::vector<std::int64_t>& taken) const {
  const bool only_reclaim =
      v.job.priority_class >= e.job.priority_class && !config_.las_preemption && !slice;
  if (!only_reclaim || !config_.quotas) return true;
  std::int64_t borrowed = 0;
  for (const ModelCharge& ch : v.charges) borrowed += book_.borrowed(v.job.tenant, ch.model);
  if (v.job.tenant.value >= taken.size()) taken.resize(v.job.tenant.value + 1, 0);
  std::int64_t& taken_of = taken[v.job.tenant.value];
  const std::int64_t after = taken_of + v.milli - borrowed;  // its shortfall then
  std::int64_t guaranteed = 0;
  for (const ModelCharge& ch : v.charges) guaranteed += book_.guaranteed(v.job.tenant, ch.model);
  const bool within =
      after <= 0 || (after < shortfall && after * kReclaimSlackDivisor <= guaranteed);
  if (taken_of >= borrowed || !within) return false;
  taken_of += v.milli;
  return true;
}

bool Scheduler::restorable(const Entry& v) const {
  return !v.job.gang.task.is_mig() &&
         std::all_of(v.assignments.begin(), v.assignments.end(),
                     [&](const Assignment& a) { return pool_.schedulable(a.node); });
}

void Scheduler::release_for_trial(const Entry& v) {
  for (const Assignment& a : v.assignments) (void)pool_.release(v.job.gang.task, a);
}

void Scheduler::restore_after_trial(const Entry& v) {
  for (const Assignment& a : v.assignments) (void)pool_.allocate(v.job.gang.task, a);
}

bool Scheduler::places_without_draws() const {
  return config_.placement != PlacementRule::kTopology || !gang_policy_ ||
         gang_policy_->places_among();
}

std::optional<std::optional<Scheduler::Room>> Scheduler::room_in_place(
    const Entry& e, const GangRequest& request, RoomCandidates& found, std::int64_t shortfall,
    bool admit_after, std::int64_t hold) {
  const TaskShape& task = request.task;
  if (admit_after || request.task_count != 1 || task.gpu_count != 1 || task.is_fractional() ||
      task.is_mig() || e.job.replica_of || !places_without_draws()) {
    return std::nullopt;
  }
  // victims_until_fits asks first whether the job fits without every victim, then releases them
  // one by one until it fits. For one task of whole GPUs, placed without draws, fitting only gets
  // easier as victims go (a node that fits the task fits it with more free), so the first prefix
  // after which it fits is its answer, and none is when it does not fit without them all: the
  // same answer without the first question, found on the pool itself.
  std::vector<const Entry*> chosen;
  auto restore_chosen = [&] {
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) restore_after_trial(**it);
  };
  auto fits = [&]() -> std::optional<GangPlacement> {
    if (!may_fit(pool_, request)) return std::nullopt;
    if (hold > 0 && count_whole_free_gpus(pool_, ModelSet::any()) - whole_gpus(e.milli) < hold) {
      return std::nullopt;
    }
    auto placed = place(pool_, e.job, request);
    if (!placed) return std::nullopt;
    return std::move(*placed);
  };
  std::vector<std::int64_t> taken(static_cast<std::size_t>(book_.tenant_count()), 0);
  std::optional<GangPlacement> placed;
  const auto size = static_cast<std::uint32_t>(found.sorted.size());
  for (std::uint32_t i = next_left(found, 0); i < size; i = next_left(found, i + 1)) {
    const Entry& v = *found.views[i]->entry;
    if (!may_take(e, v, found.sorted[i].slice, shortfall, taken)) continue;
    if (!restorable(v)) {
      restore_chosen();
      return std::nullopt;
    }
    release_for_trial(v);
    chosen.push_back(&v);
    if ((placed = fits())) break;
  }
  if (!placed) {
    restore_chosen();
    return std::optional<Room>{};
  }
  // The victims not needed after all keep running, as in victims_until_fits.
  for (std::size_t i = chosen.size() - 1, tried = 0; i-- > 0 && tried < kPruneLimit; ++tried) {
    restore_after_trial(*chosen[i]);
    if (fits()) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      release_for_trial(*chosen[i]);
    }
  }
  placed = fits();
  restore_chosen();
  if (!placed) return std::optional<Room>{};
  Room room;
  room.first.reserve(chosen.size());
  for (const Entry* v : chosen) room.first.push_back(v->job.id);
  room.second = std::move(*placed);
  return room;
}

std::optional<Scheduler::Room> Scheduler::victims_until_fits_in_place(
    const Entry& e, const GangRequest& request, const std::vector<const Entry*>& order,
    bool admit_after, std::int64_t hold) {
  // victims_until_fits, step by step, with the pool itself in the trial (the book still a copy):
  // the same placements asked on the same pool states, without a copy of the pool or a
  // placement index built for one.
  auto refund_into = [&](TenantBook& book, const Entry& v) {
    for (const ModelCharge& ch : v.charges) (void)book.refund(v.job.tenant, ch.model, ch.milli);
  };
  auto admitted_models = [&](const TenantBook& book) {
    ModelSet admitted = ModelSet::none();
    for (const Admission& a : book.assess(e.job.tenant, request.task.models, e.milli)) {
      if (a.admitted()) admitted.add(a.model);
    }
    return admitted;
  };
  auto fits = [&](const std::optional<TenantBook>& book) -> std::optional<GangPlacement> {
    GangRequest admitted_request = request;
    if (book) {
      admitted_request.task.models = admitted_models(*book);
      if (admitted_request.task.models.is_none()) return std::nullopt;
    }
    if (!may_fit(pool_, admitted_request)) return std::nullopt;
    if (hold > 0 && count_whole_free_gpus(pool_, ModelSet::any()) - whole_gpus(e.milli) < hold) {
      return std::nullopt;
    }
    auto placed = place(pool_, e.job, admitted_request);
    if (!placed) return std::nullopt;
    return std::move(*placed);
  };
  {
    std::optional<TenantBook> book;
    if (admit_after) {
      book = book_;
      for (const Entry* v : order) refund_into(*book, *v);
      if (admitted_models(*book).is_none()) return std::nullopt;
    }
    for (const Entry* v : order) release_for_trial(*v);
    const bool fits_without_all = fits(book).has_value();
    for (auto it = order.rbegin(); it != order.rend(); ++it) restore_after_trial(**it);
    if (!fits_without_all) return std::nullopt;
  }
  std::optional<TenantBook> book;
  if (admit_after) book = book_;
  std::vector<const Entry*> chosen;
  auto restore_chosen = [&] {
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) restore_after_trial(**it);
  };
  std::optional<GangPlacement> placed;
  for (const Entry* v : order) {
    release_for_trial(*v);
    if (book) refund_into(*book, *v);
    chosen.push_back(v);
    if ((placed = fits(book))) break;
  }
  if (!placed) {
    restore_chosen();
    return std::nullopt;
  }
  for (std::size_t i = chosen.size() - 1, tried = 0; i-- > 0 && tried < kPruneLimit; ++tried) {
    const Entry& v = *chosen[i];
    restore_after_trial(v);
    if (book) {
      for (const ModelCharge& ch : v.charges) {
        (void)book->record_usage(v.job.tenant, ch.model, ch.milli);
      }
    }
    if (fits(book)) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      release_for_trial(v);
      if (book) refund_into(*book, v);
    }
  }
  placed = fits(book);
  restore_chosen();
  if (!placed) return std::nullopt;
  Room room;
  room.first.reserve(chosen.size());
  for (const Entry* v : chosen) room.first.push_back(v->job.id);
  room.second = std::move(*placed);
  return room;
}

std::optional<std::pair<std::vector<JobId>, GangPlacement>> Scheduler::victims_until_fits(
    const Entry& e, const GangRequest& request, const std::vector<std::uint32_t>& order,
    bool admit_after, std::int64_t hold) {
  if (!room_naively_) {
    std::vector<const Entry*> victims;
    victims.reserve(order.size());
    for (std::uint32_t id : order) victims.push_back(&entry(JobId{id}));
    if (std::all_of(victims.begin(), victims.end(),
                    [&](const Entry* v) { return restorable(*v); })) {
      return victims_until_fits_in_place(e, request, victims, admit_after, hold);
    }
  }
  // The trial pool (and book, when the job's admission depends on the victims) without a set of
  // victims, and whether the job then fits.
  struct Trial {
    Pool pool;
    std::optional<TenantBook> book;
  };
  auto refund_into = [&](TenantBook& book, std::uint32_t id) {
    const Entry& v = entry(JobId{id});
    for (const ModelCharge& ch : v.charges) (void)book.refund(v.job.tenant, ch.model, ch.milli);
  };
  auto release_from = [&](Pool& pool, std::uint32_t id) {
    const Entry& v = entry(JobId{id});
    for (const Assignment& a : v.assignments) (void)pool.release(v.job.gang.task, a);
  };
  // The pool (and book, when admission depends on the victims) as they are now.
  auto as_now = [&] {
    Trial t{pool_, std::nullopt};
    if (admit_after) t.book = book_;
    return t;
  };
  auto release_into = [&](Trial& t, std::uint32_t id) {
    release_from(t.pool, id);
    if (t.book) refund_into(*t.book, id);
  };
  // The models the book admits the job on (none: refused).
  auto admitted_models = [&](const TenantBook& book) {
    ModelSet admitted = ModelSet::none();
    for (const Admission& a : book.assess(e.job.tenant, request.task.models, e.milli)) {
      if (a.admitted()) admitted.add(a.model);
    }
    return admitted;
  };
  auto fits = [&](const Trial& t) -> std::optional<GangPlacement> {
    // With the book in the trial, the job goes only on models the book then admits it on.
    GangRequest admitted_request = request;
    if (t.book) {
      admitted_request.task.models = admitted_models(*t.book);
      if (admitted_request.task.models.is_none()) return std::nullopt;
    }
    if (!may_fit(t.pool, admitted_request)) return std::nullopt;
    if (hold > 0 && count_whole_free_gpus(t.pool, ModelSet::any()) - whole_gpus(e.milli) < hold) {
      return std::nullopt;
    }
    auto placed = place(t.pool, e.job, admitted_request);
    if (!placed) return std::nullopt;
    return std::move(*placed);
  };
  // Room only grows with each victim released: if the job does not fit without all of them, no
  // prefix makes room (the common answer, found with one placement instead of one per victim;
  // when the book decides, it is asked first, without copying the pool).
  {
    std::optional<TenantBook> book;
    if (admit_after) {
      book = book_;
      for (std::uint32_t id : order) refund_into(*book, id);
      if (admitted_models(*book).is_none()) return std::nullopt;
    }
    Trial all{pool_, std::move(book)};
    for (std::uint32_t id : order) release_from(all.pool, id);  // the book is refunded above
    if (!fits(all)) return std::nullopt;
  }
  Trial trial = as_now();
  // Victims in order until the job fits.
  std::vector<JobId> chosen;
  std::optional<GangPlacement> placed;
  for (std::uint32_t id : order) {
    release_into(trial, id);
    chosen.push_back(JobId{id});
    if ((placed = fits(trial))) break;
  }
  if (!placed) return std::nullopt;
  // Keep running the victims that are not needed after all (the last one is): each in turn goes
  // back into the trial (the pool and book without the chosen victims) and stays running if the
  // job still fits; otherwise it is released again.
  auto restore_into = [&](Trial& t, std::uint32_t id) {
    const Entry& v = entry(JobId{id});
    for (std::size_t k = 0; k < v.assignments.size(); ++k) {
      if (!t.pool.allocate(v.job.gang.task, v.assignments[k])) {
        // Not on the node it ran on (a cordoned node takes no task back): as it was.
        for (std::size_t j = 0; j < k; ++j) (void)t.pool.release(v.job.gang.task, v.assignments[j]);
        return false;
      }
    }
    if (t.book) {
      for (const ModelCharge& ch : v.charges)
        (void)t.book->record_usage(v.job.tenant, ch.model, ch.milli);
    }
    return true;
  };
  for (std::size_t i = chosen.size() - 1, tried = 0; i-- > 0 && tried < kPruneLimit; ++tried) {
    if (!restore_into(trial, chosen[i].value)) {
      // A copy of the pool and book without the other victims instead.
      Trial rest = as_now();
      for (std::size_t j = 0; j < chosen.size(); ++j) {
        if (j != i) release_into(rest, chosen[j].value);
      }
      if (fits(rest)) {
        chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
        trial = std::move(rest);
      }
      continue;
    }
    if (fits(trial)) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      release_into(trial, chosen[i].value);
    }
  }
  placed = fits(trial);
  if (!placed) return std::nullopt;
  return std::make_pair(std::move(chosen), std::move(*placed));
}

bool Scheduler::slices(const Entry& e) const {
  return config_.time_slicing && lanes_.size() > 1 && lane_order(e).slices();
}

bool Scheduler::has_slice_victim(const Entry& e, Seconds now, PassState& state) const {
  const LaneOrder& order = lane_order(e);
  auto [it, fresh] = state.slice_victims.try_emplace(e.job.tenant);
  PassState::SliceVictims& found = it->second;
  if (fresh && may_find_victims(e, false, true)) {
    // clearly_ahead is monotone in the running rank: the job ranked last decides.
    const std::vector<RunningView>& view = running_view(now, state);
    std::vector<std::uint32_t>& possible = state.possible_victims;
    possible_victims(e, false, true, now, state, possible);
    for (std::uint32_t at : possible) {
      const RunningView& v = view[at];
      if (!may_be_victim(v, e) || !may_be_sliced(v, e.job.tenant, now, state) ||
          !order.sliceable(v.job)) {
        continue;
      }
      const LaneRank rank = order.rank(v.job);
      if (!found.last || *found.last < rank) found.last = rank;
      found.own = found.own || v.tenant == e.job.tenant;
    }
  }
  // A promoted job may stop any of its own tenant's (slice_rank_allows).
  if (e.promoted && found.own) return true;
  return found.last && order.clearly_ahead(lane_rank(e), *found.last);
}

void Scheduler::wait_or_make_room(Entry& e, const QuotaVerdict& quota, const WindowVerdict& window,
                                  const PendingReason& unplaceable, Seconds now, PassState& state,
                                  PassResult& out) {
  const Job& job = e.job;
  const bool may_reclaim = config_.reclaim && config_.quotas && quota.within_guarantee;
  const bool may_preempt =
      may_reclaim || config_.priority_preemption || config_.las_preemption || slices(e);
  if (may_preempt && preempt_for(e, quota.request, may_reclaim, quota.refused.has_value(),
                                 window.hold, quota.admission, quota.borrowed, now, state, out)) {
    return;
  }

  set_reason(e, now, unplaceable);
  if (quota.refused) {
    // A promoted job that needs more than its tenant's guarantee holds its lane too (its
    // tenant's usage drains to it); in fifo lanes small jobs go on around such a job.
    if (lanes_.size() > 1 && lane_order(e).kind() != LaneOrderKind::kFifo) {
      hold_lane_if_due(e, now, *quota.refused, state);
    }
    return;
  }
  if (window.reason) {
    // An open window holds every free GPU, and this job may not reclaim: the later jobs of its
    // lane (same tenant, no higher priority) can do no better in this pass.
    if (lanes_.size() > 1 && window.hold_open && !may_reclaim &&
        whole_free_gpus(job.gang.task.models) <= window.hold) {
      state.lane_done[e.lane] = *window.reason;
    }
    return;
  }
  if (config_.backfill && !state.reservation) state.reservation = reserve(e, quota.request, now);
}

bool Scheduler::preempt_for(Entry& e, const GangRequest& request, bool reclaim, bool admit_after,
                            std::int64_t hold, StartAdmission admission, std::int64_t borrowed,
                            Seconds now, PassState& state, PassResult& out) {
  const Job& job = e.job;
  // Jobs alike in all that making room reads share its answer: the gang's shape (the models
  // admitted included) and topology, what must stay free beside it, the tenant and priority, the
  // rules that apply and, for slicing, promotion and the slice class of its own rank (a promoted
  // job may slice other tenants' jobs only as its rank allows).
  const LaneRank slice_class = slices(e) ? lane_order(e).slice_class(lane_rank(e)) : LaneRank{};
  const int level = config_.las_preemption ? las_level(e.attained) : 0;
  const auto room_key =
      std::make_tuple(job.tenant.value, request.task_count, request.task, job.priority_class, hold,
                      reclaim, admit_after, level, e.promoted, slice_class.band, slice_class.value,
                      static_cast<std::uint8_t>(request.topology.level),
                      static_cast<std::uint8_t>(request.topology.strength));
  if (state.no_room.contains(room_key)) return false;
  auto room = make_room(e, request, reclaim, admit_after, hold, now, state);
  if (!room) {
    state.no_room.insert(room_key);
    return false;
  }
  for (JobId victim : room->first) {
    Entry& v = entry(victim);
    const PreemptionCause cause =
        v.job.priority_class < job.priority_class ? PreemptionCause::kPriority
        : config_.las_preemption                  ? PreemptionCause::kLeastAttained
        : reclaim && v.job.tenant != job.tenant   ? PreemptionCause::kReclaim
                                                  : PreemptionCause::kTimeSlice;
    out.preempted.push_back(preempt(v, now, cause, job.id));
  }
  if (admit_after && config_.quotas && e.milli > 0) {
    // Admitted once the victims are gone: within guarantee or borrowing, on the model placed.
    const GpuModelId model = pool_.spec(room->second.assignments.front().node).model;
    const Admission a = book_.assess(job.tenant, model, e.milli);
    borrowed = a.borrowed_milli;
    admission = borrowed == 0 ? StartAdmission::kWithinGuarantee : StartAdmission::kBorrowing;
  }
  start(e, room->second, now, admission, borrowed, false, out);
  state.admissions.clear();
  state.unplaceable.clear();
  state.not_kept_apart.clear();
  state.no_room.clear();
  running_changed(state, room->first);
  return true;
}

}  // namespace tidepool
