// Resource quantities. Everything is an integer in a fixed unit: GPUs in milli-GPUs (1000 = one
// whole GPU), CPU in millicores, memory in MiB, time in seconds.
#pragma once

#include <cstdint>

namespace tidepool {

using MilliGpu = std::int32_t;
using MilliCpu = std::int64_t;
using MemoryMib = std::int64_t;
using Seconds = std::int64_t;

inline constexpr MilliGpu kMilliPerGpu = 1000;
inline constexpr std::int64_t kBytesPerMib = 1024 * 1024;

// The GPUs that `milli` milli-GPUs occupy (>= 0), a fraction counting as a whole GPU.
[[nodiscard]] inline constexpr std::int64_t whole_gpus(std::int64_t milli) {
  return (milli + kMilliPerGpu - 1) / kMilliPerGpu;
}

// The most GPUs one node can carry. Bounded so that per-node GPU state fits in a fixed array and
// a set of GPUs fits in a bit mask.
inline constexpr int kMaxGpusPerNode = 16;

}  // namespace tidepool
