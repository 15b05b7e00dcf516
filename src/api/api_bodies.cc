#include "api/api_bodies.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include "api/body_fields.h"
#include "api/job_spec.h"
#include "config/yaml_reader.h"
#include "core/gpus_text.h"
#include "core/resources.h"
#include "core/tenants.h"

namespace tidepool {
namespace {

using body_fields::check_keys;
using body_fields::describe;
using body_fields::first_failure;
using body_fields::index_path;
using body_fields::integer_in;
using body_fields::Json;
using body_fields::key_path;
using body_fields::member;
using body_fields::quote;
using body_fields::read_optional;

constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kShortText = 256;

auto text_of(std::size_t max_bytes) {
  return [max_bytes](const Json& value, const std::string& path) {
    return body_fields::read_text(value, path, max_bytes);
  };
}

auto short_text() {
  return [](const Json& value, const std::string& path) {
    return body_fields::read_short_text(value, path, kShortText);
  };
}

// One of `words`.
Result<std::string> read_word(const Json& value, const std::string& path,
                              std::initializer_list<std::string_view> words) {
  std::string list;
  for (std::string_view word : words) list += (list.empty() ? "" : ", ") + std::string(word);
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (std::find(words.begin(), words.end(), text) != words.end()) return text;
  }
  return fail(path, fmt::format("expected one of {}, got {}", list, describe(value)));
}

// A GPU figure: a number or a string of GPUs with up to 3 decimals, >= 0, in milli-GPUs.
Result<std::int64_t> read_gpus(const Json& value, const std::string& path) {
  std::string text;
  if (value.is_number()) {
    text = value.dump();  // the shortest text that reads back: 0.5 -> "0.5"
  } else if (value.is_string()) {
    text = value.get_ref<const std::string&>();
  } else {
    return fail(path, "expected a number of GPUs, got " + describe(value));
  }
  if (text.starts_with('-')) return fail(path, fmt::format("{} is negative", quote(text)));
  const auto milli = parse_decimal(text, 3);
  if (!milli) {
    return fail(path,
                fmt::format("{} is not a number of GPUs with at most 3 decimals", quote(text)));
  }
  if (*milli > kMaxQuotaMilli) {
    return fail(path, fmt::format("{} is out of range 0..{} GPUs", quote(text),
                                  gpus_number(kMaxQuotaMilli)));
  }
  return *milli;
}

Result<QuotaSpec> read_quota_spec(const Json& value, const std::string& path) {
  if (auto keys =
          check_keys(value, path,
                     "a map of guaranteed_gpus, borrowing_limit_gpus and "
                     "lending_limit_gpus",
                     {"guaranteed_gpus", "borrowing_limit_gpus", "lending_limit_gpus"}, false);
      !keys) {
    return std::unexpected(keys.error());
  }
  QuotaSpec quota;
  if (auto read = first_failure({
          read_optional(value, path, "guaranteed_gpus", quota.guaranteed_milli, read_gpus),
          read_optional(value, path, "borrowing_limit_gpus", quota.borrowing_limit_milli,
                        read_gpus),
          read_optional(value, path, "lending_limit_gpus", quota.lending_limit_milli, read_gpus),
      });
      !read) {
    return std::unexpected(read.error());
  }
  if (quota.lending_limit_milli && *quota.lending_limit_milli > quota.guaranteed_milli) {
    return fail(
        key_path(path, "lending_limit_gpus"),
        fmt::format("{} GPUs is more than the guarantee of {}",
                    gpus_number(*quota.lending_limit_milli), gpus_number(quota.guaranteed_milli)));
  }
  return quota;
}

Result<std::map<std::string, QuotaSpec>> read_quota(const Json& value, const std::string& path) {
  if (auto map = body_fields::check_map(value, path, kMaxTenantGpuModels, "GPU models"); !map) {
    return std::unexpected(map.error());
  }
  std::map<std::string, QuotaSpec> quota;
  for (const auto& [model, figures] : value.items()) {
    const std::string model_path = key_path(path, model);
    if (auto name = check_name(model); !name) {
      return fail(model_path, "a GPU model must be a name: " + name.error().reason);
    }
    auto spec = read_quota_spec(figures, model_path);
    if (!spec) return std::unexpected(spec.error());
    quota.emplace(model, *spec);
  }
  return quota;
}

Result<std::vector<std::string>> read_queues(const Json& value, const std::string& path) {
  if (auto list = body_fields::check_list(value, path, kMaxTenantQueues, "queue names"); !list) {
    return std::unexpected(list.error());
  }
  if (value.empty()) return fail(path, "must name at least one queue");
  std::vector<std::string> queues;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto name = body_fields::read_name(value[i], index_path(path, i));
    if (!name) return std::unexpected(name.error());
    if (std::find(queues.begin(), queues.end(), *name) != queues.end()) {
      return fail(index_path(path, i), fmt::format("{} is listed twice", quote(*name)));
    }
    queues.push_back(std::move(*name));
  }
  return queues;
}

