// A stand-in for libnvidia-ml.so.1, built as the shared library fake_nvml, so that
// nvml_backend_test.cc runs NvmlBackend through the real dlopen and dlsym on a machine without
// NVIDIA packages. It implements the functions of nvml_api.h for two fixed GPUs:
//   GPU 0  "NVIDIA H100 80GB HBM3", bus 00000000:1B:00.0, 81559 MiB, 1024.5 MiB used, 37 %,
//          215 W, 41 C, throttled as idle (0x1), 2 uncorrected volatile ECC errors
//   GPU 1  the same model, bus 00000000:9A:00.0, 40960 MiB used, 88 %, 612 W, 67 C, throttled by
//          the power cap (0x4), ECC NOT_SUPPORTED
// Each has four NVLinks: links 0 and 2 are active and lead to the other GPU, 1 and 3 are down;
// links 4 and up do not exist (INVALID_ARGUMENT). Calls fail with UNINITIALIZED outside
// nvmlInit_v2 .. nvmlShutdown, as NVML's do.
//
// Two extra functions let a test that opens the same library look inside and inject a failure:
// tidepool_fake_nvml_init_count() and tidepool_fake_nvml_set_temperature_result(result).
//
// MIG: both GPUs start with MIG disabled and no MIG devices. A test configures them through
//   tidepool_fake_nvml_set_mig_mode(gpu, result, mode)  what nvmlDeviceGetMigMode answers
//   tidepool_fake_nvml_set_max_mig_devices(gpu, count)  nvmlDeviceGetMaxMigDeviceCount (default 7)
//   tidepool_fake_nvml_add_mig_device(gpu, index, profile, start, memory_mib)
//       MIG device `index` (0..7) named "<GPU name> MIG <profile>", UUID
//       "MIG-fake-<gpu>-<index>", on GPU instance id 10 + index placed at memory slice `start`
//   tidepool_fake_nvml_reset_mig()  back to the start
// MIG device handles answer nvmlDeviceGetName, _GetUUID and _GetMemoryInfo. Built with
// TIDEPOOL_FAKE_NVML_WITHOUT_MIG (the fake_nvml_without_mig library), it lacks the MIG functions
// of NVML, as drivers before R450 do; the configuration functions are still there.
#include <array>
#include <cstring>
#include <string>
#include <type_traits>

#include "agent/nvml_api.h"

