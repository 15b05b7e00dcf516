#include "api/agent_wire.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "api/body_fields.h"
#include "api/job_spec.h"
#include "core/job.h"
#include "core/node.h"
#include "core/resources.h"

namespace tidepool {
namespace {

using body_fields::check_keys;
using body_fields::first_failure;
using body_fields::index_path;
using body_fields::integer_in;
using body_fields::Json;
using body_fields::key_path;
using body_fields::kMaxShortText;
using body_fields::member;
using body_fields::read_optional;
using body_fields::short_text;

constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();
constexpr int kMaxTaskIndex = 99'999;
// The bounds of a replica's side of an assignment (agent_wire.h: ReplicaAssignment).
constexpr std::size_t kMaxMetricsFileBytes = 4096;
constexpr std::size_t kMaxMetricsPreset = 64;
constexpr std::size_t kMaxMetricNames = 32;

auto long_text() { return body_fields::text_in(body_fields::kMaxTextBytes); }

// A list of distinct job ids (> 0), at most kMaxHeartbeatJobs.
Result<std::vector<std::int64_t>> read_heartbeat_job_ids(const Json& value,
                                                         const std::string& path) {
  if (auto ok = body_fields::check_list(value, path, kMaxHeartbeatJobs, "job ids"); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<std::int64_t> ids;
  std::set<std::int64_t> seen;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto id = body_fields::read_integer(value[i], index_path(path, i), 1, kNoLimit);
    if (!id) return std::unexpected(id.error());
    if (!seen.insert(*id).second) {
      return fail(index_path(path, i), fmt::format("job {} is listed twice", *id));
    }
    ids.push_back(*id);
  }
  return ids;
}

// GPU indices of a node, 0..kMaxGpusPerNode - 1, at most kMaxGpusPerNode of them.
Result<std::vector<int>> read_gpu_indices(const Json& value, const std::string& path) {
  if (auto ok = body_fields::check_list(value, path, kMaxGpusPerNode, "GPU indices"); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<int> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto index = body_fields::read_integer(value[i], index_path(path, i), 0, kMaxGpusPerNode - 1);
    if (!index) return std::unexpected(index.error());
    out.push_back(static_cast<int>(*index));
  }
  return out;
}

// A GPU's MIG instances: at most 7, each with its uuid, profile, start and memory, together a
// valid layout.
Result<std::vector<MigSlice>> read_mig_slices(const Json& value, const std::string& path) {
  if (auto ok = body_fields::check_list(value, path, kMigComputeSlices, "MIG instances"); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<MigSlice> out;
  std::vector<MigInstance> layout;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string at = index_path(path, i);
    if (auto ok = check_keys(value[i], at, "a map of uuid, profile, start and memory_mib",
                             {"uuid", "profile", "start", "memory_mib"}, false);
        !ok) {
      return std::unexpected(ok.error());
    }
    for (const char* key : {"uuid", "profile", "start", "memory_mib"}) {
      if (auto present = body_fields::required(value[i], at, key); !present) {
        return std::unexpected(present.error());
      }
    }
    MigSlice slice;
    std::string profile;
    if (auto ok = first_failure({
            read_optional(value[i], at, "uuid", slice.uuid, short_text()),
            read_optional(value[i], at, "profile", profile, short_text()),
            read_optional(value[i], at, "start", slice.start, integer_in(0, kMigMemorySlices - 1)),
            read_optional(value[i], at, "memory_mib", slice.memory_mib, integer_in(0, kNoLimit)),
        });
        !ok) {
      return std::unexpected(ok.error());
    }
    auto parsed = parse_mig_profile(profile);
    if (!parsed) return fail(key_path(at, "profile"), parsed.error().reason);
    slice.profile = *parsed;
    layout.push_back(MigInstance{.profile = slice.profile, .start = slice.start});
    out.push_back(std::move(slice));
  }
  if (auto valid = check_mig_layout(layout); !valid) return fail(path, valid.error().reason);
  return out;
}

Result<GpuDevice> read_gpu_device(const Json& value, const std::string& path) {
  if (auto ok = check_keys(value, path,
                           "a map of index, uuid, model, memory_mib, pci_bus_id, numa_node, "
                           "nvlink_peers and mig",
                           {"index", "uuid", "model", "memory_mib", "pci_bus_id", "numa_node",
                            "nvlink_peers", "mig"},
                           false);
      !ok) {
    return std::unexpected(ok.error());
  }
  GpuDevice device;
  if (auto ok = first_failure({
          read_optional(value, path, "index", device.index, integer_in(0, kMaxGpusPerNode - 1)),
          read_optional(value, path, "uuid", device.uuid, short_text()),
          read_optional(value, path, "model", device.model, short_text()),
          read_optional(value, path, "memory_mib", device.memory_mib, integer_in(0, kNoLimit)),
          read_optional(value, path, "pci_bus_id", device.pci_bus_id, short_text()),
          read_optional(value, path, "numa_node", device.numa_node, integer_in(-1, 1023)),
          read_optional(value, path, "nvlink_peers", device.nvlink_peers, read_gpu_indices),
          read_optional(value, path, "mig", device.mig, read_mig_slices),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  return device;
}

Result<std::vector<GpuDevice>> read_gpu_devices(const Json& value, const std::string& path) {
  if (auto ok = body_fields::check_list(value, path, kMaxGpusPerNode, "GPUs"); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<GpuDevice> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto device = read_gpu_device(value[i], index_path(path, i));
    if (!device) return std::unexpected(device.error());
    out.push_back(std::move(*device));
  }
  return out;
}

Result<GpuReading> read_gpu_reading(const Json& value, const std::string& path) {
  if (auto ok = check_keys(
          value, path, "a map of a GPU's figures",
          {"index", "model", "utilization_percent", "memory_used_mib", "memory_total_mib",
           "power_milliwatts", "temperature_celsius", "throttle_reasons", "ecc_errors_uncorrected"},
          false);
      !ok) {
    return std::unexpected(ok.error());
  }
  GpuReading r;
  std::int64_t throttle = 0;
  std::int64_t ecc = 0;
  if (auto ok = first_failure({
          read_optional(value, path, "index", r.index, integer_in(0, kMaxGpusPerNode - 1)),
          read_optional(value, path, "model", r.model, short_text()),
          read_optional(value, path, "utilization_percent", r.utilization_percent,
                        integer_in(0, 100)),
          read_optional(value, path, "memory_used_mib", r.memory_used_mib, integer_in(0, kNoLimit)),
          read_optional(value, path, "memory_total_mib", r.memory_total_mib,
                        integer_in(0, kNoLimit)),
          read_optional(value, path, "power_milliwatts", r.power_milliwatts,
                        integer_in(0, 100'000'000)),
          read_optional(value, path, "temperature_celsius", r.temperature_celsius,
                        integer_in(-273, 1000)),
          read_optional(value, path, "throttle_reasons", throttle, integer_in(0, kNoLimit)),
          read_optional(value, path, "ecc_errors_uncorrected", ecc, integer_in(0, kNoLimit)),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  r.throttle_reasons = static_cast<std::uint64_t>(throttle);
  r.ecc_errors_uncorrected = static_cast<std::uint64_t>(ecc);
  return r;
}

Result<std::vector<GpuReading>> read_gpu_readings(const Json& value, const std::string& path) {
  if (auto ok = body_fields::check_list(value, path, kMaxGpusPerNode, "GPUs"); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<GpuReading> out;
  std::set<int> seen;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto reading = read_gpu_reading(value[i], index_path(path, i));
    if (!reading) return std::unexpected(reading.error());
    if (!seen.insert(reading->index).second) {
      return fail(index_path(path, i), fmt::format("GPU {} is listed twice", reading->index));
    }
    out.push_back(std::move(*reading));
  }
  return out;
}

// The figures of a replica's report, each with its key on the wire.
constexpr std::array<std::pair<std::string_view, std::optional<std::int64_t> ReplicaFigures::*>, 7>
    kReplicaFigureKeys{{
        {"requests_waiting_milli", &ReplicaFigures::requests_waiting_milli},
        {"requests_in_flight_milli", &ReplicaFigures::requests_in_flight_milli},
        {"requests_per_s_milli", &ReplicaFigures::requests_per_s_milli},
        {"mean_latency_ms", &ReplicaFigures::mean_latency_ms},
        {"p95_latency_ms", &ReplicaFigures::p95_latency_ms},
        {"mean_queue_time_ms", &ReplicaFigures::mean_queue_time_ms},
        {"mean_concurrency_milli", &ReplicaFigures::mean_concurrency_milli},
    }};

Result<ReplicaReport> read_replica_report(const Json& value, const std::string& path) {
  if (auto ok = check_keys(value, path, "a map of job, run and a replica's figures",
                           {"job", "run", "requests_waiting_milli", "requests_in_flight_milli",
                            "requests_per_s_milli", "mean_latency_ms", "p95_latency_ms",
                            "mean_queue_time_ms", "mean_concurrency_milli"},
                           false);
      !ok) {
    return std::unexpected(ok.error());
  }
  auto job = body_fields::required(value, path, "job");
  if (!job) return std::unexpected(job.error());
  ReplicaReport report;
  if (auto ok = first_failure({
          read_optional(value, path, "job", report.job, integer_in(1, kNoLimit)),
          read_optional(value, path, "run", report.run, integer_in(0, kNoLimit)),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  for (const auto& [key, figure] : kReplicaFigureKeys) {
    if (auto ok = read_optional(value, path, key, report.figures.*figure,
                                integer_in(0, kMaxReplicaFigure));
        !ok) {
      return std::unexpected(ok.error());
    }
  }
  return report;
}

// At most kMaxHeartbeatJobs reports, each (job, run) once.
Result<std::vector<ReplicaReport>> read_replica_reports(const Json& value,
                                                        const std::string& path) {
  if (auto ok = body_fields::check_list(value, path, kMaxHeartbeatJobs, "replicas"); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<ReplicaReport> out;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto report = read_replica_report(value[i], index_path(path, i));
    if (!report) return std::unexpected(report.error());
    if (!seen.emplace(report->job, report->run).second) {
      return fail(index_path(path, i), fmt::format("the replica of job {} run {} is listed twice",
                                                   report->job, report->run));
    }
    out.push_back(std::move(*report));
  }
  return out;
}

Result<TaskSteps> read_task_steps(const Json& value, const std::string& path) {
  if (auto ok = check_keys(value, path, "a map of job, run, task and stats",
                           {"job", "run", "task", "stats"}, false);
      !ok) {
    return std::unexpected(ok.error());
  }
  TaskSteps out;
  for (const char* key : {"job", "run", "task", "stats"}) {
    if (auto given = body_fields::required(value, path, key); !given) {
      return std::unexpected(given.error());
    }
  }
  if (auto ok = first_failure({
          read_optional(value, path, "job", out.job, integer_in(1, kNoLimit)),
          read_optional(value, path, "run", out.run, integer_in(1, kNoLimit)),
          read_optional(value, path, "task", out.task, integer_in(0, kMaxTaskIndex)),
          read_optional(value, path, "stats", out.stats, step_stats_from_json),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  return out;
}

// At most kMaxHeartbeatSteps reports, each (job, run, task) once.
Result<std::vector<TaskSteps>> read_task_steps_list(const Json& value, const std::string& path) {
  if (auto ok = body_fields::check_list(value, path, kMaxHeartbeatSteps, "step reports"); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<TaskSteps> out;
  std::set<std::tuple<std::int64_t, std::int64_t, int>> seen;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto report = read_task_steps(value[i], index_path(path, i));
    if (!report) return std::unexpected(report.error());
    if (!seen.emplace(report->job, report->run, report->task).second) {
      return fail(index_path(path, i),
                  fmt::format("the steps of job {} run {} task {} are listed twice", report->job,
                              report->run, report->task));
    }
    out.push_back(std::move(*report));
  }
  return out;
}

nlohmann::json replica_report_to_json(const ReplicaReport& report) {
  nlohmann::json out = {{"job", report.job}, {"run", report.run}};
  for (const auto& [key, figure] : kReplicaFigureKeys) {
    if (const auto& given = report.figures.*figure) out[std::string(key)] = *given;
  }
  return out;
}

// The keys of a map the agent reads from the server: unknown ones are ignored (agent_wire.h).
Result<void> check_reply_map(const Json& value, const std::string& path) {
  if (value.is_object()) return {};
  return fail(path, "expected a map, got " + body_fields::describe(value));
}

// A MIG instance's uuid, which ends up in CUDA_VISIBLE_DEVICES: 1..kMaxMigUuid characters of
// printable ASCII, no space (which would end the variable in a shell) and no comma (which
// separates devices there).
Result<std::string> read_mig_uuid(const Json& value, const std::string& path) {
  auto uuid = body_fields::read_text(value, path, body_fields::kMaxTextBytes);
  if (!uuid) return uuid;
  if (uuid->empty()) return fail(path, "must not be empty");
  if (uuid->size() > kMaxMigUuid) {
    return fail(path, fmt::format("{} is {} characters long; at most {}", body_fields::quote(*uuid),
                                  uuid->size(), kMaxMigUuid));
  }
  for (const char c : *uuid) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte > 0x20 && byte < 0x7F && c != ',') continue;
    const std::string shown = byte == ' '                  ? "a space"
                              : c == ','                   ? "a comma"
                              : byte > 0x20 && byte < 0x7F ? fmt::format("'{}'", c)
                                                           : fmt::format("the byte 0x{:02X}", byte);
    return fail(path, fmt::format("{} contains {}; a MIG uuid is printable ASCII without spaces "
                                  "or commas (CUDA_VISIBLE_DEVICES names it)",
                                  body_fields::quote(*uuid), shown));
  }
  return uuid;
}

Result<AssignedMig> read_assigned_mig(const Json& value, const std::string& path) {
  if (auto ok = check_reply_map(value, path); !ok) {
    return std::unexpected(ok.error());
  }
  for (const char* key : {"profile", "start", "uuid"}) {
    if (auto present = body_fields::required(value, path, key); !present) {
      return std::unexpected(present.error());
    }
  }
  AssignedMig mig;
  std::string profile;
  if (auto ok = first_failure({
          read_optional(value, path, "profile", profile, short_text()),
          read_optional(value, path, "start", mig.start, integer_in(0, kMigMemorySlices - 1)),
          read_optional(value, path, "uuid", mig.uuid, read_mig_uuid),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  auto parsed = parse_mig_profile(profile);
  if (!parsed) return fail(key_path(path, "profile"), parsed.error().reason);
  mig.profile = *parsed;
  if (!MigLayout{}.fits(mig.profile, mig.start)) {
    const MigProfileSpec& spec = mig_profile_spec(mig.profile);
    std::vector<int> starts;
    for (int s = 0; s < kMigMemorySlices; ++s) {
      if ((spec.starts >> s) & 1U) starts.push_back(s);
    }
    return fail(key_path(path, "start"),
                fmt::format("a {} instance starts at memory slice {}, not {}", spec.name,
                            fmt::join(starts, ", "), mig.start));
  }
  return mig;
}

Result<AssignedTask> read_assigned_task(const Json& value, const std::string& path) {
  if (auto ok = check_reply_map(value, path); !ok) {
    return std::unexpected(ok.error());
  }
  AssignedTask task;
  if (auto ok = first_failure({
          read_optional(value, path, "index", task.index, integer_in(0, kMaxGangTasks - 1)),
          read_optional(value, path, "gpus", task.gpus, read_gpu_indices),
          read_optional(value, path, "mig", task.mig, read_assigned_mig),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  if (task.mig && task.gpus.size() != 1) {
    return fail(key_path(path, "gpus"),
                fmt::format("a task on a MIG instance has one GPU, got {}", task.gpus.size()));
  }
  return task;
}

Result<std::vector<AssignedTask>> read_assigned_tasks(const Json& value, const std::string& path) {
  if (auto ok = body_fields::check_list(value, path, kMaxTasksPerNode, "tasks"); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<AssignedTask> tasks;
  std::set<int> seen;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto task = read_assigned_task(value[i], index_path(path, i));
    if (!task) return std::unexpected(task.error());
    if (!seen.insert(task->index).second) {
      return fail(index_path(path, i), fmt::format("task {} is listed twice", task->index));
    }
    tasks.push_back(std::move(*task));
  }
  return tasks;
}

// A replica's metrics file: empty (none), or an absolute path.
Result<std::string> read_metrics_file(const Json& value, const std::string& path) {
  auto text = body_fields::read_text(value, path, kMaxMetricsFileBytes);
  if (!text) return text;
  if (!text->empty() && !text->starts_with('/')) {
    return fail(path, fmt::format("{} is not an absolute path (one starting with /)",
                                  body_fields::quote(*text)));
  }
  return text;
}

// Overrides of a preset's metric names: at most kMaxMetricNames short texts, keyed by short texts.
Result<std::map<std::string, std::string, std::less<>>> read_metric_names(const Json& value,
                                                                          const std::string& path) {
  if (auto ok = body_fields::check_map(value, path, kMaxMetricNames, "metric names"); !ok) {
    return std::unexpected(ok.error());
  }
  std::map<std::string, std::string, std::less<>> names;
  for (const auto& [key, name] : value.items()) {
    const std::string name_path = key_path(path, key);
    if (auto checked = body_fields::read_short_text(Json(key), name_path, kMaxShortText);
        !checked) {
      return fail(name_path, "the key: " + checked.error().reason);
    }
    auto text = body_fields::read_short_text(name, name_path, kMaxShortText);
    if (!text) return std::unexpected(text.error());
    names.emplace(key, std::move(*text));
  }
  return names;
}

Result<ReplicaAssignment> read_replica_assignment(const Json& value, const std::string& path) {
  if (auto ok = check_reply_map(value, path); !ok) {
    return std::unexpected(ok.error());
  }
  // The service is required: without it the replica would be written back as service 0, which
  // no reader takes.
  if (auto service = body_fields::required(value, path, "service"); !service) {
    return std::unexpected(service.error());
  }
  ReplicaAssignment replica;
  if (auto ok = first_failure({
          read_optional(value, path, "service", replica.service, integer_in(1, kNoLimit)),
          read_optional(value, path, "port", replica.port, integer_in(0, 65'535)),
          read_optional(value, path, "metrics_file", replica.metrics_file, read_metrics_file),
          read_optional(value, path, "metrics_preset", replica.metrics_preset,
                        body_fields::short_text_in(kMaxMetricsPreset)),
          read_optional(value, path, "metric_names", replica.metric_names, read_metric_names),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  return replica;
}

nlohmann::json replica_assignment_to_json(const ReplicaAssignment& replica) {
  return {{"service", replica.service},
          {"port", replica.port},
          {"metrics_file", replica.metrics_file},
          {"metrics_preset", replica.metrics_preset},
          {"metric_names", replica.metric_names}};
}

}  // namespace

// --- registration ---

Result<NodeRegistration> node_registration_from_json(const nlohmann::json& value) {
  if (auto ok = check_keys(value, "",
                           "a map of gpu_model, gpus, cpu_milli, memory_mib, "
                           "agent_version, hostname, address, leaf, spine and devices",
                           {"gpu_model", "gpus", "cpu_milli", "memory_mib", "agent_version",
                            "hostname", "address", "leaf", "spine", "devices"},
                           true);
      !ok) {
    return std::unexpected(ok.error());
  }
  NodeRegistration registration;
  if (auto ok = first_failure({
          read_optional(value, "", "gpu_model", registration.gpu_model, short_text()),
          read_optional(value, "", "gpus", registration.gpus, integer_in(0, kMaxGpusPerNode)),
          read_optional(value, "", "cpu_milli", registration.cpu_milli, integer_in(0, kNoLimit)),
          read_optional(value, "", "memory_mib", registration.memory_mib, integer_in(0, kNoLimit)),
          read_optional(value, "", "agent_version", registration.agent_version, short_text()),
          read_optional(value, "", "hostname", registration.hostname, short_text()),
          read_optional(value, "", "address", registration.address, short_text()),
          read_optional(value, "", "leaf", registration.leaf, short_text()),
          read_optional(value, "", "spine", registration.spine, short_text()),
          read_optional(value, "", "devices", registration.devices, read_gpu_devices),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  return registration;
}

nlohmann::json node_registration_to_json(const NodeRegistration& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (const GpuDevice& d : r.devices) {
    nlohmann::json device = {{"index", d.index},
                             {"uuid", d.uuid},
                             {"model", d.model},
                             {"memory_mib", d.memory_mib},
                             {"pci_bus_id", d.pci_bus_id},
                             {"numa_node", d.numa_node},
                             {"nvlink_peers", d.nvlink_peers}};
    if (!d.mig.empty()) {
      nlohmann::json slices = nlohmann::json::array();
      for (const MigSlice& m : d.mig) {
        slices.push_back({{"uuid", m.uuid},
                          {"profile", std::string(mig_profile_spec(m.profile).name)},
                          {"start", m.start},
                          {"memory_mib", m.memory_mib}});
      }
      device["mig"] = std::move(slices);
    }
    devices.push_back(std::move(device));
  }
  nlohmann::json out = {{"gpu_model", r.gpu_model},
                        {"agent_version", r.agent_version},
                        {"hostname", r.hostname},
                        {"address", r.address},
                        {"leaf", r.leaf},
                        {"spine", r.spine},
                        {"devices", std::move(devices)}};
  if (r.gpus) out["gpus"] = *r.gpus;
  if (r.cpu_milli) out["cpu_milli"] = *r.cpu_milli;
  if (r.memory_mib) out["memory_mib"] = *r.memory_mib;
  return out;
}

// --- heartbeat ---

Result<NodeHeartbeat> node_heartbeat_from_json(const nlohmann::json& value) {
  if (auto ok =
          check_keys(value, "", "a map of running_jobs, healthy_gpus, gpus, replicas and steps",
                     {"running_jobs", "healthy_gpus", "gpus", "replicas", "steps"}, true);
      !ok) {
    return std::unexpected(ok.error());
  }
  NodeHeartbeat heartbeat;
  if (auto ok = first_failure({
          read_optional(value, "", "running_jobs", heartbeat.running_jobs, read_heartbeat_job_ids),
          read_optional(value, "", "healthy_gpus", heartbeat.healthy_gpus,
                        integer_in(0, kMaxGpusPerNode)),
          read_optional(value, "", "gpus", heartbeat.gpus, read_gpu_readings),
          read_optional(value, "", "replicas", heartbeat.replicas, read_replica_reports),
          read_optional(value, "", "steps", heartbeat.steps, read_task_steps_list),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  return heartbeat;
}

nlohmann::json node_heartbeat_to_json(const NodeHeartbeat& heartbeat) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuReading& r : heartbeat.gpus) {
    gpus.push_back({{"index", r.index},
                    {"model", r.model},
                    {"utilization_percent", r.utilization_percent},
                    {"memory_used_mib", r.memory_used_mib},
                    {"memory_total_mib", r.memory_total_mib},
                    {"power_milliwatts", r.power_milliwatts},
                    {"temperature_celsius", r.temperature_celsius},
                    {"throttle_reasons", r.throttle_reasons},
                    {"ecc_errors_uncorrected", r.ecc_errors_uncorrected}});
  }
  nlohmann::json replicas = nlohmann::json::array();
  for (const ReplicaReport& r : heartbeat.replicas) replicas.push_back(replica_report_to_json(r));
  nlohmann::json out = {{"running_jobs", heartbeat.running_jobs},
                        {"gpus", std::move(gpus)},
                        {"replicas", std::move(replicas)}};
  if (heartbeat.healthy_gpus) out["healthy_gpus"] = *heartbeat.healthy_gpus;
  if (!heartbeat.steps.empty()) {
    nlohmann::json steps = nlohmann::json::array();
    for (const TaskSteps& t : heartbeat.steps) {
      steps.push_back({{"job", t.job},
                       {"run", t.run},
                       {"task", t.task},
                       {"stats", step_stats_to_json(t.stats)}});
    }
    out["steps"] = std::move(steps);
  }
  return out;
}

// --- the heartbeat's reply ---

Result<NodeAssignment> node_assignment_from_json(const nlohmann::json& value,
                                                 const std::string& path) {
  if (auto ok = check_reply_map(value, path); !ok) {
    return std::unexpected(ok.error());
  }
  auto job = body_fields::required(value, path, "job");
  if (!job) return std::unexpected(job.error());
  NodeAssignment a;
  if (auto ok = first_failure({
          read_optional(value, path, "job", a.job, integer_in(1, kNoLimit)),
          read_optional(value, path, "run", a.run, integer_in(0, kNoLimit)),
          read_optional(value, path, "name", a.name, short_text()),
          read_optional(value, path, "tenant", a.tenant, short_text()),
          read_optional(value, path, "world_size", a.world_size, integer_in(1, kMaxGangTasks)),
          read_optional(value, path, "tasks", a.tasks, read_assigned_tasks),
          read_optional(value, path, "master_addr", a.master_addr, short_text()),
          read_optional(value, path, "master_port", a.master_port, integer_in(0, 65'535)),
          read_optional(value, path, "command", a.command, read_job_command),
          read_optional(value, path, "env", a.env, read_job_env),
          read_optional(value, path, "working_dir", a.working_dir, long_text()),
          read_optional(value, path, "cpu_milli_per_task", a.cpu_milli_per_task,
                        integer_in(0, kMaxCpuMilliPerTask)),
          read_optional(value, path, "memory_mib_per_task", a.memory_mib_per_task,
                        integer_in(0, kMaxMemoryMibPerTask)),
          read_optional(value, path, "gpu_milli", a.gpu_milli, integer_in(1, 1000)),
          read_optional(value, path, "preemptible", a.preemptible, body_fields::read_bool),
          read_optional(value, path, "checkpoints", a.checkpoints, body_fields::read_bool),
          read_optional(value, path, "resume_from", a.resume_from, long_text()),
          read_optional(value, path, "checkpoint_step", a.checkpoint_step, integer_in(0, kNoLimit)),
          read_optional(value, path, "replica", a.replica, read_replica_assignment),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  if (a.command.empty()) return fail(key_path(path, "command"), "the job has no command to run");
  for (std::size_t i = 0; i < a.tasks.size(); ++i) {
    if (a.tasks[i].index >= a.world_size) {
      return fail(key_path(index_path(key_path(path, "tasks"), i), "index"),
                  fmt::format("{} is not a task of a job of {}", a.tasks[i].index, a.world_size));
    }
  }
  return a;
}

nlohmann::json node_assignment_to_json(const NodeAssignment& a) {
  nlohmann::json tasks = nlohmann::json::array();
  for (const AssignedTask& t : a.tasks) {
    nlohmann::json task = {{"index", t.index}, {"gpus", t.gpus}};
    if (t.mig) {
      task["mig"] = {{"profile", std::string(mig_profile_spec(t.mig->profile).name)},
                     {"start", t.mig->start},
                     {"uuid", t.mig->uuid}};
    }
    tasks.push_back(std::move(task));
  }
  nlohmann::json out = {{"job", a.job},
                        {"run", a.run},
                        {"name", a.name},
                        {"tenant", a.tenant},
                        {"world_size", a.world_size},
                        {"tasks", std::move(tasks)},
                        {"master_addr", a.master_addr},
                        {"master_port", a.master_port},
                        {"command", a.command},
                        {"env", a.env},
                        {"working_dir", a.working_dir},
                        {"cpu_milli_per_task", a.cpu_milli_per_task},
                        {"memory_mib_per_task", a.memory_mib_per_task},
                        {"gpu_milli", a.gpu_milli},
                        {"preemptible", a.preemptible},
                        {"checkpoints", a.checkpoints},
                        {"resume_from", a.resume_from},
                        {"checkpoint_step", a.checkpoint_step ? nlohmann::json(*a.checkpoint_step)
                                                              : nlohmann::json(nullptr)}};
  if (a.replica) out["replica"] = replica_assignment_to_json(*a.replica);
  return out;
}

Result<HeartbeatReply> heartbeat_reply_from_json(const nlohmann::json& value) {
  if (auto ok = check_reply_map(value, ""); !ok) {
    return std::unexpected(ok.error());
  }
  HeartbeatReply reply;
  if (auto ok = first_failure({
          read_optional(value, "", "node", reply.node, short_text()),
          read_optional(value, "", "jobs", reply.jobs, read_heartbeat_job_ids),
          read_optional(value, "", "heartbeat_timeout_ms", reply.heartbeat_timeout_ms,
                        integer_in(0, kNoLimit)),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  const Json* assignments = member(value, "assignments");
  if (assignments == nullptr) return reply;
  if (auto ok =
          body_fields::check_list(*assignments, "assignments", kMaxHeartbeatJobs, "assignments");
      !ok) {
    return std::unexpected(ok.error());
  }
  for (std::size_t i = 0; i < assignments->size(); ++i) {
    const Json& item = (*assignments)[i];
    auto a = node_assignment_from_json(item, index_path("assignments", i));
    if (a) {
      reply.assignments.push_back(std::move(*a));
      continue;
    }
    // What the bad one is about, if that much can be read: its job is failed with the reason.
    RejectedAssignment rejected{.job = 0, .run = 0, .error = std::move(a).error()};
    (void)read_optional(item, "", "job", rejected.job, integer_in(1, kNoLimit));
    (void)read_optional(item, "", "run", rejected.run, integer_in(0, kNoLimit));
    reply.rejected.push_back(std::move(rejected));
  }
  return reply;
}

nlohmann::json heartbeat_reply_to_json(const HeartbeatReply& reply) {
  nlohmann::json assignments = nlohmann::json::array();
  for (const NodeAssignment& a : reply.assignments) {
    assignments.push_back(node_assignment_to_json(a));
  }
  nlohmann::json out = {
      {"node", reply.node}, {"jobs", reply.jobs}, {"assignments", std::move(assignments)}};
  if (reply.heartbeat_timeout_ms) out["heartbeat_timeout_ms"] = *reply.heartbeat_timeout_ms;
  return out;
}

// --- reports about a job's run ---

Result<JobStatusReport> job_status_report_from_json(const nlohmann::json& value) {
  if (auto ok = check_keys(value, "", "a map of state, exit_code, message, task, run and steps",
                           {"state", "exit_code", "message", "task", "run", "steps"}, true);
      !ok) {
    return std::unexpected(ok.error());
  }
  auto state = body_fields::required(value, "", "state");
  if (!state) return std::unexpected(state.error());
  JobStatusReport report;
  if (auto ok = first_failure({
          read_optional(
              value, "", "state", report.state,
              [](const Json& v, const std::string& path) {
                return body_fields::read_word(v, path, {"running", "succeeded", "failed"});
              }),
          read_optional(value, "", "exit_code", report.exit_code,
                        integer_in(kMinExitCode, kMaxExitCode)),
          read_optional(value, "", "message", report.message, long_text()),
          read_optional(value, "", "task", report.task, integer_in(0, kMaxTaskIndex)),
          read_optional(value, "", "run", report.run, integer_in(1, kNoLimit)),
          read_optional(value, "", "steps", report.steps, step_stats_from_json),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  if (report.steps && (!report.task || !report.run)) {
    return fail("steps", "are a task's: they need task and run");
  }
  return report;
}

nlohmann::json job_status_report_to_json(const JobStatusReport& report) {
  nlohmann::json out = {{"state", report.state}, {"message", report.message}};
  if (report.exit_code) out["exit_code"] = *report.exit_code;
  if (report.task) out["task"] = *report.task;
  if (report.run) out["run"] = *report.run;
  if (report.steps) out["steps"] = step_stats_to_json(*report.steps);
  return out;
}

Result<CheckpointReport> checkpoint_report_from_json(const nlohmann::json& value) {
  if (auto ok = check_keys(value, "", "a map of step, path, note and run",
                           {"step", "path", "note", "run"}, true);
      !ok) {
    return std::unexpected(ok.error());
  }
  CheckpointReport report;
  if (auto ok = first_failure({
          read_optional(value, "", "step", report.step, integer_in(0, kNoLimit)),
          read_optional(value, "", "path", report.path, long_text()),
          read_optional(value, "", "note", report.note, long_text()),
          read_optional(value, "", "run", report.run, integer_in(1, kNoLimit)),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  return report;
}

nlohmann::json checkpoint_report_to_json(const CheckpointReport& report) {
  nlohmann::json out = nlohmann::json::object();
  if (report.step) out["step"] = *report.step;
  if (!report.path.empty()) out["path"] = report.path;
  if (!report.note.empty()) out["note"] = report.note;
  if (report.run) out["run"] = *report.run;
  return out;
}

// --- a task's output ---

Result<LogAppendReply> log_append_reply_from_json(const nlohmann::json& value) {
  if (auto ok = check_reply_map(value, ""); !ok) {
    return std::unexpected(ok.error());
  }
  for (std::string_view key : {"job", "task", "run", "size"}) {
    if (auto present = body_fields::required(value, "", key); !present) {
      return std::unexpected(present.error());
    }
  }
  LogAppendReply reply;
  if (auto ok = first_failure({
          read_optional(value, "", "job", reply.job, integer_in(1, kNoLimit)),
          read_optional(value, "", "task", reply.task,
                        integer_in(0, std::numeric_limits<int>::max())),
          read_optional(value, "", "run", reply.run, integer_in(0, kNoLimit)),
          read_optional(value, "", "size", reply.size, integer_in(0, kNoLimit)),
      });
      !ok) {
    return std::unexpected(ok.error());
  }
  return reply;
}

nlohmann::json log_append_reply_to_json(const LogAppendReply& reply) {
  return {{"job", reply.job}, {"task", reply.task}, {"run", reply.run}, {"size", reply.size}};
}

Result<LogConflict> log_conflict_from_json(const nlohmann::json& value) {
  if (auto ok = check_reply_map(value, ""); !ok) {
    return std::unexpected(ok.error());
  }
  auto size = body_fields::required(value, "", "size");
  if (!size) return std::unexpected(size.error());
  LogConflict conflict;
  if (auto ok = read_optional(value, "", "size", conflict.size, integer_in(0, kNoLimit)); !ok) {
    return std::unexpected(ok.error());
  }
  return conflict;
}

nlohmann::json log_conflict_to_json(const LogConflict& conflict) {
  return {{"size", conflict.size}};
}

}  // namespace tidepool