Result<std::vector<std::int64_t>> read_job_ids(const Json& value, const std::string& path) {
  if (auto list = body_fields::check_list(value, path, kMaxHeartbeatJobs, "job ids"); !list) {
    return std::unexpected(list.error());
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

// An optional name, "" when absent or empty.
Result<std::string> read_optional_name(const Json& value, const std::string& path) {
  if (value.is_string() && value.get_ref<const std::string&>().empty()) return std::string();
  return body_fields::read_name(value, path);
}

Result<std::vector<int>> read_gpu_indices(const Json& value, const std::string& path) {
  if (auto list = body_fields::check_list(value, path, kMaxGpusPerNode, "GPU indices"); !list) {
    return std::unexpected(list.error());
  }
  std::vector<int> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto index = body_fields::read_integer(value[i], index_path(path, i), 0, kMaxGpusPerNode - 1);
    if (!index) return std::unexpected(index.error());
    out.push_back(static_cast<int>(*index));
  }
  return out;
}

Result<GpuDevice> read_gpu_device(const Json& value, const std::string& path) {
  if (auto keys = check_keys(
          value, path,
          "a map of index, uuid, model, memory_mib, pci_bus_id, numa_node and "
          "nvlink_peers",
          {"index", "uuid", "model", "memory_mib", "pci_bus_id", "numa_node", "nvlink_peers"},
          false);
      !keys) {
    return std::unexpected(keys.error());
  }
  GpuDevice device;
  if (auto read = first_failure({
          read_optional(value, path, "index", device.index, integer_in(0, kMaxGpusPerNode - 1)),
          read_optional(value, path, "uuid", device.uuid, short_text()),
          read_optional(value, path, "model", device.model, short_text()),
          read_optional(value, path, "memory_mib", device.memory_mib, integer_in(0, kNoLimit)),
          read_optional(value, path, "pci_bus_id", device.pci_bus_id, short_text()),
          read_optional(value, path, "numa_node", device.numa_node, integer_in(-1, 1023)),
          read_optional(value, path, "nvlink_peers", device.nvlink_peers, read_gpu_indices),
      });
      !read) {
    return std::unexpected(read.error());
  }
  return device;
}

Result<GpuReading> read_gpu_reading(const Json& value, const std::string& path) {
  if (auto keys = check_keys(
          value, path, "a map of a GPU's figures",
          {"index", "model", "utilization_percent", "memory_used_mib", "memory_total_mib",
           "power_milliwatts", "temperature_celsius", "throttle_reasons", "ecc_errors_uncorrected"},
          false);
      !keys) {
    return std::unexpected(keys.error());
  }
  GpuReading r;
  std::int64_t throttle = 0;
  std::int64_t ecc = 0;
  if (auto read = first_failure({
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
      !read) {
    return std::unexpected(read.error());
  }
  r.throttle_reasons = static_cast<std::uint64_t>(throttle);
  r.ecc_errors_uncorrected = static_cast<std::uint64_t>(ecc);
  return r;
}

Result<std::vector<GpuReading>> read_gpu_readings(const Json& value, const std::string& path) {
  if (auto list = body_fields::check_list(value, path, kMaxGpusPerNode, "GPUs"); !list) {
    return std::unexpected(list.error());
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

Result<std::vector<GpuDevice>> read_gpu_devices(const Json& value, const std::string& path) {
  if (auto list = body_fields::check_list(value, path, kMaxGpusPerNode, "GPUs"); !list) {
    return std::unexpected(list.error());
  }
  std::vector<GpuDevice> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto device = read_gpu_device(value[i], index_path(path, i));
    if (!device) return std::unexpected(device.error());
    out.push_back(std::move(*device));
  }
  return out;
}

}  // namespace

Result<JobStatusReport> job_status_report_from_json(const nlohmann::json& value) {
  if (auto keys = check_keys(value, "", "a map of state, exit_code, message, task and run",
                             {"state", "exit_code", "message", "task", "run"}, true);
      !keys) {
    return std::unexpected(keys.error());
  }
  auto state = body_fields::required(value, "", "state");
  if (!state) return std::unexpected(state.error());
  JobStatusReport report;
  if (auto read = first_failure({
          read_optional(value, "", "state", report.state,
                        [](const Json& v, const std::string& path) {
                          return read_word(v, path, {"running", "succeeded", "failed"});
                        }),
          read_optional(value, "", "exit_code", report.exit_code,
                        integer_in(kMinExitCode, kMaxExitCode)),
          read_optional(value, "", "message", report.message, text_of(body_fields::kMaxTextBytes)),
          read_optional(value, "", "task", report.task, integer_in(0, 99'999)),
          read_optional(value, "", "run", report.run, integer_in(1, kNoLimit)),
      });
      !read) {
    return std::unexpected(read.error());
  }
  return report;
}

Result<CheckpointReport> checkpoint_report_from_json(const nlohmann::json& value) {
  if (auto keys = check_keys(value, "", "a map of step, path, note and run",
                             {"step", "path", "note", "run"}, true);
      !keys) {
    return std::unexpected(keys.error());
  }
  CheckpointReport report;
  if (auto read = first_failure({
          read_optional(value, "", "step", report.step, integer_in(0, kNoLimit)),
          read_optional(value, "", "path", report.path, text_of(body_fields::kMaxTextBytes)),
          read_optional(value, "", "note", report.note, text_of(body_fields::kMaxTextBytes)),
          read_optional(value, "", "run", report.run, integer_in(1, kNoLimit)),
      });
      !read) {
    return std::unexpected(read.error());
  }
  return report;
}

Result<TenantUpdate> tenant_update_from_json(const nlohmann::json& value) {
  if (auto keys = check_keys(value, "", "a map of weight, queues and quota",
                             {"weight", "queues", "quota"}, true);
      !keys) {
    return std::unexpected(keys.error());
  }
  TenantUpdate update;
  update.queues = {"default"};
  if (auto read = first_failure({
          read_optional(value, "", "weight", update.weight, integer_in(1, kMaxTenantWeight)),
          read_optional(value, "", "queues", update.queues, read_queues),
          read_optional(value, "", "quota", update.quota, read_quota),
      });
      !read) {
    return std::unexpected(read.error());
  }
  return update;
}

Result<TokenRequest> token_request_from_json(const nlohmann::json& value) {
  if (auto keys = check_keys(value, "", "a map of role, tenant, node and description",
                             {"role", "tenant", "node", "description"}, true);
      !keys) {
    return std::unexpected(keys.error());
  }
  auto role = body_fields::required(value, "", "role");
  if (!role) return std::unexpected(role.error());
  TokenRequest request;
  if (auto read = first_failure({
          read_optional(value, "", "role", request.role,
                        [](const Json& v, const std::string& path) {
                          return read_word(v, path, {"admin", "user", "agent"});
                        }),
          read_optional(value, "", "tenant", request.tenant, read_optional_name),
          read_optional(value, "", "node", request.node, read_optional_name),
          read_optional(value, "", "description", request.description, short_text()),
      });
      !read) {
    return std::unexpected(read.error());
  }
  const bool user = request.role == "user";
  const bool agent = request.role == "agent";
  if (user && request.tenant.empty()) return fail("tenant", "a user token needs a tenant");
  if (!user && !request.tenant.empty()) {
    return fail("tenant",
                fmt::format("only a user token names a tenant, not an {} token", request.role));
  }
  if (agent && request.node.empty()) return fail("node", "an agent token needs a node");
  if (!agent && !request.node.empty()) {
    return fail("node", fmt::format("only an agent token names a node, not {} {} token",
                                    user ? "a" : "an", request.role));
  }
  return request;
}

Result<NodeRegistration> node_registration_from_json(const nlohmann::json& value) {
  if (auto keys = check_keys(value, "",
                             "a map of gpu_model, gpus, cpu_milli, memory_mib, agent_version, "
                             "hostname, address, leaf, spine and devices",
                             {"gpu_model", "gpus", "cpu_milli", "memory_mib", "agent_version",
                              "hostname", "address", "leaf", "spine", "devices"},
                             true);
      !keys) {
    return std::unexpected(keys.error());
  }
  NodeRegistration registration;
  if (auto read = first_failure({
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
      !read) {
    return std::unexpected(read.error());
  }
  return registration;
}

nlohmann::json node_registration_to_json(const NodeRegistration& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (const GpuDevice& d : r.devices) {
    devices.push_back({{"index", d.index},
                       {"uuid", d.uuid},
                       {"model", d.model},
                       {"memory_mib", d.memory_mib},
                       {"pci_bus_id", d.pci_bus_id},
                       {"numa_node", d.numa_node},
                       {"nvlink_peers", d.nvlink_peers}});
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

Result<NodeHeartbeat> node_heartbeat_from_json(const nlohmann::json& value) {
  if (auto keys = check_keys(value, "", "a map of running_jobs, healthy_gpus and gpus",
                             {"running_jobs", "healthy_gpus", "gpus"}, true);
      !keys) {
    return std::unexpected(keys.error());
  }
  NodeHeartbeat heartbeat;
  if (auto read = first_failure({
          read_optional(value, "", "running_jobs", heartbeat.running_jobs, read_job_ids),
          read_optional(value, "", "healthy_gpus", heartbeat.healthy_gpus,
                        integer_in(0, kMaxGpusPerNode)),
          read_optional(value, "", "gpus", heartbeat.gpus, read_gpu_readings),
      });
      !read) {
    return std::unexpected(read.error());
  }
  return heartbeat;
}

Result<JobUpdate> job_update_from_json(const nlohmann::json& value) {
  if (auto keys = check_keys(value, "", "a map of the fields to change",
                             {"priority", "max_runtime", "runtime_estimate", "max_cost"}, false);
      !keys) {
    return std::unexpected(keys.error());
  }
  if (value.empty()) {
    return fail("body",
                "nothing to change: give priority, max_runtime, runtime_estimate or "
                "max_cost");
  }
  return JobUpdate{value};
}

Result<JobSpec> apply_job_update(const JobSpec& spec, const JobUpdate& update) {
  if (auto checked = job_update_from_json(update.fields); !checked) {
    return std::unexpected(checked.error());
  }
  nlohmann::json merged = job_spec_to_json(spec);
  for (const auto& [key, value] : update.fields.items()) merged[key] = value;
  return job_spec_from_json(merged);
}

Result<DrainRequest> drain_request_from_json(const nlohmann::json& value) {
  if (auto keys = check_keys(value, "", "a map with a reason", {"reason"}, true); !keys) {
    return std::unexpected(keys.error());
  }
  DrainRequest request;
  if (auto read = read_optional(value, "", "reason", request.reason, short_text()); !read) {
    return std::unexpected(read.error());
  }
  return request;
}

}  // namespace tidepool
