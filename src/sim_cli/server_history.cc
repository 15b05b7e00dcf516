#include "sim_cli/server_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tidepool {
namespace {

// The integer at `key` of `job`; `where` names the job in errors.
Result<std::int64_t> integer_field(const nlohmann::json& job, const char* key,
                                   const std::string& where) {
  const auto it = job.find(key);
  if (it == job.end() || it->is_null()) return fail(where + " " + key, "missing");
  if (!it->is_number_integer()) {
    return fail(where + " " + key, fmt::format("expected an integer, got {}", it->dump()));
  }
  return it->get<std::int64_t>();
}

Result<std::string> text_field(const nlohmann::json& job, const char* key,
                               const std::string& where) {
  const auto it = job.find(key);
  if (it == job.end() || it->is_null()) return fail(where + " " + key, "missing");
  if (!it->is_string()) {
    return fail(where + " " + key, fmt::format("expected a string, got {}", it->dump()));
  }
  return it->get<std::string>();
}

// The milliseconds the job ran (see the file comment), or nullopt when it never started.
Result<std::optional<std::int64_t>> run_ms(const nlohmann::json& job, const std::string& state,
                                           std::int64_t now_ms, const std::string& where) {
  const auto it = job.find("transitions");
  if (it == job.end() || it->is_null()) return fail(where + " transitions", "missing");
  if (!it->is_array()) return fail(where + " transitions", "expected a list");
  // Plain values, not optionals: GCC 12 takes an optional's value for uninitialized here.
  bool ran = false;
  bool in_run = false;
  std::int64_t run_start = 0;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& t = (*it)[i];
    const std::string at = fmt::format("{} transitions[{}]", where, i);
    if (!t.is_object()) return fail(at, "expected an object with state and at_ms");
    auto to = text_field(t, "state", at);
    if (!to) return std::unexpected(to.error());
    auto at_ms = integer_field(t, "at_ms", at);
    if (!at_ms) return std::unexpected(at_ms.error());
    if (in_run) total += std::max<std::int64_t>(0, *at_ms - run_start);
    in_run = *to == "running";
    if (in_run) {
      ran = true;
      run_start = *at_ms;
    }
  }
  if (in_run) {
    std::int64_t end = now_ms;
    if (state != "running") {
      if (auto ended = job.find("ended_ms");
          ended != job.end() && ended->is_number_integer() && ended->get<std::int64_t>() > 0) {
        end = ended->get<std::int64_t>();
      }
    }
    total += std::max<std::int64_t>(0, end - run_start);
  }
  if (!ran) return std::optional<std::int64_t>();
  return total;
}

}  // namespace

Result<ServerHistory> read_server_history(const nlohmann::json& reply,
                                          const HistoryWindow& window) {
  if (!reply.is_object()) return fail("jobs", "expected an object with the list of jobs");
  const auto list = reply.find("jobs");
  if (list == reply.end() || !list->is_array()) return fail("jobs", "missing or not a list");
  ServerHistory out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& value = (*list)[i];
    if (!value.is_object()) return fail(fmt::format("jobs[{}]", i), "expected an object");
    auto id = integer_field(value, "id", fmt::format("jobs[{}]", i));
    if (!id) return std::unexpected(id.error());
    const std::string where = fmt::format("job {}", *id);
    auto submitted = integer_field(value, "submitted_ms", where);
    if (!submitted) return std::unexpected(submitted.error());
    if (*submitted < window.from_ms) {
      ++out.before_window;
      continue;
    }
    auto state = text_field(value, "state", where);
    if (!state) return std::unexpected(state.error());
    const auto spec_value = value.find("spec");
    if (spec_value == value.end() || spec_value->is_null()) return fail(where + " spec", "missing");
    auto spec = job_spec_from_json(*spec_value);
    if (!spec) return fail(where + " spec." + spec.error().field, spec.error().reason);
    auto ran = run_ms(value, *state, window.now_ms, where);
    if (!ran) return std::unexpected(ran.error());

    HistoryJob job;
    job.id = *id;
    job.submitted_ms = *submitted;
    job.running = *state == "running";
    if (*ran) {
      job.ran = true;
      job.runtime = (**ran + 999) / 1000;
    } else if (spec->runtime_estimate || spec->max_runtime) {
      job.runtime = spec->runtime_estimate ? *spec->runtime_estimate : *spec->max_runtime;
    } else {
      out.unknown_runtime.push_back(*id);
      continue;
    }
    job.spec = std::move(*spec);
    out.start_ms = out.jobs.empty() ? job.submitted_ms : std::min(out.start_ms, job.submitted_ms);
    out.jobs.push_back(std::move(job));
  }
  return out;
}

Result<std::vector<SimJob>> history_workload(const ServerHistory& history, const TenantBook& book,
                                             const GpuModelCatalog& models) {
  std::vector<std::size_t> order(history.jobs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::sort(order, [&](std::size_t a, std::size_t b) {
    const HistoryJob& x = history.jobs[a];
    const HistoryJob& y = history.jobs[b];
    return std::pair(x.submitted_ms, x.id) < std::pair(y.submitted_ms, y.id);
  });

  std::vector<SimJob> jobs;
  jobs.reserve(order.size());
  for (std::size_t index : order) {
    const HistoryJob& h = history.jobs[index];
    const JobSpec& spec = h.spec;
    const std::string where = fmt::format("job {}", h.id);
    const auto tenant = book.find_tenant(spec.tenant);
    if (!tenant) {
      return fail(where + " tenant",
                  fmt::format("'{}' is not a tenant of the tenants file", spec.tenant));
    }
    const auto queue = book.find_queue(*tenant, spec.queue);
    if (!queue) {
      return fail(where + " queue", fmt::format("tenant '{}' has no queue '{}' in the tenants file",
                                                spec.tenant, spec.queue));
    }
    auto made = core_job_of(spec, JobId{static_cast<std::uint32_t>(jobs.size())}, *tenant, *queue,
                            (h.submitted_ms - history.start_ms) / 1000, models);
    if (!made) return fail(where + " " + made.error().field, made.error().reason);
    jobs.push_back(SimJob{std::move(*made), h.runtime, fmt::format("job-{}", h.id)});
  }
  return jobs;
}

}  // namespace tidepool
