#include "cli/client_views.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "cli/listing.h"
#include "cli/output_format.h"
#include "core/decimal_text.h"
#include "core/duration_format.h"
#include "core/mig.h"
#include "report/text_table.h"

namespace tidepool {
namespace {

using Json = nlohmann::json;

std::string text_of(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

std::int64_t number_of(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return 0;
  return it->get<std::int64_t>();
}

const Json& array_of(const Json& object, const char* key) {
  static const Json kEmpty = Json::array();
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) return kEmpty;
  return *it;
}

std::string table_text(const TextTable& table) {
  std::ostringstream out;
  table.print(out);
  return out.str();
}

std::string indented(const std::string& text, std::string_view indent) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += std::string(indent) + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// The MIG profile a spec's task runs on (its mig_profile), or nullopt.
std::optional<MigProfile> mig_profile_of(const Json& spec) {
  const auto it = spec.find("mig_profile");
  if (it == spec.end() || !it->is_string()) return std::nullopt;
  auto profile = parse_mig_profile(it->get_ref<const std::string&>());
  return profile ? std::optional(*profile) : std::nullopt;
}

// "MIG 3g.40gb" for a job on a MIG instance, else empty.
std::string mig_text(const Json& spec) {
  const auto profile = mig_profile_of(spec);
  return profile ? fmt::format("MIG {}", mig_profile_spec(*profile).name) : std::string();
}

// What a task takes of each of its GPUs, in milli-GPUs (a MIG instance: what it counts against
// quotas, core/mig.h).
std::int64_t task_gpu_milli(const Json& spec) {
  if (number_of(spec, "gpus_per_task") == 0) return 0;
  if (const auto profile = mig_profile_of(spec)) return mig_gpu_milli(*profile);
  return number_of(spec, "gpu_milli");
}

// The job's total GPUs in milli-GPUs.
std::int64_t job_gpu_milli(const Json& spec) {
  return number_of(spec, "tasks") * number_of(spec, "gpus_per_task") * task_gpu_milli(spec);
}

std::vector<std::string> placement_nodes(const Json& job) {
  std::vector<std::string> nodes;
  for (const Json& place : array_of(job, "placement")) nodes.push_back(text_of(place, "node"));
  return nodes;
}

bool is_final_state(std::string_view state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

std::string ago(std::int64_t at_ms, std::int64_t now_ms) {
  if (at_ms <= 0) return "-";
  return fmt::format("{} ({} ago)", format_local_time(at_ms),
                     format_duration_about((now_ms - at_ms) / 1000));
}

std::string joined(const Json& list, std::string_view separator) {
  std::string out;
  for (const Json& item : list) {
    if (!out.empty()) out += separator;
    out += item.is_string() ? item.get<std::string>() : item.dump();
  }
  return out;
}

std::string key_values(const Json& map) {
  std::string out;
  if (!map.is_object()) return out;
  for (const auto& [key, value] : map.items()) {
    if (!out.empty()) out += ' ';
    out += key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return out;
}

// "4 tasks x 8 GPUs (H100 or A100), 64 CPUs and 512 GiB per task"
std::string shape_text(const Json& spec) {
  const std::int64_t tasks = number_of(spec, "tasks");
  const std::int64_t gpus = number_of(spec, "gpus_per_task");
  const std::int64_t milli = number_of(spec, "gpu_milli");
  std::string out = fmt::format("{} task{} x ", tasks, tasks == 1 ? "" : "s");
  if (const std::string mig = mig_text(spec); !mig.empty()) {
    out += mig;
  } else if (gpus == 0) {
    out += "no GPU";
  } else if (milli < 1000) {
    out += fmt::format("{} of a GPU", format_gpus(milli));
  } else {
    out += fmt::format("{} GPU{}", gpus, gpus == 1 ? "" : "s");
  }
  const Json& models = array_of(spec, "gpu_model");
  if (gpus > 0) out += models.empty() ? " (any model)" : " (" + joined(models, " or ") + ")";
  std::vector<std::string> per_task;
  if (const std::int64_t cpu = number_of(spec, "cpu_milli_per_task"); cpu > 0) {
    per_task.push_back(fmt::format("{} CPUs", format_gpus(cpu)));
  }
  if (const std::int64_t mib = number_of(spec, "memory_mib_per_task"); mib > 0) {
    per_task.push_back(mib % 1024 == 0 ? fmt::format("{} GiB", mib / 1024)
                                       : fmt::format("{} MiB", mib));
  }
  if (!per_task.empty()) out += fmt::format(", {} per task", fmt::join(per_task, " and "));
  return out;
}

// --- services ---

std::optional<std::int64_t> maybe_number(const Json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<std::int64_t>();
}

// Thousandths with one decimal, rounded half away from zero: 2000 -> "2.0", 1250 -> "1.3".
std::string tenths_text(std::int64_t milli) {
  const std::int64_t tenths = milli >= 0 ? (milli + 50) / 100 : -((50 - milli) / 100);
  std::string text = format_decimal(tenths, 1);
  return text.find('.') == std::string::npos ? text + ".0" : text;
}

// Thousandths as written, with at least one decimal: 2000 -> "2.0", 2250 -> "2.25".
std::string milli_text(std::int64_t milli) {
  std::string text = format_decimal(milli, 3);
  return text.find('.') == std::string::npos ? text + ".0" : text;
}

// "p95 500ms", "queue 2.0/replica", "concurrency 4.0/replica".
std::string target_text(const Json& service) {
  const Json target = service.value("target", Json::object());
  if (!target.is_object()) return "-";
  const std::string metric = text_of(target, "metric");
  const std::int64_t value = number_of(target, "value");
  if (metric == "p95_latency_ms") return fmt::format("p95 {}ms", value);
  if (metric == "queue_per_replica") return fmt::format("queue {}/replica", milli_text(value));
  if (metric == "concurrency_per_replica") {
    return fmt::format("concurrency {}/replica", milli_text(value));
  }
  return metric.empty() ? "-" : fmt::format("{} {}", metric, value);
}

std::int64_t replicas_in_phase(const Json& service, std::string_view phase) {
  return std::ranges::count_if(array_of(service, "replicas"),
                               [&](const Json& r) { return text_of(r, "phase") == phase; });
}

// "2/3": ready replicas of the autoscaler's count ("-" before its first decision).
std::string ready_of_wanted(const Json& service) {
  const auto wanted = maybe_number(service, "wanted");
  return fmt::format("{}/{}", replicas_in_phase(service, "ready"),
                     wanted ? std::to_string(*wanted) : "-");
}

// "1 starting, 2 ready", in the order a replica goes through its phases; "-": none.
std::string phases_text(const Json& service) {
  std::vector<std::string> parts;
  for (const char* phase : {"pending", "starting", "ready", "draining"}) {
    if (const std::int64_t n = replicas_in_phase(service, phase); n > 0) {
      parts.push_back(fmt::format("{} {}", n, phase));
    }
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, ", "));
}

// `text` cut to `width` characters (0: whole) with "..." at the end: at the end of a word when one
// ends in the last third, never inside a UTF-8 sequence.
std::string cut_to_width(const std::string& text, std::size_t width) {
  if (width == 0 || text.size() <= width) return text;
  std::size_t end = width > 3 ? width - 3 : 0;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  if (text[end] != ' ') {
    const std::size_t space = text.rfind(' ', end);
    if (space != std::string::npos && space * 3 >= end * 2) end = space;
  }
  while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == ',' || text[end - 1] == ':')) --end;
  return text.substr(0, end) + "...";
}

std::string since_text(std::int64_t at_ms, std::int64_t now_ms) {
  if (at_ms <= 0) return "-";
  return format_duration_about(std::max<std::int64_t>(0, now_ms - at_ms) / 1000) + " ago";
}

// The replicas of a service's view, with a line that counts them, for `tidepool job ID`.
std::string replicas_section(const Json& service) {
  const Json& replicas = array_of(service, "replicas");
  const auto wanted = maybe_number(service, "wanted");
  std::string head = fmt::format("Replicas: {} ready", replicas_in_phase(service, "ready"));
  if (wanted) head += fmt::format(" of {} wanted", *wanted);
  head += fmt::format(" (min {}, max {})", number_of(service, "min_replicas"),
                      number_of(service, "max_replicas"));
  if (replicas.empty()) return head + "; none live\n";
  return head + "\n" + indented(replicas_table(replicas), "  ");
}

}  // namespace

