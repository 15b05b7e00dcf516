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
#include <cstring>
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

namespace {

constexpr unsigned long long kMib = 1024 * 1024;

nvmlDevice_st devices[2] = {
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

// The device behind `handle`, or nullptr when NVML is not initialized or the handle is not ours.
nvmlDevice_st* device_of(nvmlDevice_t handle) {
  if (init_count == 0) return nullptr;
  for (nvmlDevice_st& device : devices) {
    if (handle == &device) return &device;
  }
  return nullptr;
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
  if (index >= 2) return NVML_ERROR_INVALID_ARGUMENT;
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
