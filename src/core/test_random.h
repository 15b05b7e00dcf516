// Random draws for the core's property tests, from the seeded Rng (header only; not part of the
// core library).
#pragma once

#include <cstdint>

#include "core/rng.h"

namespace tidepool::test_support {

// Uniform in [lo, hi] (lo <= hi).
inline int draw(Rng& rng, int lo, int hi) {
  return lo + static_cast<int>(rng.below(static_cast<std::uint64_t>(hi - lo) + 1));
}

// As draw, for 64-bit figures.
inline std::int64_t draw64(Rng& rng, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(hi - lo + 1)));
}

// True `percent` times in 100.
inline bool chance(Rng& rng, int percent) {
  return rng.below(100) < static_cast<std::uint64_t>(percent);
}

}  // namespace tidepool::test_support
