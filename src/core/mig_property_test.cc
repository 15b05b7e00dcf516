// Property tests of MIG placement on seeded random streams of requests for a pool of eight A100s
// (and on every stream of arrivals for one or two), each stream played once with pack_mig and once
// with first_fit_mig: every layout stays valid after every event, packing refuses only what first
// fit would refuse on the same layouts, and what each places is counted in compute slices, the
// unit a profile's name counts and a GPU has 7 of. (Quota shares, mig_gpu_milli, count memory
// too: they weigh a 1g.20gb's one compute slice nearly as much as a 2g.20gb's two.)
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/mig.h"
#include "core/rng.h"
#include "core/test_random.h"

namespace tidepool {
namespace {

using P = MigProfile;
using MigPlacer = std::optional<MigSlot> (*)(std::span<const MigLayout>, MigProfile);
using test_support::draw;

constexpr std::size_t kMigPoolGpus = 8;
constexpr int kMigSeeds = 200;
constexpr int kMigForever = std::numeric_limits<int>::max();

// The profiles of a stream, drawn uniformly from one of these mixes: inference replicas (small
// profiles more often), every profile alike, training (large ones more often).
constexpr std::array<P, 10> kMigInferenceMix = {P::k1g10gb, P::k1g10gb, P::k1g10gb, P::k1g20gb,
                                                P::k1g20gb, P::k2g20gb, P::k2g20gb, P::k3g40gb,
                                                P::k4g40gb, P::k7g80gb};
constexpr std::array<P, 6> kMigEvenMix = {P::k1g10gb, P::k1g20gb, P::k2g20gb,
                                          P::k3g40gb, P::k4g40gb, P::k7g80gb};
constexpr std::array<P, 8> kMigTrainingMix = {P::k1g10gb, P::k2g20gb, P::k3g40gb, P::k3g40gb,
                                              P::k4g40gb, P::k4g40gb, P::k7g80gb, P::k7g80gb};
constexpr std::array<std::span<const P>, 3> kMigMixes = {kMigInferenceMix, kMigEvenMix,
                                                         kMigTrainingMix};

// One request a step; its instance, if placed, stays `lifetime` steps (kMigForever: to the end) and
// leaves before the request of the step it is due.
struct MigRequest {
  P profile = P::k1g10gb;
  int lifetime = kMigForever;
};

// `count` requests from `mix`; lifetimes uniform in [1, 2 * mean_lifetime], or kMigForever.
std::vector<MigRequest> random_mig_requests(Rng& rng, std::span<const P> mix, int count,
                                            int mean_lifetime) {
  std::vector<MigRequest> requests;
  for (int i = 0; i < count; ++i) {
    const P profile = mix[rng.below(mix.size())];
    const int lifetime =
        mean_lifetime == kMigForever ? kMigForever : draw(rng, 1, 2 * mean_lifetime);
    requests.push_back({profile, lifetime});
  }
  return requests;
}

void expect_valid_layouts(std::span<const MigLayout> gpus) {
  for (const MigLayout& gpu : gpus) {
    const auto valid = check_mig_layout(gpu.instances());
    EXPECT_TRUE(valid.has_value()) << valid.error().message();
  }
}

// The compute slices a rule placed on a stream: before it first refused a request, and over the
// whole stream (a refused request is turned away and the stream goes on).
struct MigPlaced {
  int before_first_refusal = 0;
  int in_all = 0;
};

MigPlaced play_mig_stream(std::span<const MigRequest> requests, MigPlacer placer) {
  std::vector<MigLayout> gpus(kMigPoolGpus);
  std::multimap<int, std::pair<std::size_t, MigInstance>> leaving;  // step due -> where
  MigPlaced placed;
  bool refused = false;
  for (int step = 0; step < static_cast<int>(requests.size()); ++step) {
    for (auto due = leaving.begin(); due != leaving.end() && due->first <= step;) {
      const auto& [gpu, instance] = due->second;
      EXPECT_TRUE(gpus[gpu].remove(instance).has_value());
      expect_valid_layouts(gpus);
      due = leaving.erase(due);
    }
    const MigRequest& request = requests[step];
    const auto slot = placer(gpus, request.profile);
    EXPECT_EQ(slot.has_value(), first_fit_mig(gpus, request.profile).has_value());
    if (!slot) {
      refused = true;
      continue;
    }
    const MigInstance instance{request.profile, slot->start};
    EXPECT_TRUE(gpus[slot->gpu].add(instance).has_value());
    expect_valid_layouts(gpus);
    const int slices = mig_profile_spec(request.profile).compute_slices;
    placed.in_all += slices;
    if (!refused) placed.before_first_refusal += slices;
    if (request.lifetime != kMigForever) {
      leaving.emplace(step + request.lifetime, std::pair{slot->gpu, instance});
    }
  }
  return placed;
}

// Packing against first fit over many streams, by one of the counts of MigPlaced.
struct MigTally {
  int more = 0;
  int fewer = 0;
  long long packed = 0;
  long long first_fit = 0;

