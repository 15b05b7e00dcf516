#include "config/cluster_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/yaml_reader.h"
#include "core/mig.h"

namespace tidepool {
namespace {

// Bound on CPU and memory figures, so that pool totals cannot overflow (kMaxClusterNodes x 2^40
// is far below 2^63).
constexpr std::int64_t kMaxQuantity = std::int64_t{1} << 40;

// parse_decimal with an optional leading minus sign (so that a negative figure is refused by its
// range, not as a malformed number).
std::optional<std::int64_t> parse_fixed(std::string_view text, int decimals) {
  const bool negative = text.starts_with('-');
  if (negative) text.remove_prefix(1);
  const auto value = parse_decimal(text, decimals);
  if (!value) return std::nullopt;
  return negative ? -*value : *value;
}

// Reads one YAML tree into a ClusterSpec, failing with the path of the first bad value.
class ClusterReader : private YamlReader {
 public:
  explicit ClusterReader(const std::string& source) : YamlReader(source) {}

  Result<ClusterSpec> read(const YAML::Node& root);

 private:
  Result<std::int64_t> number(const YAML::Node& node, const std::string& path, std::int64_t low,
                              std::int64_t high, int decimals = 0) const;
  // Exactly one of `exact` (taken as is) and `scaled` (multiplied by `scale`, with `decimals`).
  Result<std::int64_t> quantity(const Fields& fields, const YAML::Node& map,
                                const std::string& path, const std::string& exact,
                                const std::string& scaled, std::int64_t scale, int decimals) const;

  Result<void> read_links(const YAML::Node& links, const std::string& path);
  Result<void> read_leaf(const YAML::Node& leaf, const std::string& path, LeafId id);
  Result<void> read_nodes(const YAML::Node& entry, const std::string& path, LeafId leaf);
  Result<void> read_domains(const YAML::Node& domains, const std::string& path, NodeSpec& node);
  Result<void> read_mig(const YAML::Node& mig, const std::string& path, NodeSpec& node);
  Result<std::vector<MigInstance>> read_mig_layout(const YAML::Node& list,
                                                   const std::string& path) const;