std::string replicas_table(const Json& replicas) {
  TextTable table({"JOB", "PHASE", "NODE", "PORT", "RPS", "P95 MS", "WAITING", "IN FLIGHT"});
  for (const Json& r : replicas) {
    const Json figures = r.value("figures", Json(nullptr));
    const auto tenths = [&](const char* key) {
      const auto value = maybe_number(figures, key);
      return value ? tenths_text(*value) : std::string("-");
    };
    const auto p95 = maybe_number(figures, "p95_latency_ms");
    const std::string node = text_of(r, "node");
    const std::int64_t port = number_of(r, "port");
    table.add_row({text_of(r, "job"), text_of(r, "phase"), node.empty() ? "-" : node,
                   port > 0 ? std::to_string(port) : "-", tenths("requests_per_s_milli"),
                   p95 ? std::to_string(*p95) : "-", tenths("requests_waiting_milli"),
                   tenths("requests_in_flight_milli")});
  }
  return table_text(table);
}

Listing services_listing(const Json& services, std::int64_t now_ms, std::size_t decision_width) {
  Listing listing{
      .kind = "service",
      .columns = {"ID", "NAME", "TENANT", "READY/WANTED", "MIN-MAX", "TARGET", "LAST-DECISION"},
      .wide_columns = {"STATE", "SPREAD", "PHASES", "ENDPOINTS", "DECIDED"},
      .rows = {}};
  for (const Json& s : services) {
    const Json decision = s.value("decision", Json(nullptr));
    const bool decided = decision.is_object();
    const std::string reason = decided ? text_of(decision, "reason") : "";
    const std::string id = text_of(s, "service");
    listing.rows.push_back(
        {.cells = {id, text_of(s, "name"), text_of(s, "tenant"), ready_of_wanted(s),
                   fmt::format("{}-{}", number_of(s, "min_replicas"), number_of(s, "max_replicas")),
                   target_text(s), reason.empty() ? "-" : cut_to_width(reason, decision_width)},
         .wide = {text_of(s, "state"), text_of(s, "spread"), phases_text(s),
                  std::to_string(array_of(s, "endpoints").size()),
                  decided ? since_text(number_of(decision, "at_ms"), now_ms) : "-"},
         .name = id});
  }
  return listing;
}

