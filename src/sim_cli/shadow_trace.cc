#include "sim_cli/shadow_trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/output_format.h"
#include "config/csv.h"
#include "sim/observed_job.h"
#include "sim_cli/slurm_json.h"

namespace tidepool {
namespace {

using Json = nlohmann::json;

Result<std::optional<std::int64_t>> json_integer(const Json& row, const char* key,
                                                 const std::string& where) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return std::optional<std::int64_t>();
  if (!it->is_number_integer()) {
    return fail(where + " " + key, fmt::format("expected an integer, got {}", it->dump()));
  }
  return std::optional(it->get<std::int64_t>());
}

Result<std::string> json_text(const Json& row, const char* key, const std::string& where) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return std::string();
  if (it->is_number_integer()) return std::to_string(it->get<std::int64_t>());
  if (!it->is_string()) {
    return fail(where + " " + key, fmt::format("expected a string, got {}", it->dump()));
  }
  return it->get<std::string>();
}

// The fields every form shares, checked the same way.
struct TraceRow {
  std::string id, tenant, partition, nodes;
  std::vector<std::string> node_list;
  std::optional<std::int64_t> submit, gpus, start, end, node_count, cpus, memory, limit;
  bool cancelled = false;
};

Result<ObservedJob> job_of(TraceRow row, const std::string& where) {
  if (row.id.empty()) return fail(where + " id", "missing");
  if (row.tenant.empty()) return fail(where + " tenant", "missing");
  if (!row.submit) return fail(where + " submit", "missing");
  if (!row.gpus) return fail(where + " gpus", "missing");
  // Each count within observed_job.h's bounds before it is narrowed or multiplied (the times are
  // checked with the whole job, by check_observed below); a node count below 1 is 1.
  for (const auto& [key, value, most] :
       {std::tuple{"gpus", row.gpus, kMaxObservedGpus},
        std::tuple{"node_count",
                   std::optional(std::max<std::int64_t>(1, row.node_count.value_or(1))),
                   kMaxObservedNodes},
        std::tuple{"cpus", row.cpus, kMaxObservedCpus},
        std::tuple{"memory_mib", row.memory, kMaxObservedMemoryMib},
        std::tuple{"time_limit", row.limit, kMaxObservedTime}}) {
    if (!value) continue;
    if (auto ok = observed_count(*value, most, where + " " + key); !ok) {
      return std::unexpected(ok.error());
    }
  }
  ObservedJob job;
  job.id = std::move(row.id);
  job.tenant = std::move(row.tenant);
  job.partition = std::move(row.partition);
  job.submit = *row.submit;
  job.gpus = static_cast<int>(*row.gpus);
  job.node_count = static_cast<int>(std::max<std::int64_t>(1, row.node_count.value_or(1)));
  job.milli_cpu = row.cpus.value_or(0) * 1000;
  job.memory_mib = row.memory.value_or(0);
  if (row.limit && *row.limit > 0) job.time_limit = *row.limit;
  job.cancelled = row.cancelled;
  if (!row.nodes.empty()) {
    auto names = expand_node_names(row.nodes, where + " nodes");
    if (!names) return std::unexpected(names.error());
    row.node_list = std::move(*names);
  }
  job.nodes = std::move(row.node_list);
  if (row.end && !row.start) return fail(where + " end", "given without a start");
  if (row.start) {
    if (job.nodes.empty()) return fail(where + " nodes", "a job that started needs its nodes");
    job.start = row.start;
    job.end = row.end;
  }
  if (auto kept = check_observed(job); !kept) {
    return fail(where + " " + kept.error().field, kept.error().reason);
  }
  return job;
}

