#include "core/mig.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

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

// The bit of an instance in a fixed layout's offer.
std::uint64_t offer_bit(MigProfile profile, int start) {
  return std::uint64_t{1} << (static_cast<int>(profile) * kMigMemorySlices + start);
}

bool allowed_start(const MigProfileSpec& spec, int start) {
  return start >= 0 && start < kMigMemorySlices && ((spec.starts >> start) & 1U) != 0;
}

// The halves of the memory slices. A 3g.40gb takes a whole half; a 4g.40gb only the low one.
constexpr std::uint8_t kLowHalf = 0b0000'1111;
constexpr std::uint8_t kHighHalf = 0b1111'0000;
// Slices 6-7: a 1g.20gb's place, no 2g.20gb's; a 1g.10gb at 6 leaves 7 to no profile.
constexpr int kLastPair = 6;

// The other memory slice of the pair (0-1, 2-3, 4-5, 6-7) that `slice` is in.
int pair_mate(int slice) { return slice ^ 1; }

bool slice_taken(const MigLayout& layout, int slice) {
  return ((layout.memory_used() >> slice) & 1U) != 0;
}

// What an instance at one start costs the rest of its GPU, compared member by member: the least
// is the start packing takes.
struct StartCost {
  // A 1g.10gb at 6: slice 7 then serves no profile until it leaves.
  bool strands_slice_7 = false;
  // The first instance in a half: packing fills a half already in use before breaking a whole one.
  bool opens_a_half = false;
  // Opening the half this profile should leave: the low one for a 3g.40gb (a 4g.40gb can take no
  // other) and a 1g.20gb (slices 6-7 suit it and no 2g.20gb); the high one for a 2g.20gb (it holds
  // one, then only 6-7) and a 1g.10gb (it leaves the high half no pair a 2g.20gb can use).
  bool opens_the_wrong_half = false;
  // A 1g.20gb below 6 takes a pair a 2g.20gb could use.
  bool takes_a_pair_from_2g = false;
  // A 1g.10gb in a pair of free slices, when it could complete a pair begun.
  bool splits_a_free_pair = false;
  int start = 0;

  friend auto operator<=>(const StartCost&, const StartCost&) = default;
};

StartCost start_cost(const MigLayout& layout, MigProfile profile, int start) {
  const bool high = start >= kMigMemorySlices / 2;
  const bool opens = (layout.memory_used() & (high ? kHighHalf : kLowHalf)) == 0;
  const bool high_first = profile == MigProfile::k3g40gb || profile == MigProfile::k1g20gb;
  const bool one_slice = profile == MigProfile::k1g10gb;
  return StartCost{
      .strands_slice_7 = one_slice && start == kLastPair,
      .opens_a_half = opens,
      .opens_the_wrong_half = opens && high != high_first,
      .takes_a_pair_from_2g = profile == MigProfile::k1g20gb && start != kLastPair,
      .splits_a_free_pair = one_slice && !slice_taken(layout, pair_mate(start)),
      .start = start,
  };
}

// Where an instance goes on one GPU (see StartCost), if it fits.
std::optional<int> packing_start(const MigLayout& layout, MigProfile profile) {
  std::optional<StartCost> best;
  for (int start = 0; start < kMigMemorySlices; ++start) {
    if (!layout.fits(profile, start)) continue;
    const StartCost cost = start_cost(layout, profile, start);
    if (!best || cost < *best) best = cost;
  }
  if (!best) return std::nullopt;
  return best->start;
}

// How many more instances of each profile a GPU could take on its own, the largest profile first.
MigRoom room_largest_first(const MigLayout& layout) {
  MigRoom room{};
  for (std::size_t i = 0; i < room.size(); ++i) {
    room[i] = layout.room_for(kProfiles[kProfiles.size() - 1 - i].profile);
  }
  return room;
}

MigRoom room_lost(const MigLayout& layout, MigInstance instance) {
  MigLayout after = layout;
  (void)after.add(instance);  // the caller checked that it fits
  MigRoom lost = room_largest_first(layout);
  const MigRoom left = room_largest_first(after);
  for (std::size_t i = 0; i < lost.size(); ++i) lost[i] -= left[i];
  return lost;
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

Result<MigLayout> MigLayout::partitioned(std::span<const MigInstance> offered) {
  if (auto valid = check_mig_layout(offered); !valid) return std::unexpected(valid.error());
  if (offered.empty()) return fail("instances", "a GPU in MIG mode offers at least one instance");
  MigLayout layout;
  for (const MigInstance& instance : offered) {
    layout.offered_ |= offer_bit(instance.profile, instance.start);
  }
  return layout;
}

std::int64_t MigLayout::used_milli() const {
  std::int64_t milli = 0;
  for (const MigInstance& instance : instances_) milli += mig_gpu_milli(instance.profile);
  return milli;
}

bool MigLayout::offers(MigProfile profile, int start) const {
  return offered_ == 0 || (offered_ & offer_bit(profile, start)) != 0;
}

std::uint8_t MigLayout::profiles_that_fit() const {
  std::uint8_t fit = 0;
  for (const MigProfileSpec& spec : kProfiles) {
    if (first_start(spec.profile)) {
      fit = static_cast<std::uint8_t>(fit | (1U << static_cast<unsigned>(spec.profile)));
    }
  }
  return fit;
}

bool MigLayout::fits(MigProfile profile, int start) const {
  const MigProfileSpec& spec = mig_profile_spec(profile);
  return allowed_start(spec, start) && offers(profile, start) &&
         compute_used_ + spec.compute_slices <= kMigComputeSlices &&
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
    if (!allowed_start(spec, start) || (memory & mask) != 0 || !offers(profile, start) ||
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
  if (!offers(instance.profile, instance.start)) {
    return fail("start", fmt::format("the GPU has no {} instance at memory slice {}", spec.name,
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

std::optional<MigChoice> mig_choice(const MigLayout& gpu, MigProfile profile) {
  const std::optional<int> start = packing_start(gpu, profile);
  if (!start) return std::nullopt;
  return MigChoice{room_lost(gpu, MigInstance{profile, *start}), *start};
}

std::optional<MigSlot> pack_mig(std::span<const MigLayout> gpus, MigProfile profile) {
  // The other GPUs keep their room: the pool loses what the chosen one does. Strictly less wins,
  // so ties go to the lower GPU.
  std::optional<std::pair<MigRoom, MigSlot>> best;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    const std::optional<MigChoice> choice = mig_choice(gpus[g], profile);
    if (!choice) continue;
    if (!best || choice->lost < best->first) best = {choice->lost, MigSlot{g, choice->start}};
  }
  if (!best) return std::nullopt;
  return best->second;
}

}  // namespace tidepool
