#include "server/server_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <utility>

#include "api/agent_wire.h"
#include "api/body_fields.h"
#include "core/scheduler.h"

namespace tidepool {
namespace {

constexpr std::array<std::string_view, 6> kStateNames = {"pending", "running",   "succeeded",
                                                         "failed",  "cancelled", "preempted"};

// Reads `object[key]` as T (absent: the default); a wrong type fails naming the key.
template <class T>
Result<T> read_field(const nlohmann::json& object, const char* key, T fallback = {}) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception& e) {
    return fail(key, fmt::format("unexpected value: {}", e.what()));
  }
}

}  // namespace

std::string_view job_state_name(JobState state) {
  return kStateNames[static_cast<std::size_t>(state)];
}

Result<JobState> parse_job_state(std::string_view name) {
  for (std::size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == name) return static_cast<JobState>(i);
  }
  return fail("state", fmt::format("unknown job state '{}'; states: pending, running, succeeded, "
                                   "failed, cancelled, preempted",
                                   name));
}

std::optional<JobId> job_id_from_wire(std::int64_t id) {
  if (id < 1 || id > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
  return JobId{static_cast<std::uint32_t>(id)};
}

void ServerJob::move_to(JobState next, Instant at, std::string reason) {
  state = next;
  if (!reason.empty()) message = reason;
  transitions.push_back(Transition{next, at, std::move(reason)});
}

void ServerJob::note_ran_on() {
  last_placement = placement;
  for (const TaskPlace& p : placement) {
    auto at = std::ranges::lower_bound(ran_on, p.node);
    if (at == ran_on.end() || *at != p.node) ran_on.insert(at, p.node);
  }
}

nlohmann::json server_job_to_json(const ServerJob& job) {
  nlohmann::json transitions = nlohmann::json::array();
  for (const Transition& t : job.transitions) {
    transitions.push_back(
        {{"state", job_state_name(t.state)}, {"at_ms", unix_ms(t.at)}, {"reason", t.reason}});
  }
  const auto places_json = [](const std::vector<TaskPlace>& places) {
    nlohmann::json out = nlohmann::json::array();
    for (const TaskPlace& p : places) {
      nlohmann::json place = {{"node", p.node}, {"gpus", p.gpus}};
      if (p.mig_start >= 0) place["mig_start"] = p.mig_start;
      out.push_back(std::move(place));
    }
    return out;
  };
  nlohmann::json out = {
      {"id", job.id},
      {"spec", job_spec_to_json(job.spec)},
      {"state", job_state_name(job.state)},
      {"transitions", std::move(transitions)},
      {"placement", places_json(job.placement)},
      {"submitted_ms", unix_ms(job.submitted_at)},
      {"started_ms", unix_ms(job.started_at)},
      {"ended_ms", unix_ms(job.ended_at)},
      {"starts", job.starts},
      {"preemptions", job.preemptions},
      {"message", job.message},
      {"last_checkpoint_ms", unix_ms(job.last_checkpoint_at)},
  };
  // Derived, for readers that do not know MIG profiles: what a task takes of each of its GPUs.
  if (job.spec.mig_profile) out["task_gpu_milli"] = task_gpu_milli(job.spec);
  if (!job.idempotency_key.empty()) out["idempotency_key"] = job.idempotency_key;
  if (!job.submitter_token.empty()) out["submitter_token"] = job.submitter_token;
  if (!job.submitter.empty()) out["submitter"] = job.submitter;
  if (!job.held.empty()) out["held"] = job.held;
  if (job.array_job != JobId{}) {
    out["array_job"] = job.array_job;
    out["array_index"] = job.array_index;
  }
  if (job.exit_code) out["exit_code"] = *job.exit_code;
  if (job.checkpoint_step) out["checkpoint_step"] = *job.checkpoint_step;
  if (!job.checkpoint_path.empty()) out["checkpoint_path"] = job.checkpoint_path;
  if (!job.ran_on.empty()) out["ran_on"] = job.ran_on;
  if (!job.last_placement.empty() && job.last_placement != job.placement) {
    out["last_placement"] = places_json(job.last_placement);
  }
  if (!job.tasks_done.empty()) out["tasks_done"] = job.tasks_done;
  if (job.lost_work != Millis{0}) out["lost_work_ms"] = job.lost_work.count();
  if (job.attained_gpu_seconds != 0) out["ended_runs_gpu_seconds"] = job.attained_gpu_seconds;
  if (job.faults != 0) out["faults"] = job.faults;
  if (job.bursts != 0) out["bursts"] = job.bursts;
  if (job.replica_of != JobId{}) {
    out["replica_of"] = job.replica_of;
    out["replica_port"] = job.replica_port;
    if (job.draining_since != kNotYet) out["draining_ms"] = unix_ms(job.draining_since);
  }
  if (!job.steps.empty()) out["steps"] = step_stats_to_json(job.steps);
  if (job.prewarm) {
    out["prewarm"] = {{"prewarmed", job.prewarm->prewarmed}, {"lead_seconds", job.prewarm->lead}};
  }
  if (job.burst) {
    const BurstRun& b = *job.burst;
    out["burst"] = {{"offer", b.offer},
                    {"provider", b.provider},
                    {"nodes", b.nodes},
                    {"tokens", b.tokens},
                    {"requested_ms", unix_ms(b.requested_at)},
                    {"charged_to_ms", unix_ms(b.charged_to)}};
  }
  return out;
}

Result<ServerJob> server_job_from_json(const nlohmann::json& value) {
  if (!value.is_object()) return fail("job", "expected a JSON object");
  ServerJob job;
  auto id = read_field<std::int64_t>(value, "id");
  if (!id) return std::unexpected(id.error());
  auto job_id = job_id_from_wire(*id);
  if (!job_id) return fail("id", fmt::format("{} is not a job id", *id));
  job.id = *job_id;
  auto spec_it = value.find("spec");
  if (spec_it == value.end()) return fail("spec", "missing");
  auto spec = job_spec_from_json(*spec_it);
  if (!spec) return fail("spec." + spec.error().field, spec.error().reason);
  job.spec = std::move(*spec);
  auto state = read_field<std::string>(value, "state");
  if (!state) return std::unexpected(state.error());
  auto parsed_state = parse_job_state(*state);
  if (!parsed_state) return std::unexpected(parsed_state.error());
  job.state = *parsed_state;
  if (auto it = value.find("transitions"); it != value.end() && it->is_array()) {
    for (const nlohmann::json& t : *it) {
      if (!t.is_object()) return fail("transitions", "expected objects");
      auto name = read_field<std::string>(t, "state");
      auto at = read_field<std::int64_t>(t, "at_ms");
      auto reason = read_field<std::string>(t, "reason");
      if (!name || !at || !reason) return fail("transitions", "malformed transition");
      auto s = parse_job_state(*name);
      if (!s) return std::unexpected(s.error());
      job.transitions.push_back(Transition{*s, instant_from_unix_ms(*at), std::move(*reason)});
    }
  }
  for (auto [key, places] :
       {std::pair{"placement", &job.placement}, std::pair{"last_placement", &job.last_placement}}) {
    auto it = value.find(key);
    if (it == value.end() || !it->is_array()) continue;
    for (const nlohmann::json& p : *it) {
      if (!p.is_object()) return fail(key, "expected objects");
      auto node = read_field<std::string>(p, "node");
      auto gpus = read_field<std::vector<int>>(p, "gpus");
      if (!node || !gpus) return fail(key, "malformed task place");
      int mig_start = -1;
      if (auto start = p.find("mig_start"); start != p.end()) {
        if (!start->is_number_integer() || *start < 0 || *start >= kMigMemorySlices) {
          return fail(key, "malformed task place: mig_start is a memory slice 0..7");
        }
        mig_start = start->get<int>();
      }
      places->push_back(TaskPlace{std::move(*node), std::move(*gpus), mig_start});
    }
  }
  // Written only when it differs from a running job's placement.
  if (!value.contains("last_placement")) job.last_placement = job.placement;
  auto ran_on = read_field<std::vector<std::string>>(value, "ran_on");
  if (!ran_on) return std::unexpected(ran_on.error());
  job.ran_on = std::move(*ran_on);
  auto tasks_done = read_field<std::vector<int>>(value, "tasks_done");
  if (!tasks_done) return std::unexpected(tasks_done.error());
  job.tasks_done = std::move(*tasks_done);
  // Figures absent from the document keep their defaults.
  const auto count = body_fields::integer_in(0, std::numeric_limits<std::int64_t>::max());
  const auto job_number = body_fields::integer_in(0, std::numeric_limits<std::uint32_t>::max());
  const auto unix_time = [&count](const nlohmann::json& v,
                                  const std::string& path) -> Result<Instant> {
    auto ms = count(v, path);
    if (!ms) return std::unexpected(ms.error());
    return instant_from_unix_ms(*ms);
  };
  const auto span = [&count](const nlohmann::json& v, const std::string& path) -> Result<Millis> {
    auto ms = count(v, path);
    if (!ms) return std::unexpected(ms.error());
    return Millis{*ms};
  };
  std::int64_t array_job = 0;
  std::int64_t replica_of = 0;
  const auto text = [](const nlohmann::json& v, const std::string& path) {
    return body_fields::read_text(v, path, std::numeric_limits<std::size_t>::max());
  };
  if (auto ok = body_fields::first_failure(
          {body_fields::read_optional(value, "", "idempotency_key", job.idempotency_key, text),
           body_fields::read_optional(value, "", "submitter_token", job.submitter_token, text),
           body_fields::read_optional(value, "", "submitter", job.submitter, text),
           body_fields::read_optional(value, "", "held", job.held, text),
           body_fields::read_optional(value, "", "array_job", array_job, job_number),
           body_fields::read_optional(value, "", "array_index", job.array_index, count),
           body_fields::read_optional(value, "", "submitted_ms", job.submitted_at, unix_time),
           body_fields::read_optional(value, "", "started_ms", job.started_at, unix_time),
           body_fields::read_optional(value, "", "ended_ms", job.ended_at, unix_time),
           body_fields::read_optional(value, "", "starts", job.starts, count),
           body_fields::read_optional(value, "", "preemptions", job.preemptions, count),
           body_fields::read_optional(value, "", "message", job.message, text),
           body_fields::read_optional(value, "", "last_checkpoint_ms", job.last_checkpoint_at,
                                      unix_time),
           body_fields::read_optional(value, "", "exit_code", job.exit_code,
                                      body_fields::integer_in(kMinExitCode, kMaxExitCode)),
           body_fields::read_optional(value, "", "checkpoint_step", job.checkpoint_step, count),
           body_fields::read_optional(value, "", "checkpoint_path", job.checkpoint_path, text),
           body_fields::read_optional(value, "", "lost_work_ms", job.lost_work, span),
           body_fields::read_optional(value, "", "ended_runs_gpu_seconds", job.attained_gpu_seconds,
                                      body_fields::integer_in(0, kMaxAttainedGpuSeconds)),
           body_fields::read_optional(value, "", "faults", job.faults, count),
           body_fields::read_optional(value, "", "bursts", job.bursts, count),
           body_fields::read_optional(value, "", "replica_of", replica_of, job_number),
           body_fields::read_optional(value, "", "replica_port", job.replica_port,
                                      body_fields::integer_in(0, 65'535)),
           body_fields::read_optional(value, "", "draining_ms", job.draining_since, unix_time)});
      !ok) {
    return std::unexpected(ok.error());
  }
  // Documents from before step telemetry have none.
  if (const nlohmann::json* steps = body_fields::member(value, "steps")) {
    auto read = step_stats_from_json(*steps, "steps");
    if (!read) return std::unexpected(read.error());
    job.steps = std::move(*read);
  }
  job.array_job = JobId{static_cast<std::uint32_t>(array_job)};
  job.replica_of = JobId{static_cast<std::uint32_t>(replica_of)};
  if (auto it = value.find("burst"); it != value.end() && !it->is_null()) {
    if (!it->is_object()) return fail("burst", "expected an object");
    BurstRun b;
    auto offer = read_field<std::string>(*it, "offer");
    auto provider = read_field<std::string>(*it, "provider");
    auto nodes = read_field<std::vector<std::string>>(*it, "nodes");
    auto tokens = read_field<std::vector<std::string>>(*it, "tokens");
    auto requested = read_field<std::int64_t>(*it, "requested_ms");
    auto charged = read_field<std::int64_t>(*it, "charged_to_ms");
    if (!offer || !provider || !nodes || !tokens || !requested || !charged || offer->empty()) {
      return fail("burst", "malformed rented run");
    }
    b.offer = std::move(*offer);
    b.provider = std::move(*provider);
    b.nodes = std::move(*nodes);
    b.tokens = std::move(*tokens);
    b.requested_at = instant_from_unix_ms(*requested);
    b.charged_to = instant_from_unix_ms(*charged);
    job.burst = std::move(b);
  }
  if (auto it = value.find("prewarm"); it != value.end() && !it->is_null()) {
    if (!it->is_object()) return fail("prewarm", "expected an object");
    auto prewarmed = read_field<bool>(*it, "prewarmed");
    auto lead = read_field<Seconds>(*it, "lead_seconds");
    if (!prewarmed || !lead || *lead < 0) return fail("prewarm", "malformed pre-warmed start");
    job.prewarm = PrewarmedStart{*prewarmed, *lead};
  }
  return job;
}

JobRecord to_record(const ServerJob& job) {
  return JobRecord{wire_job_id(job.id), job.spec.tenant,
                   job.spec.queue,      std::string(job_state_name(job.state)),
                   job.idempotency_key, server_job_to_json(job).dump()};
}

Result<ServerJob> from_record(const JobRecord& record) {
  auto value = nlohmann::json::parse(record.document, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return fail(fmt::format("job {}", record.id), "stored document is not valid JSON");
  }
  auto job = server_job_from_json(value);
  if (!job) {
    return fail(fmt::format("job {} {}", record.id, job.error().field), job.error().reason);
  }
  return job;
}

}  // namespace tidepool