  ClusterSpec spec_;
  std::unordered_map<std::string, std::string> spine_paths_, leaf_paths_, node_paths_;
};

Result<std::int64_t> ClusterReader::number(const YAML::Node& node, const std::string& path,
                                           std::int64_t low, std::int64_t high,
                                           int decimals) const {
  if (!node.IsScalar()) {
    return error_at(node, path, "expected a number, got " + yaml_node_kind(node));
  }
  const auto value = parse_fixed(node.Scalar(), decimals);
  if (!value) {
    return error_at(
        node, path,
        fmt::format("expected {}, got '{}'",
                    decimals > 0 ? "a number (up to 3 decimals)" : "an integer", node.Scalar()));
  }
  if (*value < low || *value > high) {
    std::int64_t unit = 1;  // bounds are shown in the unit of the text
    for (int i = 0; i < decimals; ++i) unit *= 10;
    return error_at(node, path,
                    fmt::format("must be {}..{}, got {}", low / unit, high / unit, node.Scalar()));
  }
  return *value;
}

Result<std::int64_t> ClusterReader::quantity(const Fields& fields, const YAML::Node& map,
                                             const std::string& path, const std::string& exact,
                                             const std::string& scaled, std::int64_t scale,
                                             int decimals) const {
  const auto exact_value = fields.get(exact);
  const auto scaled_value = fields.get(scaled);
  if (exact_value && scaled_value) {
    return error_at(*scaled_value, path + "." + scaled,
                    "give either " + exact + " or " + scaled + ", not both");
  }
  if (exact_value) return number(*exact_value, path + "." + exact, 0, kMaxQuantity);
  if (!scaled_value) {
    return error_at(map, path + "." + exact, "the key is missing (or give " + scaled + ")");
  }
  // Whole units are bounded so that the product stays within kMaxQuantity.
  std::int64_t unit = 1;
  for (int i = 0; i < decimals; ++i) unit *= 10;
  auto value = number(*scaled_value, path + "." + scaled, 0, kMaxQuantity / scale * unit, decimals);
  if (!value) return value;
  return *value * scale / unit;
}

Result<ClusterSpec> ClusterReader::read(const YAML::Node& root) {
  if (root.IsNull()) return error_at(root, "", "the file is empty; expected site and spines");
  auto top = fields(root, "", {"site", "links", "spines"});
  if (!top) return std::unexpected(top.error());
  auto site = required(*top, root, "", "site");
  if (!site) return std::unexpected(site.error());
  auto site_name = text(*site, "site");
  if (!site_name) return std::unexpected(site_name.error());
  spec_.topology.site = *site_name;
  if (auto links = top->get("links")) {
    if (auto ok = read_links(*links, "links"); !ok) return std::unexpected(ok.error());
  }

  auto spines = required(*top, root, "", "spines");
  if (!spines) return std::unexpected(spines.error());
  if (auto ok = sequence(*spines, "spines"); !ok) return std::unexpected(ok.error());
  for (std::size_t s = 0; s < spines->size(); ++s) {
    const YAML::Node spine = (*spines)[s];
    const std::string path = fmt::format("spines[{}]", s);
    auto spine_fields = fields(spine, path, {"name", "oversubscription", "leaves"});
    if (!spine_fields) return std::unexpected(spine_fields.error());
    auto name = unique_name(*spine_fields, spine, path, "spine", spine_paths_);
    if (!name) return std::unexpected(name.error());
    SpineSpec spine_spec{.name = *name};
    if (auto ratio = spine_fields->get("oversubscription")) {
      auto value = number(*ratio, path + ".oversubscription", 1, kMaxOversubscription);
      if (!value) return std::unexpected(value.error());
      spine_spec.oversubscription = static_cast<int>(*value);
    }
    const SpineId spine_id{static_cast<std::uint32_t>(spec_.topology.spines.size())};
    spec_.topology.spines.push_back(std::move(spine_spec));

    auto leaves = required(*spine_fields, spine, path, "leaves");
    if (!leaves) return std::unexpected(leaves.error());
    if (auto ok = sequence(*leaves, path + ".leaves"); !ok) return std::unexpected(ok.error());
    for (std::size_t l = 0; l < leaves->size(); ++l) {
      const LeafId leaf_id{static_cast<std::uint32_t>(spec_.topology.leaves.size())};
      spec_.topology.leaves.push_back({"", spine_id});
      auto ok = read_leaf((*leaves)[l], fmt::format("{}.leaves[{}]", path, l), leaf_id);
      if (!ok) return std::unexpected(ok.error());
    }
  }
  if (spec_.nodes.empty()) return error_at(*spines, "spines", "the cluster has no nodes");
  return std::move(spec_);
}

Result<void> ClusterReader::read_links(const YAML::Node& links, const std::string& path) {
  auto f = fields(links, path, {"nvlink_gbps", "pcie_gbps", "leaf_gbps", "spine_gbps"});
  if (!f) return std::unexpected(f.error());
  LinkSpeeds& speeds = spec_.topology.links;
  const std::pair<const char*, int*> keys[] = {{"nvlink_gbps", &speeds.nvlink_gbps},
                                               {"pcie_gbps", &speeds.pcie_gbps},
                                               {"leaf_gbps", &speeds.leaf_gbps},
                                               {"spine_gbps", &speeds.spine_gbps}};
  for (const auto& [key, slot] : keys) {
    const auto node = f->get(key);
    if (!node) continue;  // the default stays
    auto value = number(*node, path + "." + key, 1, kMaxLinkGbps);
    if (!value) return std::unexpected(value.error());
    *slot = static_cast<int>(*value);
  }
  return {};
}

Result<void> ClusterReader::read_leaf(const YAML::Node& leaf, const std::string& path, LeafId id) {
  auto leaf_fields = fields(leaf, path, {"name", "nodes"});
  if (!leaf_fields) return std::unexpected(leaf_fields.error());
  auto name = unique_name(*leaf_fields, leaf, path, "leaf", leaf_paths_);
  if (!name) return std::unexpected(name.error());
  spec_.topology.leaves[id.value].name = *name;

  auto nodes = required(*leaf_fields, leaf, path, "nodes");
  if (!nodes) return std::unexpected(nodes.error());
  if (auto ok = sequence(*nodes, path + ".nodes"); !ok) return std::unexpected(ok.error());
  for (std::size_t n = 0; n < nodes->size(); ++n) {
    auto ok = read_nodes((*nodes)[n], fmt::format("{}.nodes[{}]", path, n), id);
    if (!ok) return ok;
  }
  return {};
}

Result<void> ClusterReader::read_nodes(const YAML::Node& entry, const std::string& path,
                                       LeafId leaf) {
  auto f = fields(entry, path,
                  {"name", "count", "gpu_model", "gpus", "cpu_millicores", "cpus", "memory_mib",
                   "memory_gib", "nvlink_domains", "mig"});
  if (!f) return std::unexpected(f.error());
  NodeSpec node;
  node.leaf = leaf;

  auto name_node = required(*f, entry, path, "name");
  if (!name_node) return std::unexpected(name_node.error());
  auto name = text(*name_node, path + ".name");
  if (!name) return std::unexpected(name.error());

  std::optional<std::int64_t> count;
  if (auto count_node = f->get("count")) {
    auto value = number(*count_node, path + ".count", 1, kMaxClusterNodes);
    if (!value) return std::unexpected(value.error());
    count = *value;
  }
  const std::int64_t copies = count.value_or(1);
  if (static_cast<std::int64_t>(spec_.nodes.size()) + copies > kMaxClusterNodes) {
    return error_at(count ? *f->get("count") : entry, path + (count ? ".count" : ""),
                    fmt::format("the cluster would have more than {} nodes", kMaxClusterNodes));
  }

  auto gpus_node = required(*f, entry, path, "gpus");
  if (!gpus_node) return std::unexpected(gpus_node.error());
  auto gpus = number(*gpus_node, path + ".gpus", 0, kMaxGpusPerNode);
  if (!gpus) return std::unexpected(gpus.error());
  node.gpu_count = static_cast<int>(*gpus);

  const auto model_node = f->get("gpu_model");
  if (node.gpu_count > 0) {
    if (!model_node) {
      return error_at(entry, path + ".gpu_model", "the key is missing (the node has GPUs)");
    }
    auto model_name = text(*model_node, path + ".gpu_model");
    if (!model_name) return std::unexpected(model_name.error());
    auto model = spec_.models.intern(*model_name);
    if (!model) return error_at(*model_node, path + ".gpu_model", model.error().reason);
    node.model = *model;
  } else if (model_node) {
    return error_at(*model_node, path + ".gpu_model", "a node without GPUs takes no GPU model");
  }

  auto cpu = quantity(*f, entry, path, "cpu_millicores", "cpus", 1000, 3);
  if (!cpu) return std::unexpected(cpu.error());
  node.milli_cpu = *cpu;
  auto memory = quantity(*f, entry, path, "memory_mib", "memory_gib", 1024, 0);
  if (!memory) return std::unexpected(memory.error());
  node.memory_mib = *memory;

  if (auto domains = f->get("nvlink_domains")) {
    if (auto ok = read_domains(*domains, path + ".nvlink_domains", node); !ok) return ok;
  }
  if (auto mig = f->get("mig")) {
    if (auto ok = read_mig(*mig, path + ".mig", node); !ok) return ok;
  }

  const int width = std::max<int>(2, static_cast<int>(std::to_string(copies).size()));
  for (std::int64_t i = 1; i <= copies; ++i) {
    node.name = count ? fmt::format("{}-{:0{}}", *name, i, width) : *name;
    if (auto [it, added] = node_paths_.emplace(node.name, path); !added) {
      return error_at(*name_node, path + ".name",
                      "node '" + node.name + "' is already defined at " + it->second);
    }
    spec_.nodes.push_back(node);
  }
  return {};
}

Result<void> ClusterReader::read_domains(const YAML::Node& domains, const std::string& path,
                                         NodeSpec& node) {
  if (auto ok = sequence(domains, path); !ok) return std::unexpected(ok.error());
  std::array<int, kMaxGpusPerNode> domain_of;
  domain_of.fill(-1);
  for (std::size_t d = 0; d < domains.size(); ++d) {
    const YAML::Node domain = domains[d];
    const std::string domain_path = fmt::format("{}[{}]", path, d);
    if (auto ok = sequence(domain, domain_path); !ok) return std::unexpected(ok.error());
    if (domain.size() == 0) return error_at(domain, domain_path, "a domain must list its GPUs");
    for (std::size_t g = 0; g < domain.size(); ++g) {
      const std::string gpu_path = fmt::format("{}[{}]", domain_path, g);
      if (node.gpu_count == 0) return error_at(domain[g], gpu_path, "the node has no GPUs");
      auto gpu = number(domain[g], gpu_path, 0, node.gpu_count - 1);
      if (!gpu) return std::unexpected(gpu.error());
      if (domain_of[*gpu] >= 0) {
        return error_at(domain[g], gpu_path,
                        fmt::format("GPU {} is already in domain {}", *gpu, domain_of[*gpu]));
      }
      domain_of[*gpu] = static_cast<int>(d);
      node.nvlink_domain[*gpu] = static_cast<std::uint8_t>(d);
    }
  }
  std::string missing;
  for (int g = 0; g < node.gpu_count; ++g) {
    if (domain_of[g] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(g);
  }
  if (!missing.empty()) {
    return error_at(domains, path, "GPUs " + missing + " are in no domain; list each GPU once");
  }
  return {};
}

Result<void> ClusterReader::read_mig(const YAML::Node& mig, const std::string& path,
                                     NodeSpec& node) {
  if (node.gpu_count == 0 || !model_supports_mig(spec_.models.name(node.model))) {
    return error_at(mig, path,
                    fmt::format("{} GPUs cannot be partitioned into MIG instances (A100 and H100 "
                                "can)",
                                node.gpu_count == 0 ? "no" : spec_.models.name(node.model)));
  }
  if (mig.IsScalar()) {
    if (mig.Scalar() != "on_demand") {
      return error_at(
          mig, path,
          fmt::format("'{}' is not on_demand or a map of GPUs to their instances", mig.Scalar()));
    }
    node.mig_on_demand = static_cast<GpuSet>((std::uint64_t{1} << node.gpu_count) - 1);
    return {};
  }
  auto gpus = entries(mig, path);
  if (!gpus) return std::unexpected(gpus.error());
  for (const Entry& entry : *gpus) {
    const std::string gpu_path = path + "." + entry.name;
    auto layout = read_mig_layout(entry.value, gpu_path);
    if (!layout) return std::unexpected(layout.error());
    std::vector<int> indexes;
    if (entry.name == "all") {
      for (int g = 0; g < node.gpu_count; ++g) indexes.push_back(g);
    } else {
      auto gpu = number(entry.key, gpu_path, 0, node.gpu_count - 1);
      if (!gpu) return std::unexpected(gpu.error());
      indexes.push_back(static_cast<int>(*gpu));
    }
    for (const int g : indexes) {
      if (std::ranges::any_of(node.mig_partitions,
                              [&](const NodeSpec::MigPartition& p) { return p.gpu == g; })) {
        return error_at(entry.key, gpu_path, fmt::format("GPU {} is partitioned twice", g));
      }
      node.mig_partitions.push_back({g, *layout});
    }
  }
  return {};
}

Result<std::vector<MigInstance>> ClusterReader::read_mig_layout(const YAML::Node& list,
                                                                const std::string& path) const {
  if (auto ok = sequence(list, path); !ok) return std::unexpected(ok.error());
  if (list.size() == 0) return error_at(list, path, "a partitioned GPU lists its instances");
  MigLayout layout;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string item_path = fmt::format("{}[{}]", path, i);
    auto item = text(list[i], item_path);
    if (!item) return std::unexpected(item.error());
    // "3g.40gb" (placed as packing places it) or "3g.40gb@4" (at memory slice 4).
    const std::size_t at = item->find('@');
    auto profile = parse_mig_profile(item->substr(0, at));
    if (!profile) return error_at(list[i], item_path, profile.error().reason);
    std::optional<int> start;
    if (at != std::string::npos) {
      const std::string digits = item->substr(at + 1);
      if (digits.size() != 1 || digits[0] < '0' || digits[0] > '7') {
        return error_at(list[i], item_path,
                        fmt::format("'{}': the start after @ is a memory slice 0..7", *item));
      }
      start = digits[0] - '0';
    } else if (auto slot = pack_mig(std::span(&layout, 1), *profile)) {
      start = slot->start;
    }
    if (!start) {
      return error_at(list[i], item_path,
                      fmt::format("no room for a {} instance beside the ones before it", *item));
    }
    if (auto added = layout.add({*profile, *start}); !added) {
      return error_at(list[i], item_path, added.error().reason);
    }
  }
  return std::vector<MigInstance>(layout.instances().begin(), layout.instances().end());
}

}  // namespace

Result<ClusterSpec> read_cluster_yaml(std::string_view text, const std::string& source) {
  return read_one_yaml_document(text, source, "cluster file", [&](const YAML::Node& root) {
    ClusterReader reader(source);
    return reader.read(root);
  });
}

Result<ClusterSpec> load_cluster_yaml(const std::string& path) {
  auto text = read_file_text(path);
  if (!text) return std::unexpected(text.error());
  return read_cluster_yaml(*text, path);
}

}  // namespace tidepool
