#include "agent/agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/fake_gpu_backend.h"
#include "agent/gpu_hold.h"
#include "agent/process_stats.h"
#include "agent/task_files.h"

namespace tidepool {
namespace {

constexpr std::int64_t kLogChunkBytes = 256 * 1024;
constexpr std::int64_t kStoppingPollMs = 50;
constexpr std::int64_t kRunningPollMs = 1000;

std::int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The bytes of `path` from `offset`, at most `limit`; empty when it cannot be read.
std::string read_from(const std::string& path, std::int64_t offset, std::int64_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out(static_cast<std::size_t>(limit), '\0');
  const ssize_t n = ::pread(fd, out.data(), out.size(), offset);
  ::close(fd);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

std::int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : 0;
}

}  // namespace

struct Agent::LocalTask {
  std::int64_t job = 0;
  std::int64_t run = 0;
  int index = 0;
  std::vector<int> gpus;
  std::optional<MigInstance> mig;  // the MIG instance of its one GPU it runs on, if any
  int gpu_milli = 1000;            // its share of each of its GPUs
  bool checkpoints = false;
  std::string tenant;
  int uid = -1;  // the job's uid on this node; -1: the agent's own
  std::string checkpoint_dir;
  std::string run_dir;
  std::string log_path;
  std::string checkpoint_file;
  std::string notice_file;
  std::string step_file;
  std::optional<TaskProcess> process;  // started by this agent
  pid_t adopted_pid = 0;               // taken back after a restart: not this agent's child
  std::uint64_t start_ticks = 0;       // the leader's start time, against pid reuse
  std::optional<TaskCgroup> cgroup;
  std::optional<StopSequence> stop;
  std::optional<TaskExit> exit;
  bool group_gone = false;
  bool reported = false;
  std::optional<ReplicaAssignment> replica;  // a service's replica: its figures are read
  std::int64_t log_shipped = 0;              // bytes of the local log (this run's) the server has
  std::int64_t checkpoint_read = 0;          // bytes of checkpoint_file forwarded
  std::int64_t step_read = 0;                // bytes of step_file read
  StepLineReader steps;                      // read, not yet taken for a report
  StepStats unsent_steps;                    // taken, not yet acknowledged by the server
  bool step_refusal_logged = false;
  GroupUsage usage;  // for fake GPUs' load

