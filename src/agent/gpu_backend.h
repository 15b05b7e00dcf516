// The node agent's view of the GPUs of its machine: what they are (discover) and how busy they are
// now (sample). Two backends implement it: NVML, through the NVIDIA driver (nvml_backend.h), and a
// fake one for machines without GPUs, tests and demonstrations (fake_gpu_backend.h). The agent
// picks one with --gpus, through make_gpu_backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/mig.h"

namespace tidepool {

// One MIG instance of a partitioned GPU, as discovered: what a task is given when it runs on a
// slice of a GPU rather than a whole one.
struct MigDevice {
  std::string uuid;  // "MIG-..." as NVML and CUDA_VISIBLE_DEVICES name the instance
  MigProfile profile = MigProfile::k1g10gb;  // the core's profile: "1g.10gb" .. "7g.80gb"
  int start = 0;                             // its first memory slice, 0..7 (core/mig.h)
  std::int64_t memory_mib = 0;               // the instance's own device memory

  // The instance as the core's layout rules see it.
  [[nodiscard]] MigInstance instance() const { return MigInstance{profile, start}; }

  friend bool operator==(const MigDevice&, const MigDevice&) = default;
};

// One GPU as discovered. Figures that do not change while the machine runs.
struct GpuInfo {
  int index = 0;      // 0 .. count - 1, the order of the backend (NVML's, for nvml)
  std::string uuid;   // "GPU-..." as NVML and CUDA_VISIBLE_DEVICES name the GPU
  std::string model;  // as the backend names it: "NVIDIA H100 80GB HBM3", or "H100" for fakes
  std::int64_t memory_mib = 0;  // total device memory
  // "domain:bus:device.function" as sysfs names the device: 4-hex-digit domain, lower case
  // ("0000:1b:00.0").
  std::string pci_bus_id;
  int numa_node = -1;  // the NUMA node the GPU is attached to; -1: unknown or none
  // Indices of the GPUs this one reaches over NVLink (directly or through NVSwitches), ascending,
  // without itself; empty when it has no NVLink.
  std::vector<int> nvlink_peers;
  // Whether the GPU is in MIG mode. Then `mig` lists its instances (none yet is possible: MIG on,
  // nothing created), in the backend's order, and make a layout that check_mig_layout accepts: a
  // backend reports an Error rather than a layout the core refuses. A GPU in MIG mode runs no task
  // as a whole GPU.
  bool mig_enabled = false;
  std::vector<MigDevice> mig;

  friend bool operator==(const GpuInfo&, const GpuInfo&) = default;
};

// How busy one GPU is at the moment of sample(). A figure the GPU cannot report is 0.
struct GpuSample {
  int index = 0;                             // as in GpuInfo
  int utilization_percent = 0;               // 0..100, share of the last sample period a kernel ran
  std::int64_t memory_used_mib = 0;          // device memory in use
  int power_milliwatts = 0;                  // board power draw
  int temperature_celsius = 0;               // GPU die
  std::uint64_t throttle_reasons = 0;        // NVML's nvmlClocksThrottleReason* bit mask; 0: none
  std::uint64_t ecc_errors_uncorrected = 0;  // since the driver loaded

  friend bool operator==(const GpuSample&, const GpuSample&) = default;
};

// A source of GPU facts. Not thread-safe: one thread at a time.
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  // "nvml", or the fake's spec ("fake:8xH100"), for logs and the node's registration.
  [[nodiscard]] virtual std::string name() const = 0;
  // Every GPU of the machine, in index order.
  virtual Result<std::vector<GpuInfo>> discover() = 0;
  // One sample of every GPU, in index order.
  virtual Result<std::vector<GpuSample>> sample() = 0;
};

// The backend that --gpus names:
//   "nvml"                 the GPUs of this machine, through the NVIDIA driver's libnvidia-ml.so.1
//                          (loaded and initialized here, so a missing driver is reported now)
//   "fake:8xH100"          fake GPUs, <count>x<model>; a comma-separated list mixes models
//   "fake:4xA100,4xH100"   (fake_gpu_backend.h lists the models and their figures)
//   "fake:2xA100[3g.40gb+2g.20gb],2xH100"
//                          an entry's GPUs in MIG mode, partitioned into the profiles in brackets
// `node_seed` (the host name, say) makes fake UUIDs differ between nodes; nvml ignores it.
// Errors name the field "--gpus" and say what is accepted.
Result<std::unique_ptr<GpuBackend>> make_gpu_backend(std::string_view spec,
                                                     std::string_view node_seed = "node");

}  // namespace tidepool
