#include "server/node_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <tuple>
#include <utility>

namespace tidepool {
namespace {

// Whether a GPU name the agent reports ("NVIDIA H100 80GB HBM3", or "H100" from fake GPUs) is of
// the model the cluster file declares ("H100"): the declared name, ignoring case, as a whole word
// of the reported one.
bool names_model(std::string_view reported, std::string_view declared) {
  const auto lower = [](std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string haystack = lower(reported);
  const std::string needle = lower(declared);
  if (needle.empty()) return false;
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (std::size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    const std::size_t end = at + needle.size();
    if ((at == 0 || !word(haystack[at - 1])) && (end == haystack.size() || !word(haystack[end]))) {
      return true;
    }
  }
  return false;
}

// The port a gang's task 0 listens on for its peers (MASTER_PORT): one per job, 20000..29999.
int master_port(JobId job) { return 20'000 + static_cast<int>(job.value % 10'000); }

// A GPU's MIG instances in words, the same for the agent's report and the cluster file:
// "whole", or "in MIG mode with 1g.10gb@0, 3g.40gb@4" (sorted by start).
std::string mig_text(std::vector<MigInstance> instances) {
  if (instances.empty()) return "whole";
  std::ranges::sort(instances, {}, [](const MigInstance& i) {
    return std::pair{i.start, i.profile};
  });
  std::string text = "in MIG mode with ";
  for (std::size_t k = 0; k < instances.size(); ++k) {
    text += fmt::format("{}{}@{}", k == 0 ? "" : ", ", mig_profile_spec(instances[k].profile).name,
                        instances[k].start);
  }
  return text;
}

std::string mig_layout_text(const std::vector<MigSlice>& slices) {
  std::vector<MigInstance> instances;
  for (const MigSlice& slice : slices) instances.push_back({slice.profile, slice.start});
  return mig_text(std::move(instances));
}

std::string declared_mig_text(const NodeSpec& spec, int gpu) {
  for (const NodeSpec::MigPartition& partition : spec.mig_partitions) {
    if (partition.gpu == gpu) return mig_text(partition.instances);
  }
  return mig_text({});
}

// The UUID of the agent's MIG instance of `profile` at `start` on GPU `gpu`, or "".
std::string reported_mig_uuid(const NodeRegistration& reported, int gpu, MigProfile profile,
                              int start) {
  for (const GpuDevice& device : reported.devices) {
    if (device.index != gpu) continue;
    for (const MigSlice& slice : device.mig) {
      if (slice.profile == profile && slice.start == start) return slice.uuid;
    }
  }
  return {};
}

}  // namespace

NodeTable::NodeTable(PlaneState& state, MarketClerk& clerk)
    : state_(state), clerk_(clerk), telemetry_(state.setup().idle_gpu) {
  for (const NodeSpec& spec : state_.setup().cluster.nodes) {
    PlaneNode node;
    node.name = spec.name;
    node.id = NodeId{static_cast<std::uint32_t>(pool_.size())};
    pool_.push_back(&nodes_.emplace(spec.name, std::move(node)).first->second);
  }
}

Result<void> NodeTable::restore(const std::vector<KeyedRecord>& stored, Instant now) {
  for (const KeyedRecord& record : stored) {
    auto it = nodes_.find(record.key);
    if (it == nodes_.end()) continue;  // the node left the cluster file
    auto value = nlohmann::json::parse(record.document, nullptr, false);
    if (value.is_discarded() || !value.is_object()) {
      return fail("nodes " + record.key, "stored document is not a JSON object");
    }
    PlaneNode& node = it->second;
    node.drained = value.value("drained", false);
    node.drain_reason = value.value("drain_reason", "");
    const auto instant = [&value](const char* key) {
      return instant_from_unix_ms(value.value(key, std::int64_t{0}));
    };
    node.drained_at = instant("drained_ms");
    node.not_ready = value.value("not_ready", false);
    node.not_ready_at = instant("not_ready_ms");
    node.registered_at = instant("registered_ms");
    node.last_heartbeat_at = std::max(instant("last_heartbeat_ms"), now);
    if (auto reported = value.find("reported"); reported != value.end()) {
      if (auto r = node_registration_from_json(*reported)) node.reported = std::move(*r);
    }
  }
  return {};
}

Result<void> NodeTable::cordon(Scheduler& scheduler) const {
  for (const PlaneNode* node : pool_) {
    if (schedulable(*node)) continue;
    // Every node of the cluster file is the pool's: a refusal is a bug, for the caller to report.
    if (auto ok = scheduler.set_node_schedulable(node->id, false); !ok) return ok;
  }
  return {};
}

const PlaneNode* NodeTable::find(std::string_view name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

bool NodeTable::is_rented(std::string_view name) const {
  const PlaneNode* node = find(name);
  return node != nullptr && node->kind == NodeKind::kRented;
}

std::vector<const PlaneNode*> NodeTable::rented() const {
  std::vector<const PlaneNode*> out;
  for (const auto& [name, node] : nodes_) {
    if (node.kind == NodeKind::kRented) out.push_back(&node);
  }
  return out;
}

bool NodeTable::schedulable(const PlaneNode& node) const {
  return !node.drained && !node.not_ready &&
         (node.registered_at != kNotYet || state_.setup().simulate_unregistered_nodes);
}

std::string NodeTable::unschedulable_reason(const PlaneNode& node) const {
  const ControlPlaneSetup& setup = state_.setup();
  if (node.drained) return node.drain_reason;
  if (node.not_ready) {
    return fmt::format("its agent sent no heartbeat for more than {} s (timeout)",
                       whole_seconds(setup.heartbeat_timeout));
  }
  if (node.registered_at == kNotYet && !setup.simulate_unregistered_nodes) {
    return "no agent has registered the node: start `tidepool agent --node " + node.name +
           "` there";
  }
  return "";
}

// --- agents and admins ---

Outcome<void> NodeTable::check_agent(const Principal& who, const std::string& node,
                                     std::string_view what) {
  if (who.role == Role::kUser || (who.role == Role::kAgent && who.node != node)) {
    return forbidden("node", fmt::format("only node '{}''s agent or an admin may {}", node, what));
  }
  return {};
}

Outcome<NodeId> NodeTable::register_node(const std::string& name,
                                         const NodeRegistration& registration, Instant now,
                                         Batch& batch) {
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second.kind != NodeKind::kCluster) {
    return refuse(Refusal::kNotFound,
                  Error{"node", fmt::format("no node '{}' in the cluster file", name)});
  }
  PlaneNode& node = it->second;
  const ClusterSpec& cluster = state_.setup().cluster;
  const NodeSpec& spec = cluster.nodes[node.id.value];
  if (registration.gpus && *registration.gpus != spec.gpu_count) {
    return conflict("gpus", fmt::format("the agent found {} GPUs, the cluster file declares {}",
                                        *registration.gpus, spec.gpu_count));
  }
  if (spec.gpu_count > 0) {
    const std::string& declared = cluster.models.name(spec.model);
    std::vector<std::pair<std::string, const std::string*>> told;
    if (!registration.gpu_model.empty()) told.emplace_back("gpu_model", &registration.gpu_model);
    for (std::size_t i = 0; i < registration.devices.size(); ++i) {
      told.emplace_back(fmt::format("devices[{}].model", i), &registration.devices[i].model);
    }
    for (const auto& [field, model] : told) {
      if (names_model(*model, declared)) continue;
      return conflict(field, fmt::format("the agent found {} GPUs, the cluster file declares {} "
                                         "for node '{}'",
                                         model->empty() ? "unnamed" : *model, declared, name));
    }
  }
  for (std::size_t i = 0; i < registration.devices.size(); ++i) {
    const GpuDevice& device = registration.devices[i];
    const std::string found = mig_layout_text(device.mig);
    const std::string declared = declared_mig_text(spec, device.index);
    if (found != declared) {
      return conflict(fmt::format("devices[{}].mig", i),
                      fmt::format("the agent found GPU {} of node '{}' {}, the cluster file "
                                  "declares it {}",
                                  device.index, name, found, declared));
    }
  }
  const Topology& topology = cluster.topology;
  const LeafSpec& leaf = topology.leaves[spec.leaf.value];
  for (auto [field, told, declared] :
       {std::tuple{"leaf", &registration.leaf, &leaf.name},
        std::tuple{"spine", &registration.spine, &topology.spines[leaf.spine.value].name}}) {
    if (!told->empty() && *told != *declared) {
      return conflict(field, fmt::format("the agent says {} '{}', the cluster file puts node '{}' "
                                         "under '{}'",
                                         field, *told, name, *declared));
    }
  }
  const bool was_schedulable = schedulable(node);
  node.reported = registration;
  node.registered_at = now;
  node.last_heartbeat_at = now;
  state_.emit(batch, now, "node.registered",
              {{"node", name},
               {"gpus", registration.devices.size()},
               {"address", registration.address},
               {"agent_version", registration.agent_version}});
  mark_ready(node, was_schedulable, now, batch);
  record_node(batch, node);
  return node.id;
}

void NodeTable::register_rented(const std::string& name, const NodeRegistration& registration,
                                Instant now) {
  PlaneNode& node = nodes_.at(name);
  node.reported = registration;
  node.registered_at = now;
  node.last_heartbeat_at = now;
}

Outcome<const PlaneNode*> NodeTable::heard_from(const std::string& name, Instant now,
                                                Batch& batch) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return refuse(Refusal::kNotFound, Error{"node", fmt::format("no node '{}'", name)});
  }
  PlaneNode& node = it->second;
  if (node.kind == NodeKind::kRented) {
    if (node.registered_at == kNotYet) node.registered_at = now;
    node.last_heartbeat_at = now;
    return &node;
  }
  const bool was_schedulable = schedulable(node);
  const bool first = node.registered_at == kNotYet;
  const bool was_not_ready = node.not_ready;
  if (first) node.registered_at = now;
  node.last_heartbeat_at = now;
  mark_ready(node, was_schedulable, now, batch);
  // Stored only when what a restart reads from it changes. The time of the beat is not: a
  // restart counts every node as heard from when it loads (load()), so writing it would cost a
  // store write per beat (thousands a second in a large pool) and change nothing.
  if (first || was_not_ready) record_node(batch, node);
  return &node;
}