namespace tidepool::nvml {

constexpr unsigned int kLinks = 4;

struct nvmlDevice_st {
  const char* name;
  const char* uuid;
  const char* bus_id;
  const char* bus_id_legacy;
  unsigned int bus;
  unsigned long long memory_total;
  unsigned long long memory_used;
  unsigned int utilization;
  unsigned int power_milliwatts;
  unsigned int temperature;
  unsigned long long throttle_reasons;
  bool ecc_supported;
  bool link_active[kLinks];
  int link_peer;  // index of the GPU the active links lead to
};

constexpr unsigned int kGpus = 2;
constexpr unsigned int kMigSlots = 8;

struct nvmlGpuInstance_st {
  unsigned int gpu;
  unsigned int id;
  unsigned int start;
};

namespace {

constexpr unsigned long long kMib = 1024 * 1024;

nvmlDevice_st devices[kGpus] = {
    {"NVIDIA H100 80GB HBM3",
     "GPU-0b8d0c3e-1f2a-4d5e-9a7b-000000000001",
     "00000000:1B:00.0",
     "0000:1B:00.0",
     0x1b,
     81559 * kMib,
     1024 * kMib + 512 * 1024,
     37,
     215000,
     41,
     0x1,
     true,
     {true, false, true, false},
     1},
    {"NVIDIA H100 80GB HBM3",
     "GPU-0b8d0c3e-1f2a-4d5e-9a7b-000000000002",
     "00000000:9A:00.0",
     "0000:9A:00.0",
     0x9a,
     81559 * kMib,
     40960 * kMib,
     88,
     612000,
     67,
     0x4,
     false,
     {true, false, true, false},
     0},
};
int init_count = 0;
nvmlReturn_t temperature_result = NVML_SUCCESS;

struct MigState {
  nvmlReturn_t mode_result = NVML_SUCCESS;
  unsigned int mode = NVML_DEVICE_MIG_DISABLE;
  unsigned int max_devices = 7;
  std::array<bool, kMigSlots> present{};
  std::array<std::string, kMigSlots> names;
  std::array<std::string, kMigSlots> uuids;
  std::array<nvmlDevice_st, kMigSlots> devices{};
  std::array<nvmlGpuInstance_st, kMigSlots> instances{};
};
MigState mig[kGpus];

// The device behind `handle` (a GPU or a MIG device), or nullptr when NVML is not initialized or
// the handle is not ours.
nvmlDevice_st* device_of(nvmlDevice_t handle) {
  if (init_count == 0) return nullptr;
  for (nvmlDevice_st& device : devices) {
    if (handle == &device) return &device;
  }
  for (MigState& state : mig) {
    for (unsigned int i = 0; i < kMigSlots; ++i) {
      if (state.present[i] && handle == &state.devices[i]) return &state.devices[i];
    }
  }
  return nullptr;
}

// The index of GPU `handle` (not a MIG device), or -1.
[[maybe_unused]] int gpu_of(nvmlDevice_t handle) {
  if (init_count == 0) return -1;
  for (unsigned int g = 0; g < kGpus; ++g) {
    if (handle == &devices[g]) return static_cast<int>(g);
  }
  return -1;
}

nvmlReturn_t bad_handle() {
  return init_count == 0 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t copy_text(const char* text, char* buffer, unsigned int length) {
  if (buffer == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (std::strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::strcpy(buffer, text);
  return NVML_SUCCESS;
}

void fill_pci(const nvmlDevice_st& device, nvmlPciInfo_t* pci) {
  *pci = nvmlPciInfo_t{};
  std::strcpy(pci->busIdLegacy, device.bus_id_legacy);
  std::strcpy(pci->busId, device.bus_id);
  pci->bus = device.bus;
  pci->pciDeviceId = 0x233010de;  // H100 SXM5, NVIDIA's vendor id
}

}  // namespace
}  // namespace tidepool::nvml

using namespace tidepool::nvml;

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  ++init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown() {
  if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --init_count;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
  *count = 2;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (index >= kGpus) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t handle, char* name, unsigned int length) {
  const nvmlDevice_st* device = device_of(handle);
  return device == nullptr ? bad_handle() : copy_text(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t handle, char* uuid, unsigned int length) {
  const nvmlDevice_st* device = device_of(handle);
  return device == nullptr ? bad_handle() : copy_text(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t handle, nvmlMemory_t* memory) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  memory->total = device->memory_total;
  memory->used = device->memory_used;
  memory->free = device->memory_total - device->memory_used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t handle, nvmlPciInfo_t* pci) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  fill_pci(*device, pci);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t handle, nvmlUtilization_t* utilization) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  utilization->gpu = device->utilization;
  utilization->memory = device->utilization / 2;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t handle, unsigned int* power) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  *power = device->power_milliwatts;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t handle, int sensor, unsigned int* temperature) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  if (temperature_result != NVML_SUCCESS) return temperature_result;
  *temperature = device->temperature;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t handle,
                                                       unsigned long long* reasons) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  *reasons = device->throttle_reasons;
  return NVML_SUCCESS;
}

// Distinct counts per kind, so that a test sees which one was asked for.
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t handle, int error_type, int counter_type,
                                         unsigned long long* count) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  if (!device->ecc_supported) return NVML_ERROR_NOT_SUPPORTED;
  const bool uncorrected = error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED;
  const bool volatile_count = counter_type == NVML_VOLATILE_ECC;
  *count = uncorrected ? (volatile_count ? 2 : 7) : (volatile_count ? 11 : 13);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t handle, unsigned int link, int* is_active) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  if (link >= kLinks) return NVML_ERROR_INVALID_ARGUMENT;
  *is_active = device->link_active[link] ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t handle, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  const nvmlDevice_st* device = device_of(handle);
  if (device == nullptr) return bad_handle();
  if (link >= kLinks || !device->link_active[link]) return NVML_ERROR_INVALID_ARGUMENT;
  fill_pci(devices[device->link_peer], pci);
  return NVML_SUCCESS;
}

int tidepool_fake_nvml_init_count() { return init_count; }

void tidepool_fake_nvml_set_temperature_result(nvmlReturn_t result) { temperature_result = result; }

void tidepool_fake_nvml_set_mig_mode(unsigned int gpu, nvmlReturn_t result, unsigned int mode) {
  if (gpu >= kGpus) return;
  mig[gpu].mode_result = result;
  mig[gpu].mode = mode;
}

void tidepool_fake_nvml_set_max_mig_devices(unsigned int gpu, unsigned int count) {
  if (gpu < kGpus) mig[gpu].max_devices = count;
}