std::string render_service_details(const Json& service, std::int64_t now_ms) {
  std::string out =
      fmt::format("Service {}: {}\n", text_of(service, "service"), text_of(service, "name"));
  const auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<10}{}\n", fmt::format("{}:", label), value);
  };
  line("State", text_of(service, "state"));
  line("Tenant", text_of(service, "tenant"));
  const auto wanted = maybe_number(service, "wanted");
  const std::string phases = phases_text(service);
  line("Replicas",
       fmt::format("{} ready{} (min {}, max {}); {}", replicas_in_phase(service, "ready"),
                   wanted ? fmt::format(" of {} wanted", *wanted) : ", no decision yet",
                   number_of(service, "min_replicas"), number_of(service, "max_replicas"),
                   phases == "-" ? "none live" : phases));
  line("Target", target_text(service));
  const std::int64_t per_node = number_of(service, "max_per_node");
  const std::string spread = text_of(service, "spread");
  line("Spread", fmt::format("over {}{}", spread == "leaf" ? "leaves" : spread + "s",
                             per_node > 0 ? fmt::format(", at most {} per node", per_node) : ""));

  const Json& replicas = array_of(service, "replicas");
  out += replicas.empty() ? "\nReplicas: none live\n"
                          : "\nReplicas:\n" + indented(replicas_table(replicas), "  ");

  const Json& endpoints = array_of(service, "endpoints");
  if (endpoints.empty()) {
    out += "\nEndpoints: none (no replica is ready and serving on a port)\n";
  } else {
    TextTable table({"JOB", "NODE", "URL"});
    for (const Json& e : endpoints) {
      table.add_row({text_of(e, "job"), text_of(e, "node"), text_of(e, "url")});
    }
    out += "\nEndpoints:\n" + indented(table_text(table), "  ");
  }

  const Json decision = service.value("decision", Json(nullptr));
  if (!decision.is_object()) {
    out += "\nLast decision: none yet (the autoscaler decides at the next scheduling round)\n";
  } else {
    out += fmt::format("\nLast decision: {} replica(s){}, {}\n", number_of(decision, "wanted"),
                       decision.value("panic", false) ? " in panic mode" : "",
                       ago(number_of(decision, "at_ms"), now_ms));
    out += "  " + text_of(decision, "reason") + "\n";
  }
  return out;
}

namespace {

// A job of an array as squeue shows it: "sweep[3]".
std::string array_name(const Json& job, std::string name) {
  if (job.contains("array_index"))
    name += "[" + std::to_string(number_of(job, "array_index")) + "]";
  return name;
}

}  // namespace

Listing jobs_listing(const Json& jobs, const std::map<std::int64_t, std::string>& pending_kinds,
                     std::int64_t now_ms) {
  Listing listing{.kind = "job",
                  .columns = {"ID", "NAME", "TENANT", "QUEUE", "STATE", "GPUS", "AGE", "TIME",
                              "ATTAINED", "NODES", "REASON"},
                  .wide_columns = {"PRIORITY", "CLASS", "MODELS", "SUBMITTED", "SUBMITTER"},
                  .rows = {}};
  for (const Json& job : jobs) {
    const Json& spec = job.contains("spec") ? job["spec"] : Json::object();
    const std::int64_t id = number_of(job, "id");
    const std::string state = text_of(job, "state");
    const std::int64_t started = number_of(job, "started_ms");
    const std::int64_t ended = number_of(job, "ended_ms");
    std::string run_time = "-";
    if (state == "running" && started > 0) {
      run_time = format_duration_about((now_ms - started) / 1000);
    } else if (is_final_state(state) && started > 0 && number_of(job, "starts") > 0) {
      run_time = format_duration_about((ended - started) / 1000);
    }
    std::string reason;
    if (state == "pending") {
      auto kind = pending_kinds.find(id);
      reason = kind != pending_kinds.end() ? kind->second : text_of(job, "message");
    } else if (state != "running") {
      reason = text_of(job, "message");
    }
    const auto nodes = placement_nodes(job);
    const Json& models = array_of(spec, "gpu_model");
    // The submitting token's description, else its id.
    std::string submitter = text_of(job, "submitter");
    if (submitter.empty() && !text_of(job, "submitter_token").empty()) {
      submitter = "token " + text_of(job, "submitter_token");
    }
    listing.rows.push_back(
        {.cells = {std::to_string(id), array_name(job, text_of(spec, "name")),
                   text_of(spec, "tenant"), text_of(spec, "queue"), state,
                   mig_text(spec).empty() ? format_gpus(job_gpu_milli(spec)) : mig_text(spec),
                   format_duration_about((now_ms - number_of(job, "submitted_ms")) / 1000),
                   run_time,
                   job.contains("attained_gpu_seconds")
                       ? format_gpu_hours(number_of(job, "attained_gpu_seconds"))
                       : "-",
                   nodes.empty() ? "-" : compress_node_names(nodes), reason},
         .wide = {std::to_string(number_of(spec, "priority")), text_of(spec, "class"),
                  models.empty() ? "any" : joined(models, "|"),
                  format_local_time(number_of(job, "submitted_ms")),
                  submitter.empty() ? "-" : submitter},
         .name = std::to_string(id)});
  }
  return listing;
}