HeartbeatReply NodeTable::answer_heartbeat(const std::string& node,
                                           const std::vector<const ServerJob*>& here,
                                           const std::vector<GpuReading>& gpus, Instant now,
                                           Batch& batch) {
  HeartbeatReply reply;
  reply.node = node;
  reply.heartbeat_timeout_ms = state_.setup().heartbeat_timeout.count();
  std::vector<std::int64_t> job_by_gpu(static_cast<std::size_t>(kMaxGpusPerNode), 0);
  for (const ServerJob* job : here) {
    reply.jobs.push_back(wire_job_id(job->id));
    reply.assignments.push_back(assignment_of(*job, node));
    for (const TaskPlace& p : job->placement) {
      if (p.node != node) continue;
      for (int g : p.gpus) job_by_gpu[static_cast<std::size_t>(g)] = wire_job_id(job->id);
    }
  }
  for (IdleGpuAlert& alert : telemetry_.update(node, gpus, job_by_gpu, now)) {
    state_.emit(batch, now, "gpu.idle",
                {{"node", alert.node},
                 {"gpu", alert.gpu},
                 {"job", alert.job},
                 {"kind", idle_kind_name(alert.kind)},
                 {"since_ms", unix_ms(alert.since)},
                 {"reason", alert.reason}});
  }
  return reply;
}

