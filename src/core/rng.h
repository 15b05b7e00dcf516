// The injected source of randomness. Every random choice in Tidepool draws from an Rng passed in
// by the caller, so the same seed gives the same schedule, bit for bit, on every platform: the
// generator (xoshiro256**, seeded through SplitMix64) and the bounded draw are fully specified
// here rather than left to the standard library's implementation-defined distributions.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

namespace tidepool {

class Rng {
 public:
  explicit Rng(std::uint64_t seed);

  // Next 64 random bits.
  std::uint64_t next();

  // Uniform integer in [0, bound). `bound` must be positive.
  std::uint64_t below(std::uint64_t bound);

  // Fisher-Yates shuffle of `items`.
  template <class T>
  void shuffle(std::span<T> items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      std::size_t j = below(i);
      std::swap(items[i - 1], items[j]);
    }
  }

 private:
  std::uint64_t state_[4];
};

}  // namespace tidepool