  [[nodiscard]] pid_t leader() const { return process ? process->pid() : adopted_pid; }
  [[nodiscard]] bool finished() const { return group_gone && (reported || stop.has_value()); }
};

Agent::Agent(AgentOptions options, AgentClient client, std::unique_ptr<GpuBackend> gpus,
             CgroupSetup cgroups)
    : options_(std::move(options)),
      client_(std::move(client)),
      gpus_(std::move(gpus)),
      cgroups_(std::move(cgroups)),
      uids_(options_.task_uids.value_or(UidRange{})),
      replicas_(fetch_replica_metrics, [this](const std::string& line) { log(line); }) {}

Agent::~Agent() = default;

void Agent::log(const std::string& line) const {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::fprintf(stderr, "%s agent %s: %s\n", stamp, options_.node.c_str(), line.c_str());
}

Result<void> Agent::register_node() {
  auto discovered = gpus_->discover();
  if (!discovered) return std::unexpected(discovered.error());
  gpu_info_ = std::move(*discovered);
  const bool fake = gpus_->name().starts_with("fake:");
  gpu_names_.clear();
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  NodeRegistration registration{
      .gpu_model = gpu_info_.empty() ? "" : gpu_info_.front().model,
      .gpus = static_cast<int>(gpu_info_.size()),
      .cpu_milli = std::int64_t{cpus > 0 ? cpus : 0} * 1000,
      .memory_mib = pages > 0 && page_size > 0
                        ? static_cast<std::int64_t>(pages) * page_size / (1024 * 1024)
                        : 0,
      .agent_version = "0.1.0",
      .hostname = options_.hostname,
      .address = options_.address.empty() ? options_.node : options_.address,
      .leaf = options_.leaf,
      .spine = options_.spine,
      .devices = {}};
  for (const GpuInfo& g : gpu_info_) {
    gpu_names_.push_back(fake ? std::to_string(g.index) : g.uuid);
    std::vector<MigSlice> mig;
    for (const MigDevice& m : g.mig) {
      mig.push_back(MigSlice{
          .uuid = m.uuid, .profile = m.profile, .start = m.start, .memory_mib = m.memory_mib});
    }
    registration.devices.push_back(GpuDevice{.index = g.index,
                                             .uuid = g.uuid,
                                             .model = g.model,
                                             .memory_mib = g.memory_mib,
                                             .pci_bus_id = g.pci_bus_id,
                                             .numa_node = g.numa_node,
                                             .nvlink_peers = g.nvlink_peers,
                                             .mig = std::move(mig)});
  }
  const nlohmann::json body = node_registration_to_json(registration);
  for (int attempt = 0;; ++attempt) {
    auto reply = client_.post(fmt::format("/v1/nodes/{}/register", options_.node), body);
    if (reply && reply->ok()) {
      log(fmt::format(
          "registered with {}: {} GPU(s) ({}), {}", client_.server(), gpu_info_.size(),
          gpus_->name(),
          cgroups_.usable ? "cgroup limits under " + cgroups_.root : "no cgroup limits"));
      return {};
    }
    if (reply && reply->status >= 400 && reply->status < 500 && reply->status != 429) {
      return fail("register", fmt::format("the server refused node '{}': {}", options_.node,
                                          reply->error_text()));
    }
    const std::string why = reply ? reply->error_text() : reply.error().message();
    if (attempt % 10 == 0) log(fmt::format("cannot register yet ({}); retrying", why));
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    const timespec wait{1, 0};
    if (::sigtimedwait(&stop, nullptr, &wait) > 0) return fail("register", "stopped by a signal");
  }
}

Result<void> Agent::run() {
  // Others may pass through the state folder to their run folder, not list it (task_files.h).
  for (auto [dir, mode] :
       {std::pair{options_.state_dir, 0711}, std::pair{options_.state_dir + "/runs", 0711},
        std::pair{options_.state_dir + "/logs", 0700}}) {
    if (auto ok = make_owned_dir(dir, static_cast<mode_t>(mode)); !ok) return ok;
  }
  // Shared storage may belong to someone else: its mode is then theirs to set.
  if (auto ok = make_owned_dir(options_.checkpoint_root, 0711); !ok) {
    if (!std::filesystem::is_directory(options_.checkpoint_root)) return ok;
    log("warning: " + ok.error().message());
  }
  if (options_.task_uids) {
    for (const std::string& dir : {options_.state_dir, options_.checkpoint_root}) {
      for (auto up = std::filesystem::path(dir).parent_path(); !up.empty(); up = up.parent_path()) {
        struct stat info {};
        if (::stat(up.c_str(), &info) == 0 && (info.st_mode & S_IXOTH) == 0) {
          log(
              fmt::format("warning: {} is mode {:04o}: tasks, which run as other uids, cannot "
                          "pass through it to their folders under {} (chmod o+x it)",
                          up.string(), info.st_mode & 07777, dir));
        }
        if (up == up.parent_path()) break;
      }
    }
  }
  if (auto ok = register_node(); !ok) return ok;
  log(fmt::format(
      "tasks run {}, {}, {}; {}",
      options_.task_uids ? fmt::format("as uids {}-{} (one per job)", options_.task_uids->first,
                                       options_.task_uids->last)
                         : "as the agent's own user (it may not switch uids)",
      options_.pid_namespaces ? "in PID and mount namespaces of their own"
                              : "in the agent's PID namespace",
      cgroups_.usable ? "each in a cgroup under " + cgroups_.root : "without a cgroup",
      isolates_tenants() ? "tenants are isolated"
                         : (options_.allow_shared_node_without_isolation
                                ? "tenants are NOT isolated, and share the node "
                                  "(--allow-shared-node-without-isolation)"
                                : "tenants are not isolated: one tenant's tasks at a time")));
  load_state();
  enforce_log_quota();
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, SIGTERM);
  sigaddset(&wake, SIGINT);
  bool stopping = false;
  std::int64_t stop_deadline = 0;
  while (true) {
    const std::int64_t now = monotonic_ms();
    watch_tasks(now);
    {
      // After watch_tasks polled the leaders: what is left are strays, reparented to the agent.
      std::vector<pid_t> leaders;
      for (const auto& [key, task] : tasks_) {
        if (task.process && !task.exit) leaders.push_back(task.process->pid());
      }
      (void)reap_stray_children(leaders);
    }
    sync_logs(now);
    if (!stopping) ship_running_logs(now);
    if (!stopping && now >= next_heartbeat_ms_) {
      if (now >= next_sample_ms_) sample_gpus(now);
      heartbeat(now);
      next_heartbeat_ms_ = now + options_.heartbeat_ms;
    }
    if (!stopping) start_ready_tasks(now);
    // Tasks whose group is gone are done once their end is told: a stopped one needs no report
    // (the server took it away), one that ended on its own is reported first; both ship their
    // last output.
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      LocalTask& task = it->second;
      if (!task.group_gone || (!task.stop && !task.exit)) {
        ++it;
        continue;
      }
      if (task.stop) {
        ship_log(task);
      } else if (!task.reported) {
        report_exit(task);
      }
      if (task.stop || (task.reported && task.log_shipped >= file_size(task.log_path))) {
        if (task.cgroup) (void)task.cgroup->remove();
        const std::int64_t job = task.job;
        done_.insert(it->first);
        it = tasks_.erase(it);
        release_uid_if_unused(job);
        enforce_log_quota();
        state_dirty_ = true;
      } else {
        ++it;
      }
    }
    for (auto it = uids_to_clear_.begin(); it != uids_to_clear_.end();) {
      // A uid goes back to the pool only once no process has it any more.
      if (kill_processes_of_uid(it->second) == 0) {
        uids_.release(it->first);
        it = uids_to_clear_.erase(it);
      } else {
        ++it;
      }
    }
    if (state_dirty_) save_state();
    if (stopping && (tasks_.empty() || !options_.stop_tasks_on_exit || now >= stop_deadline)) {
      break;
    }
    const std::int64_t timeout = std::max<std::int64_t>(0, next_wake_ms(now) - monotonic_ms());
    const timespec wait{static_cast<time_t>(timeout / 1000),
                        static_cast<long>((timeout % 1000) * 1'000'000)};
    const int sig = ::sigtimedwait(&wake, nullptr, &wait);
    if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
      stopping = true;
      log(options_.stop_tasks_on_exit ? "stopping: stopping the tasks first"
                                      : "stopping: the tasks keep running for the next agent");
      stop_deadline = monotonic_ms() + options_.notice_ms + options_.grace_ms + 5000;
      if (options_.stop_tasks_on_exit) {
        for (auto& [key, task] : tasks_) {
          if (!task.stop && !task.group_gone) begin_stop(task, monotonic_ms());
        }
      }
    }
  }
  save_state();
  log("stopped");
  return {};
}