Result<ObservedJob> json_line(const std::string& line, const std::string& where) {
  const Json row = Json::parse(line, nullptr, false);
  if (row.is_discarded() || !row.is_object()) return fail(where, "expected a JSON object");
  TraceRow r;
  for (const auto& [key, out] : {std::pair{"id", &r.id}, std::pair{"tenant", &r.tenant},
                                 std::pair{"partition", &r.partition}}) {
    auto v = json_text(row, key, where);
    if (!v) return std::unexpected(v.error());
    *out = std::move(*v);
  }
  for (const auto& [key, out] :
       {std::pair{"submit", &r.submit}, std::pair{"gpus", &r.gpus}, std::pair{"start", &r.start},
        std::pair{"end", &r.end}, std::pair{"node_count", &r.node_count},
        std::pair{"cpus", &r.cpus}, std::pair{"memory_mib", &r.memory},
        std::pair{"time_limit", &r.limit}}) {
    auto v = json_integer(row, key, where);
    if (!v) return std::unexpected(v.error());
    *out = *v;
  }
  if (const auto it = row.find("nodes"); it != row.end() && !it->is_null()) {
    if (it->is_string()) {
      r.nodes = it->get<std::string>();
    } else if (it->is_array() &&
               std::all_of(it->begin(), it->end(), [](const Json& n) { return n.is_string(); })) {
      for (const Json& n : *it) r.node_list.push_back(n.get<std::string>());
    } else {
      return fail(where + " nodes", "expected a hostlist or a list of node names");
    }
  }
  if (const auto it = row.find("cancelled"); it != row.end() && !it->is_null()) {
    if (!it->is_boolean()) return fail(where + " cancelled", "expected true or false");
    r.cancelled = it->get<bool>();
  }
  return job_of(std::move(r), where);
}

Result<std::vector<ObservedJob>> csv_rows(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  auto csv = CsvReader::open(in, source);
  if (!csv) return std::unexpected(csv.error());
  if (auto ok = csv->require({"id", "tenant", "submit", "gpus"}); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<ObservedJob> jobs;
  while (csv->next()) {
    TraceRow r;
    r.id = std::string(csv->text("id"));
    r.tenant = std::string(csv->text("tenant"));
    r.partition = std::string(csv->text("partition"));
    r.nodes = std::string(csv->text("nodes"));
    for (const auto& [key, out] :
         {std::pair{"submit", &r.submit}, std::pair{"gpus", &r.gpus}, std::pair{"start", &r.start},
          std::pair{"end", &r.end}, std::pair{"node_count", &r.node_count},
          std::pair{"cpus", &r.cpus}, std::pair{"memory_mib", &r.memory},
          std::pair{"time_limit", &r.limit},
          std::pair{"cancelled", static_cast<std::optional<std::int64_t>*>(nullptr)}}) {
      auto v = csv->optional_integer(key);
      if (!v) return std::unexpected(v.error());
      if (out != nullptr) {
        *out = *v;
      } else if (*v) {
        if (**v != 0 && **v != 1) return fail(csv->where(key), "expected 0 or 1");
        r.cancelled = **v == 1;
      }
    }
    auto job = job_of(std::move(r), fmt::format("{}:{}", source, csv->line_number()));
    if (!job) return std::unexpected(job.error());
    jobs.push_back(std::move(*job));
  }
  return jobs;
}

}  // namespace

Result<std::vector<ObservedJob>> read_shadow_trace(const std::string& text,
                                                   const std::string& source) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return fail(source, "empty");
  std::vector<ObservedJob> jobs;
  if (text[first] == '{') {
    const Json whole = Json::parse(text, nullptr, false);
    if (!whole.is_discarded() && whole.is_object() && whole.contains("jobs")) {
      // A saved Slurm reply: sacct's jobs have "time", squeue's "submit_time".
      const Json& list = whole["jobs"];
      const bool sacct =
          list.is_array() && !list.empty() && list[0].is_object() && list[0].contains("time");
      auto read = sacct ? read_sacct_json(whole) : read_squeue_json(whole);
      if (!read) return fail(source + ": " + read.error().field, read.error().reason);
      jobs = std::move(*read);
    } else {
      std::istringstream in(text);
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        auto job = json_line(line, fmt::format("{}:{}", source, n));
        if (!job) return std::unexpected(job.error());
        jobs.push_back(std::move(*job));
      }
    }
  } else {
    auto rows = csv_rows(text, source);
    if (!rows) return std::unexpected(rows.error());
    jobs = std::move(*rows);
  }
  std::set<std::string> ids;
  for (const ObservedJob& j : jobs) {
    if (!ids.insert(j.id).second) return fail(source, "job '" + j.id + "' is listed twice");
  }
  return jobs;
}

}  // namespace tidepool