  void add(int packed_slices, int first_fit_slices) {
    more += packed_slices > first_fit_slices ? 1 : 0;
    fewer += packed_slices < first_fit_slices ? 1 : 0;
    packed += packed_slices;
    first_fit += first_fit_slices;
  }
};

std::string describe_tally(const MigTally& tally) {
  return "packing placed more on " + std::to_string(tally.more) + " streams, fewer on " +
         std::to_string(tally.fewer) + "; " + std::to_string(tally.packed) + " slices against " +
         std::to_string(tally.first_fit);
}

// Arrivals alone, each mix, until the first refusal: packing never places less, and often more.
TEST(MigPackProperty, OnArrivalsAlonePackingPlacesAtLeastAsMuchAsFirstFit) {
  for (std::size_t mix = 0; mix < kMigMixes.size(); ++mix) {
    MigTally tally;
    for (int seed = 1; seed <= kMigSeeds; ++seed) {
      Rng rng(static_cast<std::uint64_t>(seed) * 1009 + mix);
      const auto requests = random_mig_requests(rng, kMigMixes[mix], 80, kMigForever);
      const int packed = play_mig_stream(requests, pack_mig).before_first_refusal;
      const int first = play_mig_stream(requests, first_fit_mig).before_first_refusal;
      EXPECT_GE(packed, first) << "mix " << mix << ", seed " << seed;
      tally.add(packed, first);
    }
    EXPECT_GT(tally.more, kMigSeeds / 10) << "mix " << mix << ": " << describe_tally(tally);
  }
}

// With departures (random lifetimes; requests for about 4/5 of the pool, then for more than all of
// it), first fit wins some streams (mig_test.cc shows how), but packing wins far more and places
// more in all.
TEST(MigPackProperty, WithDeparturesPackingPlacesMoreInAllAndOnMostStreams) {
  for (const int mean_lifetime : {20, 30}) {
    MigTally whole_stream;
    MigTally before_refusal;
    for (int seed = 1; seed <= kMigSeeds; ++seed) {
      Rng rng(static_cast<std::uint64_t>(seed) * 2003 + static_cast<std::uint64_t>(mean_lifetime));
      const auto requests = random_mig_requests(rng, kMigInferenceMix, 400, mean_lifetime);
      const MigPlaced packed = play_mig_stream(requests, pack_mig);
      const MigPlaced first = play_mig_stream(requests, first_fit_mig);
      whole_stream.add(packed.in_all, first.in_all);
      before_refusal.add(packed.before_first_refusal, first.before_first_refusal);
    }
    for (const MigTally& tally : {whole_stream, before_refusal}) {
      EXPECT_GT(tally.packed, tally.first_fit) << mean_lifetime << ": " << describe_tally(tally);
      EXPECT_GT(tally.more, 5 * tally.fewer) << mean_lifetime << ": " << describe_tally(tally);
    }
  }
}

// A pool's layouts as the placements each GPU holds (bit profile * 8 + start).
std::vector<std::uint64_t> mig_placements(std::span<const MigLayout> gpus) {
  std::vector<std::uint64_t> bits;
  for (const MigLayout& gpu : gpus) {
    std::uint64_t gpu_bits = 0;
    for (const MigInstance& instance : gpu.instances()) {
      gpu_bits |= std::uint64_t{1}
                  << (static_cast<int>(instance.profile) * kMigMemorySlices + instance.start);
    }
    bits.push_back(gpu_bits);
  }
  return bits;
}

std::string describe_pool(std::span<const MigLayout> gpus) {
  std::string text;
  for (const MigLayout& gpu : gpus) {
    text += "[";
    for (const MigInstance& instance : gpu.instances()) {
      text += " " + std::string(mig_profile_spec(instance.profile).name) + "@" +
              std::to_string(instance.start);
    }
    text += " ]";
  }
  return text;
}

bool place_mig(std::vector<MigLayout>& gpus, MigProfile profile, const MigSlot& slot) {
  return gpus[slot.gpu].add({profile, slot.start}).has_value();
}

// Every stream of arrivals on one or two GPUs, walked as the pairs of pools (packing's, first
// fit's) it can lead to: wherever first fit places a request, packing places it too.
TEST(MigPackProperty, OnOneOrTwoGpusNoStreamOfArrivalsMakesPackingRefuseFirst) {
  for (const std::size_t gpu_count : {std::size_t{1}, std::size_t{2}}) {
    using Pools = std::pair<std::vector<MigLayout>, std::vector<MigLayout>>;
    std::set<std::pair<std::vector<std::uint64_t>, std::vector<std::uint64_t>>> seen;
    std::vector<Pools> to_visit = {
        {std::vector<MigLayout>(gpu_count), std::vector<MigLayout>(gpu_count)}};
    int packed_where_first_fit_refused = 0;
    while (!to_visit.empty()) {
      const Pools pools = std::move(to_visit.back());
      to_visit.pop_back();
      for (const MigProfileSpec& spec : mig_profiles()) {
        const auto first = first_fit_mig(pools.second, spec.profile);
        const auto packed = pack_mig(pools.first, spec.profile);
        if (!first) {
          packed_where_first_fit_refused += packed.has_value() ? 1 : 0;
          continue;  // first fit's stream ends here
        }
        ASSERT_TRUE(packed.has_value())
            << spec.name << " on packing's " << describe_pool(pools.first) << ", first fit's "
            << describe_pool(pools.second);
        Pools next = pools;
        ASSERT_TRUE(place_mig(next.first, spec.profile, *packed));
        ASSERT_TRUE(place_mig(next.second, spec.profile, *first));
        if (seen.emplace(mig_placements(next.first), mig_placements(next.second)).second) {
          to_visit.push_back(std::move(next));
        }
      }
    }
    EXPECT_GT(packed_where_first_fit_refused, 0) << gpu_count << " GPUs";
  }
}

}  // namespace
}  // namespace tidepool