std::int64_t Agent::next_wake_ms(std::int64_t now_ms) const {
  std::int64_t next = next_heartbeat_ms_;
  for (const auto& [key, task] : tasks_) {
    if (task.stop || (task.exit && !task.group_gone)) {
      next = std::min(next, now_ms + kStoppingPollMs);
    } else {
      next = std::min(next, std::min(now_ms + kRunningPollMs, next_log_ship_ms_));
    }
  }
  if (!waiting_.empty() || !uids_to_clear_.empty()) {
    next = std::min(next, now_ms + kStoppingPollMs * 4);
  }
  return next;
}

void Agent::scrape_replicas(std::int64_t now_ms) {
  std::set<std::pair<std::int64_t, std::int64_t>> live;
  for (const auto& [key, task] : tasks_) {
    if (task.group_gone || task.stop || task.exit || !task.replica) continue;
    // A replica is one task; another task of the same run would read the same figures.
    if (!live.emplace(task.job, task.run).second) continue;
    replicas_.scrape(task.job, task.run, *task.replica, task.uid, now_ms);
  }
  for (const auto& [job, run] : replicas_.known()) {
    if (!live.contains({job, run})) replicas_.forget(job, run);
  }
}

void Agent::heartbeat(std::int64_t now_ms) {
  std::set<std::int64_t> jobs;
  for (const auto& [key, task] : tasks_) {
    if (!task.group_gone && !task.stop) jobs.insert(task.job);
  }
  scrape_replicas(now_ms);
  NodeHeartbeat beat{.running_jobs = {jobs.begin(), jobs.end()},
                     .healthy_gpus = static_cast<int>(gpu_info_.size()),
                     .gpus = samples_,
                     .replicas = replicas_.reports()};
  // The steps of the tasks still running; an ended task's go with its exit report.
  for (auto& [key, task] : tasks_) {
    if (task.exit || task.run < 1) continue;
    task.unsent_steps.merge(task.steps.take());
    if (task.unsent_steps.empty() || beat.steps.size() >= kMaxHeartbeatSteps) continue;
    beat.steps.push_back(TaskSteps{
        .job = task.job, .run = task.run, .task = task.index, .stats = task.unsent_steps});
  }
  auto reply = client_.post(fmt::format("/v1/nodes/{}/heartbeat", options_.node),
                            node_heartbeat_to_json(beat));
  if (reply && reply->ok()) {
    for (const TaskSteps& sent : beat.steps) {
      if (auto it = tasks_.find(TaskKey{sent.job, sent.run, sent.task}); it != tasks_.end()) {
        it->second.unsent_steps = StepStats{};
      }
    }
  }
  if (!reply) {
    // Said once, not at every heartbeat; the tasks keep running meanwhile.
    if (server_reachable_) log("heartbeat failed: " + reply.error().message());
    server_reachable_ = false;
    return;
  }
  if (!server_reachable_) log("the server answers again");
  server_reachable_ = true;
  if (!reply->ok()) {
    log("heartbeat refused: " + reply->error_text());
    return;
  }
  auto assigned = heartbeat_reply_from_json(reply->body);
  if (!assigned) {
    log("heartbeat reply not understood: " + assigned.error().message());
    return;
  }
  fail_rejected(assigned->rejected);
  reconcile(assigned->assignments, now_ms);
}

void Agent::fail_rejected(const std::vector<RejectedAssignment>& rejected) {
  for (const RejectedAssignment& bad : rejected) {
    if (bad.job <= 0) {
      if (rejected_logged_.insert(bad.error.message()).second) {
        log("an assignment of the heartbeat reply is skipped: " + bad.error.message());
      }
      continue;
    }
    if (rejected_.contains({bad.job, bad.run})) continue;
    const std::string reason =
        fmt::format("the agent cannot run this job: {}", bad.error.message());
    log(fmt::format("job {} run {}: {}; the job fails, the other assignments run", bad.job, bad.run,
                    reason));
    const JobStatusReport report{.state = "failed",
                                 .exit_code = std::nullopt,
                                 .message = reason,
                                 .task = std::nullopt,
                                 .run = bad.run > 0 ? std::optional(bad.run) : std::nullopt};
    auto reply =
        client_.post(fmt::format("/v1/jobs/{}/status", bad.job), job_status_report_to_json(report));
    if (!reply) continue;  // the server is away: told again at the next heartbeat
    if (!reply->ok()) {
      log(fmt::format("job {} failure not recorded: {}", bad.job, reply->error_text()));
    }
    rejected_.insert({bad.job, bad.run});
  }
}

bool Agent::isolates_tenants() const {
  return options_.task_uids.has_value() && (cgroups_.usable || options_.pid_namespaces);
}

std::string Agent::cgroup_name(const LocalTask& task) const {
  // The node's name and a hash of the state folder too: agents of several (fake) nodes, or of
  // several test runs, may share one cgroup. FNV-1a: the same name after a restart or an upgrade.
  std::uint32_t hash = 2166136261U;
  for (const char c : options_.state_dir) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 16777619U;
  }
  return fmt::format("{}-{:08x}-job-{}-run-{}-task-{}", options_.node, hash, task.job, task.run,
                     task.index);
}