namespace {

// A step time: "850 us", "44.8 ms", "1.25 s".
std::string step_time_text(std::int64_t us) {
  if (us < 1000) return fmt::format("{} us", us);
  if (us < 1'000'000) return fmt::format("{:.1f} ms", static_cast<double>(us) / 1e3);
  return fmt::format("{:.2f} s", static_cast<double>(us) / 1e6);
}

// A rate of bytes: "850 B/s", "12.5 MB/s", "3.20 GB/s" (decimal units, as nccl-tests print).
std::string byte_rate_text(double bytes_per_s) {
  if (bytes_per_s < 1e3) return fmt::format("{:.0f} B/s", bytes_per_s);
  if (bytes_per_s < 1e6) return fmt::format("{:.1f} kB/s", bytes_per_s / 1e3);
  if (bytes_per_s < 1e9) return fmt::format("{:.1f} MB/s", bytes_per_s / 1e6);
  return fmt::format("{:.2f} GB/s", bytes_per_s / 1e9);
}

double real_of(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || !it->is_number() ? 0.0 : it->get<double>();
}

// The lines of a job's step_summary (api/step_report.h: step_summary_json).
std::vector<std::pair<std::string, std::string>> step_lines(const Json& s) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string steps = fmt::format("{} reported", number_of(s, "steps"));
  if (s.contains("last_step")) steps += fmt::format(" (last step {})", number_of(s, "last_step"));
  if (s.contains("p50_us")) {
    steps += fmt::format(
        "; time p50 {}, p90 {}, p99 {}, mean {}", step_time_text(number_of(s, "p50_us")),
        step_time_text(number_of(s, "p90_us")), step_time_text(number_of(s, "p99_us")),
        step_time_text(number_of(s, "mean_us")));
  }
  if (s.contains("refused_lines")) {
    steps += fmt::format("; {} line(s) refused", number_of(s, "refused_lines"));
  }
  out.emplace_back("Steps", steps);
  if (s.contains("comm_share")) {
    std::string comm = fmt::format(
        "{:.1f}% of step time ({})", 100.0 * real_of(s, "comm_share"),
        text_of(s, "comm_share_source") == "allreduce" ? "all-reduce / step" : "step - compute");
    if (s.contains("mean_compute_us")) {
      comm += "; compute " + step_time_text(number_of(s, "mean_compute_us"));
    }
    out.emplace_back("Comm share", comm);
  }
  if (s.contains("mean_allreduce_us")) {
    std::string allreduce = step_time_text(number_of(s, "mean_allreduce_us")) + " per step";
    if (s.contains("mean_allreduce_bytes")) {
      allreduce += fmt::format(" of {} bytes", number_of(s, "mean_allreduce_bytes"));
    }
    if (s.contains("allreduce_bus_bytes_per_s")) {
      allreduce += fmt::format("; bus bandwidth {} ({} ranks), algorithm {}",
                               byte_rate_text(real_of(s, "allreduce_bus_bytes_per_s")),
                               number_of(s, "allreduce_ranks"),
                               byte_rate_text(real_of(s, "allreduce_alg_bytes_per_s")));
    }
    out.emplace_back("All-reduce", allreduce);
  }
  if (s.contains("mfu")) {
    out.emplace_back("MFU",
                     fmt::format("{:.1f}% ({:.3g} model FLOPs per step, peak {:.4g} "
                                 "TFLOP/s)",
                                 100.0 * real_of(s, "mfu"), real_of(s, "model_flops_per_step"),
                                 real_of(s, "peak_flops_per_s") / 1e12));
  } else if (s.contains("model_flops_per_step")) {
    out.emplace_back("MFU", "unknown: no peak FLOP/s known for the job's GPU model");
  }
  return out;
}

}  // namespace

