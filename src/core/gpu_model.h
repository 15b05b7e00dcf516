// GPU models (H100, A100, T4, ...) and sets of them, as tasks constrain where they may run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/ids.h"

namespace tidepool {

// The most distinct GPU models one pool may name; a ModelSet is a bit mask over them.
inline constexpr int kMaxGpuModels = 64;

// Names of the GPU models known to a pool. Ids are dense, in order of first appearance.
class GpuModelCatalog {
 public:
  // Returns the id of `name`, adding it if new. Fails on an empty name or past kMaxGpuModels.
  Result<GpuModelId> intern(std::string_view name);
  [[nodiscard]] std::optional<GpuModelId> find(std::string_view name) const;
  [[nodiscard]] const std::string& name(GpuModelId id) const { return names_.at(id.value); }
  [[nodiscard]] int size() const { return static_cast<int>(names_.size()); }

 private:
  std::vector<std::string> names_;
};

// The GPU models a task accepts. Default-constructed, it accepts any model.
class ModelSet {
 public:
  ModelSet() = default;
  static ModelSet any() { return ModelSet(); }
  static ModelSet none() { return ModelSet(false, 0); }
  // A set that accepts exactly `model`.
  static ModelSet only(GpuModelId model) {
    ModelSet set = none();
    set.add(model);
    return set;
  }

  // Adds one model; a set built this way accepts only the models added.
  void add(GpuModelId model);

  [[nodiscard]] bool accepts(GpuModelId model) const {
    return any_ || ((bits_ >> model.value) & 1U) != 0;
  }
  [[nodiscard]] bool is_any() const { return any_; }
  // Accepts no model.
  [[nodiscard]] bool is_none() const { return !any_ && bits_ == 0; }
  [[nodiscard]] std::uint64_t bits() const { return bits_; }

  friend auto operator<=>(const ModelSet&, const ModelSet&) = default;

 private:
  ModelSet(bool any, std::uint64_t bits) : any_(any), bits_(bits) {}

  bool any_ = true;
  std::uint64_t bits_ = 0;
};

// Parses a constraint such as "V100M16|V100M32" (models joined by '|'); empty means any model.
// Unknown model names are added to `catalog`: a task may ask for a model the pool lacks, and then
// it fits nowhere, which is an answer, not an error.
Result<ModelSet> parse_model_set(std::string_view spec, GpuModelCatalog& catalog);

// "any", or the accepted model names joined by '|', in id order.
std::string describe(const ModelSet& models, const GpuModelCatalog& catalog);

}  // namespace tidepool
