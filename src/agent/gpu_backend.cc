#include "agent/gpu_backend.h"

#include <fmt/format.h>

#include <memory>
#include <utility>

#include "agent/fake_gpu_backend.h"
#include "agent/nvml_backend.h"

namespace tidepool {

Result<std::unique_ptr<GpuBackend>> make_gpu_backend(std::string_view spec,
                                                     std::string_view node_seed) {
  constexpr std::string_view kFake = "fake:";
  if (spec == "nvml") {
    auto backend = std::make_unique<NvmlBackend>();
    if (auto opened = backend->open(); !opened) return std::unexpected(opened.error());
    return std::unique_ptr<GpuBackend>(std::move(backend));
  }
  if (spec.starts_with(kFake)) {
    auto gpus = parse_fake_gpus(spec.substr(kFake.size()));
    if (!gpus) return std::unexpected(gpus.error());
    return std::make_unique<FakeGpuBackend>(std::move(*gpus), std::string(node_seed));
  }
  const std::string accepted =
      "use \"nvml\" for the GPUs of this machine, or fake:<count>x<model>[,...] for fake GPUs, "
      "such as fake:8xH100 or fake:4xA100,4xH100; fake:2xA100[3g.40gb+2g.20gb],2xH100 partitions "
      "the A100s into MIG instances";
  if (spec.empty()) return fail("--gpus", "no GPU backend given; " + accepted);
  return fail("--gpus", fmt::format("\"{}\" is not a GPU backend; {}", spec, accepted));
}

}  // namespace tidepool