void Agent::reconcile(const std::vector<NodeAssignment>& assignments, std::int64_t now_ms) {
  std::map<TaskKey, std::pair<NodeAssignment, AssignedTask>> wanted;
  for (const NodeAssignment& a : assignments) {
    for (const AssignedTask& t : a.tasks)
      wanted.emplace(TaskKey{a.job, a.run, t.index}, std::pair{a, t});
  }
  for (auto& [key, task] : tasks_) {
    const auto assigned = wanted.find(key);
    if (assigned == wanted.end()) {
      if (!task.stop && !task.group_gone) begin_stop(task, now_ms);
    } else {
      // Also for a task taken back after a restart, whose assignment tasks.json does not keep.
      task.replica = assigned->second.first.replica;
    }
  }
  waiting_.clear();
  for (auto& [key, entry] : wanted) {
    // A task that ended here is not started again, even while the server still lists it.
    if (!tasks_.contains(key) && !done_.contains(key)) waiting_.emplace(key, std::move(entry));
  }
  std::erase_if(done_, [&](const TaskKey& key) { return !wanted.contains(key); });
  std::erase_if(told_waiting_, [&](const TaskKey& key) { return !waiting_.contains(key); });
}

void Agent::start_ready_tasks(std::int64_t now_ms) {
  GpuHold held;
  for (const auto& [key, task] : tasks_) {
    if (!task.group_gone) held.add(task.gpus, task.mig, task.gpu_milli);
  }
  // Without isolation, one tenant at a time: the one whose tasks are here.
  std::set<std::string> tenants;
  for (const auto& [key, task] : tasks_) {
    if (!task.group_gone) tenants.insert(task.tenant);
  }
  const bool shared = isolates_tenants() || options_.allow_shared_node_without_isolation;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const auto& [assignment, task] = it->second;
    if (!held.free_for(task.gpus, mig_instance(task), assignment.gpu_milli)) {
      ++it;  // a task that is stopping still holds one of its GPUs (or its share or instance)
      continue;
    }
    if (!shared && !tenants.empty() && !tenants.contains(assignment.tenant)) {
      if (told_waiting_.insert(it->first).second) {
        log(
            fmt::format("job {} task {} (tenant {}) waits: this node cannot isolate tenants and "
                        "runs tasks of tenant {}; it starts when they are gone "
                        "(--allow-shared-node-without-isolation runs them together)",
                        assignment.job, task.index, assignment.tenant, *tenants.begin()));
      }
      ++it;
      continue;
    }
    told_waiting_.erase(it->first);
    start_task(it->first, assignment, task, now_ms);
    held.add(task.gpus, mig_instance(task), assignment.gpu_milli);
    tenants.insert(assignment.tenant);
    it = waiting_.erase(it);
  }
}

void Agent::start_task(const TaskKey& key, const NodeAssignment& assignment,
                       const AssignedTask& assigned, std::int64_t now_ms) {
  LocalTask task;
  task.job = assignment.job;
  task.run = assignment.run;
  task.index = assigned.index;
  task.gpus = assigned.gpus;
  task.mig = mig_instance(assigned);
  task.gpu_milli = assignment.gpu_milli;
  task.checkpoints = assignment.checkpoints;
  task.tenant = assignment.tenant;
  task.replica = assignment.replica;
  const std::string job_runs = fmt::format("{}/runs/{}", options_.state_dir, assignment.job);
  const std::string run_folder = fmt::format("{}/run-{}", job_runs, assignment.run);
  task.run_dir = fmt::format("{}/task-{}", run_folder, assigned.index);
  const std::string log_dir = fmt::format("{}/logs/{}", options_.state_dir, assignment.job);
  task.log_path = fmt::format("{}/task-{}.run-{}.log", log_dir, assigned.index, assignment.run);
  task.checkpoint_file = task.run_dir + "/checkpoints.jsonl";
  task.notice_file = task.run_dir + "/preemption-notice";
  task.step_file = task.run_dir + "/steps.txt";
  task.checkpoint_dir = fmt::format("{}/{}", options_.checkpoint_root, assignment.job);
  std::string failure;
  // A MIG instance the server assigned but this node's discovery does not have (the GPU was
  // partitioned anew, or the server's view is stale): the task would run on another instance,
  // or on none.
  if (auto instance = check_mig_instance(assigned, gpu_info_); !instance) {
    failure = instance.error().message();
  }
  if (failure.empty() && options_.task_uids) {
    if (auto uid = uids_.acquire(task.job); uid) {
      task.uid = *uid;
    } else {
      failure = uid.error().message();
    }
  }
  // The folders above the task's are the agent's, so that the job cannot swap them (task_files.h).
  if (failure.empty()) {
    for (auto [dir, mode, owner] :
         {std::tuple{job_runs, 0711, -1}, std::tuple{run_folder, 0711, -1},
          std::tuple{task.run_dir, 0700, task.uid}, std::tuple{log_dir, 0700, -1},
          std::tuple{task.checkpoint_dir, 0700, task.uid}}) {
      if (auto ok = make_owned_dir(dir, static_cast<mode_t>(mode), owner); !ok) {
        failure = ok.error().message();
        break;
      }
    }
  }
  if (failure.empty() && task.uid >= 0) {
    // Left by a run under another uid (here, or on a node that shares the folder).
    if (auto ok = give_tree_to(task.checkpoint_dir, task.uid); !ok) failure = ok.error().message();
  }
  TaskLaunch launch;
  launch.command = assignment.command;
  launch.environment = task_environment(assignment, assigned,
                                        TaskSetting{.agent_dir = options_.agent_dir,
                                                    .run_dir = task.run_dir,
                                                    .checkpoint_dir = task.checkpoint_dir,
                                                    .notice_file = task.notice_file,
                                                    .checkpoint_file = task.checkpoint_file,
                                                    .step_file = task.step_file,
                                                    .server_url = client_.server(),
                                                    .gpu_names = gpu_names_});
  launch.working_dir = assignment.working_dir.empty() ? task.run_dir : assignment.working_dir;
  launch.log_path = task.log_path;
  launch.uid = task.uid;
  launch.gid = task.uid;
  launch.own_pid_namespace = options_.pid_namespaces;
  if (failure.empty() && cgroups_.usable) {
    auto group = TaskCgroup::create(cgroups_.root, cgroup_name(task), assignment.cpu_milli_per_task,
                                    assignment.memory_mib_per_task, cgroups_.limits);
    if (group) {
      task.cgroup = std::move(*group);
      launch.cgroup_procs = task.cgroup->procs_path();
    } else {
      log(fmt::format("job {} task {}: no cgroup: {}", task.job, task.index,
                      group.error().message()));
    }
  }
  auto process =
      failure.empty() ? TaskProcess::start(launch) : Result<TaskProcess>(fail("", failure));
  if (!process) {
    // It cannot start here: say so; the job fails with the reason.
    log(fmt::format("job {} task {} cannot start: {}", task.job, task.index,
                    process.error().message()));
    task.exit = TaskExit{127, 0, "could not start: " + process.error().message()};
    task.group_gone = true;
    tasks_.emplace(key, std::move(task));
    state_dirty_ = true;
    return;
  }
  task.start_ticks = process_start_ticks(process->pid());
  log(fmt::format("job {} run {} task {} started as pid {} on GPU(s) [{}]{}{}", task.job, task.run,
                  task.index, process->pid(), fmt::join(task.gpus, ","),
                  assigned.mig ? fmt::format(", MIG {} at memory slice {} ({})",
                                             mig_profile_spec(assigned.mig->profile).name,
                                             assigned.mig->start, assigned.mig->uuid)
                               : std::string(),
                  task.uid >= 0 ? fmt::format(", uid {}", task.uid) : std::string()));
  task.process = std::move(*process);
  task.usage = group_usage(task.leader(), now_ms);
  tasks_.emplace(key, std::move(task));
  // Written down at once, not at the end of the round: an agent killed from here on leaves a
  // task that the next agent on the node takes back (or stops), never one nobody knows of.
  save_state();
}

