#include "core/gpu_model.h"

#include <algorithm>

namespace tidepool {

Result<GpuModelId> GpuModelCatalog::intern(std::string_view name) {
  if (name.empty()) return fail("gpu model", "the model name is empty");
  if (auto found = find(name)) return *found;
  if (size() >= kMaxGpuModels) {
    return fail("gpu model", "more than " + std::to_string(kMaxGpuModels) +
                                 " distinct GPU models; cannot add '" + std::string(name) + "'");
  }
  names_.emplace_back(name);
  return GpuModelId{static_cast<std::uint32_t>(names_.size() - 1)};
}

std::optional<GpuModelId> GpuModelCatalog::find(std::string_view name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) return std::nullopt;
  return GpuModelId{static_cast<std::uint32_t>(it - names_.begin())};
}

void ModelSet::add(GpuModelId model) {
  if (any_) {
    any_ = false;
    bits_ = 0;
  }
  bits_ |= std::uint64_t{1} << model.value;
}

Result<ModelSet> parse_model_set(std::string_view spec, GpuModelCatalog& catalog) {
  ModelSet set = ModelSet::any();
  while (!spec.empty()) {
    const auto bar = spec.find('|');
    const std::string_view name = spec.substr(0, bar);
    if (!name.empty()) {
      auto id = catalog.intern(name);
      if (!id) return std::unexpected(id.error());
      set.add(*id);
    }
    if (bar == std::string_view::npos) break;
    spec.remove_prefix(bar + 1);
  }
  return set;
}

std::string describe(const ModelSet& models, const GpuModelCatalog& catalog) {
  if (models.is_any()) return "any";
  std::string out;
  for (int i = 0; i < catalog.size(); ++i) {
    const GpuModelId id{static_cast<std::uint32_t>(i)};
    if (!models.accepts(id)) continue;
    if (!out.empty()) out += '|';
    out += catalog.name(id);
  }
  return out.empty() ? "none" : out;
}

}  // namespace tidepool
