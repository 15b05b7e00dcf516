// NVIDIA Multi-Instance GPU (MIG): the profiles a GPU can be partitioned into, the rules of a valid
// layout, and where a new instance goes on a set of GPUs.
//
// The model (NVIDIA's MIG user guide, for the 80 GB A100 and H100): a GPU has 7 compute slices
// and 8 memory slices, numbered 0..7. An instance of a profile takes a run of memory slices that
// starts at one of the profile's allowed positions, and some compute slices:
//
//   profile    compute  memory  starts        at most
//   1g.10gb       1       1     0 1 2 3 4 5 6    7
//   1g.20gb       1       2     0 2 4 6          4
//   2g.20gb       2       2     0 2 4            3
//   3g.40gb       3       4     0 4              2
//   4g.40gb       4       4     0                1
//   7g.80gb       7       8     0                1
//
// A layout is valid when each instance starts at an allowed position, no two instances share a
// memory slice, and the compute slices taken add up to at most 7. (The "at most" column follows
// from these rules.)
//
// An instance counts against quotas as the share of the GPU it makes unusable: the larger of its
// compute share (of 7) and its memory share (of 8), in thousandths of a GPU, rounded up.
//
// Packing (pack_mig) chooses the start on each GPU, then the GPU.
//  - The start keeps halves whole. The memory slices split into halves, 0-3 and 4-7: a 3g.40gb
//    takes a whole half, a 4g.40gb the low one. A 1g.10gb takes slice 6 only when nothing else
//    fits (slice 7 then serves no profile). An instance goes into a half already in use when it
//    fits there. A whole half is opened high for a 3g.40gb and a 1g.20gb (the low half is the only
//    place of a 4g.40gb), low for a 2g.20gb and a 1g.10gb (the high half holds one 2g.20gb, then
//    slices 6-7, where no 2g.20gb goes). Then a 1g.20gb takes slices 6-7 before a pair a 2g.20gb
//    could use, a 1g.10gb completes a pair already begun, and the lowest start wins.
//  - The GPU is the one where the instance, at its start, takes least from what the pool could
//    still hold: for each profile, how many more instances of it each GPU could take on its own,
//    compared from the largest profile down (so a whole GPU is broken only when no partitioned one
//    fits it). Ties go to the lower GPU.
// first_fit_mig is the baseline: the first GPU, at the lowest start, where it fits. Both refuse
// only when no GPU has room.
//
// Neither places more on every stream of requests. Until the first refusal, packing places at
// least as much as first fit on every stream of arrivals alone on one or two GPUs; on more GPUs a
// stream built for it makes it refuse first (mig_test.cc), random ones rarely do
// (mig_property_test.cc). With departures first fit wins some streams: an instance leaving can turn
// first fit's place for another into the better one.
//
// Pure value types: no I/O, no randomness.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tidepool {

enum class MigProfile : std::uint8_t { k1g10gb, k1g20gb, k2g20gb, k3g40gb, k4g40gb, k7g80gb };

inline constexpr int kMigComputeSlices = 7;
inline constexpr int kMigMemorySlices = 8;
inline constexpr int kMigProfileCount = 6;

struct MigProfileSpec {
  MigProfile profile;
  std::string_view name;  // "1g.10gb"
  int compute_slices = 0;
  int memory_slices = 0;
  std::uint8_t starts = 0;  // bit i: the instance may start at memory slice i
};

// The table above, in the order of MigProfile (smallest first).
[[nodiscard]] std::span<const MigProfileSpec> mig_profiles();
[[nodiscard]] const MigProfileSpec& mig_profile_spec(MigProfile profile);
// "1g.10gb" .. "7g.80gb"; an unknown name is an Error naming the profiles.
[[nodiscard]] Result<MigProfile> parse_mig_profile(std::string_view name);
// Whether the GPU model (a cluster file's model name) can be partitioned: A100 and H100.
[[nodiscard]] bool model_supports_mig(std::string_view model);
// What an instance counts against quotas, in thousandths of a GPU (see the file comment).
[[nodiscard]] std::int64_t mig_gpu_milli(MigProfile profile);

struct MigInstance {
  MigProfile profile = MigProfile::k1g10gb;
  int start = 0;  // its first memory slice

  friend bool operator==(const MigInstance&, const MigInstance&) = default;
};

// One GPU's instances. Kept valid: add() refuses what would break the rules.
//
// A layout is open (any instance the rules allow may be added: a GPU partitioned on demand) or
// fixed (partitioned() below: only the instances that exist on the GPU may be used, as a node's
// agent reports them; nothing else is created).
class MigLayout {
 public:
  MigLayout() = default;
  // A fixed layout offering exactly `offered` (a valid layout, else the broken rule), none in use.
  static Result<MigLayout> partitioned(std::span<const MigInstance> offered);

  // Whether an instance of `profile` may start at `start` with the layout as it is.
  [[nodiscard]] bool fits(MigProfile profile, int start) const;
  // The lowest start where it fits, if any.
  [[nodiscard]] std::optional<int> first_start(MigProfile profile) const;
  // How many more instances of `profile` the GPU could take, with nothing else added.
  [[nodiscard]] int room_for(MigProfile profile) const;
  // The profiles of which an instance fits now: bit p for MigProfile p.
  [[nodiscard]] std::uint8_t profiles_that_fit() const;

  Result<void> add(MigInstance instance);
  // Removes one instance equal to `instance`; an Error when there is none.
  Result<void> remove(MigInstance instance);

  [[nodiscard]] std::span<const MigInstance> instances() const { return instances_; }
  [[nodiscard]] bool empty() const { return instances_.empty(); }
  [[nodiscard]] int compute_used() const { return compute_used_; }
  [[nodiscard]] std::uint8_t memory_used() const { return memory_used_; }
  // A fixed layout's instances, as bits profile * 8 + start; 0 for an open layout.
  [[nodiscard]] std::uint64_t offered() const { return offered_; }
  // What the instances in use count against quotas (mig_gpu_milli of each).
  [[nodiscard]] std::int64_t used_milli() const;

 private:
  // Whether the layout may hold an instance of `profile` at `start`: an open layout any, a fixed
  // one those it offers.
  [[nodiscard]] bool offers(MigProfile profile, int start) const;

  std::vector<MigInstance> instances_;
  std::uint64_t offered_ = 0;
  int compute_used_ = 0;
  std::uint8_t memory_used_ = 0;  // bit i: memory slice i is taken
};

// Whether `instances` make a valid layout of one GPU (the rules above), or the first broken rule.
Result<void> check_mig_layout(std::span<const MigInstance> instances);

// Where a new instance goes: GPU `gpu` of the span, at memory slice `start`.
struct MigSlot {
  std::size_t gpu = 0;
  int start = 0;

  friend bool operator==(const MigSlot&, const MigSlot&) = default;
};

[[nodiscard]] std::optional<MigSlot> pack_mig(std::span<const MigLayout> gpus, MigProfile profile);

// pack_mig's measure of one GPU: the start it takes there and what the GPU loses by it (for each
// profile from the largest down, how many fewer instances of it the GPU could take). Less lost is
// better, compared in that order; a pool of many nodes compares its GPUs by it
// (core/mig_placement.h).
using MigRoom = std::array<int, kMigProfileCount>;
struct MigChoice {
  MigRoom lost{};
  int start = 0;
};
[[nodiscard]] std::optional<MigChoice> mig_choice(const MigLayout& gpu, MigProfile profile);
[[nodiscard]] std::optional<MigSlot> first_fit_mig(std::span<const MigLayout> gpus,
                                                   MigProfile profile);

}  // namespace tidepool
