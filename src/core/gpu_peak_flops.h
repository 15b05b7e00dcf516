// Peak dense tensor FLOP/s per GPU model: the denominator of model FLOPs utilisation (MFU,
// core/step_stats.h). One table, from the vendors' datasheets, in FLOP/s as integers.
//
// The figure is the dense (no structured sparsity) tensor-core rate at 16-bit precision: bf16
// where the GPU has it, else fp16 (V100, T4) or plain fp16 without tensor cores (P100); the
// precision each entry is at is in the table. Datasheets give most of these "with sparsity"; the
// dense rate is half of that. A model the table lacks has no peak, and a job on it no MFU.
//
// Names: a GPU model as a cluster file or the agent's discovery names it ("H100", "A100",
// "V100M16", "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB") is looked up without case, a leading
// "NVIDIA " or "Tesla ", with '-' and '_' read as spaces; an entry matches a name that is its key
// or starts with its key and a space ("A10" matches "NVIDIA A10" but neither "A100" nor "A10G",
// which the table lacks). The more specific keys come first ("H100 PCIE" before "H100").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace tidepool {

struct GpuPeakFlops {
  std::string_view key;          // "H100 PCIE": upper case, words separated by one space
  std::int64_t flops_per_s = 0;  // dense, at `precision`
  std::string_view precision;    // "bf16 tensor", "fp16 tensor", "fp16"
};

// The table, in lookup order.
std::span<const GpuPeakFlops> gpu_peak_flops_table();

// The entry for a GPU model's name (see the file comment); empty for a model the table lacks.
std::optional<GpuPeakFlops> find_gpu_peak_flops(std::string_view model);

}  // namespace tidepool
