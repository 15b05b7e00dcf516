// The nodes the control plane knows, in one table: the nodes of the cluster file (the pool's) and
// the nodes rented for jobs' tasks (burst_desk.h), each with what its agent said and when. The
// table keeps the rules of the nodes' lives: an agent registers its node (checked against the
// cluster file) and sends heartbeats; an admin drains a node and undrains it; a node whose agent
// falls silent past the heartbeat timeout is NotReady (cordoned) until it is heard from again.
// What each node should run, and its GPUs' telemetry, are answered to its heartbeats.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/agent_wire.h"
#include "server/gpu_telemetry.h"
#include "server/market_clerk.h"
#include "server/plane_state.h"

namespace tidepool {

enum class NodeKind : std::uint8_t {
  kCluster,  // a node of the cluster file: the pool's scheduler places jobs there
  kRented,   // rented from a burst provider for one task of one job
};

struct PlaneNode {
  std::string name;
  NodeKind kind = NodeKind::kCluster;
  NodeId id;  // kCluster: its number in the pool (the cluster file's order)
  // kCluster: drained by an admin (with the reason and time), or NotReady.
  bool drained = false;
  std::string drain_reason;
  Instant drained_at;
  bool not_ready = false;  // its agent missed heartbeats
  Instant not_ready_at;
  // kRented: the job and task it was rented for.
  JobId job;
  int task = 0;
  Instant registered_at;  // kNotYet: no agent registered it (yet)
  Instant last_heartbeat_at;
  NodeRegistration reported;  // what its agent found
};

class NodeTable {
 public:
  // Every node of the cluster file, none registered.
  NodeTable(PlaneState& state, MarketClerk& clerk);
  NodeTable(const NodeTable&) = delete;
  NodeTable& operator=(const NodeTable&) = delete;

  // The cluster nodes' stored states (those the cluster file still has). A server that was down
  // heard nothing: each agent gets a full timeout from now.
  Result<void> restore(const std::vector<KeyedRecord>& stored, Instant now);
  // Cordons in `scheduler` (new, or rebuilt) the cluster nodes that take no jobs.
  Result<void> cordon(Scheduler& scheduler) const;

  [[nodiscard]] const PlaneNode* find(std::string_view name) const;
  [[nodiscard]] bool is_rented(std::string_view name) const;
  [[nodiscard]] const PlaneNode& pool_node(NodeId id) const { return *pool_[id.value]; }
  [[nodiscard]] std::size_t pool_size() const { return pool_.size(); }
  // The rented nodes, by name.
  [[nodiscard]] std::vector<const PlaneNode*> rented() const;
  // Whether a cluster node takes new jobs: not drained, its agent registered (or
  // simulate_unregistered_nodes) and heard from within the heartbeat timeout.
  [[nodiscard]] bool schedulable(const PlaneNode& node) const;
  // Why it takes none, for `tidepool nodes` (empty when it does).
  [[nodiscard]] std::string unschedulable_reason(const PlaneNode& node) const;

  // --- agents and admins ---
  // Whether `who` may act for `node` (its agent, or an admin) to do `what`, or kForbidden.
  [[nodiscard]] static Outcome<void> check_agent(const Principal& who, const std::string& node,
                                                 std::string_view what);
  // A cluster node's agent registered, with what it found: kConflict where that is not what the
  // cluster file declares.
  Outcome<NodeId> register_node(const std::string& node, const NodeRegistration& registration,
                                Instant now, Batch& batch);
  // A rented node's agent registered (burst_desk.h checks what it found).
  void register_rented(const std::string& node, const NodeRegistration& registration, Instant now);
  // An agent was heard from: a heartbeat from an agent that never registered registers its node
  // (an older agent, or after a restart). The node goes into `batch` only when that, or its
  // coming back from NotReady, changes its record: not the beat's time, which a restart does not
  // read (it counts every node as heard from when it loads).
  Outcome<const PlaneNode*> heard_from(const std::string& node, Instant now, Batch& batch);
  // What the node should run (a task of each job of `here`, the running jobs with a task there),
  // and its GPUs' telemetry: alerts of idle GPUs are gpu.idle events.
  HeartbeatReply answer_heartbeat(const std::string& node,
                                  const std::vector<const ServerJob*>& here,
                                  const std::vector<GpuReading>& gpus, Instant now, Batch& batch);
  // An admin drains or undrains a cluster node; draining a drained node with another reason
  // replaces the reason.
  Outcome<NodeId> set_drained(const Principal& who, const std::string& node, bool drained,
                              const std::string& reason, Instant now, Batch& batch);
  // What a node's agent needs to run its part of a running job.
  [[nodiscard]] NodeAssignment assignment_of(const ServerJob& job, const std::string& node) const;

  // --- liveness ---
  // The registered, ready cluster nodes silent past the heartbeat timeout, in pool order.
  [[nodiscard]] std::vector<NodeId> silent(Instant now) const;
  // Marks a silent node NotReady (cordoned); returns why, for the requeue of its jobs.
  std::string mark_not_ready(NodeId id, Instant now, Batch& batch);
  // A node failed (a cluster node NotReady, or a rented node silent).
  void count_failure() { ++failures_; }
  [[nodiscard]] std::int64_t failures() const { return failures_; }
  // The soonest time an agent heard from may fall silent, or a time before it. It is kept, not
  // found by a walk over every node at each call: heartbeats only move a node's silence later, and
  // a node heard from anew falls silent a full timeout after `now`, later than any node heard from
  // before; so the value found is a bound until `now` reaches it, and is then found again.
  [[nodiscard]] std::optional<Instant> next_silence(Instant now) const;

  // --- rented nodes (burst_desk.h) ---
  // A node rented for `task` of `job`; restored (after a restart) with `registered_at` and
  // `last_heartbeat_at` from now. A name the cluster file has is not taken: its agent registers
  // the cluster's node, and the rental, never up, is given up at its deadline.
  void add_rented(const std::string& node, JobId job, int task, Instant registered_at = kNotYet,
                  Instant last_heartbeat_at = kNotYet);
  // A rented node released: forgotten, and its GPUs' telemetry too.
  void forget_rented(const std::string& node);

  [[nodiscard]] const GpuTelemetry& telemetry() const { return telemetry_; }

 private:
  // A NotReady node heard from again: schedulable unless drained.
  // (`was_schedulable`: before the agent was heard from; the scheduler learns of a change.)
  void mark_ready(PlaneNode& node, bool was_schedulable, Instant now, Batch& batch);
  // Tells the scheduler whether a cluster node takes jobs now.
  void tell_scheduler(const PlaneNode& node, Instant now, Batch& batch);
  void record_node(Batch& batch, const PlaneNode& node) const;

  PlaneState& state_;
  MarketClerk& clerk_;
  std::map<std::string, PlaneNode, std::less<>> nodes_;  // every node, by name
  std::vector<PlaneNode*> pool_;                         // the cluster nodes, by NodeId
  GpuTelemetry telemetry_;
  std::int64_t failures_ = 0;  // since the server started
  // next_silence()'s bound, once found (none found: walked again at each call).
  mutable std::optional<Instant> silence_bound_;
};

}  // namespace tidepool
