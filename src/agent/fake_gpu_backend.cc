#include "agent/fake_gpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <map>
#include <optional>
#include <utility>

#include "core/resources.h"

namespace tidepool {
namespace {

constexpr std::array<FakeGpuModel, 5> kModels{{
    {"H100", 81559, 70, 700, 30, 75, true},
    {"A100", 81920, 55, 400, 32, 70, true},
    {"L40S", 46068, 35, 350, 32, 80, false},
    {"T4", 15360, 10, 70, 30, 75, false},
    {"V100", 32768, 25, 250, 30, 78, false},
}};

// GPUs per HGX board: the size of one NVLink domain of fake GPUs.
constexpr int kHgxBoardGpus = 8;

constexpr std::string_view kListExample = "such as fake:8xH100 or fake:4xA100,4xH100";

std::string known_models() {
  std::string names;
  for (const FakeGpuModel& model : kModels) {
    if (!names.empty()) names += ", ";
    names += model.name;
  }
  return names;
}

struct Entry {
  int count = 0;
  const FakeGpuModel* model = nullptr;
  bool mig_enabled = false;
  std::vector<MigInstance> mig;
};

std::string profile_list(std::span<const MigInstance> instances) {
  std::string names;
  for (const MigInstance& instance : instances) {
    if (!names.empty()) names += '+';
    names += mig_profile_spec(instance.profile).name;
  }
  return names;
}

// The "<profile>+<profile>..." of `entry`, placed in that order on one empty GPU.
Result<std::vector<MigInstance>> parse_partition(std::string_view partition,
                                                 std::string_view entry) {
  if (partition.empty()) return std::vector<MigInstance>{};
  MigLayout layout;
  std::string_view rest = partition;
  for (;;) {
    const auto plus = rest.find('+');
    const std::string_view name = rest.substr(0, plus);
    auto profile = parse_mig_profile(name);
    if (!profile) {
      return fail("--gpus", fmt::format("\"{}\": {}; separate the profiles of a GPU with '+', "
                                        "such as fake:2xA100[3g.40gb+2g.20gb+1g.10gb]",
                                        entry, profile.error().reason));
    }
    const std::optional<MigSlot> slot = pack_mig(std::span(&layout, 1), *profile);
    if (!slot) {
      return fail("--gpus", fmt::format("\"{}\": a {} instance does not fit on a GPU that "
                                        "already holds {}",
                                        entry, name, profile_list(layout.instances())));
    }
    if (auto added = layout.add(MigInstance{*profile, slot->start}); !added) {
      return fail("--gpus", fmt::format("\"{}\": {}", entry, added.error().reason));
    }
    if (plus == std::string_view::npos) break;
    rest.remove_prefix(plus + 1);
  }
  std::vector<MigInstance> instances(layout.instances().begin(), layout.instances().end());
  if (auto checked = check_mig_layout(instances); !checked) {
    return fail("--gpus", fmt::format("\"{}\": {}", entry, checked.error().reason));
  }
  return instances;
}

// One "<count>x<model>" or "<count>x<model>[<partition>]" of the list.
Result<Entry> parse_entry(std::string_view entry, std::string_view list) {
  if (entry.empty()) {
    return fail("--gpus", fmt::format("\"fake:{}\" has an empty entry; write <count>x<model>, {}",
                                      list, kListExample));
  }
  Entry parsed;
  const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), parsed.count);
  const auto digits = static_cast<std::size_t>(end - entry.data());
  if (ec == std::errc::invalid_argument || entry.front() == '-' || digits == entry.size() ||
      entry[digits] != 'x') {
    return fail("--gpus",
                fmt::format("\"{}\" is not <count>x<model>; write it {}", entry, kListExample));
  }
  if (ec == std::errc::result_out_of_range || parsed.count > kMaxGpusPerNode) {
    return fail("--gpus",
                fmt::format("\"{}\": a node has at most {} GPUs", entry, kMaxGpusPerNode));
  }
  if (parsed.count < 1) {
    return fail("--gpus", fmt::format("\"{}\": the count of GPUs must be at least 1", entry));
  }
  std::string_view name = entry.substr(digits + 1);
  std::string_view partition;
  if (const auto open = name.find('['); open != std::string_view::npos) {
    if (!name.ends_with(']')) {
      return fail("--gpus", fmt::format("\"{}\": a partition is written [<profile>+<profile>...] "
                                        "after the model, such as 2xA100[3g.40gb+2g.20gb]",
                                        entry));
    }
    partition = name.substr(open + 1, name.size() - open - 2);
    name = name.substr(0, open);
    parsed.mig_enabled = true;
  }
  parsed.model = find_fake_gpu_model(name);
  if (parsed.model == nullptr) {
    return fail("--gpus", fmt::format("\"{}\": unknown fake GPU model \"{}\"; known models: {}",
                                      entry, name, known_models()));
  }
  if (parsed.mig_enabled) {
    if (!model_supports_mig(name)) {
      return fail("--gpus", fmt::format("\"{}\": {} GPUs have no MIG partitions; A100 and H100 "
                                        "have",
                                        entry, name));
    }
    auto instances = parse_partition(partition, entry);
    if (!instances) return std::unexpected(instances.error());
    parsed.mig = std::move(*instances);
  }
  return parsed;
}

}  // namespace

std::span<const FakeGpuModel> fake_gpu_models() { return kModels; }

