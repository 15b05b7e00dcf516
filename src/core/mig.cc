#include "core/mig.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>

namespace tidepool {

namespace {

constexpr std::array<MigProfileSpec, kMigProfileCount> kProfiles = {{
    {MigProfile::k1g10gb, "1g.10gb", 1, 1, 0b0111'1111},
    {MigProfile::k1g20gb, "1g.20gb", 1, 2, 0b0101'0101},
    {MigProfile::k2g20gb, "2g.20gb", 2, 2, 0b0001'0101},
    {MigProfile::k3g40gb, "3g.40gb", 3, 4, 0b0001'0001},
    {MigProfile::k4g40gb, "4g.40gb", 4, 4, 0b0000'0001},
    {MigProfile::k7g80gb, "7g.80gb", 7, 8, 0b0000'0001},
}};

// The memory slices an instance of `spec` starting at `start` takes, as a mask.
std::uint8_t memory_mask(const MigProfileSpec& spec, int start) {
  return static_cast<std::uint8_t>(((1U << spec.memory_slices) - 1U) << start);
}

bool allowed_start(const MigProfileSpec& spec, int start) {
  return start >= 0 && start < kMigMemorySlices && ((spec.starts >> start) & 1U) != 0;
}

// The room left on a GPU, weighted by the profiles' compute slices: what packing keeps high.
int weighted_room(const MigLayout& layout) {
  int room = 0;
  for (const MigProfileSpec& spec : kProfiles) {
    room += spec.compute_slices * layout.room_for(spec.profile);
  }
  return room;
}

}  // namespace

std::span<const MigProfileSpec> mig_profiles() { return kProfiles; }

const MigProfileSpec& mig_profile_spec(MigProfile profile) {
  return kProfiles[static_cast<std::size_t>(profile)];
}

Result<MigProfile> parse_mig_profile(std::string_view name) {
  std::string names;
  for (const MigProfileSpec& spec : kProfiles) {
    if (spec.name == name) return spec.profile;
    names += (names.empty() ? "" : ", ") + std::string(spec.name);
  }
  return fail("mig_profile",
              fmt::format("'{}' is not a MIG profile; the profiles: {}", name, names));
}

bool model_supports_mig(std::string_view model) { return model == "A100" || model == "H100"; }

std::int64_t mig_gpu_milli(MigProfile profile) {
  const MigProfileSpec& spec = mig_profile_spec(profile);
  const auto share = [](int part, int whole) {
    return (std::int64_t{part} * 1000 + whole - 1) / whole;  // rounded up
  };
  return std::max(share(spec.compute_slices, kMigComputeSlices),
                  share(spec.memory_slices, kMigMemorySlices));
}

bool MigLayout::fits(MigProfile profile, int start) const {
  const MigProfileSpec& spec = mig_profile_spec(profile);
  return allowed_start(spec, start) && compute_used_ + spec.compute_slices <= kMigComputeSlices &&
         (memory_used_ & memory_mask(spec, start)) == 0;
}

std::optional<int> MigLayout::first_start(MigProfile profile) const {
  for (int start = 0; start < kMigMemorySlices; ++start) {
    if (fits(profile, start)) return start;
  }
  return std::nullopt;
}

int MigLayout::room_for(MigProfile profile) const {
  const MigProfileSpec& spec = mig_profile_spec(profile);
  // Instances of one profile fill its allowed starts lowest first: none of them can block a
  // later start more than an earlier one would.
  int count = 0;
  int compute = compute_used_;
  std::uint8_t memory = memory_used_;
  for (int start = 0; start < kMigMemorySlices; ++start) {
    const std::uint8_t mask = memory_mask(spec, start);
    if (!allowed_start(spec, start) || (memory & mask) != 0 ||
        compute + spec.compute_slices > kMigComputeSlices) {
      continue;
    }
    ++count;
    compute += spec.compute_slices;
    memory = static_cast<std::uint8_t>(memory | mask);
  }
  return count;
}

Result<void> MigLayout::add(MigInstance instance) {
  const MigProfileSpec& spec = mig_profile_spec(instance.profile);
  if (!allowed_start(spec, instance.start)) {
    return fail("start", fmt::format("a {} instance cannot start at memory slice {}", spec.name,
                                     instance.start));
  }
  if ((memory_used_ & memory_mask(spec, instance.start)) != 0) {
    return fail("start", fmt::format("a {} instance at memory slice {} overlaps another instance",
                                     spec.name, instance.start));
  }
  if (compute_used_ + spec.compute_slices > kMigComputeSlices) {
    return fail(
        "mig_profile",
        fmt::format("a {} instance needs {} compute slices; {} of {} are free", spec.name,
                    spec.compute_slices, kMigComputeSlices - compute_used_, kMigComputeSlices));
  }
  instances_.push_back(instance);
  compute_used_ += spec.compute_slices;
  memory_used_ = static_cast<std::uint8_t>(memory_used_ | memory_mask(spec, instance.start));
  return {};
}

Result<void> MigLayout::remove(MigInstance instance) {
  const auto it = std::ranges::find(instances_, instance);
  const MigProfileSpec& spec = mig_profile_spec(instance.profile);
  if (it == instances_.end()) {
    return fail("start",
                fmt::format("no {} instance at memory slice {}", spec.name, instance.start));
  }
  instances_.erase(it);
  compute_used_ -= spec.compute_slices;
  memory_used_ = static_cast<std::uint8_t>(memory_used_ & ~memory_mask(spec, instance.start));
  return {};
}

Result<void> check_mig_layout(std::span<const MigInstance> instances) {
  MigLayout layout;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (auto added = layout.add(instances[i]); !added) {
      return fail(fmt::format("instances[{}]", i), added.error().reason);
    }
  }
  return {};
}

std::optional<MigSlot> first_fit_mig(std::span<const MigLayout> gpus, MigProfile profile) {
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    if (auto start = gpus[g].first_start(profile)) return MigSlot{g, *start};
  }
  return std::nullopt;
}

std::optional<MigSlot> pack_mig(std::span<const MigLayout> gpus, MigProfile profile) {
  // (room lost, whole GPU broken, gpu, start): the least is best.
  std::optional<std::tuple<int, bool, std::size_t, int>> best;
  bool whole_seen = false;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    const MigLayout& gpu = gpus[g];
    // Whole GPUs are all alike, and the first wins their ties: it stands for the others.
    if (gpu.empty()) {
      if (whole_seen) continue;
      whole_seen = true;
    }
    const int before = weighted_room(gpu);
    for (int start = 0; start < kMigMemorySlices; ++start) {
      if (!gpu.fits(profile, start)) continue;
      MigLayout after = gpu;
      (void)after.add(MigInstance{profile, start});  // fits: cannot fail
      const std::tuple candidate{before - weighted_room(after), gpu.empty(), g, start};
      if (!best || candidate < *best) best = candidate;
    }
  }
  if (!best) return std::nullopt;
  return MigSlot{std::get<2>(*best), std::get<3>(*best)};
}

}  // namespace tidepool