void Agent::begin_stop(LocalTask& task, std::int64_t now_ms) {
  StopReason reason = StopReason::kPreempted;
  if (auto job = client_.get(fmt::format("/v1/jobs/{}", task.job)); job && job->ok()) {
    const std::string state = job->body.value("state", "");
    const std::string message = job->body.value("message", "");
    if (state == "cancelled") reason = StopReason::kCancelled;
    if (state == "failed" && message.find("max_runtime") != std::string::npos) {
      reason = StopReason::kMaxRuntime;
    }
  }
  const StopPlan plan{.reason = reason,
                      .give_notice = task.checkpoints,
                      .notice_signal = options_.notice_signal,
                      .notice_ms = options_.notice_ms,
                      .grace_ms = options_.grace_ms};
  auto stop = StopSequence::start(plan, now_ms);
  if (!stop) {
    log("cannot stop: " + stop.error().message());
    return;
  }
  task.stop = *stop;
  log(fmt::format("job {} task {}: stopping ({})", task.job, task.index, stop_reason_name(reason)));
  apply(task, task.stop->on_tick(now_ms), now_ms);
  state_dirty_ = true;
}

void Agent::apply(LocalTask& task, const std::vector<StopAction>& actions, std::int64_t now_ms) {
  for (const StopAction& action : actions) {
    if (action.kind == StopAction::Kind::kNotice) {
      // The task's folder is the job's: a link it left there is replaced, not followed.
      const std::filesystem::path notice(task.notice_file);
      if (auto ok = write_fresh_file(
              notice.parent_path().string(), notice.filename().string(),
              fmt::format("{} {}\n", stop_reason_name(task.stop->plan().reason), wall_ms()),
              task.uid);
          !ok) {
        log(fmt::format("job {} task {}: no notice file: {}", task.job, task.index,
                        ok.error().message()));
      }
    }
    const pid_t group = task.leader();
    if (task.process) {
      (void)task.process->signal_group(action.signal);
    } else if (group > 0 && !task.group_gone) {
      ::kill(-group, action.signal);
    }
    if (action.kind == StopAction::Kind::kKill) kill_everything(task);
    log(fmt::format("job {} task {}: {} (signal {}) at +{} ms", task.job, task.index,
                    stop_action_name(action.kind), action.signal,
                    now_ms - task.stop->times().requested_ms));
  }
}

bool Agent::task_gone(LocalTask& task) {
  bool group_gone = false;
  if (task.process) {
    if (auto exit = task.process->poll(); exit && !task.exit) {
      task.exit = *exit;
      state_dirty_ = true;
    }
    group_gone = task.exit.has_value() && !task.process->group_alive();
  } else if (task.adopted_pid > 0) {
    const bool leader_alive =
        process_start_ticks(task.adopted_pid) == task.start_ticks && task.start_ticks != 0;
    if (!leader_alive && !task.exit) {
      task.exit =
          TaskExit{-1, 0, "ended while the agent was restarting; its exit status is unknown"};
    }
    group_gone = !leader_alive && ::kill(-task.adopted_pid, 0) != 0 && errno == ESRCH;
  } else {
    group_gone = true;
  }
  // Processes that left the group (setsid, double forks) are still the task's while its cgroup
  // holds them.
  return group_gone && !(task.cgroup && task.cgroup->has_processes().value_or(false));
}

void Agent::kill_everything(LocalTask& task) {
  if (task.process) {
    (void)task.process->signal_group(SIGKILL);
  } else if (task.adopted_pid > 0 && !task.group_gone) {
    ::kill(-task.adopted_pid, SIGKILL);
  }
  if (task.cgroup) {
    if (auto ok = task.cgroup->kill_all(); !ok) {
      log(fmt::format("job {} task {}: {}", task.job, task.index, ok.error().message()));
    }
  }
}