void tidepool_fake_nvml_add_mig_device(unsigned int gpu, unsigned int index, const char* profile,
                                       unsigned int start, unsigned long long memory_mib) {
  if (gpu >= kGpus || index >= kMigSlots) return;
  MigState& state = mig[gpu];
  state.present[index] = true;
  state.names[index] = std::string(devices[gpu].name) + " MIG " + profile;
  state.uuids[index] = "MIG-fake-" + std::to_string(gpu) + "-" + std::to_string(index);
  nvmlDevice_st& device = state.devices[index];
  device = devices[gpu];
  device.name = state.names[index].c_str();
  device.uuid = state.uuids[index].c_str();
  device.memory_total = memory_mib * kMib;
  device.memory_used = 0;
  state.instances[index] = nvmlGpuInstance_st{gpu, 10 + index, start};
}

void tidepool_fake_nvml_reset_mig() {
  for (MigState& state : mig) state = MigState{};
}

#ifndef TIDEPOOL_FAKE_NVML_WITHOUT_MIG

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t handle, unsigned int* current_mode,
                                  unsigned int* pending_mode) {
  const int gpu = gpu_of(handle);
  if (gpu < 0) return bad_handle();
  if (mig[gpu].mode_result != NVML_SUCCESS) return mig[gpu].mode_result;
  *current_mode = mig[gpu].mode;
  *pending_mode = mig[gpu].mode;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t handle, unsigned int* count) {
  const int gpu = gpu_of(handle);
  if (gpu < 0) return bad_handle();
  *count = mig[gpu].mode == NVML_DEVICE_MIG_ENABLE ? mig[gpu].max_devices : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t handle, unsigned int index,
                                                 nvmlDevice_t* mig_device) {
  const int gpu = gpu_of(handle);
  if (gpu < 0) return bad_handle();
  if (index >= mig[gpu].max_devices) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= kMigSlots || !mig[gpu].present[index]) return NVML_ERROR_NOT_FOUND;
  *mig_device = &mig[gpu].devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t handle, unsigned int* id) {
  if (device_of(handle) == nullptr) return bad_handle();
  for (MigState& state : mig) {
    for (unsigned int i = 0; i < kMigSlots; ++i) {
      if (state.present[i] && handle == &state.devices[i]) {
        *id = state.instances[i].id;
        return NVML_SUCCESS;
      }
    }
  }
  return NVML_ERROR_INVALID_ARGUMENT;  // a GPU, not a MIG device
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t handle, unsigned int id,
                                          nvmlGpuInstance_t* gpu_instance) {
  const int gpu = gpu_of(handle);
  if (gpu < 0) return bad_handle();
  for (unsigned int i = 0; i < kMigSlots; ++i) {
    if (mig[gpu].present[i] && mig[gpu].instances[i].id == id) {
      *gpu_instance = &mig[gpu].instances[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpu_instance, nvmlGpuInstanceInfo_t* info) {
  if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (gpu_instance == nullptr || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *info = nvmlGpuInstanceInfo_t{};
  info->device = &devices[gpu_instance->gpu];
  info->id = gpu_instance->id;
  info->placement.start = gpu_instance->start;
  info->placement.size = 1;
  return NVML_SUCCESS;
}

#endif  // TIDEPOOL_FAKE_NVML_WITHOUT_MIG

}  // extern "C"

// The functions above have the types that NvmlBackend casts their symbols to.
static_assert(std::is_same_v<decltype(&nvmlInit_v2), nvmlInit_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlShutdown), nvmlShutdown_fn>);
static_assert(std::is_same_v<decltype(&nvmlErrorString), nvmlErrorString_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount_v2), nvmlDeviceGetCount_v2_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex_v2), nvmlDeviceGetHandleByIndex_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetName), nvmlDeviceGetName_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUUID), nvmlDeviceGetUUID_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo), nvmlDeviceGetMemoryInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPciInfo_v3), nvmlDeviceGetPciInfo_v3_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetUtilizationRates), nvmlDeviceGetUtilizationRates_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPowerUsage), nvmlDeviceGetPowerUsage_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTemperature), nvmlDeviceGetTemperature_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCurrentClocksThrottleReasons),
                             nvmlDeviceGetCurrentClocksThrottleReasons_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetTotalEccErrors), nvmlDeviceGetTotalEccErrors_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetNvLinkState), nvmlDeviceGetNvLinkState_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetNvLinkRemotePciInfo_v2),
                             nvmlDeviceGetNvLinkRemotePciInfo_v2_fn>);
#ifndef TIDEPOOL_FAKE_NVML_WITHOUT_MIG
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigMode), nvmlDeviceGetMigMode_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetMaxMigDeviceCount), nvmlDeviceGetMaxMigDeviceCount_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigDeviceHandleByIndex),
                             nvmlDeviceGetMigDeviceHandleByIndex_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceId), nvmlDeviceGetGpuInstanceId_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceById), nvmlDeviceGetGpuInstanceById_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetInfo), nvmlGpuInstanceGetInfo_fn>);
#endif
