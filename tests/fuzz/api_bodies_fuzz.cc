// libFuzzer target: the request body readers (api/api_bodies.h and job_spec_from_json) on
// arbitrary text: parse_body as JSON or YAML, chosen by the first input byte (even: JSON, odd:
// YAML), then every reader on the same value. They must return a value or an Error, never throw
// or crash (an exception is not caught here: it aborts the run); every error says something in
// valid UTF-8, and what reads keeps the promises of api_bodies.h. Built and run by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/api_bodies.h"
#include "api/body_fields.h"
#include "api/job_spec.h"
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
  auto value = parse_body(body, data[0] % 2 == 0 ? BodyFormat::kJson : BodyFormat::kYaml);
  if (failed(value)) return 0;

  if (auto report = job_status_report_from_json(*value); !failed(report)) {
    check(report->state == "running" || report->state == "succeeded" || report->state == "failed",
          "state");
    check(!report->exit_code || (*report->exit_code >= -255 && *report->exit_code <= 255),
          "exit_code");
  }
  if (auto report = checkpoint_report_from_json(*value); !failed(report)) {
    check(!report->step || *report->step >= 0, "step");
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
  }
  if (auto heartbeat = node_heartbeat_from_json(*value); !failed(heartbeat)) {
    for (std::int64_t id : heartbeat->running_jobs) check(id > 0, "job ids");
  }
  (void)failed(drain_request_from_json(*value));
  if (auto spec = job_spec_from_json(*value); !failed(spec)) {
    check(spec->gpu_milli == 1000 || (spec->tasks == 1 && spec->gpus_per_task == 1), "gpu_milli");
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
