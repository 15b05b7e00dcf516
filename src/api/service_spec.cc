#include "api/service_spec.h"

#include <fmt/format.h>

#include <tuple>
#include <utility>

#include "api/body_fields.h"
#include "api/replica_metrics.h"
#include "config/yaml_reader.h"
#include "core/duration_format.h"

namespace tidepool {
namespace {

using Json = nlohmann::json;
using body_fields::duration_in;
using body_fields::integer_in;
using body_fields::key_path;
using body_fields::read_optional;

// A count of requests with up to 3 decimals (a number or a string), in thousandths, > 0.
Result<std::int64_t> read_requests(const Json& value, const std::string& path) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (value.is_number()) {
    text = value.dump();
  } else {
    return fail(path, "expected a number of requests such as 2 or 2.5, got " +
                          body_fields::describe(value));
  }
  const auto milli = parse_decimal(text, 3);
  if (!milli || *milli <= 0 || *milli > std::int64_t{1'000'000'000}) {
    return fail(path, fmt::format("{} is not a number of requests more than 0 and at most "
                                  "1000000, with up to 3 decimals",
                                  body_fields::quote(text)));
  }
  return *milli;
}

Result<void> read_target(const Json& value, const std::string& path, AutoscalerSpec& scaler) {
  if (auto keys = body_fields::check_keys(
          value, path, "a map of one target",
          {"p95_latency_ms", "queue_per_replica", "concurrency_per_replica"}, false);
      !keys) {
    return keys;
  }
  if (value.size() != 1) {
    return fail(path,
                "give exactly one of p95_latency_ms, queue_per_replica, "
                "concurrency_per_replica");
  }
  const auto entry = value.begin();
  const std::string& key = entry.key();
  const Json& target = entry.value();
  auto metric = parse_scale_metric(key);
  if (!metric) return fail(path, metric.error().reason);
  scaler.metric = *metric;
  auto read = *metric == ScaleMetric::kP95LatencyMs
                  ? body_fields::read_integer(target, key_path(path, key), 1, 1'000'000'000)
                  : read_requests(target, key_path(path, key));
  if (!read) return std::unexpected(read.error());
  scaler.target = *read;
  return {};
}

Result<void> read_metrics(const Json& value, const std::string& path, ServiceSpec& spec) {
  if (auto keys = body_fields::check_keys(value, path, "a map of preset and names",
                                          {"preset", "names"}, true);
      !keys) {
    return keys;
  }
  if (auto ok =
          read_optional(value, path, "preset", spec.metrics_preset, body_fields::short_text_in(32));
      !ok) {
    return ok;
  }
  if (const Json* names = body_fields::member(value, "names")) {
    const std::string names_path = key_path(path, "names");
    if (auto map = body_fields::check_map(*names, names_path, 32, "metric names"); !map) {
      return map;
    }
    for (const auto& [key, name] : names->items()) {
      auto text = body_fields::read_short_text(name, key_path(names_path, key), 256);
      if (!text) return std::unexpected(text.error());
      spec.metric_names[key] = std::move(*text);
    }
  }
  // The agent reads them with this table: a name it could not use is refused here.
  if (auto names = replica_metric_names(spec.metrics_preset, spec.metric_names); !names) {
    const std::string field =
        names.error().field.empty() ? path : key_path(path, names.error().field);
    return fail(field, names.error().reason);
  }
  return {};
}

Result<void> read_models(const Json& value, const std::string& path, ServiceSpec& spec) {
  if (auto map = body_fields::check_map(value, path, kMaxServiceModels, "GPU models"); !map) {
    return map;
  }
  for (const auto& [name, figures] : value.items()) {
    const std::string model_path = key_path(path, name);
    if (name.empty() || name.size() > 64) {
      return fail(model_path, "a GPU model's name has 1 to 64 characters");
    }
    if (auto keys =
            body_fields::check_keys(figures, model_path, "a map of throughput and p95_latency_ms",
                                    {"throughput", "p95_latency_ms"}, false);
        !keys) {
      return keys;
    }
    for (const char* key : {"throughput", "p95_latency_ms"}) {
      if (body_fields::member(figures, key) == nullptr) {
        return fail(key_path(model_path, key), "required");
      }
    }
    auto throughput = read_requests(figures["throughput"], key_path(model_path, "throughput"));
    if (!throughput) return std::unexpected(throughput.error());
    auto p95 = body_fields::read_integer(figures["p95_latency_ms"],
                                         key_path(model_path, "p95_latency_ms"), 1, 1'000'000'000);
    if (!p95) return std::unexpected(p95.error());
    spec.models[name] =
        ModelThroughput{.throughput_milli_rps = *throughput, .p95_latency_ms = *p95};
  }
  return {};
}

}  // namespace

bool operator==(const ServiceSpec& a, const ServiceSpec& b) {
  const auto fields = [](const ServiceSpec& s) {
    const AutoscalerSpec& c = s.scaler;
    return std::tie(c.min_replicas, c.max_replicas, c.metric, c.target, c.stable_window,
                    c.panic_window, c.panic_percent, c.tolerance_percent, c.up_period,
                    c.down_window, c.down_period, c.slots_per_replica, c.lead, s.drain,
                    s.spread.level, s.spread.max_per_node, s.metrics_port, s.metrics_file,
                    s.metrics_preset, s.metric_names, s.models);
  };
  return fields(a) == fields(b);
}

Result<ServiceSpec> read_service_spec(const Json& value, const std::string& path) {
  if (auto keys = body_fields::check_keys(
          value, path, "a map of the service's fields",
          {"min_replicas", "max_replicas", "target", "stable_window", "panic_window",
           "panic_percent", "tolerance_percent", "up_period", "down_window", "down_period",
           "slots_per_replica", "startup", "drain", "spread", "max_per_node", "metrics_port",
           "metrics_file", "metrics", "models"},
          false);
      !keys) {
    return std::unexpected(keys.error());
  }
  ServiceSpec spec;
  AutoscalerSpec& s = spec.scaler;
  s.lead = 60;
  std::optional<int> max_replicas;
  std::string spread = "node";
  auto target = body_fields::required(value, path, "target");
  if (!target) return std::unexpected(target.error());
  if (auto read = body_fields::first_failure({
          read_optional(value, path, "min_replicas", s.min_replicas, integer_in(0, kMaxReplicas)),
          read_optional(value, path, "max_replicas", max_replicas, integer_in(1, kMaxReplicas)),
          read_target(**target, key_path(path, "target"), s),
          read_optional(value, path, "stable_window", s.stable_window, duration_in(6, 3600)),
          read_optional(value, path, "panic_window", s.panic_window, duration_in(1, 3600)),
          read_optional(value, path, "panic_percent", s.panic_percent, integer_in(101, 10'000)),
          read_optional(value, path, "tolerance_percent", s.tolerance_percent, integer_in(0, 50)),
          read_optional(value, path, "up_period", s.up_period, duration_in(1, 86'400)),
          read_optional(value, path, "down_window", s.down_window, duration_in(0, 86'400)),
          read_optional(value, path, "down_period", s.down_period, duration_in(1, 86'400)),
          read_optional(value, path, "slots_per_replica", s.slots_per_replica, integer_in(1, 1024)),
          read_optional(value, path, "startup", s.lead, duration_in(0, 3600)),
          read_optional(value, path, "drain", spec.drain, duration_in(0, 3600)),
          read_optional(value, path, "spread", spread,
                        [](const Json& v, const std::string& p) {
                          return body_fields::read_word(v, p, {"node", "leaf"});
                        }),
          read_optional(value, path, "max_per_node", spec.spread.max_per_node,
                        integer_in(0, kMaxReplicas)),
          read_optional(value, path, "metrics_port", spec.metrics_port, integer_in(1, 65'535)),
          read_optional(value, path, "metrics_file", spec.metrics_file, body_fields::text_in(4096)),
      });
      !read) {
    return std::unexpected(read.error());
  }
  spec.spread.level = *parse_spread_level(spread);
  s.max_replicas = max_replicas.value_or(default_max_replicas(s.min_replicas));
  if (!spec.metrics_file.empty() && spec.metrics_file.front() != '/') {
    return fail(key_path(path, "metrics_file"),
                fmt::format("{} is not an absolute path", body_fields::quote(spec.metrics_file)));
  }
  if (spec.metrics_port && !spec.metrics_file.empty()) {
    return fail(key_path(path, "metrics_file"), "give metrics_port or metrics_file, not both");
  }
  if (const Json* metrics = body_fields::member(value, "metrics")) {
    if (auto ok = read_metrics(*metrics, key_path(path, "metrics"), spec); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (const Json* models = body_fields::member(value, "models")) {
    if (auto ok = read_models(*models, key_path(path, "models"), spec); !ok) {
      return std::unexpected(ok.error());
    }
  }
  auto checked = make_autoscaler_spec(s);
  if (!checked) return fail(key_path(path, checked.error().field), checked.error().reason);
  return spec;
}

Json service_spec_to_json(const ServiceSpec& spec) {
  const AutoscalerSpec& s = spec.scaler;
  Json models = Json::object();
  for (const auto& [name, m] : spec.models) {
    models[name] = {{"throughput", fmt::format("{}.{:03}", m.throughput_milli_rps / 1000,
                                               m.throughput_milli_rps % 1000)},
                    {"p95_latency_ms", m.p95_latency_ms}};
  }
  const Json target = s.metric == ScaleMetric::kP95LatencyMs
                          ? Json(s.target)
                          : Json(fmt::format("{}.{:03}", s.target / 1000, s.target % 1000));
  return Json{
      {"min_replicas", s.min_replicas},
      {"max_replicas", s.max_replicas},
      {"target", Json{{std::string(scale_metric_name(s.metric)), target}}},
      {"stable_window", format_duration(s.stable_window)},
      {"panic_window", format_duration(s.panic_window)},
      {"panic_percent", s.panic_percent},
      {"tolerance_percent", s.tolerance_percent},
      {"up_period", format_duration(s.up_period)},
      {"down_window", format_duration(s.down_window)},
      {"down_period", format_duration(s.down_period)},
      {"slots_per_replica", s.slots_per_replica},
      {"startup", format_duration(s.lead)},
      {"drain", format_duration(spec.drain)},
      {"spread", std::string(spread_level_name(spec.spread.level))},
      {"max_per_node", spec.spread.max_per_node},
      {"metrics_port", spec.metrics_port ? Json(*spec.metrics_port) : Json(nullptr)},
      {"metrics_file", spec.metrics_file.empty() ? Json(nullptr) : Json(spec.metrics_file)},
      {"metrics", Json{{"preset", spec.metrics_preset}, {"names", spec.metric_names}}},
      {"models", models},
  };
}

}  // namespace tidepool
