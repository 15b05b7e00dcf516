// The control plane's side of the node agents: registration, heartbeats and what each node should
// run, node liveness (NotReady after missed heartbeats, and the requeue of the node's jobs), and
// who may read and write task logs.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <tuple>
#include <utility>

#include "server/control_plane.h"

namespace tidepool {
namespace {

std::unexpected<Refused> not_this_node(const std::string& node, std::string_view what) {
  return refuse(
      Refusal::kForbidden,
      Error{"node", fmt::format("only node '{}''s agent or an admin may {}", node, what)});
}

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
int master_port(std::int64_t job) { return 20'000 + static_cast<int>(job % 10'000); }

}  // namespace

Reply ControlPlane::register_node(const Principal& who, const std::string& node,
                                  const NodeRegistration& registration, std::int64_t now_ms,
                                  Batch& batch) {
  if (who.role == Role::kUser || (who.role == Role::kAgent && who.node != node)) {
    return not_this_node(node, "register it");
  }
  if (burst_nodes_.contains(node)) return register_burst_node(node, registration, now_ms, batch);
  auto it = node_ids_.find(node);
  if (it == node_ids_.end()) {
    return refuse(Refusal::kNotFound,
                  Error{"node", fmt::format("no node '{}' in the cluster file", node)});
  }
  const NodeSpec& spec = setup_.cluster.nodes[it->second.value];
  if (registration.gpus && *registration.gpus != spec.gpu_count) {
    return refuse(Refusal::kConflict,
                  Error{"gpus", fmt::format("the agent found {} GPUs, the cluster file "
                                            "declares {}",
                                            *registration.gpus, spec.gpu_count)});
  }
  if (spec.gpu_count > 0) {
    const std::string& declared = setup_.cluster.models.name(spec.model);
    std::vector<std::pair<std::string, const std::string*>> told;
    if (!registration.gpu_model.empty()) told.emplace_back("gpu_model", &registration.gpu_model);
    for (std::size_t i = 0; i < registration.devices.size(); ++i) {
      told.emplace_back(fmt::format("devices[{}].model", i), &registration.devices[i].model);
    }
    for (const auto& [field, model] : told) {
      if (names_model(*model, declared)) continue;
      return refuse(Refusal::kConflict,
                    Error{field, fmt::format("the agent found {} GPUs, the cluster file "
                                             "declares {} for node '{}'",
                                             model->empty() ? "unnamed" : *model, declared, node)});
    }
  }
  const Topology& topology = setup_.cluster.topology;
  const LeafSpec& leaf = topology.leaves[spec.leaf.value];
  for (auto [field, told, declared] :
       {std::tuple{"leaf", &registration.leaf, &leaf.name},
        std::tuple{"spine", &registration.spine, &topology.spines[leaf.spine.value].name}}) {
    if (!told->empty() && *told != *declared) {
      return refuse(Refusal::kConflict,
                    Error{field, fmt::format("the agent says {} '{}', the cluster file puts "
                                             "node '{}' under '{}'",
                                             field, *told, node, *declared)});
    }
  }
  NodeInfo& info = nodes_[it->second.value];
  const bool was_schedulable = schedulable(info);
  info.reported = registration;
  info.registered_ms = now_ms;
  info.last_heartbeat_ms = now_ms;
  emit(batch, now_ms, "node.registered",
       {{"node", node},
        {"gpus", registration.devices.size()},
        {"address", registration.address},
        {"agent_version", registration.agent_version}});
  mark_ready(it->second, was_schedulable, now_ms, batch);
  record_node(batch, info);
  nlohmann::json out = node_json(it->second, running_by_node()[it->second.value]);
  out["heartbeat_timeout_ms"] = setup_.heartbeat_timeout_ms;
  return answer(std::move(out));
}

void ControlPlane::mark_ready(NodeId id, bool was_schedulable, std::int64_t now_ms, Batch& batch) {
  NodeInfo& info = nodes_[id.value];
  const bool was_not_ready = info.not_ready;
  info.not_ready = false;
  info.not_ready_ms = 0;
  if (schedulable(info) != was_schedulable) {
    meter_advance(now_ms, batch);
    if (auto ok = scheduler_.set_node_schedulable(id, schedulable(info)); !ok) {
      internal_error("node " + info.name + ": scheduler set_node_schedulable", ok.error(), now_ms,
                     batch);
    }
    dirty_ = true;
  }
  if (was_not_ready) emit(batch, now_ms, "node.ready", {{"node", info.name}});
}