std::string render_job_details(const Json& job, std::int64_t now_ms) {
  const Json& spec = job.contains("spec") ? job["spec"] : Json::object();
  std::string out = fmt::format("Job {}: {}\n", number_of(job, "id"), text_of(spec, "name"));
  const auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<13}{}\n", fmt::format("{}:", label), value);
  };
  const std::string state = text_of(job, "state");
  const std::string message = text_of(job, "message");
  line("State", message.empty() ? state : fmt::format("{} ({})", state, message));
  line("Tenant", fmt::format("{}, queue {}", text_of(spec, "tenant"), text_of(spec, "queue")));
  const bool preemptible = spec.value("preemptible", true);
  line("Class",
       fmt::format("{}, priority {}, {}", text_of(spec, "class"), number_of(spec, "priority"),
                   preemptible ? "preemptible" : "not preemptible"));
  line("Shape", shape_text(spec));
  if (auto topology = spec.find("topology"); topology != spec.end() && topology->is_object()) {
    line("Topology",
         fmt::format("within {} ({})", text_of(*topology, "within"), text_of(*topology, "mode")));
  }
  std::vector<std::string> runtime;
  if (auto estimate = text_of(spec, "runtime_estimate"); !estimate.empty()) {
    runtime.push_back("estimate " + estimate);
  }
  if (auto max = text_of(spec, "max_runtime"); !max.empty()) runtime.push_back("at most " + max);
  if (!runtime.empty()) line("Runtime", fmt::format("{}", fmt::join(runtime, ", ")));
  if (auto every = text_of(spec, "checkpoint_interval"); !every.empty()) {
    std::string checkpoints = "every " + every;
    if (const std::int64_t last = number_of(job, "last_checkpoint_ms"); last > 0) {
      checkpoints += "; last " + ago(last, now_ms);
      if (job.contains("checkpoint_step")) {
        checkpoints += fmt::format(", step {}", number_of(job, "checkpoint_step"));
      }
    }
    line("Checkpoints", checkpoints);
  }
  if (const Json& command = array_of(spec, "command"); !command.empty()) {
    line("Command", joined(command, " "));
  }
  if (auto env = key_values(spec.value("env", Json::object())); !env.empty()) {
    line("Env", env);
  }
  if (auto labels = key_values(spec.value("labels", Json::object())); !labels.empty()) {
    line("Labels", labels);
  }
  line("Submitted", ago(number_of(job, "submitted_ms"), now_ms));
  if (number_of(job, "starts") > 0) {
    line("Started", ago(number_of(job, "started_ms"), now_ms));
  }
  if (number_of(job, "ended_ms") > 0) {
    line("Ended", ago(number_of(job, "ended_ms"), now_ms));
  }
  line("Runs", fmt::format("{} start(s), {} preemption(s)", number_of(job, "starts"),
                           number_of(job, "preemptions")));
  if (job.contains("exit_code")) {
    line("Exit code", std::to_string(number_of(job, "exit_code")));
  }
  // The server pre-warms (its `prewarm:` hook): how the last start stood with its data.
  if (auto warm = job.find("prewarm"); warm != job.end() && warm->is_object()) {
    line("Pre-warm", warm->value("prewarmed", false)
                         ? fmt::format("data staged for the last start, called {} before it",
                                       format_duration(number_of(*warm, "lead_seconds")))
                         : std::string("none: the last start began without its data staged"));
  }
  if (auto steps = job.find("step_summary"); steps != job.end() && steps->is_object()) {
    for (const auto& [label, text] : step_lines(*steps)) line(label, text);
  }

  TextTable transitions({"TIME", "STATE", "REASON"});
  for (const Json& t : array_of(job, "transitions")) {
    transitions.add_row(
        {format_local_time(number_of(t, "at_ms")), text_of(t, "state"), text_of(t, "reason")});
  }
  out += "\nTransitions:\n" + indented(table_text(transitions), "  ");

  const Json& placement = array_of(job, "placement");
  const auto status = job.find("service_status");
  const bool service = status != job.end() && status->is_object();
  if (placement.empty()) {
    out += service ? "\nPlacement: none (a service: its replicas are placed, below)\n"
                   : "\nPlacement: none (not running)\n";
  } else {
    TextTable places({"TASK", "NODE", "GPUS"});
    int task = 0;
    const std::string mig = mig_text(spec);
    for (const Json& place : placement) {
      std::string gpus = joined(array_of(place, "gpus"), ",");
      if (!mig.empty() && place.contains("mig_start")) {
        gpus += fmt::format(" ({} at memory slice {})", mig, number_of(place, "mig_start"));
      }
      places.add_row({std::to_string(task++), text_of(place, "node"), std::move(gpus)});
    }
    out += "\nPlacement:\n" + indented(table_text(places), "  ");
  }
  if (service) out += "\n" + replicas_section(*status);
  return out;
}

// The advice as text: one line per piece, then the note and the MFU it would reach.
std::string render_advice(const nlohmann::json& advice) {
  std::string out;
  const std::string job = advice.value("job", nlohmann::json(0)).dump();
  const nlohmann::json lines = advice.value("advice", nlohmann::json::array());
  if (lines.empty()) {
    out += fmt::format("No advice for job {}", job);
  } else {
    out += fmt::format("Advice for job {}:\n", job);
    for (const nlohmann::json& line : lines) {
      out += fmt::format("  - {}\n", line.is_string() ? line.get<std::string>() : line.dump());
    }
  }
  if (advice.contains("note") && advice["note"].is_string()) {
    out += fmt::format(
        "{}{}\n", lines.empty() ? ": " : "  Communication: ", advice["note"].get<std::string>());
  } else if (lines.empty()) {
    out += "\n";
  }
  if (advice.contains("mfu_now") && advice["mfu_now"].is_number() &&
      advice.contains("mfu_expected") && advice["mfu_expected"].is_number()) {
    out += fmt::format("  MFU: {:.1f}% now, {:.1f}% with the advice\n",
                       advice["mfu_now"].get<double>() * 100,
                       advice["mfu_expected"].get<double>() * 100);
  }
  return out;
}

