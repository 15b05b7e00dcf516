// The job desk's commands: submission, cancellation, the agents' reports and task log access.
#include "server/job_desk.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "core/feasibility.h"

namespace tidepool {

Error no_such_task(JobId job, std::int64_t tasks) {
  return Error{"task", tasks == 1
                           ? fmt::format("job {} has 1 task, task 0", job)
                           : fmt::format("job {} has {} tasks, 0..{}", job, tasks, tasks - 1)};
}

// --- submission ---

Outcome<JobDesk::Submitted> JobDesk::submit(const Principal& who, JobSpec spec,
                                            const std::string& idempotency_key, Instant now,
                                            Batch& batch) {
  if (who.role == Role::kAgent) return forbidden("role", "agent tokens cannot submit jobs");
  if (who.role == Role::kUser && spec.tenant != who.tenant) {
    return forbidden("tenant", fmt::format("this token acts for tenant '{}' only", who.tenant));
  }
  // The key is stored in the job's JSON document: printable ASCII only, so that it is valid
  // UTF-8 whatever bytes the header carried.
  if (idempotency_key.size() > 255 ||
      !std::ranges::all_of(idempotency_key, [](char c) { return c >= 0x20 && c < 0x7f; })) {
    return refuse(Refusal::kInvalid,
                  Error{"Idempotency-Key", "at most 255 printable ASCII characters"});
  }
  if (!idempotency_key.empty()) {
    if (auto it = idempotency_.find({spec.tenant, idempotency_key}); it != idempotency_.end()) {
      const ServerJob& existing = state_.jobs().at(it->second);
      // An array's key names its first job, whose spec is the array's as that job got it.
      const bool same = existing.array_job != JobId{}
                            ? existing.spec == array_member(spec, existing.id, existing.array_index)
                            : existing.spec == spec;
      if (!same) {
        return conflict("Idempotency-Key",
                        fmt::format("key already used for job {} with another spec; use a new "
                                    "key for a new job",
                                    existing.id));
      }
      return Submitted{&existing, false};
    }
  }
  auto job = spec.array.empty() ? admit(who, std::move(spec), idempotency_key, now, batch, 1, {})
                                : submit_array(who, spec, idempotency_key, now, batch);
  if (!job) return std::unexpected(job.error());
  return Submitted{*job, true};
}

Outcome<const ServerJob*> JobDesk::admit(const Principal& who, JobSpec spec,
                                         const std::string& idempotency_key, Instant now,
                                         Batch& batch, std::int64_t admitted, ArrayPlace array,
                                         JobId replica_of) {
  // Ids are never used again: the last one, 2^32-1, is the last job.
  if (next_job_id_ == JobId{std::numeric_limits<std::uint32_t>::max()}) {
    return refuse(Refusal::kUnavailable,
                  Error{"id", "the server has given every job id; it takes no new jobs"});
  }
  ServerJob job;
  job.array_job = array.job;
  job.array_index = array.index;
  job.replica_of = replica_of;
  job.id = next_job_id_;
  job.spec = std::move(spec);
  job.idempotency_key = idempotency_key;
  job.submitter_token = who.token_id;
  if (auto token = state_.tokens().find(who.token_id)) job.submitter = token->description;
  job.submitted_at = now;
  job.move_to(JobState::kPending, now, "submitted");
  Scheduler& scheduler = state_.scheduler();
  auto core = state_.to_core_job(job, scheduler.book());
  if (!core) return refuse(Refusal::kInvalid, "invalid job", core.error());
  if (auto runnable = check_runnable(job.spec); !runnable) {
    return refuse(Refusal::kInvalid, "invalid job spec", runnable.error());
  }
  // A job that could never run is refused now rather than left to wait forever.
  if (auto ever = check_can_ever_start(*core, scheduler.pool(),
                                       scheduler.config().quotas ? &scheduler.book() : nullptr);
      !ever) {
    return refuse(Refusal::kInvalid, "cannot ever run",
                  Error{spec_field(ever.error().field), ever.error().reason});
  }
  if (auto ok = check_dependencies(who, job.spec); !ok) return std::unexpected(ok.error());
  if (admitted > 0) {
    if (auto ok = check_admission(job.spec.tenant, core->tenant, now, admitted); !ok) {
      return std::unexpected(ok.error());
    }
  }
  // A service runs from now: its replicas are jobs of their own that the service desk submits
  // (service_desk.h); the service itself is never queued, placed or live.
  if (job.spec.service) {
    job.move_to(JobState::kRunning, now, "service started: its replicas are scheduled as jobs");
    job.started_at = now;
  } else if (state_.unmet_dependencies(job).empty()) {
    // A job that waits for others is queued once they have succeeded (settle_dependents).
    if (auto ok = scheduler.submit(*core, unix_seconds(now)); !ok) {
      return refuse(Refusal::kInvalid, "invalid job",
                    Error{spec_field(ok.error().field), ok.error().reason});
    }
  }
  ++next_job_id_.value;
  if (!idempotency_key.empty()) idempotency_[{job.spec.tenant, idempotency_key}] = job.id;
  if (!job.spec.service) add_live(job);
  state_.mark_dirty();
  state_.record_job(batch, job, now, "job.submitted");
  const JobId id = job.id;
  return &state_.jobs().emplace(id, std::move(job)).first->second;
}

Outcome<const ServerJob*> JobDesk::submit_replica(const ServerJob& service,
                                                  const std::string& model, Instant now,
                                                  Batch& batch) {
  JobSpec spec = service.spec;
  spec.service.reset();
  if (!model.empty()) spec.gpu_models = {model};
  spec.env["TIDEPOOL_SERVICE"] = fmt::format("{}", service.id);
  const Principal submitter{.token_id = service.submitter_token,
                            .role = Role::kUser,
                            .tenant = service.spec.tenant,
                            .node = {}};
  return admit(submitter, std::move(spec), "", now, batch, 0, {}, service.id);
}

Outcome<void> JobDesk::check_admission(const std::string& tenant, TenantId id, Instant now,
                                       std::int64_t jobs) {
  std::int64_t pending = state_.scheduler().pending_count(id);
  for (JobId parked : parked_) {
    if (state_.jobs().at(parked).spec.tenant == tenant) ++pending;
  }
  return gate_.admit(tenant, pending, jobs, now);
}

// --- cancellation and reports ---

Outcome<const ServerJob*> JobDesk::cancel(const Principal& who, JobId id, Instant now,
                                          Batch& batch) {
  if (who.role == Role::kAgent) return forbidden("role", "agent tokens cannot cancel jobs");
  auto found = state_.visible_job(who, id);
  if (!found) return std::unexpected(found.error());
  ServerJob& job = **found;
  if (is_final(job.state)) {
    return conflict("id", fmt::format("job {} already ended: {}", id, job_state_name(job.state)));
  }
  end_job(job, JobState::kCancelled,
          fmt::format("cancelled by token {} ({})", who.token_id, role_name(who.role)), now, batch);
  return &job;
}

Outcome<ServerJob*> JobDesk::running_job(const Principal& who, JobId id) {
  auto found = state_.visible_job(who, id);
  if (!found) return std::unexpected(found.error());
  if ((*found)->state != JobState::kRunning) {
    return conflict("state",
                    fmt::format("job {} is {}, not running", id, job_state_name((*found)->state)));
  }
  return *found;
}

Outcome<const ServerJob*> JobDesk::report_status(const Principal& who, JobId id,
                                                 const JobStatusReport& report, Instant now,
                                                 Batch& batch) {
  if (who.role == Role::kUser) {
    return forbidden("role", "job status is reported by the agent of the job's node or an admin");
  }
  auto found = running_job(who, id);
  if (!found) return std::unexpected(found.error());
  ServerJob& job = **found;
  if (auto ok = check_agent_report(who, job, report.task, report.run); !ok) {
    return std::unexpected(ok.error());
  }
  if (report.run && *report.run != job.starts) {
    return conflict("run", fmt::format("job {} is in run {}; this report is about run {}", id,
                                       job.starts, *report.run));
  }
  // The last steps of an ended task (the wire has them only with its task and run).
  if (report.steps && report.task && *report.task < job.spec.tasks) {
    job.steps.merge(*report.steps);
  }
  if (report.state == "running") return &job;
  auto state = parse_job_state(report.state);
  if (!state || (*state != JobState::kSucceeded && *state != JobState::kFailed)) {
    return refuse(Refusal::kInvalid, Error{"state", "a job reports running, succeeded or failed"});
  }
  if (report.task && *report.task >= job.spec.tasks) {
    return refuse(
        Refusal::kInvalid,
        Error{"task", fmt::format("job {} has {} task(s), numbered from 0", id, job.spec.tasks)});
  }
  if (report.task && *state == JobState::kSucceeded) {
    auto at = std::ranges::lower_bound(job.tasks_done, *report.task);
    if (at == job.tasks_done.end() || *at != *report.task) job.tasks_done.insert(at, *report.task);
    if (std::cmp_less(job.tasks_done.size(), job.spec.tasks)) {
      PlaneState::stage(batch, job);
      return &job;
    }
  }
  job.exit_code = report.exit_code;
  std::string reason = report.message;
  if (reason.empty()) {
    reason = report.exit_code ? fmt::format("exited with code {}", *report.exit_code)
                              : std::string(report.state);
    if (report.task && job.spec.tasks > 1 && *state == JobState::kFailed) {
      reason = fmt::format("task {} {}", *report.task, reason);
    }
  }
  end_job(job, *state, std::move(reason), now, batch);
  return &job;
}

Outcome<const ServerJob*> JobDesk::report_checkpoint(const Principal& who, JobId id,
                                                     const CheckpointReport& report, Instant now,
                                                     Batch& batch) {
  // A job being stopped checkpoints after the server took it off its nodes: any job that has not
  // ended may report one.
  auto found = state_.visible_job(who, id);
  if (!found) return std::unexpected(found.error());
  ServerJob& job = **found;
  if (is_final(job.state)) {
    return conflict("id", fmt::format("job {} already ended: {}", id, job_state_name(job.state)));
  }
  if (auto ok = check_agent_report(who, job, std::nullopt, report.run); !ok) {
    return std::unexpected(ok.error());
  }
  if (report.run && *report.run != job.starts) {
    return conflict("run", fmt::format("job {} is in run {}; this checkpoint is of run {}", id,
                                       job.starts, *report.run));
  }
  job.last_checkpoint_at = now;
  if (report.step) job.checkpoint_step = report.step;
  if (!report.path.empty()) job.checkpoint_path = report.path;
  PlaneState::stage(batch, job);
  state_.emit(batch, now, "job.checkpointed",
              {{"job", job.id},
               {"tenant", job.spec.tenant},
               {"step", report.step.value_or(-1)},
               {"path", report.path},
               {"note", report.note}});
  return &job;
}

Outcome<const ServerJob*> JobDesk::log_access(const Principal& who, JobId id, bool write,
                                              std::optional<int> task,
                                              std::optional<std::int64_t> run) const {
  auto visible = state_.visible_job(who, id);
  if (!visible) return std::unexpected(visible.error());
  const ServerJob& job = **visible;
  if (write && who.role == Role::kUser) {
    return forbidden("role", "task logs are written by the agents of the job's nodes");
  }
  if (write && who.role == Role::kAgent && run && *run >= 1 && *run < job.starts) {
    // A run that ended: its node may still ship the last of its output (each run has its own
    // log, so nothing mixes with the run after it).
    if (task && (*task < 0 || *task >= job.spec.tasks)) {
      return refuse(Refusal::kInvalid, no_such_task(job.id, job.spec.tasks));
    }
    if (!std::ranges::binary_search(job.ran_on, who.node)) {
      return forbidden("node", fmt::format("no run of job {} ran on node {}", job.id, who.node));
    }
  } else if (write) {
    if (auto ok = check_agent_report(who, job, task, run); !ok) return std::unexpected(ok.error());
  }
  return &job;
}

Outcome<void> JobDesk::check_agent_report(const Principal& who, const ServerJob& job,
                                          std::optional<int> task,
                                          std::optional<std::int64_t> run) {
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
    return conflict("run", fmt::format("job {} is in run {}; this report is about run {}", job.id,
                                       job.starts, *run));
  }
  const std::vector<TaskPlace>& places = job.last_placement;
  const bool placed_here =
      task ? std::cmp_less(*task, places.size()) && places[*task].node == who.node
           : std::ranges::any_of(places, [&](const TaskPlace& p) { return p.node == who.node; });
  if (!placed_here) {
    return forbidden(
        task ? "task" : "node",
        task ? fmt::format("run {} of job {} does not run task {} on node {}", *run, job.id, *task,
                           who.node)
             : fmt::format("run {} of job {} does not run on node {}", *run, job.id, who.node));
  }
  return {};
}

}  // namespace tidepool