Reply ControlPlane::heartbeat(const Principal& who, const std::string& node,
                              const NodeHeartbeat& heartbeat, std::int64_t now_ms, Batch& batch) {
  if (who.role == Role::kUser || (who.role == Role::kAgent && who.node != node)) {
    return not_this_node(node, "send its heartbeat");
  }
  std::vector<const ServerJob*> here;  // the running jobs with a task on the node
  if (auto rented = burst_nodes_.find(node); rented != burst_nodes_.end()) {
    BurstNode& b = rented->second;
    // A heartbeat from an agent that never registered registers the node (after a restart too).
    if (b.registered_ms == 0) b.registered_ms = now_ms;
    b.last_heartbeat_ms = now_ms;
    ServerJob& job = jobs_.at(b.job);
    start_when_up(job, now_ms, batch);
    if (job.state == JobState::kRunning) here.push_back(&job);
  } else {
    auto it = node_ids_.find(node);
    if (it == node_ids_.end()) {
      return refuse(Refusal::kNotFound, Error{"node", fmt::format("no node '{}'", node)});
    }
    NodeInfo& info = nodes_[it->second.value];
    const bool was_schedulable = schedulable(info);
    // A heartbeat from an agent that never registered (an older agent) registers the node.
    if (info.registered_ms == 0) info.registered_ms = now_ms;
    info.last_heartbeat_ms = now_ms;
    mark_ready(it->second, was_schedulable, now_ms, batch);
    record_node(batch, info);
    here = std::move(running_by_node()[it->second.value]);
  }
  HeartbeatReply reply;
  reply.node = node;
  reply.heartbeat_timeout_ms = setup_.heartbeat_timeout_ms;
  std::vector<std::int64_t> job_by_gpu(static_cast<std::size_t>(kMaxGpusPerNode), 0);
  for (const ServerJob* job : here) {
    reply.jobs.push_back(job->id);
    reply.assignments.push_back(assignment_of(*job, node));
    for (const TaskPlace& p : job->placement) {
      if (p.node != node) continue;
      for (int g : p.gpus) job_by_gpu[static_cast<std::size_t>(g)] = job->id;
    }
  }
  for (IdleGpuAlert& alert : telemetry_.update(node, heartbeat.gpus, job_by_gpu, now_ms)) {
    emit(batch, now_ms, "gpu.idle",
         {{"node", alert.node},
          {"gpu", alert.gpu},
          {"job", alert.job},
          {"kind", idle_kind_name(alert.kind)},
          {"since_ms", alert.since_ms},
          {"reason", alert.reason}});
  }
  return answer(heartbeat_reply_to_json(reply));
}

NodeAssignment ControlPlane::assignment_of(const ServerJob& job, const std::string& node) const {
  std::vector<AssignedTask> tasks;
  for (std::size_t i = 0; i < job.placement.size(); ++i) {
    if (job.placement[i].node == node) {
      tasks.push_back({.index = static_cast<int>(i), .gpus = job.placement[i].gpus});
    }
  }
  std::string master = job.placement.empty() ? node : job.placement.front().node;
  if (auto it = node_ids_.find(master); it != node_ids_.end()) {
    const std::string& address = nodes_[it->second.value].reported.address;
    if (!address.empty()) master = address;
  } else if (auto rented = burst_nodes_.find(master); rented != burst_nodes_.end()) {
    const std::string& address = rented->second.reported.address;
    if (!address.empty()) master = address;
  }
  const JobSpec& spec = job.spec;
  return NodeAssignment{.job = job.id,
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
                        .checkpoint_step = job.checkpoint_step};
}

void ControlPlane::check_liveness(std::int64_t now_ms, Batch& batch) {
  std::vector<std::vector<const ServerJob*>> running;
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    NodeInfo& info = nodes_[n];
    if (info.registered_ms == 0 || info.not_ready) continue;
    const std::int64_t silent_ms = now_ms - info.last_heartbeat_ms;
    if (silent_ms <= setup_.heartbeat_timeout_ms) continue;
    const NodeId id{static_cast<std::uint32_t>(n)};
    meter_advance(now_ms, batch);
    info.not_ready = true;
    info.not_ready_ms = now_ms;
    ++node_failures_;
    if (auto ok = scheduler_.set_node_schedulable(id, false); !ok) {
      internal_error("node " + info.name + ": scheduler set_node_schedulable", ok.error(), now_ms,
                     batch);
    }
    dirty_ = true;
    telemetry_.forget_node(info.name);
    record_node(batch, info);
    const std::string reason =
        fmt::format("node {}'s agent sent no heartbeat for {} s (timeout {} s)", info.name,
                    silent_ms / 1000, setup_.heartbeat_timeout_ms / 1000);
    emit(batch, now_ms, "node.not_ready", {{"node", info.name}, {"reason", reason}});
    if (running.empty()) running = running_by_node();
    std::vector<std::int64_t> ids;
    for (const ServerJob* job : running[n]) ids.push_back(job->id);
    for (std::int64_t job_id : ids) {
      ServerJob& job = jobs_.at(job_id);
      if (job.state == JobState::kRunning) requeue(job, true, reason, now_ms, batch);
    }
  }
}

void ControlPlane::stop_run(ServerJob& job, const std::string& cause, std::int64_t now_ms) {
  const std::int64_t saved_until = std::max(job.started_ms, job.last_checkpoint_ms);
  const std::int64_t lost = std::max<std::int64_t>(0, now_ms - saved_until);
  job.lost_work_ms += lost;
  lost_work_ms_by_cause_[cause] += lost;
  ++requeued_by_cause_[cause];
  job.placement.clear();
  job.tasks_done.clear();
}