std::string render_why(const Json& why) {
  const std::string state = text_of(why, "state");
  const std::int64_t id = number_of(why, "id");
  if (state != "pending") {
    return fmt::format("Job {} is {}: {}\n", id, state, text_of(why, "reason"));
  }
  std::string out =
      fmt::format("Job {} is pending ({}): {}\n", id, text_of(why, "kind"), text_of(why, "reason"));
  out += fmt::format("It has waited {} since it last became pending.\n",
                     format_duration_about(number_of(why, "pending_seconds")));
  if (const Json lane = why.value("lane", Json::object()); lane.is_object() && !lane.empty()) {
    const std::int64_t position = number_of(lane, "position");
    std::string place =
        fmt::format("It is {} of {} pending in its lane ({} order{})", ordinal(position),
                    number_of(lane, "pending"), text_of(lane, "order"),
                    lane.value("promoted", false) ? ", promoted after waiting "
                                                    "the starvation limit"
                                                  : "");
    place += fmt::format(": {}", text_of(lane, "rank"));
    std::vector<std::string> ahead;
    for (const Json& other : array_of(lane, "ahead")) {
      if (other.is_number_integer()) ahead.push_back(std::to_string(other.get<std::int64_t>()));
    }
    const std::int64_t hidden = number_of(lane, "ahead_hidden");
    if (!ahead.empty() || hidden > 0) {
      place += "; just ahead: " + fmt::format("{}", fmt::join(ahead, ", "));
      if (hidden > 0) {
        place += fmt::format("{}{} of other tenants", ahead.empty() ? "" : " and ", hidden);
      }
    }
    out += place + ".\n";
  }
  const Json waited = why.value("waited_seconds", Json::object());
  if (waited.is_object() && !waited.empty()) {
    TextTable table({"REASON", "WAITED"});
    for (const auto& [kind, seconds] : waited.items()) {
      table.add_row(
          {kind, format_duration_about(seconds.is_number() ? seconds.get<std::int64_t>() : 0)});
    }
    out += "Time waited, by reason:\n" + indented(table_text(table), "  ");
  }
  return out;
}

Listing nodes_listing(const Json& nodes, std::int64_t now_ms) {
  Listing listing{.kind = "node",
                  .columns = {"NAME", "STATE", "MODEL", "GPUS", "USED", "LEAF", "AGENT",
                              "HEARTBEAT", "JOBS", "REASON"},
                  .wide_columns = {"SPINE", "CPUS", "MEMORY", "ADDRESS"},
                  .rows = {}};
  for (const Json& node : nodes) {
    std::vector<std::string> ids;
    for (const Json& job : array_of(node, "jobs")) ids.push_back(text_of(job, "job"));
    std::string jobs = ids.empty() ? "-" : "";
    constexpr std::size_t kShown = 4;
    for (std::size_t i = 0; i < ids.size() && i < kShown; ++i) {
      jobs += (i > 0 ? "," : "") + ids[i];
    }
    if (ids.size() > kShown) jobs += fmt::format(",+{}", ids.size() - kShown);
    const std::string model = text_of(node, "gpu_model");
    // The agent's version once one registered the node; how long ago it was last heard from.
    std::string agent = "-";
    std::string address = "-";
    if (node.contains("agent") && node["agent"].is_object()) {
      agent = text_of(node["agent"], "agent_version");
      if (agent.empty()) agent = "yes";
      if (std::string at = text_of(node["agent"], "address"); !at.empty()) address = at;
    }
    const std::int64_t heard = number_of(node, "last_heartbeat_ms");
    const std::string heartbeat =
        heard > 0 ? format_duration_about(std::max<std::int64_t>(0, now_ms - heard) / 1000) + " ago"
                  : "-";
    std::string reason = text_of(node, "reason");
    if (reason.empty()) reason = text_of(node, "drain_reason");
    const std::int64_t mib = number_of(node, "memory_mib");
    const std::string name = text_of(node, "name");
    listing.rows.push_back(
        {.cells = {name, text_of(node, "state"), model.empty() ? "-" : model,
                   std::to_string(number_of(node, "gpus")),
                   format_gpus(number_of(node, "gpu_milli_allocated")), text_of(node, "leaf"),
                   agent, heartbeat, jobs, reason},
         .wide = {text_of(node, "spine").empty() ? "-" : text_of(node, "spine"),
                  format_gpus(number_of(node, "cpu_milli")),
                  mib % 1024 == 0 ? fmt::format("{}Gi", mib / 1024) : fmt::format("{}Mi", mib),
                  address},
         .name = name});
  }
  return listing;
}

Listing queues_listing(const Json& queues) {
  Listing listing{.kind = "queue",
                  .columns = {"TENANT", "QUEUE", "PENDING", "RUNNING"},
                  .wide_columns = {},
                  .rows = {}};
  for (const Json& q : queues) {
    listing.rows.push_back({.cells = {text_of(q, "tenant"), text_of(q, "queue"),
                                      std::to_string(number_of(q, "pending")),
                                      std::to_string(number_of(q, "running"))},
                            .wide = {},
                            .name = text_of(q, "tenant") + "/" + text_of(q, "queue")});
  }
  return listing;
}