void Agent::release_uid_if_unused(std::int64_t job) {
  const auto uid = uids_.of(job);
  if (!uid) return;
  for (const auto& [key, task] : tasks_) {
    if (task.job == job) return;
  }
  // Without a namespace or a cgroup to hold them, processes of the job may have escaped its
  // process group: anything of the job's uid still running is killed before another job gets the
  // uid. (Not otherwise: agents of several fake nodes on one machine may give one job the same
  // uid, and a task of it may still run under the other agent.)
  const bool contained = options_.pid_namespaces || cgroups_.usable;
  if (contained || kill_processes_of_uid(*uid) == 0) {
    uids_.release(job);
  } else {
    log(fmt::format("job {}: processes of uid {} outlived its tasks: killed", job, *uid));
    uids_to_clear_[job] = *uid;
  }
}

void Agent::sync_logs(std::int64_t now_ms) {
  if (now_ms < next_log_sync_ms_) return;
  next_log_sync_ms_ = now_ms + options_.log_sync_ms;
  for (const auto& [key, task] : tasks_) {
    if (!task.group_gone) (void)sync_file(task.log_path);
  }
}

void Agent::enforce_log_quota() {
  std::set<std::string> live;
  for (const auto& [key, task] : tasks_) live.insert(task.log_path);
  for (const std::string& removed :
       tidepool::enforce_log_quota(options_.state_dir + "/logs", live, options_.log_quota_bytes)) {
    log(fmt::format("log quota ({} bytes): removed {}, the log of a finished task",
                    options_.log_quota_bytes, removed));
  }
}

void Agent::watch_tasks(std::int64_t now_ms) {
  for (auto& [key, task] : tasks_) {
    forward_checkpoints(task, now_ms);
    read_steps(task, 1);
    if (!task.group_gone) {
      task.group_gone = task_gone(task);
      if (task.exit && !task.group_gone && !task.stop) {
        // The leader is gone but processes of the task remain: a task is its group and its
        // cgroup, so they go.
        kill_everything(task);
      }
      if (task.group_gone) {
        state_dirty_ = true;
        (void)sync_file(task.log_path);
      }
    }
    if (task.stop && !task.stop->done()) {
      if (task.group_gone) {
        (void)task.stop->on_exited(now_ms);
        const StopTimes& t = task.stop->times();
        std::string steps;
        if (t.notice_ms) steps += fmt::format(", notice at +{} ms", *t.notice_ms - t.requested_ms);
        if (t.checkpoint_ms) {
          steps += fmt::format(", checkpoint at +{} ms", *t.checkpoint_ms - t.requested_ms);
        }
        if (t.term_ms) steps += fmt::format(", SIGTERM at +{} ms", *t.term_ms - t.requested_ms);
        if (t.kill_ms) steps += fmt::format(", SIGKILL at +{} ms", *t.kill_ms - t.requested_ms);
        log(fmt::format("job {} task {}: stopped ({}){}; GPUs free {} ms after the stop began",
                        task.job, task.index, stop_reason_name(task.stop->plan().reason), steps,
                        *t.exited_ms - t.requested_ms));
      } else {
        apply(task, task.stop->on_tick(now_ms), now_ms);
      }
    }
  }
}

void Agent::forward_checkpoints(LocalTask& task, std::int64_t now_ms) {
  // The report is in the job's folder: read only a regular file, never through a link.
  std::int64_t size = 0;
  const std::string text =
      read_regular_file(task.checkpoint_file, task.checkpoint_read, kLogChunkBytes, &size);
  if (size <= task.checkpoint_read) return;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;
    const std::string line = text.substr(start, end - start);
    // The line `tidepool checkpoint` appended ({"job", "step", "path", "note", "at_ms"}): its
    // step, path and note are this run's CheckpointReport, whatever else the task wrote.
    auto value = nlohmann::json::parse(line, nullptr, false);
    nlohmann::json fields = nlohmann::json::object();
    if (value.is_object()) {
      for (const char* key : {"step", "path", "note"}) {
        if (value.contains(key)) fields[key] = value[key];
      }
    }
    fields["run"] = task.run;
    if (fields.contains("path")) {
      auto resolved = fields["path"].is_string()
                          ? resolve_within(fields["path"].get<std::string>(), task.checkpoint_dir)
                          : Result<std::string>(fail("path", "is not a string"));
      if (!resolved) {
        log(fmt::format("job {} task {}: checkpoint report dropped: {}", task.job, task.index,
                        resolved.error().message()));
        task.checkpoint_read += static_cast<std::int64_t>(end - start + 1);
        state_dirty_ = true;
        start = end + 1;
        continue;
      }
      fields["path"] = *resolved;
    }
    if (auto report = checkpoint_report_from_json(fields); !report) {
      // One the server would refuse is not sent: it is not recorded, as if refused there.
      log(fmt::format("job {} checkpoint not recorded: {}", task.job, report.error().message()));
    } else {
      auto reply = client_.post(fmt::format("/v1/jobs/{}/checkpoint", task.job),
                                checkpoint_report_to_json(*report));
      if (!reply) return;  // the server is away: the line is sent again later
      if (!reply->ok()) {
        log(fmt::format("job {} checkpoint not recorded: {}", task.job, reply->error_text()));
      } else {
        log(fmt::format("job {} task {}: checkpoint {}", task.job, task.index, report->path));
      }
    }
    task.checkpoint_read += static_cast<std::int64_t>(end - start + 1);
    state_dirty_ = true;
    if (task.stop) apply(task, task.stop->on_checkpoint(now_ms), now_ms);
    start = end + 1;
  }
}