Outcome<NodeId> NodeTable::set_drained(const Principal& who, const std::string& name, bool drained,
                                       const std::string& reason, Instant now, Batch& batch) {
  if (auto ok = check_admin(who); !ok) return std::unexpected(ok.error());
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second.kind != NodeKind::kCluster) {
    return refuse(Refusal::kNotFound, Error{"node", fmt::format("no node '{}'", name)});
  }
  PlaneNode& node = it->second;
  // Draining a drained node again with another reason replaces the reason (and keeps the time).
  const bool new_reason = drained && node.drained && !reason.empty() && reason != node.drain_reason;
  if (node.drained != drained || new_reason) {
    clerk_.advance(now, batch);
    if (!new_reason) node.drained_at = drained ? now : kNotYet;
    node.drained = drained;
    tell_scheduler(node, now, batch);
    node.drain_reason = drained ? (reason.empty() ? "drained by an admin" : reason) : "";
    state_.mark_dirty();
    record_node(batch, node);
    state_.emit(batch, now, drained ? "node.drained" : "node.undrained",
                {{"node", name}, {"reason", node.drain_reason}});
  }
  return node.id;
}

NodeAssignment NodeTable::assignment_of(const ServerJob& job, const std::string& node) const {
  std::vector<AssignedTask> tasks;
  const PlaneNode* here = find(node);
  for (std::size_t i = 0; i < job.placement.size(); ++i) {
    const TaskPlace& place = job.placement[i];
    if (place.node != node) continue;
    AssignedTask task{.index = static_cast<int>(i), .gpus = place.gpus};
    if (place.mig_start >= 0 && job.spec.mig_profile && place.gpus.size() == 1) {
      // The instance's UUID as the node's agent reported it (registration checked the layout);
      // empty if it reported no devices: the agent then refuses the task.
      task.mig = AssignedMig{
          .profile = *job.spec.mig_profile,
          .start = place.mig_start,
          .uuid = here == nullptr ? std::string()
                                  : reported_mig_uuid(here->reported, place.gpus[0],
                                                      *job.spec.mig_profile, place.mig_start)};
    }
    tasks.push_back(std::move(task));
  }
  std::string master = job.placement.empty() ? node : job.placement.front().node;
  if (const PlaneNode* leader = find(master); leader && !leader->reported.address.empty()) {
    master = leader->reported.address;
  }
  const JobSpec& spec = job.spec;
  return NodeAssignment{.job = wire_job_id(job.id),
                        .run = job.starts,
                        .name = spec.name,
                        .tenant = spec.tenant,
                        .world_size = spec.tasks,
                        .tasks = std::move(tasks),
                        .master_addr = std::move(master),
                        .master_port = master_port(job.id),
                        .command = spec.command,
                        .env = spec.env,
                        .working_dir = spec.working_dir,
                        .cpu_milli_per_task = spec.cpu_milli_per_task,
                        .memory_mib_per_task = spec.memory_mib_per_task,
                        .gpu_milli = spec.gpu_milli,
                        .preemptible = spec.preemptible,
                        .checkpoints = spec.checkpoint_interval.has_value(),
                        .resume_from = job.checkpoint_path,
                        .checkpoint_step = job.checkpoint_step,
                        .replica = std::nullopt};  // ControlPlane::heartbeat adds it
}