Listing tenants_listing(const Json& tenants) {
  Listing listing{.kind = "tenant",
                  .columns = {"TENANT", "ORG", "WEIGHT", "MODEL", "GUARANTEED", "USED", "BORROWED",
                              "BORROW-LIMIT", "LEND-LIMIT", "PENDING", "RUNNING"},
                  .wide_columns = {"QUEUES"},
                  .rows = {}};
  for (const Json& t : tenants) {
    const std::vector<std::string> head = {text_of(t, "name"), text_of(t, "org"),
                                           std::to_string(number_of(t, "weight"))};
    const std::vector<std::string> tail = {std::to_string(number_of(t, "jobs_pending")),
                                           std::to_string(number_of(t, "jobs_running"))};
    const std::string queues = joined(array_of(t, "queues"), ",");
    const Json quota = t.value("quota", Json::object());
    auto add = [&](std::vector<std::string> middle) {
      std::vector<std::string> row = head;
      row.insert(row.end(), middle.begin(), middle.end());
      row.insert(row.end(), tail.begin(), tail.end());
      listing.rows.push_back({.cells = std::move(row),
                              .wide = {queues.empty() ? "-" : queues},
                              .name = text_of(t, "name")});
    };
    if (!quota.is_object() || quota.empty()) {
      add({"-", "0", format_gpus(number_of(t, "gpu_milli_used")), "0", "unlimited", "0"});
      continue;
    }
    for (const auto& [model, q] : quota.items()) {
      add({model, format_gpu_value(q.value("guaranteed_gpus", Json(0))),
           format_gpu_value(q.value("used_gpus", Json(0))),
           format_gpu_value(q.value("borrowed_gpus", Json(0))),
           format_gpu_value(q.value("borrowing_limit_gpus", Json(nullptr)), "unlimited"),
           format_gpu_value(q.value("lending_limit_gpus", Json(nullptr)), "unlimited")});
    }
  }
  return listing;
}

Listing tokens_listing(const Json& tokens) {
  Listing listing{.kind = "token",
                  .columns = {"ID", "ROLE", "TENANT", "NODE", "CREATED", "STATE", "DESCRIPTION"},
                  .wide_columns = {},
                  .rows = {}};
  for (const Json& t : tokens) {
    const auto dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
    listing.rows.push_back(
        {.cells = {text_of(t, "id"), text_of(t, "role"), dash(text_of(t, "tenant")),
                   dash(text_of(t, "node")), format_local_time(number_of(t, "created_ms")),
                   t.value("revoked", false) ? "revoked" : "active", text_of(t, "description")},
         .wide = {},
         .name = text_of(t, "id")});
  }
  return listing;
}

// --- top ---

namespace {

constexpr std::string_view kTenantKeys = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
// Foreground colors that read on dark and light terminals, one per tenant (cycling).
constexpr int kColors[] = {32, 34, 35, 36, 33, 31, 92, 94, 95, 96, 93, 91};

struct GpuUse {
  std::int64_t milli = 0;
  std::set<int> tenants;  // tenant indices
};

std::string paint(std::string_view text, int color, bool on) {
  if (!on || text.empty()) return std::string(text);
  return fmt::format("\x1b[{}m{}\x1b[0m", color, text);
}

}  // namespace