const FakeGpuModel* find_fake_gpu_model(std::string_view name) {
  const auto found = std::ranges::find(kModels, name, &FakeGpuModel::name);
  return found == kModels.end() ? nullptr : &*found;
}

Result<std::vector<FakeGpu>> parse_fake_gpus(std::string_view list) {
  if (list.empty()) {
    return fail("--gpus", fmt::format("\"fake:\" needs a list of <count>x<model>, {}; known "
                                      "models: {}",
                                      kListExample, known_models()));
  }
  std::vector<FakeGpu> gpus;
  std::string_view rest = list;
  for (;;) {
    const auto comma = rest.find(',');
    auto entry = parse_entry(rest.substr(0, comma), list);
    if (!entry) return std::unexpected(entry.error());
    if (entry->count > kMaxGpusPerNode - static_cast<int>(gpus.size())) {
      return fail("--gpus", fmt::format("\"fake:{}\" has more than {} GPUs, the most a node has",
                                        list, kMaxGpusPerNode));
    }
    gpus.insert(gpus.end(), entry->count, FakeGpu{*entry->model, entry->mig_enabled, entry->mig});
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return gpus;
}

FakeGpuBackend::FakeGpuBackend(std::vector<FakeGpu> gpus, std::string node_seed)
    : models_(std::move(gpus)), loads_(models_.size()) {
  const int count = static_cast<int>(models_.size());
  // The GPUs of each NVLink model, in index order; std::map for an order that does not depend on
  // hashing.
  std::map<std::string_view, std::vector<int>> nvlink_models;
  for (int index = 0; index < count; ++index) {
    const FakeGpuModel& model = models_[index].model;
    GpuInfo gpu;
    gpu.index = index;
    gpu.uuid = fmt::format("GPU-fake-{}-{}", node_seed, index);
    gpu.model = std::string(model.name);
    gpu.memory_mib = model.memory_mib;
    gpu.pci_bus_id = fmt::format("{:04x}:{:02x}:00.0", index / kHgxBoardGpus,
                                 0x18 + 0x20 * (index % kHgxBoardGpus));
    gpu.numa_node = index * 2 / count;
    gpu.mig_enabled = models_[index].mig_enabled;
    for (std::size_t k = 0; k < models_[index].mig.size(); ++k) {
      const MigInstance& instance = models_[index].mig[k];
      gpu.mig.push_back(MigDevice{
          fmt::format("MIG-fake-{}-{}-{}", node_seed, index, k), instance.profile, instance.start,
          model.memory_mib * mig_profile_spec(instance.profile).memory_slices / kMigMemorySlices});
    }
    gpus_.push_back(std::move(gpu));
    if (model.nvlink) nvlink_models[model.name].push_back(index);
  }
  for (const auto& [name, indices] : nvlink_models) {
    for (std::size_t board = 0; board < indices.size(); board += kHgxBoardGpus) {
      const std::size_t end = std::min(indices.size(), board + kHgxBoardGpus);
      for (std::size_t i = board; i < end; ++i) {
        for (std::size_t j = board; j < end; ++j) {
          if (i != j) gpus_[indices[i]].nvlink_peers.push_back(indices[j]);
        }
      }
    }
  }
}

std::string FakeGpuBackend::name() const {
  std::string list;
  auto same = [](const FakeGpu& a, const FakeGpu& b) {
    return a.model.name == b.model.name && a.mig_enabled == b.mig_enabled && a.mig == b.mig;
  };
  for (std::size_t start = 0; start < models_.size();) {
    std::size_t end = start + 1;
    while (end < models_.size() && same(models_[end], models_[start])) ++end;
    if (!list.empty()) list += ',';
    list += fmt::format("{}x{}", end - start, models_[start].model.name);
    if (models_[start].mig_enabled) list += "[" + profile_list(models_[start].mig) + "]";
    start = end;
  }
  return "fake:" + list;
}

Result<std::vector<GpuInfo>> FakeGpuBackend::discover() { return gpus_; }

Result<std::vector<GpuSample>> FakeGpuBackend::sample() {
  std::vector<GpuSample> samples;
  samples.reserve(models_.size());
  for (std::size_t index = 0; index < models_.size(); ++index) {
    const FakeGpuModel& model = models_[index].model;
    const Load& load = loads_[index];
    const int busy = load.utilization_percent;
    GpuSample sample;
    sample.index = static_cast<int>(index);
    sample.utilization_percent = busy;
    sample.memory_used_mib = load.memory_used_mib;
    sample.power_milliwatts = model.idle_power_watts * 1000 +
                              (model.max_power_watts - model.idle_power_watts) * 1000 * busy / 100;
    sample.temperature_celsius =
        model.idle_temperature_celsius +
        (model.max_temperature_celsius - model.idle_temperature_celsius) * busy / 100;
    samples.push_back(sample);
  }
  return samples;
}

void FakeGpuBackend::set_load(int index, int utilization_percent, std::int64_t memory_used_mib) {
  const bool known = index >= 0 && index < static_cast<int>(models_.size());
  assert(known && "set_load: not a GPU of this backend");
  if (!known) return;
  loads_[index] =
      Load{std::clamp(utilization_percent, 0, 100),
           std::clamp<std::int64_t>(memory_used_mib, 0, models_[index].model.memory_mib)};
}

}  // namespace tidepool