void Agent::read_steps(LocalTask& task, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    // The file is in the job's folder: read only a regular file, never through a link.
    std::int64_t size = 0;
    const std::string bytes =
        read_regular_file(task.step_file, task.step_read, kMaxStepReadBytes, &size);
    if (size < task.step_read) task.step_read = 0;  // truncated or replaced: from its start
    if (bytes.empty()) return;
    task.steps.feed(bytes);
    task.step_read += static_cast<std::int64_t>(bytes.size());
    if (task.steps.first_refusal() && !task.step_refusal_logged) {
      task.step_refusal_logged = true;
      log(
          fmt::format("job {} task {}: a line of its step report is refused ({}); such lines are "
                      "counted and skipped, this is said once",
                      task.job, task.index, task.steps.first_refusal()->message()));
    }
  }
}

void Agent::report_exit(LocalTask& task) {
  ship_log(task);
  // The last lines of its step file, up to 16 reads more (4 MiB).
  read_steps(task, 16);
  task.unsent_steps.merge(task.steps.take());
  const bool ok = task.exit->exit_code == 0 && task.exit->signal == 0;
  const JobStatusReport report{
      .state = ok ? "succeeded" : "failed",
      .exit_code = task.exit->exit_code >= 0 ? std::optional(task.exit->exit_code) : std::nullopt,
      .message = task.cgroup && task.cgroup->oom_killed()
                     ? task.exit->reason + " (out of memory: over its limit)"
                     : task.exit->reason,
      .task = task.index,
      .run = task.run,
      .steps = task.unsent_steps.empty() || task.run < 1 ? std::nullopt
                                                         : std::optional(task.unsent_steps)};
  auto reply =
      client_.post(fmt::format("/v1/jobs/{}/status", task.job), job_status_report_to_json(report));
  if (!reply) return;  // again at the next turn
  if (!reply->ok()) {
    log(fmt::format("job {} task {} exit not recorded: {}", task.job, task.index,
                    reply->error_text()));
  } else {
    log(fmt::format("job {} task {}: {}", task.job, task.index, task.exit->reason));
  }
  task.unsent_steps = StepStats{};
  task.reported = true;
  state_dirty_ = true;
}

void Agent::ship_log(LocalTask& task) {
  for (int round = 0; round < 64; ++round) {
    const std::int64_t size = file_size(task.log_path);
    if (size <= task.log_shipped) return;
    const std::string chunk = read_from(task.log_path, task.log_shipped,
                                        std::min(kLogChunkBytes, size - task.log_shipped));
    if (chunk.empty()) return;
    // The server keeps each run's log apart: the offset is the one in this run's local log.
    auto reply = client_.post_bytes(fmt::format("/v1/jobs/{}/logs?task={}&run={}&offset={}",
                                                task.job, task.index, task.run, task.log_shipped),
                                    chunk);
    if (!reply) return;
    if (reply->status == 409) {
      if (auto held = log_conflict_from_json(reply->body); held && held->size < task.log_shipped) {
        // The server holds less than it acknowledged (it was restored from a backup, or this
        // agent's state is from before runs had logs of their own): send again from there.
        task.log_shipped = held->size;
        state_dirty_ = true;
        continue;
      }
    }
    if (!reply->ok()) {
      log(fmt::format("job {} task {}: log not shipped: {}", task.job, task.index,
                      reply->error_text()));
      task.log_shipped = size;  // the server will not take it: give up on these bytes
      state_dirty_ = true;
      return;
    }
    task.log_shipped += static_cast<std::int64_t>(chunk.size());
    state_dirty_ = true;
  }
}

void Agent::ship_running_logs(std::int64_t now_ms) {
  if (now_ms < next_log_ship_ms_) return;
  next_log_ship_ms_ = now_ms + options_.log_ship_ms;
  // While the server is away, the heartbeat finds out when it is back; the output waits.
  if (!server_reachable_) return;
  for (auto& [key, task] : tasks_) {
    if (!task.group_gone && !task.stop) ship_log(task);
  }
}

void Agent::sample_gpus(std::int64_t now_ms) {
  next_sample_ms_ = now_ms + options_.sample_ms;
  if (auto* fake = dynamic_cast<FakeGpuBackend*>(gpus_.get())) {
    std::vector<std::pair<int, std::int64_t>> load(gpu_info_.size(), {0, 0});
    for (auto& [key, task] : tasks_) {
      if (task.group_gone || task.gpus.empty()) continue;
      const GroupUsage now = group_usage(task.leader(), now_ms);
      const int percent = busy_percent(task.usage, now);
      task.usage = now;
      const std::int64_t memory_per_gpu = now.rss_mib / static_cast<std::int64_t>(task.gpus.size());
      for (int g : task.gpus) {
        if (g >= 0 && static_cast<std::size_t>(g) < load.size())
          load[static_cast<std::size_t>(g)] = {percent, memory_per_gpu};
      }
    }
    for (std::size_t g = 0; g < load.size(); ++g) {
      fake->set_load(static_cast<int>(g), load[g].first, load[g].second);
    }
  }
  auto samples = gpus_->sample();
  if (!samples) {
    log("cannot read the GPUs: " + samples.error().message());
    return;
  }
  samples_.clear();
  for (const GpuSample& s : *samples) {
    const std::size_t i = static_cast<std::size_t>(s.index);
    const bool known = i < gpu_info_.size();
    samples_.push_back(GpuReading{.index = s.index,
                                  .model = known ? gpu_info_[i].model : "",
                                  .utilization_percent = s.utilization_percent,
                                  .memory_used_mib = s.memory_used_mib,
                                  .memory_total_mib = known ? gpu_info_[i].memory_mib : 0,
                                  .power_milliwatts = s.power_milliwatts,
                                  .temperature_celsius = s.temperature_celsius,
                                  .throttle_reasons = s.throttle_reasons,
                                  .ecc_errors_uncorrected = s.ecc_errors_uncorrected});
  }
}