// --- liveness ---

std::vector<NodeId> NodeTable::silent(Instant now) const {
  std::vector<NodeId> out;
  if (const auto first = next_silence(now); !first || now < *first) return out;
  for (const PlaneNode* node : pool_) {
    if (node->registered_at == kNotYet || node->not_ready) continue;
    if (now - node->last_heartbeat_at > state_.setup().heartbeat_timeout) {
      out.push_back(node->id);
    }
  }
  return out;
}

std::string NodeTable::mark_not_ready(NodeId id, Instant now, Batch& batch) {
  PlaneNode& node = *pool_[id.value];
  const Millis silent_for = now - node.last_heartbeat_at;
  const Millis timeout = state_.setup().heartbeat_timeout;
  clerk_.advance(now, batch);
  node.not_ready = true;
  node.not_ready_at = now;
  count_failure();
  tell_scheduler(node, now, batch);
  state_.mark_dirty();
  telemetry_.forget_node(node.name);
  record_node(batch, node);
  std::string reason = fmt::format("node {}'s agent sent no heartbeat for {} s (timeout {} s)",
                                   node.name, whole_seconds(silent_for), whole_seconds(timeout));
  state_.emit(batch, now, "node.not_ready", {{"node", node.name}, {"reason", reason}});
  return reason;
}

std::optional<Instant> NodeTable::next_silence(Instant now) const {
  if (silence_bound_ && now < *silence_bound_) return silence_bound_;
  std::optional<Instant> next;
  for (const auto& [name, node] : nodes_) {
    if (node.registered_at == kNotYet || node.not_ready) continue;
    const Instant at = node.last_heartbeat_at + state_.setup().heartbeat_timeout + Millis{1};
    if (!next || at < *next) next = at;
  }
  silence_bound_ = next;
  return next;
}

void NodeTable::mark_ready(PlaneNode& node, bool was_schedulable, Instant now, Batch& batch) {
  const bool was_not_ready = node.not_ready;
  node.not_ready = false;
  node.not_ready_at = kNotYet;
  if (schedulable(node) != was_schedulable) {
    clerk_.advance(now, batch);
    tell_scheduler(node, now, batch);
    state_.mark_dirty();
  }
  if (was_not_ready) state_.emit(batch, now, "node.ready", {{"node", node.name}});
}

void NodeTable::tell_scheduler(const PlaneNode& node, Instant now, Batch& batch) {
  // A node of the cluster file is the pool's: a refusal is a bug, shown and not hidden.
  if (auto ok = state_.scheduler().set_node_schedulable(node.id, schedulable(node)); !ok) {
    state_.internal_error("node " + node.name + ": scheduler set_node_schedulable", ok.error(), now,
                          batch);
  }
}

void NodeTable::record_node(Batch& batch, const PlaneNode& node) const {
  batch.nodes.push_back(KeyedRecord{node.name,
                                    nlohmann::json{
                                        {"drained", node.drained},
                                        {"drain_reason", node.drain_reason},
                                        {"drained_ms", unix_ms(node.drained_at)},
                                        {"not_ready", node.not_ready},
                                        {"not_ready_ms", unix_ms(node.not_ready_at)},
                                        {"registered_ms", unix_ms(node.registered_at)},
                                        {"last_heartbeat_ms", unix_ms(node.last_heartbeat_at)},
                                        {"reported", node_registration_to_json(node.reported)},
                                    }
                                        .dump()});
}

// --- rented nodes ---

void NodeTable::add_rented(const std::string& name, JobId job, int task, Instant registered_at,
                           Instant last_heartbeat_at) {
  PlaneNode node;
  node.name = name;
  node.kind = NodeKind::kRented;
  node.job = job;
  node.task = task;
  node.registered_at = registered_at;
  node.last_heartbeat_at = last_heartbeat_at;
  silence_bound_.reset();  // its times come from the caller: the bound is found again
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    nodes_.emplace(name, std::move(node));
  } else if (it->second.kind == NodeKind::kRented) {
    it->second = std::move(node);
  }
}

void NodeTable::forget_rented(const std::string& name) {
  auto it = nodes_.find(name);
  if (it != nodes_.end() && it->second.kind == NodeKind::kRented) nodes_.erase(it);
  telemetry_.forget_node(name);
}

}  // namespace tidepool