void ControlPlane::requeue(ServerJob& job, bool node_failure, const std::string& reason,
                           std::int64_t now_ms, Batch& batch) {
  const JobId core_id{static_cast<std::uint32_t>(job.id)};
  meter_stop(job, now_ms, batch);
  job.attained_gpu_seconds = scheduler_.attained_gpu_seconds(core_id, to_seconds(now_ms))
                                 .value_or(job.attained_gpu_seconds);
  // A running job on the pool's nodes is the scheduler's: a refusal is a bug (see end_job).
  if (auto ok = scheduler_.finish(core_id, to_seconds(now_ms), std::nullopt); !ok) {
    internal_error(fmt::format("job {}: scheduler finish", job.id), ok.error(), now_ms, batch);
  }
  if (auto ok = scheduler_.forget(core_id); !ok) {
    internal_error(fmt::format("job {}: scheduler forget", job.id), ok.error(), now_ms, batch);
  }
  stop_run(job, node_failure ? "node_failure" : "requeue", now_ms);
  if (node_failure) ++job.faults;
  job.move_to(JobState::kPreempted, now_ms, reason);
  record_job(batch, job, now_ms, "job.requeued");
  const std::string requeued = node_failure ? "requeued after a node failure" : reason;
  queue_again(job,
              job.checkpoint_path.empty()
                  ? requeued + "; restarts from the beginning (no checkpoint)"
                  : requeued + "; resumes from " + job.checkpoint_path,
              now_ms, batch);
}

void ControlPlane::queue_again(ServerJob& job, const std::string& reason, std::int64_t now_ms,
                               Batch& batch) {
  dirty_ = true;
  auto core = to_core_job(job, scheduler_.book());
  auto queued =
      core ? enqueue(*core, job, now_ms, batch) : Result<void>(std::unexpected(core.error()));
  if (!queued) {
    drop_live(job.id);
    job.move_to(JobState::kFailed, now_ms,
                "could not be queued again: " + queued.error().message());
    job.ended_ms = now_ms;
    record_job(batch, job, now_ms, "job.failed");
    settle_dependents(job, now_ms, batch);
    return;
  }
  job.move_to(JobState::kPending, now_ms, reason);
  note_parked(job);
  stage(batch, job);
}

Error no_such_task(std::int64_t job, std::int64_t tasks) {
  return Error{"task", tasks == 1
                           ? fmt::format("job {} has 1 task, task 0", job)
                           : fmt::format("job {} has {} tasks, 0..{}", job, tasks, tasks - 1)};
}

Reply ControlPlane::log_access(const Principal& who, std::int64_t id, bool write,
                               std::optional<int> task, std::optional<std::int64_t> run) const {
  auto visible = visible_job(who, id);
  if (!visible) return std::unexpected(visible.error());
  const ServerJob* found = *visible;
  if (write && who.role == Role::kUser) {
    return refuse(Refusal::kForbidden,
                  Error{"role", "task logs are written by the agents of the job's nodes"});
  }
  if (write && who.role == Role::kAgent && run && *run >= 1 && *run < found->starts) {
    // A run that ended: its node may still ship the last of its output (each run has its own
    // log, so nothing mixes with the run after it).
    if (task && (*task < 0 || *task >= found->spec.tasks)) {
      return refuse(Refusal::kInvalid, no_such_task(found->id, found->spec.tasks));
    }
    if (!std::ranges::binary_search(found->ran_on, who.node)) {
      return refuse(
          Refusal::kForbidden,
          Error{"node", fmt::format("no run of job {} ran on node {}", found->id, who.node)});
    }
  } else if (write) {
    if (auto ok = check_agent_report(who, *found, task, run); !ok) {
      return std::unexpected(ok.error());
    }
  }
  return answer({{"job", id}, {"tasks", found->spec.tasks}});
}

Outcome<void> ControlPlane::check_agent_report(const Principal& who, const ServerJob& job,
                                               std::optional<int> task,
                                               std::optional<std::int64_t> run) const {
  if (who.role != Role::kAgent) return {};
  if (task && (*task < 0 || *task >= job.spec.tasks)) {
    return refuse(Refusal::kInvalid, no_such_task(job.id, job.spec.tasks));
  }
  if (!run) {
    return refuse(Refusal::kInvalid,
                  Error{"run", fmt::format("an agent names the run it reports about (job {} "
                                           "is in run {})",
                                           job.id, job.starts)});
  }
  if (*run != job.starts) {
    return refuse(Refusal::kConflict,
                  Error{"run", fmt::format("job {} is in run {}; this report is about run {}",
                                           job.id, job.starts, *run)});
  }
  const std::vector<TaskPlace>& places = job.last_placement;
  const bool placed_here =
      task ? std::cmp_less(*task, places.size()) && places[*task].node == who.node
           : std::ranges::any_of(places, [&](const TaskPlace& p) { return p.node == who.node; });
  if (!placed_here) {
    return refuse(Refusal::kForbidden,
                  Error{task ? "task" : "node",
                        task ? fmt::format("run {} of job {} does not run task {} on node {}", *run,
                                           job.id, *task, who.node)
                             : fmt::format("run {} of job {} does not run on node {}", *run, job.id,
                                           who.node)});
  }
  return {};
}

}  // namespace tidepool