void Agent::save_state() {
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& [key, task] : tasks_) {
    if (task.group_gone && (task.reported || task.stop)) continue;
    nlohmann::json entry = {{"job", task.job},
                            {"run", task.run},
                            {"task", task.index},
                            {"gpus", task.gpus},
                            {"gpu_milli", task.gpu_milli},
                            {"checkpoints", task.checkpoints},
                            {"tenant", task.tenant},
                            {"uid", task.uid},
                            {"checkpoint_dir", task.checkpoint_dir},
                            {"pid", task.leader()},
                            {"start_ticks", task.start_ticks},
                            {"run_dir", task.run_dir},
                            {"log_path", task.log_path},
                            {"log_shipped", task.log_shipped},
                            {"checkpoint_read", task.checkpoint_read}};
    if (task.mig) {
      entry["mig"] = {{"profile", mig_profile_spec(task.mig->profile).name},
                      {"start", task.mig->start}};
    }
    tasks.push_back(std::move(entry));
  }
  const std::string path = options_.state_dir + "/tasks.json";
  const std::string temporary = path + ".new";
  {
    // Root only: it lists what the tasks are.
    const std::string text =
        nlohmann::json{{"node", options_.node}, {"tasks", std::move(tasks)}}.dump(1) + "\n";
    ::unlink(temporary.c_str());
    const int fd =
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    const bool written =
        fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (fd >= 0) ::close(fd);
    if (!written) {
      log(fmt::format("cannot write {}: {}", temporary, std::strerror(errno)));
      return;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    log(fmt::format("cannot replace {}: {}", path, std::strerror(errno)));
    return;
  }
  state_dirty_ = false;
}

void Agent::load_state() {
  const std::string path = options_.state_dir + "/tasks.json";
  std::ifstream in(path);
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  auto state = nlohmann::json::parse(text.str(), nullptr, false);
  if (!state.is_object() || !state.contains("tasks") || !state["tasks"].is_array()) {
    log(path + " is not readable JSON: ignored");
    return;
  }
  for (const nlohmann::json& entry : state["tasks"]) {
    try {
      LocalTask task;
      task.job = entry.at("job").get<std::int64_t>();
      task.run = entry.at("run").get<std::int64_t>();
      task.index = entry.at("task").get<int>();
      task.gpus = entry.at("gpus").get<std::vector<int>>();
      if (const auto mig = entry.find("mig"); mig != entry.end() && mig->is_object()) {
        // An instance this agent cannot read back holds its GPU whole (GpuHold): safe.
        if (auto profile = parse_mig_profile(mig->value("profile", std::string()))) {
          task.mig = MigInstance{.profile = *profile, .start = mig->value("start", 0)};
        }
      }
      // Without a share (an older agent's file) a task holds its GPUs whole: safe.
      task.gpu_milli = entry.value("gpu_milli", 1000);
      task.checkpoints = entry.value("checkpoints", false);
      task.tenant = entry.value("tenant", std::string());
      task.uid = entry.value("uid", -1);
      task.checkpoint_dir =
          entry.value("checkpoint_dir", fmt::format("{}/{}", options_.checkpoint_root, task.job));
      task.adopted_pid = entry.at("pid").get<pid_t>();
      task.start_ticks = entry.at("start_ticks").get<std::uint64_t>();
      task.run_dir = entry.at("run_dir").get<std::string>();
      task.log_path = entry.at("log_path").get<std::string>();
      task.checkpoint_file = task.run_dir + "/checkpoints.jsonl";
      task.notice_file = task.run_dir + "/preemption-notice";
      task.step_file = task.run_dir + "/steps.txt";
      // The steps it read but had not sent are gone with the agent: from here on, none twice.
      task.step_read = file_size(task.step_file);
      task.log_shipped = entry.value("log_shipped", std::int64_t{0});
      task.checkpoint_read = entry.value("checkpoint_read", std::int64_t{0});
      if (task.adopted_pid <= 1) continue;
      if (task.uid >= 0 && !uids_.restore(task.job, task.uid)) {
        log(
            fmt::format("job {}: uid {} of {} is not in --task-uids or is another job's: kept "
                        "for this task only",
                        task.job, task.uid, path));
      }
      if (cgroups_.usable) {
        // The group the task was started in, if it is there: killed with the task.
        if (auto group = TaskCgroup::create(cgroups_.root, cgroup_name(task), 0, 0, false)) {
          task.cgroup = std::move(*group);
        }
      }
      const bool alive = process_start_ticks(task.adopted_pid) == task.start_ticks;
      log(fmt::format("job {} run {} task {}: pid {} {}", task.job, task.run, task.index,
                      task.adopted_pid, alive ? "still runs: taken back" : "ended meanwhile"));
      tasks_.emplace(TaskKey{task.job, task.run, task.index}, std::move(task));
    } catch (const nlohmann::json::exception& e) {
      log(fmt::format("{}: an entry is malformed ({}): ignored", path, e.what()));
    }
  }
  state_dirty_ = true;
}

}  // namespace tidepool
