#include "config/tenants_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/yaml_reader.h"
#include "core/gpus_text.h"

namespace tidepool {
namespace {

constexpr int kDecimals = 3;  // GPU figures: milli-GPU precision

// Reads one YAML tree into a TenantsSpec, failing with the path of the first bad value.
class TenantsReader : private YamlReader {
 public:
  TenantsReader(const std::string& source, GpuModelCatalog& models)
      : YamlReader(source), models_(models) {}

  Result<TenantsSpec> read(const YAML::Node& root);

 private:
  // The figures of one quota entry, with the nodes they came from (for errors).
  struct Figures {
    std::optional<std::int64_t> guaranteed, borrowing_limit, lending_limit;
    std::optional<YAML::Node> guaranteed_node, lending_node;
  };

  Result<std::int64_t> gpus(const YAML::Node& node, const std::string& path) const;
  // Reads a quota map (model name -> figures), calling `add(model, figures, path)` per entry.
  template <class Add>
  Result<void> read_quota(const YAML::Node& quota, const std::string& path, Add add);

  Result<void> read_org(const YAML::Node& node, const std::string& path, TenantsSpec& spec);
  Result<TenantSpec> read_tenant(const YAML::Node& node, const std::string& path);
  // "fifo", "las" or "srpt" (core/lane_order.h).
  Result<LaneOrderKind> read_order(const YAML::Node& node, const std::string& path) const;

