// The GPUs of this machine through NVML, the NVIDIA driver's management library. The library is
// loaded at run time (dlopen), so that Tidepool builds and runs without NVIDIA packages; a machine
// without the driver gets an Error that says so and suggests --gpus fake:8xH100.
//
// Beyond NVML, discover() reads the GPU's NUMA node from sysfs
// (<sysfs PCI devices>/<pci bus id>/numa_node) and works out NVLink peers from where each GPU's
// active links lead (nvlink_peers below). Calls that a GPU does not support (NVML's NOT_SUPPORTED:
// ECC on a GPU without it, power on some boards) give 0, or no NVLink; any other failed call is an
// Error naming the function, the GPU and NVML's reason.
//
// MIG: the MIG functions are optional (drivers before R450 lack them). Without them, or where a GPU
// answers NOT_SUPPORTED, the GPU is reported without MIG. A GPU in MIG mode lists its MIG devices
// (nvmlDeviceGetMigDeviceHandleByIndex over 0 .. nvmlDeviceGetMaxMigDeviceCount - 1, skipping the
// empty indices): the UUID, the memory, the profile from the last word of the device's name
// ("NVIDIA H100 80GB HBM3 MIG 1g.10gb") and the start of its GPU instance's placement. A profile
// the core does not know (a 40 GB A100's "1g.5gb", a compute instance's "1c.7g.80gb") or a layout
// check_mig_layout refuses is an Error naming the GPU and why, never a layout used as it is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_backend.h"
#include "agent/nvml_api.h"
#include "core/error.h"

namespace tidepool {

inline constexpr std::string_view kNvmlLibrary = "libnvidia-ml.so.1";
inline constexpr std::string_view kSysfsPciDevices = "/sys/bus/pci/devices";

class NvmlBackend final : public GpuBackend {
 public:
  // Loads nothing yet. `library` is passed to dlopen as it is (a file name searched the usual way,
  // or a path: tests load a fake NVML); `sysfs_pci_devices` is where NUMA nodes are read.
  explicit NvmlBackend(std::string library = std::string(kNvmlLibrary),
                       std::string sysfs_pci_devices = std::string(kSysfsPciDevices));
  // Shuts NVML down (nvmlShutdown) and unloads the library if open() succeeded.
  ~NvmlBackend() override;
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  // Loads the library, resolves every function, initializes NVML and gets a handle on every GPU.
  // Done by the first discover() or sample() when not called before; once it succeeded, later
  // calls do nothing. Errors: the library is missing, lacks a function (an old driver), or
  // nvmlInit fails (e.g. the kernel module is not loaded).
  Result<void> open();

  [[nodiscard]] std::string name() const override { return "nvml"; }
  Result<std::vector<GpuInfo>> discover() override;
  Result<std::vector<GpuSample>> sample() override;

 private:
  struct Functions {
    nvml::nvmlInit_v2_fn init = nullptr;
    nvml::nvmlShutdown_fn shutdown = nullptr;
    nvml::nvmlErrorString_fn error_string = nullptr;
    nvml::nvmlDeviceGetCount_v2_fn get_count = nullptr;
    nvml::nvmlDeviceGetHandleByIndex_v2_fn get_handle = nullptr;
    nvml::nvmlDeviceGetName_fn get_name = nullptr;
    nvml::nvmlDeviceGetUUID_fn get_uuid = nullptr;
    nvml::nvmlDeviceGetMemoryInfo_fn get_memory = nullptr;
    nvml::nvmlDeviceGetPciInfo_v3_fn get_pci = nullptr;
    nvml::nvmlDeviceGetUtilizationRates_fn get_utilization = nullptr;
    nvml::nvmlDeviceGetPowerUsage_fn get_power = nullptr;
    nvml::nvmlDeviceGetTemperature_fn get_temperature = nullptr;
    nvml::nvmlDeviceGetCurrentClocksThrottleReasons_fn get_throttle_reasons = nullptr;
    nvml::nvmlDeviceGetTotalEccErrors_fn get_ecc_errors = nullptr;
    nvml::nvmlDeviceGetNvLinkState_fn get_nvlink_state = nullptr;
    nvml::nvmlDeviceGetNvLinkRemotePciInfo_v2_fn get_nvlink_remote_pci = nullptr;
    // Optional: all set, or all nullptr when the library lacks any of them.
    nvml::nvmlDeviceGetMigMode_fn get_mig_mode = nullptr;
    nvml::nvmlDeviceGetMaxMigDeviceCount_fn get_max_mig_devices = nullptr;
    nvml::nvmlDeviceGetMigDeviceHandleByIndex_fn get_mig_device = nullptr;
    nvml::nvmlDeviceGetGpuInstanceId_fn get_gpu_instance_id = nullptr;
    nvml::nvmlDeviceGetGpuInstanceById_fn get_gpu_instance = nullptr;
    nvml::nvmlGpuInstanceGetInfo_fn get_gpu_instance_info = nullptr;
  };

  Result<void> load_functions();
  // The Error for `function` failing with `result` on GPU `index` (-1: not about one GPU).
  [[nodiscard]] Error call_failed(std::string_view function, nvml::nvmlReturn_t result,
                                  int index) const;
  [[nodiscard]] int read_numa_node(const std::string& pci_bus_id) const;
  // A device's name, UUID and total memory, whether a GPU or one of its MIG devices; `suffix`
  // follows the names of the calls in errors (" (MIG device)"), `index` is the GPU's.
  struct DeviceIdentity {
    std::string name;
    std::string uuid;
    std::int64_t memory_mib = 0;
  };
  Result<DeviceIdentity> identity(nvml::nvmlDevice_t device, int index,
                                  std::string_view suffix) const;
  // The bus ids (sysfs form) that the active NVLinks of GPU `index` lead to.
  Result<std::vector<std::string>> nvlink_remotes(int index) const;
  // Fills gpu.mig_enabled and gpu.mig for GPU `index` (see the file comment).
  Result<void> read_mig(int index, GpuInfo& gpu) const;

  std::string library_;
  std::string sysfs_pci_devices_;
  void* library_handle_ = nullptr;
  bool initialized_ = false;
  Functions nvml_;
  std::vector<nvml::nvmlDevice_t> devices_;
};

// "domain:bus:device.function" in the form sysfs names PCI devices: lower case, the domain
// trimmed of leading zeros down to 4 hex digits ("00000000:1B:00.0" -> "0000:1b:00.0").
std::string sysfs_pci_bus_id(std::string_view nvml_bus_id);

// The NVLink peers of every GPU (ascending, without itself) from where its active links lead:
// `remotes[i]` holds the bus ids that the links of GPU i reach, `bus_ids[i]` is GPU i's own (all in
// sysfs_pci_bus_id form). Two GPUs are peers when a link of one reaches the other, or when links
// of both reach the same device that is no GPU of the machine: an NVSwitch, through which the GPUs
// of an HGX board reach each other.
std::vector<std::vector<int>> nvlink_peers(const std::vector<std::string>& bus_ids,
                                           const std::vector<std::vector<std::string>>& remotes);

}  // namespace tidepool
