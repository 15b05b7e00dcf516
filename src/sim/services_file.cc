#include "sim/services_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <tuple>
#include <unordered_map>

#include "config/csv.h"
#include "config/duration_text.h"
#include "config/yaml_reader.h"
#include "core/job.h"

namespace tidepool {
namespace {

// Rates and factors: up to 3 decimals, at most a million requests per second.
constexpr std::int64_t kMaxRateMilli = std::int64_t{1'000'000'000};
constexpr std::int64_t kMaxFactorMilli = 1'000'000;  // a burst multiplies by at most 1000
constexpr Seconds kMaxServiceTime = 3600;
constexpr std::uintmax_t kMaxRateTraceBytes = std::uintmax_t{64} << 20;

class ServicesReader : private YamlReader {
 public:
  ServicesReader(const std::string& source, const std::string& folder,
                 const GpuModelCatalog& models)
      : YamlReader(source), folder_(folder), models_(models) {}

  Result<std::vector<ServiceEntry>> read(const YAML::Node& root) const {
    auto top = fields(root, "", {"services"});
    if (!top) return std::unexpected(top.error());
    auto list_node = required(*top, root, "", "services");
    if (!list_node) return std::unexpected(list_node.error());
    auto list = sequence(*list_node, "services");
    if (!list) return std::unexpected(list.error());
    if (list->size() == 0 || list->size() > kMaxServices) {
      return error_at(*list, "services",
                      fmt::format("expected 1..{} services, got {}", kMaxServices, list->size()));
    }
    std::vector<ServiceEntry> services;
    std::unordered_map<std::string, std::string> seen;
    for (std::size_t i = 0; i < list->size(); ++i) {
      auto service = read_service((*list)[i], fmt::format("services[{}]", i), seen);
      if (!service) return std::unexpected(service.error());
      services.push_back(std::move(*service));
    }
    return services;
  }

 private:
  // A whole number in [lo, hi].
  Result<std::int64_t> whole(const YAML::Node& node, const std::string& path, std::int64_t lo,
                             std::int64_t hi) const {
    auto text = number_text(node, path);
    if (!text) return std::unexpected(text.error());
    const auto value = parse_decimal(*text, 0);
    if (!value || *value < lo || *value > hi) {
      return error_at(node, path,
                      fmt::format("expected a whole number {}..{}, got '{}'", lo, hi, *text));
    }
    return *value;
  }
  // Up to 3 decimals, in thousandths, in [lo, hi].
  Result<std::int64_t> milli(const YAML::Node& node, const std::string& path, std::int64_t lo,
                             std::int64_t hi) const {
    auto text = number_text(node, path);
    if (!text) return std::unexpected(text.error());
    const auto value = parse_decimal(*text, 3);
    if (!value || *value < lo || *value > hi) {
      return error_at(
          node, path,
          fmt::format("expected a number {}..{} with up to 3 decimals, got '{}'",
                      static_cast<double>(lo) / 1000, static_cast<double>(hi) / 1000, *text));
    }
    return *value;
  }
  Result<Seconds> duration(const YAML::Node& node, const std::string& path, Seconds lo,
                           Seconds hi) const {
    auto seconds = YamlReader::duration(node, path, hi);
    if (!seconds) return seconds;
    if (*seconds < lo) {
      return error_at(node, path, fmt::format("must be at least {}s, got '{}'", lo, node.Scalar()));
    }
    return *seconds;
  }

  // Reads `key` of `f` into `target` with `parse` when present.
  template <class T, class Parse>
  Result<void> optional(const Fields& f, const std::string& path, const std::string& key, T& target,
                        Parse parse) const {
    const auto node = f.get(key);
    if (!node) return {};
    auto value = parse(*node, path + "." + key);
    if (!value) return std::unexpected(value.error());
    target = static_cast<T>(*value);
    return {};
  }

  Result<ServiceEntry> read_service(const YAML::Node& node, const std::string& path,
                                    std::unordered_map<std::string, std::string>& seen) const {
    auto f = entry_fields(node, path,
                          {"name", "tenant", "replica", "replicas", "target", "scale", "spread",
                           "max_per_node", "priority", "rate"});
    if (!f) return std::unexpected(f.error());
    ServiceEntry entry;
    SimServiceSpec& spec = entry.spec;
    auto name = unique_name(*f, node, path, "service", seen);
    if (!name) return std::unexpected(name.error());
    spec.name = *name;
    auto tenant_node = required(*f, node, path, "tenant");
    if (!tenant_node) return std::unexpected(tenant_node.error());
    auto tenant = text(*tenant_node, path + ".tenant");
    if (!tenant) return std::unexpected(tenant.error());
    entry.tenant = *tenant;
    auto replica_node = required(*f, node, path, "replica");
    if (!replica_node) return std::unexpected(replica_node.error());
    if (auto ok = read_replica(*replica_node, path + ".replica", spec); !ok) {
      return std::unexpected(ok.error());
    }
    std::optional<int> max_replicas;
    if (auto replicas = f->get("replicas")) {
      auto r = fields(*replicas, path + ".replicas", {"min", "max"});
      if (!r) return std::unexpected(r.error());
      const auto count = [this](const YAML::Node& n, const std::string& p) {
        return whole(n, p, 0, kMaxReplicas);
      };
      if (auto ok = optional(*r, path + ".replicas", "min", spec.scaler.min_replicas, count); !ok) {
        return std::unexpected(ok.error());
      }
      if (auto ok = optional(*r, path + ".replicas", "max", max_replicas, count); !ok) {
        return std::unexpected(ok.error());
      }
    }
    spec.scaler.max_replicas =
        max_replicas.value_or(default_max_replicas(spec.scaler.min_replicas));
    auto target_node = required(*f, node, path, "target");
    if (!target_node) return std::unexpected(target_node.error());
    auto target = fields(*target_node, path + ".target", {"p95_latency_ms"});
    if (!target) return std::unexpected(target.error());
    auto p95 = required(*target, *target_node, path + ".target", "p95_latency_ms");
    if (!p95) return std::unexpected(p95.error());
    auto target_ms = whole(*p95, path + ".target.p95_latency_ms", 1, 3'600'000);
    if (!target_ms) return std::unexpected(target_ms.error());
    spec.scaler.metric = ScaleMetric::kP95LatencyMs;
    spec.scaler.target = *target_ms;
    if (auto scale = f->get("scale")) {
      if (auto ok = read_scale(*scale, path + ".scale", spec); !ok) {
        return std::unexpected(ok.error());
      }
    }
    if (auto spread = f->get("spread")) {
      auto level_text = text(*spread, path + ".spread");
      if (!level_text) return std::unexpected(level_text.error());
      auto level = parse_spread_level(*level_text);
      if (!level) return error_at(*spread, path + ".spread", level.error().reason);
      spec.spread.level = *level;
    }
    const auto count = [this](const YAML::Node& n, const std::string& p) {
      return whole(n, p, 0, kMaxReplicas);
    };
    if (auto ok = optional(*f, path, "max_per_node", spec.spread.max_per_node, count); !ok) {
      return std::unexpected(ok.error());
    }
    const auto priority = [this](const YAML::Node& n, const std::string& p) {
      return whole(n, p, 0, kMaxPriorityClass);
    };
    if (auto ok = optional(*f, path, "priority", spec.priority, priority); !ok) {
      return std::unexpected(ok.error());
    }
    auto rate_node = required(*f, node, path, "rate");
    if (!rate_node) return std::unexpected(rate_node.error());
    if (auto ok = read_rate(*rate_node, path + ".rate", spec.rate); !ok) {
      return std::unexpected(ok.error());
    }
    auto checked = make_autoscaler_spec(spec.scaler);
    if (!checked) {
      return error_at(node, path + "." + checked.error().field, checked.error().reason);
    }
    return entry;
  }

  Result<void> read_replica(const YAML::Node& node, const std::string& path,
                            SimServiceSpec& spec) const {
    auto f = fields(node, path,
                    {"gpus", "gpu_milli", "mig_profile", "gpu_models", "cpu_milli", "memory_mib",
                     "slots", "service_time", "startup", "drain"});
    if (!f) return std::unexpected(f.error());
    std::int64_t gpus = 1;
    std::int64_t gpu_milli = kMilliPerGpu;
    std::int64_t cpu_milli = 4000;
    std::int64_t memory_mib = 16384;
    if ((f->get("gpus") ? 1 : 0) + (f->get("gpu_milli") ? 1 : 0) + (f->get("mig_profile") ? 1 : 0) >
        1) {
      return error_at(node, path,
                      "give gpus (whole GPUs), gpu_milli (a fraction) or mig_profile (a MIG "
                      "instance), one of them");
    }
    std::optional<MigProfile> mig;
    if (auto profile_node = f->get("mig_profile")) {
      auto name = text(*profile_node, path + ".mig_profile");
      if (!name) return std::unexpected(name.error());
      auto profile = parse_mig_profile(*name);
      if (!profile) return error_at(*profile_node, path + ".mig_profile", profile.error().reason);
      mig = *profile;
    }
    const auto number = [this](std::int64_t lo, std::int64_t hi) {
      return
          [this, lo, hi](const YAML::Node& n, const std::string& p) { return whole(n, p, lo, hi); };
    };
    for (auto [key, target, lo, hi] :
         {std::tuple{"gpus", &gpus, std::int64_t{1}, std::int64_t{kMaxGpusPerNode}},
          std::tuple{"cpu_milli", &cpu_milli, std::int64_t{0}, std::int64_t{1'000'000}},
          std::tuple{"memory_mib", &memory_mib, std::int64_t{0}, std::int64_t{100'000'000}}}) {
      if (auto ok = optional(*f, path, key, *target, number(lo, hi)); !ok) {
        return std::unexpected(ok.error());
      }
    }
    if (f->get("gpu_milli")) {
      if (auto ok = optional(*f, path, "gpu_milli", gpu_milli, number(1, kMilliPerGpu - 1)); !ok) {
        return std::unexpected(ok.error());
      }
      gpus = 1;
    }
    ModelSet accepted = ModelSet::any();
    if (auto listed = f->get("gpu_models")) {
      auto names = sequence(*listed, path + ".gpu_models");
      if (!names) return std::unexpected(names.error());
      accepted = ModelSet::none();
      for (std::size_t i = 0; i < names->size(); ++i) {
        const std::string where = fmt::format("{}.gpu_models[{}]", path, i);
        auto model_name = text((*names)[i], where);
        if (!model_name) return std::unexpected(model_name.error());
        const auto model = models_.find(*model_name);
        if (!model) {
          return error_at((*names)[i], where,
                          fmt::format("'{}' is not a GPU model of the pool", *model_name));
        }
        accepted.add(*model);
      }
      if (accepted.is_none()) return error_at(*listed, path + ".gpu_models", "is empty");
    }
    auto shape = mig ? make_mig_task_shape(*mig, cpu_milli, memory_mib, accepted)
                     : make_task_shape(gpus, gpu_milli, cpu_milli, memory_mib, accepted);
    if (!shape) return error_at(node, path, shape.error().message());
    spec.replica = *shape;
    if (auto ok = optional(*f, path, "slots", spec.scaler.slots_per_replica, number(1, 1024));
        !ok) {
      return std::unexpected(ok.error());
    }
    auto service_node = required(*f, node, path, "service_time");
    if (!service_node) return std::unexpected(service_node.error());
    auto service_text = number_text(*service_node, path + ".service_time");
    if (!service_text) return std::unexpected(service_text.error());
    const auto service_ms = parse_duration_ms(*service_text, kMaxServiceTime * 1000);
    if (!service_ms || *service_ms <= 0) {
      return error_at(*service_node, path + ".service_time",
                      service_ms ? "must be positive" : service_ms.error().reason);
    }
    spec.service_s = static_cast<double>(*service_ms) / 1000.0;
    const auto span = [this](const YAML::Node& n, const std::string& p) {
      return duration(n, p, 0, 3600);
    };
    spec.scaler.lead = 60;
    if (auto ok = optional(*f, path, "startup", spec.scaler.lead, span); !ok) {
      return std::unexpected(ok.error());
    }
    return optional(*f, path, "drain", spec.drain, span);
  }

  Result<void> read_scale(const YAML::Node& node, const std::string& path,
                          SimServiceSpec& spec) const {
    auto f = fields(node, path,
                    {"tick", "stable_window", "panic_window", "panic_percent", "up_period",
                     "down_window", "down_period"});
    if (!f) return std::unexpected(f.error());
    const auto span = [this](const YAML::Node& n, const std::string& p) {
      return duration(n, p, 0, 86'400);
    };
    AutoscalerSpec& s = spec.scaler;
    for (auto [key, target] :
         {std::pair{"tick", &spec.tick}, std::pair{"stable_window", &s.stable_window},
          std::pair{"panic_window", &s.panic_window}, std::pair{"up_period", &s.up_period},
          std::pair{"down_window", &s.down_window}, std::pair{"down_period", &s.down_period}}) {
      if (auto ok = optional(*f, path, key, *target, span); !ok) return ok;
    }
    if (spec.tick < 1) return error_at(node, path + ".tick", "must be at least 1s");
    const auto percent = [this](const YAML::Node& n, const std::string& p) {
      return whole(n, p, 101, 10'000);
    };
    return optional(*f, path, "panic_percent", s.panic_percent, percent);
  }

  Result<void> read_rate(const YAML::Node& node, const std::string& path, RateCurve& rate) const {
    auto f = fields(node, path, {"trough", "peak", "peak_at", "bursts", "trace"});
    if (!f) return std::unexpected(f.error());
    const auto requests = [this](const YAML::Node& n, const std::string& p) {
      return milli(n, p, 0, kMaxRateMilli);
    };
    if (auto trace = f->get("trace")) {
      if (f->get("trough") || f->get("peak") || f->get("peak_at")) {
        return error_at(node, path, "give a trace or a curve (trough, peak, peak_at), not both");
      }
      auto file = text(*trace, path + ".trace");
      if (!file) return std::unexpected(file.error());
      auto points = read_rate_trace(*file);
      if (!points) return error_at(*trace, path + ".trace", points.error().message());
      rate.points = std::move(*points);
    } else {
      std::int64_t trough = -1;
      std::int64_t peak = -1;
      for (auto [key, target] : {std::pair{"trough", &trough}, std::pair{"peak", &peak}}) {
        auto value_node = required(*f, node, path, key);
        if (!value_node) return std::unexpected(value_node.error());
        auto value = requests(*value_node, path + "." + key);
        if (!value) return std::unexpected(value.error());
        *target = *value;
      }
      if (peak < trough) return error_at(node, path + ".peak", "must be at least the trough");
      rate.trough = static_cast<double>(trough) / 1000.0;
      rate.peak = static_cast<double>(peak) / 1000.0;
      if (auto at = f->get("peak_at")) {
        auto seconds = time_of_day(*at, path + ".peak_at", /*closing=*/false);
        if (!seconds) return std::unexpected(seconds.error());
        rate.peak_at = *seconds;
      }
    }
    if (auto bursts = f->get("bursts")) {
      auto list = sequence(*bursts, path + ".bursts");
      if (!list) return std::unexpected(list.error());
      for (std::size_t i = 0; i < list->size(); ++i) {
        auto burst = read_burst((*list)[i], fmt::format("{}.bursts[{}]", path, i));
        if (!burst) return std::unexpected(burst.error());
        rate.bursts.push_back(*burst);
      }
    }
    return {};
  }

  Result<RateBurst> read_burst(const YAML::Node& node, const std::string& path) const {
    auto f = fields(node, path, {"at", "duration", "factor"});
    if (!f) return std::unexpected(f.error());
    RateBurst burst;
    for (auto [key, target, lo] : {std::tuple{"at", &burst.at, Seconds{0}},
                                   std::tuple{"duration", &burst.duration, Seconds{1}}}) {
      auto value_node = required(*f, node, path, key);
      if (!value_node) return std::unexpected(value_node.error());
      auto value = duration(*value_node, path + "." + key, lo, kMaxDuration);
      if (!value) return std::unexpected(value.error());
      *target = *value;
    }
    auto factor_node = required(*f, node, path, "factor");
    if (!factor_node) return std::unexpected(factor_node.error());
    auto factor = milli(*factor_node, path + ".factor", 1, kMaxFactorMilli);
    if (!factor) return std::unexpected(factor.error());
    burst.factor = static_cast<double>(*factor) / 1000.0;
    return burst;
  }

  // "seconds,requests_per_second" lines, by time; a first line that is not numbers is a header.
  Result<std::vector<std::pair<Seconds, double>>> read_rate_trace(const std::string& file) const {
    const std::filesystem::path path = std::filesystem::path(folder_) / file;  // absolute: itself
    // A regular file of bounded size: a device or a pipe named here must not stall the run.
    std::error_code error;
    if (!std::filesystem::is_regular_file(path, error)) {
      return fail(path.string(), "is not a readable regular file");
    }
    if (std::filesystem::file_size(path, error) > kMaxRateTraceBytes || error) {
      return fail(path.string(), fmt::format("is larger than {} MiB", kMaxRateTraceBytes >> 20));
    }
    auto content = read_file_text(path.string());
    if (!content) return std::unexpected(content.error());
    std::vector<std::pair<Seconds, double>> points;
    std::string_view rest = *content;
    for (int line = 1; !rest.empty(); ++line) {
      const std::size_t end = rest.find('\n');
      std::string_view text = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      if (text.empty()) continue;
      const std::vector<std::string_view> cells = split_csv_line(text);
      const auto seconds = cells.size() == 2 ? parse_decimal(cells[0], 0) : std::nullopt;
      const auto rate = cells.size() == 2 ? parse_decimal(cells[1], 3) : std::nullopt;
      if (!seconds || !rate || *rate > kMaxRateMilli) {
        if (line == 1 && points.empty()) continue;  // a header
        return fail(fmt::format("{}:{}", path.string(), line),
                    "expected seconds,requests_per_second (whole seconds; a rate up to 3 "
                    "decimals, at most 1000000)");
      }
      if (!points.empty() && *seconds <= points.back().first) {
        return fail(fmt::format("{}:{}", path.string(), line),
                    "times must increase from line to line");
      }
      if (points.size() >= kMaxRatePoints) {
        return fail(path.string(), fmt::format("more than {} points", kMaxRatePoints));
      }
      points.emplace_back(*seconds, static_cast<double>(*rate) / 1000.0);
    }
    if (points.empty()) return fail(path.string(), "has no points");
    return points;
  }

  std::string folder_;
  const GpuModelCatalog& models_;
};

}  // namespace

Result<std::vector<ServiceEntry>> parse_services_yaml(std::string_view text,
                                                      const std::string& source,
                                                      const std::string& folder,
                                                      const GpuModelCatalog& models) {
  const ServicesReader reader(source, folder, models);
  return read_one_yaml_document(text, source, "services file",
                                [&](const YAML::Node& root) { return reader.read(root); });
}

Result<std::vector<ServiceEntry>> load_services_yaml(const std::string& path,
                                                     const GpuModelCatalog& models) {
  auto text = read_file_text(path);
  if (!text) return std::unexpected(text.error());
  return parse_services_yaml(*text, path, std::filesystem::path(path).parent_path().string(),
                             models);
}

}  // namespace tidepool
