#include "api/api_bodies.h"

#include <fmt/format.h>

#include <algorithm>
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
using body_fields::quote;
using body_fields::read_optional;
using body_fields::short_text;

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

// An optional name, "" when absent or empty.
Result<std::string> read_optional_name(const Json& value, const std::string& path) {
  if (value.is_string() && value.get_ref<const std::string&>().empty()) return std::string();
  return body_fields::read_name(value, path);
}

}  // namespace

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
                          return body_fields::read_word(v, path, {"admin", "user", "agent"});
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