  GpuModelCatalog& models_;
  std::unordered_map<std::string, std::string> org_paths_, tenant_paths_;
  int tenant_count_ = 0;
};

Result<std::int64_t> TenantsReader::gpus(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar())
    return error_at(node, path, "expected a number, got " + yaml_node_kind(node));
  const auto value = parse_decimal(node.Scalar(), kDecimals);
  if (!value) {
    return error_at(node, path,
                    "expected a GPU count (up to 3 decimals), got '" + node.Scalar() + "'");
  }
  if (*value > kMaxQuotaMilli) {
    return error_at(node, path,
                    fmt::format("must be 0..{}, got {}", kMaxQuotaMilli / 1000, node.Scalar()));
  }
  return *value;
}

template <class Add>
Result<void> TenantsReader::read_quota(const YAML::Node& quota, const std::string& path, Add add) {
  auto list = entries(quota, path);
  if (!list) return std::unexpected(list.error());
  for (const Entry& entry : *list) {
    const std::string model_path = path + "." + entry.name;
    const YAML::Node& value = entry.value;
    auto f = entry_fields(value, model_path,
                          {"guaranteed_gpus", "borrowing_limit_gpus", "lending_limit_gpus"});
    if (!f) return std::unexpected(f.error());
    Figures figures;
    for (auto [key, target] : {std::pair{"guaranteed_gpus", &figures.guaranteed},
                               std::pair{"borrowing_limit_gpus", &figures.borrowing_limit},
                               std::pair{"lending_limit_gpus", &figures.lending_limit}}) {
      if (auto node = f->get(key)) {
        auto milli = gpus(*node, model_path + "." + key);
        if (!milli) return std::unexpected(milli.error());
        *target = *milli;
      }
    }
    figures.guaranteed_node = f->get("guaranteed_gpus");
    figures.lending_node = f->get("lending_limit_gpus");
    auto model = models_.intern(entry.name);
    if (!model) return error_at(entry.key, model_path, model.error().reason);
    if (auto ok = add(*model, figures, model_path); !ok) return ok;
  }
  return {};
}

Result<LaneOrderKind> TenantsReader::read_order(const YAML::Node& node,
                                                const std::string& path) const {
  auto name = text(node, path);
  if (!name) return std::unexpected(name.error());
  auto kind = parse_lane_order(*name);
  if (!kind) return error_at(node, path, kind.error().reason);
  return *kind;
}

Result<TenantsSpec> TenantsReader::read(const YAML::Node& root) {
  if (root.IsNull()) return error_at(root, "", "the file is empty; expected orgs");
  auto top = entry_fields(root, "", {"order", "orgs"});
  if (!top) return std::unexpected(top.error());
  auto orgs = required(*top, root, "", "orgs");
  if (!orgs) return std::unexpected(orgs.error());
  if (auto ok = sequence(*orgs, "orgs"); !ok) return std::unexpected(ok.error());
  TenantsSpec spec;
  if (auto order = top->get("order")) {
    auto kind = read_order(*order, "order");
    if (!kind) return std::unexpected(kind.error());
    spec.default_order = *kind;
  }
  for (std::size_t o = 0; o < orgs->size(); ++o) {
    if (auto ok = read_org((*orgs)[o], fmt::format("orgs[{}]", o), spec); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (tenant_count_ == 0) return error_at(*orgs, "orgs", "the file has no tenants");
  // Everything create() checks was checked above, with positions; this is a last guard.
  if (auto book = TenantBook::create(spec, models_); !book) {
    return fail(source() + " " + book.error().field, book.error().reason);
  }
  return spec;
}

Result<void> TenantsReader::read_org(const YAML::Node& node, const std::string& path,
                                     TenantsSpec& spec) {
  auto f = entry_fields(node, path, {"name", "quota", "tenants"});
  if (!f) return std::unexpected(f.error());
  auto name = unique_name(*f, node, path, "org", org_paths_);
  if (!name) return std::unexpected(name.error());
  OrgSpec org;
  org.name = *name;
  // Org guarantees, checked against the tenants' sum once they are read.
  struct GuaranteeCap {
    GpuModelId model;
    std::int64_t milli;
    std::string path;
    YAML::Node node;
  };
  std::vector<GuaranteeCap> guarantee_caps;
  if (auto quota = f->get("quota")) {
    auto ok = read_quota(
        *quota, path + ".quota",
        [&](GpuModelId model, const Figures& figures, const std::string& where) -> Result<void> {
          org.caps.push_back(
              {model, figures.guaranteed, figures.borrowing_limit, figures.lending_limit});
          if (figures.guaranteed) {
            guarantee_caps.push_back(
                {model, *figures.guaranteed, where + ".guaranteed_gpus", *figures.guaranteed_node});
          }
          return {};
        });
    if (!ok) return ok;
  }

  auto tenants = required(*f, node, path, "tenants");
  if (!tenants) return std::unexpected(tenants.error());
  if (auto ok = sequence(*tenants, path + ".tenants"); !ok) return std::unexpected(ok.error());
  for (std::size_t t = 0; t < tenants->size(); ++t) {
    auto tenant = read_tenant((*tenants)[t], fmt::format("{}.tenants[{}]", path, t));
    if (!tenant) return std::unexpected(tenant.error());
    org.tenants.push_back(std::move(*tenant));
  }

  for (const GuaranteeCap& cap : guarantee_caps) {
    std::int64_t sum = 0;
    for (const TenantSpec& tenant : org.tenants) {
      for (const ModelQuota& quota : tenant.quotas) {
        if (quota.model == cap.model) sum += quota.guaranteed_milli;
      }
    }
    if (sum > cap.milli) {
      return error_at(cap.node, cap.path,
                      fmt::format("the org's tenants are guaranteed {} {} GPUs in total, more "
                                  "than the org's {}",
                                  gpus_number(sum), models_.name(cap.model), cap.node.Scalar()));
    }
  }
  spec.orgs.push_back(std::move(org));
  return {};
}

Result<TenantSpec> TenantsReader::read_tenant(const YAML::Node& node, const std::string& path) {
  auto f = entry_fields(
      node, path,
      {"name", "weight", "order", "quota", "queues", "max_pending_jobs", "submissions_per_second"});
  if (!f) return std::unexpected(f.error());
  auto name = unique_name(*f, node, path, "tenant", tenant_paths_);
  if (!name) return std::unexpected(name.error());
  if (++tenant_count_ > kMaxTenants) {
    return error_at(node, path, fmt::format("more than {} tenants", kMaxTenants));
  }
  TenantSpec tenant;
  tenant.name = *name;

  if (auto weight = f->get("weight")) {
    const std::string weight_path = path + ".weight";
    const std::string digits = weight->IsScalar() ? weight->Scalar() : "";
    const auto value = parse_decimal(digits, 0);
    if (!value || *value < 1 || *value > kMaxTenantWeight) {
      return error_at(
          *weight, weight_path,
          fmt::format("expected an integer 1..{}, got {}", kMaxTenantWeight,
                      weight->IsScalar() ? "'" + digits + "'" : yaml_node_kind(*weight)));
    }
    tenant.weight = *value;
  }

  if (auto order = f->get("order")) {
    auto kind = read_order(*order, path + ".order");
    if (!kind) return std::unexpected(kind.error());
    tenant.order = *kind;
  }

  for (auto [key, target] : {std::pair{"max_pending_jobs", &tenant.max_pending_jobs},
                             std::pair{"submissions_per_second", &tenant.submissions_per_second}}) {
    auto limit = f->get(key);
    if (!limit) continue;
    const std::string digits = limit->IsScalar() ? limit->Scalar() : "";
    const auto value = parse_decimal(digits, 0);
    if (!value || *value < 1 || *value > 10'000'000) {
      return error_at(*limit, path + "." + key,
                      fmt::format("expected an integer 1..10000000, got {}",
                                  limit->IsScalar() ? "'" + digits + "'" : yaml_node_kind(*limit)));
    }
    *target = *value;
  }

  if (auto quota = f->get("quota")) {
    auto ok = read_quota(
        *quota, path + ".quota",
        [&](GpuModelId model, const Figures& figures, const std::string& where) -> Result<void> {
          const std::int64_t guaranteed = figures.guaranteed.value_or(0);
          if (figures.lending_limit && *figures.lending_limit > guaranteed) {
            return error_at(*figures.lending_node, where + ".lending_limit_gpus",
                            fmt::format("must be at most the guarantee ({} GPUs), got {}",
                                        gpus_number(guaranteed), figures.lending_node->Scalar()));
          }
          tenant.quotas.push_back(
              {model, guaranteed, figures.borrowing_limit, figures.lending_limit});
          return {};
        });
    if (!ok) return std::unexpected(ok.error());
  }

  if (auto queues = f->get("queues")) {
    const std::string queues_path = path + ".queues";
    if (auto ok = sequence(*queues, queues_path); !ok) return std::unexpected(ok.error());
    std::unordered_map<std::string, std::size_t> seen;
    for (std::size_t q = 0; q < queues->size(); ++q) {
      const std::string queue_path = fmt::format("{}[{}]", queues_path, q);
      auto queue = text((*queues)[q], queue_path);
      if (!queue) return std::unexpected(queue.error());
      if (auto [it, added] = seen.emplace(*queue, q); !added) {
        return error_at(
            (*queues)[q], queue_path,
            fmt::format("queue '{}' is already listed at {}[{}]", *queue, queues_path, it->second));
      }
      tenant.queues.push_back(*queue);
    }
  }
  return tenant;
}

}  // namespace

Result<TenantsSpec> read_tenants_yaml(std::string_view text, const std::string& source,
                                      GpuModelCatalog& models) {
  return read_one_yaml_document(text, source, "tenants file", [&](const YAML::Node& root) {
    TenantsReader reader(source, models);
    return reader.read(root);
  });
}

Result<TenantsSpec> load_tenants_yaml(const std::string& path, GpuModelCatalog& models) {
  auto text = read_file_text(path);
  if (!text) return std::unexpected(text.error());
  return read_tenants_yaml(*text, path, models);
}

}  // namespace tidepool
