#include "core/gpu_peak_flops.h"

#include <array>
#include <cctype>
#include <string>

namespace tidepool {
namespace {

constexpr std::int64_t kPeakTera = 1'000'000'000'000;
constexpr std::int64_t kPeakGiga = 1'000'000'000;

// Sources: NVIDIA's product datasheets; the dense figure where the datasheet's is "with sparsity"
// is half of it.
constexpr std::array kPeakTable{
    // H100 Tensor Core GPU datasheet: BF16 1,979 TFLOPS with sparsity (SXM), 1,513 (PCIe),
    // 1,671 (NVL).
    GpuPeakFlops{"H100 PCIE", 756'500 * kPeakGiga, "bf16 tensor"},
    GpuPeakFlops{"H100 NVL", 835'500 * kPeakGiga, "bf16 tensor"},
    GpuPeakFlops{"H100", 989'400 * kPeakGiga, "bf16 tensor"},
    // H200 Tensor Core GPU datasheet: BF16 1,979 TFLOPS with sparsity (SXM), 1,671 (NVL).
    GpuPeakFlops{"H200 NVL", 835'500 * kPeakGiga, "bf16 tensor"},
    GpuPeakFlops{"H200", 989'400 * kPeakGiga, "bf16 tensor"},
    // A100 Tensor Core GPU datasheet: BF16 312 TFLOPS dense (624 with sparsity), PCIe and SXM.
    GpuPeakFlops{"A100", 312 * kPeakTera, "bf16 tensor"},
    // A40 datasheet: BF16 149.7 TFLOPS dense (299.4 with sparsity).
    GpuPeakFlops{"A40", 149'700 * kPeakGiga, "bf16 tensor"},
    // A30 datasheet: BF16 165 TFLOPS dense (330 with sparsity).
    GpuPeakFlops{"A30", 165 * kPeakTera, "bf16 tensor"},
    // A10 datasheet: BF16 125 TFLOPS dense (250 with sparsity).
    GpuPeakFlops{"A10", 125 * kPeakTera, "bf16 tensor"},
    // L40S datasheet: BF16 362.05 TFLOPS dense (733 with sparsity).
    GpuPeakFlops{"L40S", 362'050 * kPeakGiga, "bf16 tensor"},
    // L40 datasheet: BF16 181.05 TFLOPS dense (362.1 with sparsity).
    GpuPeakFlops{"L40", 181'050 * kPeakGiga, "bf16 tensor"},
    // L4 datasheet: BF16 242 TFLOPS with sparsity.
    GpuPeakFlops{"L4", 121 * kPeakTera, "bf16 tensor"},
    // V100 datasheet: tensor performance 125 TFLOPS (SXM2), 112 (PCIe); V100S PCIe: 130. fp16
    // (Volta has no bf16); SXM2 when the name does not say.
    GpuPeakFlops{"V100S", 130 * kPeakTera, "fp16 tensor"},
    GpuPeakFlops{"V100 PCIE", 112 * kPeakTera, "fp16 tensor"},
    GpuPeakFlops{"V100", 125 * kPeakTera, "fp16 tensor"},
    // The openb traces' names of V100 SXM2 boards with 16 and 32 GB.
    GpuPeakFlops{"V100M16", 125 * kPeakTera, "fp16 tensor"},
    GpuPeakFlops{"V100M32", 125 * kPeakTera, "fp16 tensor"},
    // T4 datasheet: mixed precision (FP16/FP32) 65 TFLOPS.
    GpuPeakFlops{"T4", 65 * kPeakTera, "fp16 tensor"},
    // P100 datasheet: half precision 21.2 TFLOPS (SXM2), 18.7 (PCIe); no tensor cores. PCIe when
    // the name does not say.
    GpuPeakFlops{"P100 SXM2", 21'200 * kPeakGiga, "fp16"},
    GpuPeakFlops{"P100", 18'700 * kPeakGiga, "fp16"},
};

// Upper case, '-' and '_' as spaces, runs of spaces as one, without the vendor's prefixes.
std::string normalised_gpu_name(std::string_view name) {
  std::string out;
  for (const char c : name) {
    const char upper =
        c == '-' || c == '_' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (upper == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += upper;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  for (const std::string_view prefix : {"NVIDIA ", "TESLA "}) {
    if (std::string_view(out).starts_with(prefix)) out.erase(0, prefix.size());
  }
  return out;
}

}  // namespace

std::span<const GpuPeakFlops> gpu_peak_flops_table() { return kPeakTable; }

std::optional<GpuPeakFlops> find_gpu_peak_flops(std::string_view model) {
  const std::string name = normalised_gpu_name(model);
  for (const GpuPeakFlops& entry : kPeakTable) {
    if (!std::string_view(name).starts_with(entry.key)) continue;
    if (name.size() > entry.key.size() && name[entry.key.size()] != ' ') continue;
    return entry;
  }
  return std::nullopt;
}

}  // namespace tidepool