std::string render_top_frame(const Json& nodes, const Json& running_jobs, const Json& queues,
                             const TopFrameStyle& style) {
  // Tenants in the order the server lists their queues (the tenants file's), then any other.
  std::vector<std::string> tenants;
  std::map<std::string, int, std::less<>> tenant_index;
  const auto tenant_of = [&](const std::string& name) {
    auto [it, added] = tenant_index.emplace(name, static_cast<int>(tenants.size()));
    if (added) tenants.push_back(name);
    return it->second;
  };
  for (const Json& q : queues) tenant_of(text_of(q, "tenant"));
  const auto key_of = [](int index) {
    return index < static_cast<int>(kTenantKeys.size()) ? kTenantKeys[index] : '?';
  };
  const auto color_of = [](int index) { return kColors[index % std::size(kColors)]; };

  // Who holds each GPU, from the running jobs' placements; GPUs held per tenant.
  std::map<std::string, std::map<int, GpuUse>, std::less<>> use;
  std::map<int, std::int64_t> tenant_milli;
  for (const Json& job : running_jobs) {
    const Json& spec = job.contains("spec") ? job["spec"] : Json::object();
    const int tenant = tenant_of(text_of(spec, "tenant"));
    const std::int64_t milli = task_gpu_milli(spec);
    for (const Json& place : array_of(job, "placement")) {
      for (const Json& gpu : array_of(place, "gpus")) {
        GpuUse& u = use[text_of(place, "node")][gpu.is_number() ? gpu.get<int>() : -1];
        u.milli += milli;
        u.tenants.insert(tenant);
        tenant_milli[tenant] += milli;
      }
    }
  }

  // One cell per node with GPUs: "name [AAAA....]  4/8".
  struct Cell {
    std::string name, bar, used;
    std::size_t bar_width = 0;
  };
  std::vector<Cell> cells;
  std::int64_t total_gpus = 0;
  std::int64_t allocated_milli = 0;
  int drained = 0;
  for (const Json& node : nodes) {
    const int gpus = static_cast<int>(number_of(node, "gpus"));
    const bool is_drained = text_of(node, "state") == "drained";
    drained += is_drained ? 1 : 0;
    if (gpus <= 0) continue;
    total_gpus += gpus;
    allocated_milli += number_of(node, "gpu_milli_allocated");
    const std::string name = text_of(node, "name");
    auto node_use = use.find(name);
    Cell cell{name, "[", "", static_cast<std::size_t>(gpus) + 2};
    int busy = 0;
    for (int g = 0; g < gpus; ++g) {
      const GpuUse* u = nullptr;
      if (node_use != use.end()) {
        if (auto it = node_use->second.find(g); it != node_use->second.end()) u = &it->second;
      }
      if (u == nullptr || u->tenants.empty()) {
        cell.bar += paint(is_drained ? "x" : ".", is_drained ? 31 : 2, style.color);
        continue;
      }
      ++busy;
      if (u->tenants.size() > 1) {
        cell.bar += paint("+", 1, style.color);
        continue;
      }
      const int tenant = *u->tenants.begin();
      char key = key_of(tenant);
      if (u->milli < 1000) key = static_cast<char>(std::tolower(static_cast<unsigned char>(key)));
      cell.bar += paint(std::string(1, key), color_of(tenant), style.color);
    }
    cell.bar += "]";
    cell.used = fmt::format("{}/{}{}", busy, gpus, is_drained ? " drained" : "");
    cells.push_back(std::move(cell));
  }

  std::string out = style.title.empty() ? "" : style.title + "\n";
  int running = 0;
  int pending = 0;
  for (const Json& q : queues) {
    running += static_cast<int>(number_of(q, "running"));
    pending += static_cast<int>(number_of(q, "pending"));
  }
  out += fmt::format("GPUs: {} of {} allocated ({:.1f}%)  jobs: {} running, {} pending",
                     format_gpus(allocated_milli), total_gpus,
                     total_gpus == 0 ? 0.0
                                     : 100.0 * static_cast<double>(allocated_milli) /
                                           static_cast<double>(total_gpus * 1000),
                     running, pending);
  if (drained > 0) out += fmt::format("  nodes drained: {}", drained);
  out += "\n\n";

  std::size_t name_width = 0;
  std::size_t bar_width = 0;
  std::size_t used_width = 0;
  for (const Cell& c : cells) {
    name_width = std::max(name_width, c.name.size());
    bar_width = std::max(bar_width, c.bar_width);
    used_width = std::max(used_width, c.used.size());
  }
  const std::size_t cell_width = name_width + 1 + bar_width + 1 + used_width;
  constexpr std::size_t kGap = 3;
  const std::size_t columns = std::max<std::size_t>(
      1, (static_cast<std::size_t>(std::max(style.width, 1)) + kGap) / (cell_width + kGap));
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    const bool last = (i + 1) % columns == 0 || i + 1 == cells.size();
    std::string text = fmt::format("{:<{}} {}{} {}", c.name, name_width, c.bar,
                                   std::string(bar_width - c.bar_width, ' '), c.used);
    if (!last) text += std::string(used_width - c.used.size() + kGap, ' ');
    out += text;
    if (last) out += '\n';
  }
  if (cells.empty()) out += "(no nodes with GPUs)\n";

  out += "\n";
  std::string legend;
  for (std::size_t t = 0; t < tenants.size(); ++t) {
    const int index = static_cast<int>(t);
    legend += paint(std::string(1, key_of(index)), color_of(index), style.color) + " " +
              tenants[t] + "  ";
  }
  legend += ". free  x drained  a-z partly used  + shared";
  out += legend + "\n\n";

  // Per tenant: GPUs held, running and pending jobs, and the pending ones per queue.
  std::map<int, std::pair<std::int64_t, std::int64_t>> counts;  // running, pending
  std::map<int, std::string> pending_queues;
  for (const Json& q : queues) {
    const int tenant = tenant_of(text_of(q, "tenant"));
    counts[tenant].first += number_of(q, "running");
    counts[tenant].second += number_of(q, "pending");
    if (const std::int64_t n = number_of(q, "pending"); n > 0) {
      std::string& text = pending_queues[tenant];
      text += fmt::format("{}{} {}", text.empty() ? "" : ", ", text_of(q, "queue"), n);
    }
  }
  TextTable table({"KEY", "TENANT", "GPUS", "RUNNING", "PENDING", "PENDING BY QUEUE"});
  for (std::size_t t = 0; t < tenants.size(); ++t) {
    const int index = static_cast<int>(t);
    table.add_row({std::string(1, key_of(index)), tenants[t], format_gpus(tenant_milli[index]),
                   std::to_string(counts[index].first), std::to_string(counts[index].second),
                   pending_queues[index].empty() ? "-" : pending_queues[index]});
  }
  out += table_text(table);
  return out;
}

}  // namespace tidepool
