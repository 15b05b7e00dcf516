// Fake GPUs, for machines without GPUs (a laptop, CI, a demonstration cluster of containers) and
// for tests: `--gpus fake:8xH100` gives an agent eight H100s with fixed figures. Pure and
// deterministic: no clock, no randomness, no I/O; the same spec and seed give the same GPUs.
//
// Discovery of fake GPU i (counting over the whole list):
//   uuid        "GPU-fake-<node seed>-<i>"
//   pci_bus_id  "<dddd>:<bb>:00.0": domain i / 8, bus 0x18 + 0x20 * (i % 8)
//   numa_node   the first half of the GPUs on node 0, the second half on node 1 (one GPU: node 0)
//   NVLink      GPUs of an NVLink model (H100, A100) form NVLink domains of 8, as HGX boards do:
//               the first 8 GPUs of that model on the node, then the next 8; other models have
//               none
//   MIG         GPUs of an entry with a partition ("2xA100[3g.40gb+2g.20gb]") are in MIG mode with
//               one instance per listed profile, in the order listed: instance k of GPU i has
//               uuid "MIG-fake-<node seed>-<i>-<k>", its profile, the start pack_mig
//               (core/mig.h) chose for it when the instances were placed in that order on the
//               empty GPU, and the model's memory times its memory slices / 8 (rounded down)
// Samples are idle until set_load gives a GPU a load; power and temperature then scale linearly
// from the model's idle figure (0 %) to its maximum (100 %).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_backend.h"
#include "core/error.h"
#include "core/mig.h"

namespace tidepool {

// The figures of one fake GPU model. Memory is what nvidia-smi reports for the real part; power
// limits are the board's published maximum; idle power and temperatures are plausible figures for
// a data-centre GPU, not measurements.
struct FakeGpuModel {
  std::string_view name;  // as in --gpus fake:8xH100
  std::int64_t memory_mib = 0;
  int idle_power_watts = 0;
  int max_power_watts = 0;
  int idle_temperature_celsius = 0;
  int max_temperature_celsius = 0;
  bool nvlink = false;  // sold on 8-GPU HGX boards whose GPUs all reach each other over NVLink
};

// The known models, in this order:
//   H100  SXM5 80 GB on an HGX H100 board: 81559 MiB, 70..700 W, 30..75 C, NVLink
//   A100  SXM4 80 GB on an HGX A100 board: 81920 MiB, 55..400 W, 32..70 C, NVLink
//   L40S  48 GB PCIe card:                 46068 MiB, 35..350 W, 32..80 C
//   T4    16 GB PCIe card:                 15360 MiB, 10..70 W,  30..75 C
//   V100  32 GB PCIe card:                 32768 MiB, 25..250 W, 30..78 C (the SXM2 boards'
//         hybrid cube-mesh NVLink is not modelled)
std::span<const FakeGpuModel> fake_gpu_models();

// The model called `name` (exact spelling), or nullptr.
const FakeGpuModel* find_fake_gpu_model(std::string_view name);

// One fake GPU: its model and, in MIG mode, its instances (profiles and starts; see above).
struct FakeGpu {
  FakeGpuModel model;
  bool mig_enabled = false;
  std::vector<MigInstance> mig;  // in the order the list gave the profiles
};

// The GPUs of a list such as "8xH100" or "4xA100,4xH100" (the part of --gpus after "fake:"), one
// entry per GPU in index order: <count>x<model>, count 1.. and at most kMaxGpusPerNode GPUs in
// all. An entry of a MIG model (A100, H100; model_supports_mig) may partition its GPUs:
// <count>x<model>[<profile>+<profile>...], such as "2xA100[3g.40gb+2g.20gb+1g.10gb]", each GPU
// in MIG mode with those instances; "[]" is MIG mode with no instance yet. Errors name the field
// "--gpus": an unknown profile, a model without MIG, or instances that do not fit on one GPU
// (pack_mig finds no place for one of them, in the order given).
Result<std::vector<FakeGpu>> parse_fake_gpus(std::string_view list);

class FakeGpuBackend final : public GpuBackend {
 public:
  // One GPU per entry of `gpus`, in index order (see parse_fake_gpus). `node_seed` (e.g. the host
  // name) makes the UUIDs of one node differ from another's.
  FakeGpuBackend(std::vector<FakeGpu> gpus, std::string node_seed);

  // "fake:" and the list, consecutive GPUs of one model and partition counted together:
  // "fake:4xA100,4xH100", "fake:2xA100[3g.40gb+2g.20gb],2xA100".
  [[nodiscard]] std::string name() const override;
  // Never fails.
  Result<std::vector<GpuInfo>> discover() override;
  // Never fails. Throttle reasons and ECC errors are always 0.
  Result<std::vector<GpuSample>> sample() override;

  // What GPU `index` does from now on: the load of the process holding it. `index` must be one
  // discover() returned (a programmer error otherwise). Figures no GPU could report are clamped:
  // utilization to 0..100, memory to 0..the GPU's memory.
  void set_load(int index, int utilization_percent, std::int64_t memory_used_mib);

 private:
  struct Load {
    int utilization_percent = 0;
    std::int64_t memory_used_mib = 0;
  };

  std::vector<FakeGpu> models_;
  std::vector<GpuInfo> gpus_;
  std::vector<Load> loads_;
};

}  // namespace tidepool
