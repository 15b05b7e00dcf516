// Our own declarations of the few parts of NVML (the NVIDIA Management Library, libnvidia-ml) that
// the NVML backend uses, so that Tidepool builds without any NVIDIA package: the backend loads the
// library at run time (nvml_backend.h) and looks these functions up by name.
//
// Types and layouts follow NVIDIA's public nvml.h; the names of types and constants are kept as
// NVML spells them so that they can be looked up in its documentation. Enumerations are passed as
// int, as C passes them. Only the versioned symbols are used ("nvmlInit_v2", not "nvmlInit"): the
// unversioned ones are older functions with other layouts, kept by the driver for old programs.
#pragma once

namespace tidepool::nvml {

// Result of every NVML call: NVML_SUCCESS or an error; nvmlErrorString names it.
using nvmlReturn_t = int;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

// A GPU, as NVML hands it out; opaque.
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
// A GPU instance of a GPU in MIG mode (the memory slices a MIG device lives on); opaque.
struct nvmlGpuInstance_st;
using nvmlGpuInstance_t = nvmlGpuInstance_st*;

// nvmlEnableState_t
inline constexpr int NVML_FEATURE_DISABLED = 0;
inline constexpr int NVML_FEATURE_ENABLED = 1;
// nvmlTemperatureSensors_t
inline constexpr int NVML_TEMPERATURE_GPU = 0;
// nvmlMemoryErrorType_t
inline constexpr int NVML_MEMORY_ERROR_TYPE_CORRECTED = 0;
inline constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
// nvmlEccCounterType_t: volatile counts restart when the driver loads, aggregate ones never.
inline constexpr int NVML_VOLATILE_ECC = 0;
inline constexpr int NVML_AGGREGATE_ECC = 1;

// MIG modes (nvmlDeviceGetMigMode)
inline constexpr unsigned int NVML_DEVICE_MIG_DISABLE = 0;
inline constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 1;

// Buffer sizes large enough for nvmlDeviceGetName and nvmlDeviceGetUUID (the _V2_ sizes of
// nvml.h), and the most NVLink links a GPU has.
inline constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_NVLINK_MAX_LINKS = 18;

// Busy percentage of the GPU's engines and of its memory interface over the last sample period.
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

// Device memory, in bytes.
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// Where a device sits on the PCI bus (the layout nvmlDeviceGetPciInfo_v3 fills). busId is
// "domain:bus:device.function" with an 8-hex-digit domain ("00000000:1B:00.0"), busIdLegacy the
// same with a 4-digit domain.
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;     // 16-bit device id << 16 | 16-bit vendor id
  unsigned int pciSubSystemId;  // 32-bit subsystem device id
  char busId[32];
};

// Where a GPU instance sits: its first memory slice and how many it takes.
struct nvmlGpuInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};

// A GPU instance (nvmlGpuInstanceGetInfo): the parent GPU, the instance's id on it, its profile id
// (NVML's numbering, not a name) and its placement.
struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};

// The functions, as pointer types named after their symbols.
using nvmlInit_v2_fn = nvmlReturn_t (*)();
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t result);
using nvmlDeviceGetCount_v2_fn = nvmlReturn_t (*)(unsigned int* device_count);
using nvmlDeviceGetHandleByIndex_v2_fn = nvmlReturn_t (*)(unsigned int index, nvmlDevice_t* device);
using nvmlDeviceGetName_fn = nvmlReturn_t (*)(nvmlDevice_t device, char* name, unsigned int length);
using nvmlDeviceGetUUID_fn = nvmlReturn_t (*)(nvmlDevice_t device, char* uuid, unsigned int length);
using nvmlDeviceGetMemoryInfo_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlMemory_t* memory);
using nvmlDeviceGetPciInfo_v3_fn = nvmlReturn_t (*)(nvmlDevice_t device, nvmlPciInfo_t* pci);
using nvmlDeviceGetUtilizationRates_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                          nvmlUtilization_t* utilization);
// Milliwatts drawn by the whole board.
using nvmlDeviceGetPowerUsage_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* power);
// Degrees Celsius of `sensor` (NVML_TEMPERATURE_GPU).
using nvmlDeviceGetTemperature_fn = nvmlReturn_t (*)(nvmlDevice_t device, int sensor,
                                                     unsigned int* temperature);
// A bit mask of why the clocks are held down (nvmlClocksThrottleReason* in nvml.h).
using nvmlDeviceGetCurrentClocksThrottleReasons_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                                      unsigned long long* reasons);
using nvmlDeviceGetTotalEccErrors_fn = nvmlReturn_t (*)(nvmlDevice_t device, int error_type,
                                                        int counter_type,
                                                        unsigned long long* count);
// Whether NVLink `link` (0 .. NVML_NVLINK_MAX_LINKS - 1) is up: NVML_FEATURE_ENABLED or _DISABLED.
using nvmlDeviceGetNvLinkState_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int link,
                                                     int* is_active);
// Where NVLink `link` leads: another GPU, or an NVSwitch on boards that have them.
using nvmlDeviceGetNvLinkRemotePciInfo_v2_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                                unsigned int link,
                                                                nvmlPciInfo_t* pci);

// MIG (drivers from R450 on; older ones lack the symbols). The mode in force and the one that
// applies after the next GPU reset: NVML_DEVICE_MIG_ENABLE or _DISABLE.
using nvmlDeviceGetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* current_mode,
                                                 unsigned int* pending_mode);
// How many MIG devices the GPU could have: the bound of nvmlDeviceGetMigDeviceHandleByIndex.
using nvmlDeviceGetMaxMigDeviceCount_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                           unsigned int* count);
// MIG device `index` of the GPU; NVML_ERROR_NOT_FOUND when that index holds none. A MIG device
// handle answers nvmlDeviceGetName, _GetUUID and _GetMemoryInfo like a GPU's.
using nvmlDeviceGetMigDeviceHandleByIndex_fn = nvmlReturn_t (*)(nvmlDevice_t device,
                                                                unsigned int index,
                                                                nvmlDevice_t* mig_device);
// The id of the GPU instance a MIG device belongs to.
using nvmlDeviceGetGpuInstanceId_fn = nvmlReturn_t (*)(nvmlDevice_t mig_device, unsigned int* id);
// The GPU instance `id` of a (parent) GPU.
using nvmlDeviceGetGpuInstanceById_fn = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int id,
                                                         nvmlGpuInstance_t* gpu_instance);
using nvmlGpuInstanceGetInfo_fn = nvmlReturn_t (*)(nvmlGpuInstance_t gpu_instance,
                                                   nvmlGpuInstanceInfo_t* info);

}  // namespace tidepool::nvml
