#include "core/policies/placement_policy.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/policies/policy_factories.h"

namespace tidepool {
namespace {

constexpr std::array<PolicyInfo, 7> kPolicies{{
    {"random", "01-Random", "a random node where the task fits"},
    {"dot-product", "02-DotProd", "Tetris dot product of free resources and demand"},
    {"gpu-clustering", "03-GpuClustering", "keep tasks of the same GPU demand together"},
    {"gpu-packing", "04-GpuPacking", "fill used GPUs, then used nodes, then idle nodes"},
    {"best-fit", "05-BestFit", "the node with the least resources left"},
    {"fgd", "06-FGD", "fragmentation gradient descent (Weng et al., ATC'23)"},
    {"tidepool", "07-Tidepool", "Tidepool's default: FGD plus GPU capacity stranded behind CPU"},
}};

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::span<const PolicyInfo> placement_policies() { return kPolicies; }

Result<PolicyInfo> find_placement_policy(std::string_view name_or_label) {
  for (const PolicyInfo& info : kPolicies) {
    if (equal_ignoring_case(info.name, name_or_label) ||
        equal_ignoring_case(info.label, name_or_label)) {
      return info;
    }
  }
  std::string known;
  for (const PolicyInfo& info : kPolicies) {
    if (!known.empty()) known += ", ";
    known += info.name;
  }
  return fail("policy", "unknown policy '" + std::string(name_or_label) + "'; known: " + known);
}

Result<std::unique_ptr<PlacementPolicy>> make_placement_policy(std::string_view name_or_label,
                                                               const WorkloadProfile& profile) {
  auto info = find_placement_policy(name_or_label);
  if (!info) return std::unexpected(info.error());
  const std::string_view name = info->name;
  if (name == "random") return make_random_policy();
  if (name == "dot-product") return make_dot_product_policy();
  if (name == "gpu-clustering") return make_gpu_clustering_policy();
  if (name == "gpu-packing") return make_gpu_packing_policy();
  if (name == "best-fit") return make_best_fit_policy();
  if (name == "fgd") return make_fgd_policy(profile);
  return make_tidepool_policy(profile);
}

}  // namespace tidepool
