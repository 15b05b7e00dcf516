// libFuzzer target: the request body readers (api/api_bodies.h, api/agent_wire.h and
// job_spec_from_json) on arbitrary text: parse_body as JSON or YAML, chosen by the first input byte
// (even: JSON, odd: YAML), then every reader on the same value; and the step line protocol
// (api/step_report.h: what a job writes to its TIDEPOOL_STEP_REPORT) on the text itself. They must
// return a value or an Error, never throw or crash (an exception is not caught here: it aborts the
// run); every error says something in valid UTF-8, and what reads keeps the promises of
// api_bodies.h and agent_wire.h (an agent message read back from its to_json is the same). Built
// and run by run_fuzz.sh.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/agent_wire.h"
#include "api/api_bodies.h"
#include "api/body_fields.h"
#include "api/job_spec.h"
#include "api/step_report.h"
#include "core/tenants.h"

namespace {

// The error of `result`, checked, or nothing.
template <class T>
bool failed(const tidepool::Result<T>& result) {
  if (result) return false;
  const std::string message = result.error().message();
  if (result.error().reason.empty() || !tidepool::body_fields::valid_utf8(message) ||
      message.size() > 4096) {
    std::fprintf(stderr, "bad error message (%zu bytes): %s\n", message.size(), message.c_str());
    std::abort();
  }
  return true;
}

// Whether `value`, written with `write`, reads back equal with `read`.
template <class T, class Write, class Read>
bool reads_back(const T& value, Write write, Read read) {
  auto back = read(write(value));
  return back.has_value() && *back == value;
}

void check(bool promise, const char* what) {
  if (!promise) {
    std::fprintf(stderr, "broken promise: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tidepool;
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  {
    // Whatever a job writes, in whatever pieces: each line is a step or a refusal, and what was
    // read reads back from its JSON.
    StepLineReader reader;
    reader.feed(body.substr(0, body.size() / 2));
    reader.feed(body.substr(body.size() / 2));
    reader.feed("\n");
    const StepStats stats = reader.take();
    const auto lines = static_cast<std::int64_t>(std::count(body.begin(), body.end(), '\n')) + 1;
    check(stats.steps.count() + stats.refused_lines <= lines, "one figure per line");
    check(reads_back(
              stats, [](const StepStats& s) { return step_stats_to_json(s); },
              [](const nlohmann::json& j) { return step_stats_from_json(j, "steps"); }),
          "step stats round trip");
  }
  auto value = parse_body(body, data[0] % 2 == 0 ? BodyFormat::kJson : BodyFormat::kYaml);
  if (failed(value)) return 0;

  if (auto report = job_status_report_from_json(*value); !failed(report)) {
    check(report->state == "running" || report->state == "succeeded" || report->state == "failed",
          "state");
    check(!report->exit_code || (*report->exit_code >= -255 && *report->exit_code <= 255),
          "exit_code");
    check(reads_back(*report, job_status_report_to_json, job_status_report_from_json),
          "status round trip");
  }
  if (auto report = checkpoint_report_from_json(*value); !failed(report)) {
    check(!report->step || *report->step >= 0, "step");
    check(reads_back(*report, checkpoint_report_to_json, checkpoint_report_from_json),
          "checkpoint round trip");
  }
  if (auto update = tenant_update_from_json(*value); !failed(update)) {
    check(!update->queues.empty(), "queues");
    check(update->weight >= 1 && update->weight <= kMaxTenantWeight, "weight");
    for (const auto& [model, quota] : update->quota) {
      check(quota.guaranteed_milli >= 0 && quota.guaranteed_milli <= kMaxQuotaMilli, "guarantee");
      check(!quota.lending_limit_milli || *quota.lending_limit_milli <= quota.guaranteed_milli,
            "lending limit");
      check(!quota.borrowing_limit_milli || *quota.borrowing_limit_milli >= 0, "borrowing limit");
    }
  }
  if (auto request = token_request_from_json(*value); !failed(request)) {
    check(request->tenant.empty() == (request->role != "user"), "tenant for users only");
    check(request->node.empty() == (request->role != "agent"), "node for agents only");
  }
  if (auto registration = node_registration_from_json(*value); !failed(registration)) {
    check(!registration->gpus || (*registration->gpus >= 0 && *registration->gpus <= 16), "gpus");
    check(reads_back(*registration, node_registration_to_json, node_registration_from_json),
          "registration round trip");
  }
  if (auto heartbeat = node_heartbeat_from_json(*value); !failed(heartbeat)) {
    for (std::int64_t id : heartbeat->running_jobs) check(id > 0, "job ids");
    check(reads_back(*heartbeat, node_heartbeat_to_json, node_heartbeat_from_json),
          "heartbeat round trip");
  }
  if (auto reply = heartbeat_reply_from_json(*value); !failed(reply)) {
    for (const RejectedAssignment& rejected : reply->rejected) {
      (void)failed(Result<void>(std::unexpected(rejected.error)));  // its reason checked
    }
    for (const NodeAssignment& a : reply->assignments) {
      check(a.job > 0 && !a.command.empty(), "assignment job and command");
      for (const AssignedTask& t : a.tasks) {
        check(t.index < a.world_size, "task index");
        check(!t.mig || (t.gpus.size() == 1 && MigLayout{}.fits(t.mig->profile, t.mig->start) &&
                         !t.mig->uuid.empty() && t.mig->uuid.size() <= kMaxMigUuid),
              "a task's MIG instance");
      }
    }
    HeartbeatReply accepted = *reply;
    accepted.rejected.clear();
    check(reads_back(accepted, heartbeat_reply_to_json, heartbeat_reply_from_json),
          "heartbeat reply round trip");
  }
  if (auto reply = log_append_reply_from_json(*value); !failed(reply)) {
    check(reads_back(*reply, log_append_reply_to_json, log_append_reply_from_json),
          "log reply round trip");
  }
  if (auto conflict = log_conflict_from_json(*value); !failed(conflict)) {
    check(conflict->size >= 0, "log size");
  }
  (void)failed(drain_request_from_json(*value));
  if (auto spec = job_spec_from_json(*value); !failed(spec)) {
    check(spec->gpu_milli == 1000 || (spec->tasks == 1 && spec->gpus_per_task == 1), "gpu_milli");
    check(!spec->mig_profile || (spec->tasks == 1 && spec->gpus_per_task == 1), "mig_profile");
    check(check_name(spec->name).has_value(), "name");
    check(spec->after_ok.size() <= kMaxDependencies, "after_ok");
    if (!spec->array.empty()) {
      auto indexes = parse_array_indexes(spec->array);
      check(!failed(indexes) && !indexes->empty() && indexes->size() <= kMaxArrayJobs, "array");
    }
  }
  if (auto update = job_update_from_json(*value); !failed(update)) {
    // Any update applied to a valid spec is a valid spec or an Error, never a throw.
    JobSpec base;
    base.name = "fuzz";
    base.tenant = "fuzz";
    if (auto updated = apply_job_update(base, *update); !failed(updated)) {
      check(updated->name == "fuzz" && updated->tenant == "fuzz", "update keeps the rest");
    }
  }
  return 0;
}
