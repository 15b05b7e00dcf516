#include "agent/nvml_backend.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <utility>

#include "core/mig.h"
#include "core/resources.h"

namespace tidepool {
namespace {

using nvml::NVML_ERROR_INVALID_ARGUMENT;
using nvml::NVML_ERROR_NOT_FOUND;
using nvml::NVML_ERROR_NOT_SUPPORTED;
using nvml::NVML_SUCCESS;
using nvml::nvmlReturn_t;

// A NUL-terminated string from an NVML buffer, which it may fill to the last byte.
template <std::size_t N>
std::string text(const char (&buffer)[N]) {
  return std::string(buffer, ::strnlen(buffer, N));
}

// The most MIG device indices asked about on one GPU, whatever nvmlDeviceGetMaxMigDeviceCount
// says: an A100 or H100 has at most 7 GPU instances of up to 7 compute instances each.
constexpr unsigned int kMaxMigDeviceIndices = 64;

}  // namespace

NvmlBackend::NvmlBackend(std::string library, std::string sysfs_pci_devices)
    : library_(std::move(library)), sysfs_pci_devices_(std::move(sysfs_pci_devices)) {}

NvmlBackend::~NvmlBackend() {
  if (initialized_) nvml_.shutdown();
  if (library_handle_ != nullptr) ::dlclose(library_handle_);
}

Result<void> NvmlBackend::load_functions() {
  std::string missing;
  auto resolve = [&]<class Fn>(Fn& slot, const char* symbol) {
    // POSIX guarantees that dlsym's object pointer converts to a function pointer.
    slot = reinterpret_cast<Fn>(::dlsym(library_handle_, symbol));
    if (slot == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  resolve(nvml_.init, "nvmlInit_v2");
  resolve(nvml_.shutdown, "nvmlShutdown");
  resolve(nvml_.error_string, "nvmlErrorString");
  resolve(nvml_.get_count, "nvmlDeviceGetCount_v2");
  resolve(nvml_.get_handle, "nvmlDeviceGetHandleByIndex_v2");
  resolve(nvml_.get_name, "nvmlDeviceGetName");
  resolve(nvml_.get_uuid, "nvmlDeviceGetUUID");
  resolve(nvml_.get_memory, "nvmlDeviceGetMemoryInfo");
  resolve(nvml_.get_pci, "nvmlDeviceGetPciInfo_v3");
  resolve(nvml_.get_utilization, "nvmlDeviceGetUtilizationRates");
  resolve(nvml_.get_power, "nvmlDeviceGetPowerUsage");
  resolve(nvml_.get_temperature, "nvmlDeviceGetTemperature");
  resolve(nvml_.get_throttle_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  resolve(nvml_.get_ecc_errors, "nvmlDeviceGetTotalEccErrors");
  resolve(nvml_.get_nvlink_state, "nvmlDeviceGetNvLinkState");
  resolve(nvml_.get_nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (!missing.empty()) {
    return fail("--gpus", fmt::format("the NVML library {} lacks {}; the NVIDIA driver is too old "
                                      "or this is not NVML",
                                      library_, missing));
  }
  // MIG: optional, and used only when all are there.
  bool mig = true;
  auto optional = [&]<class Fn>(Fn& slot, const char* symbol) {
    slot = reinterpret_cast<Fn>(::dlsym(library_handle_, symbol));
    mig = mig && slot != nullptr;
  };
  optional(nvml_.get_mig_mode, "nvmlDeviceGetMigMode");
  optional(nvml_.get_max_mig_devices, "nvmlDeviceGetMaxMigDeviceCount");
  optional(nvml_.get_mig_device, "nvmlDeviceGetMigDeviceHandleByIndex");
  optional(nvml_.get_gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
  optional(nvml_.get_gpu_instance, "nvmlDeviceGetGpuInstanceById");
  optional(nvml_.get_gpu_instance_info, "nvmlGpuInstanceGetInfo");
  if (!mig) {
    nvml_.get_mig_mode = nullptr;
    nvml_.get_max_mig_devices = nullptr;
    nvml_.get_mig_device = nullptr;
    nvml_.get_gpu_instance_id = nullptr;
    nvml_.get_gpu_instance = nullptr;
    nvml_.get_gpu_instance_info = nullptr;
  }
  return {};
}

Result<void> NvmlBackend::open() {
  if (initialized_) return {};
  if (library_handle_ == nullptr) {
    ::dlerror();  // forget any earlier error
    library_handle_ = ::dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library_handle_ == nullptr) {
      const char* reason = ::dlerror();
      return fail("--gpus",
                  fmt::format("NVML not found ({}): {}; is the NVIDIA driver installed? use --gpus "
                              "fake:8xH100 on a machine without GPUs",
                              library_, reason != nullptr ? reason : "dlopen failed"));
    }
    if (auto loaded = load_functions(); !loaded) {
      ::dlclose(library_handle_);
      library_handle_ = nullptr;
      return loaded;
    }
  }
  if (const nvmlReturn_t result = nvml_.init(); result != NVML_SUCCESS) {
    return std::unexpected(call_failed("nvmlInit_v2", result, -1));
  }
  // Handles stay valid until nvmlShutdown; the GPUs of a machine do not change while it runs.
  auto give_up = [&](Error error) -> Result<void> {
    nvml_.shutdown();
    return std::unexpected(std::move(error));
  };
  unsigned int count = 0;
  if (const nvmlReturn_t result = nvml_.get_count(&count); result != NVML_SUCCESS) {
    return give_up(call_failed("nvmlDeviceGetCount_v2", result, -1));
  }
  std::vector<nvml::nvmlDevice_t> devices(count, nullptr);
  for (unsigned int index = 0; index < count; ++index) {
    if (const nvmlReturn_t result = nvml_.get_handle(index, &devices[index]);
        result != NVML_SUCCESS) {
      return give_up(call_failed("nvmlDeviceGetHandleByIndex_v2", result, static_cast<int>(index)));
    }
  }
  devices_ = std::move(devices);
  initialized_ = true;
  return {};
}

Error NvmlBackend::call_failed(std::string_view function, nvmlReturn_t result, int index) const {
  const char* reason = nvml_.error_string != nullptr ? nvml_.error_string(result) : nullptr;
  return Error{"nvml", fmt::format("{} failed{}: {} (NVML error {})", function,
                                   index >= 0 ? fmt::format(" for GPU {}", index) : "",
                                   reason != nullptr ? reason : "unknown error", result)};
}

Result<NvmlBackend::DeviceIdentity> NvmlBackend::identity(nvml::nvmlDevice_t device, int index,
                                                          std::string_view suffix) const {
  DeviceIdentity identity;
  char name[nvml::NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (const auto result = nvml_.get_name(device, name, sizeof name); result != NVML_SUCCESS) {
    return std::unexpected(call_failed(fmt::format("nvmlDeviceGetName{}", suffix), result, index));
  }
  identity.name = text(name);
  char uuid[nvml::NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (const auto result = nvml_.get_uuid(device, uuid, sizeof uuid); result != NVML_SUCCESS) {
    return std::unexpected(call_failed(fmt::format("nvmlDeviceGetUUID{}", suffix), result, index));
  }
  identity.uuid = text(uuid);
  nvml::nvmlMemory_t memory{};
  if (const auto result = nvml_.get_memory(device, &memory); result != NVML_SUCCESS) {
    return std::unexpected(
        call_failed(fmt::format("nvmlDeviceGetMemoryInfo{}", suffix), result, index));
  }
  identity.memory_mib = static_cast<std::int64_t>(memory.total / kBytesPerMib);
  return identity;
}

int NvmlBackend::read_numa_node(const std::string& pci_bus_id) const {
  if (pci_bus_id.empty() || pci_bus_id.find('/') != std::string::npos) return -1;
  std::ifstream file(sysfs_pci_devices_ + "/" + pci_bus_id + "/numa_node");
  int node = -1;
  if (!(file >> node) || node < 0) return -1;
  return node;
}

Result<std::vector<std::string>> NvmlBackend::nvlink_remotes(int index) const {
  std::vector<std::string> remotes;
  const nvml::nvmlDevice_t device = devices_[index];
  for (unsigned int link = 0; link < nvml::NVML_NVLINK_MAX_LINKS; ++link) {
    int active = nvml::NVML_FEATURE_DISABLED;
    const nvmlReturn_t state = nvml_.get_nvlink_state(device, link, &active);
    if (state == NVML_ERROR_NOT_SUPPORTED) break;        // a GPU without NVLink
    if (state == NVML_ERROR_INVALID_ARGUMENT) continue;  // a link this GPU does not have
    if (state != NVML_SUCCESS) {
      return std::unexpected(call_failed("nvmlDeviceGetNvLinkState", state, index));
    }
    if (active != nvml::NVML_FEATURE_ENABLED) continue;
    nvml::nvmlPciInfo_t pci{};
    const nvmlReturn_t remote = nvml_.get_nvlink_remote_pci(device, link, &pci);
    if (remote == NVML_ERROR_NOT_SUPPORTED) continue;
    if (remote != NVML_SUCCESS) {
      return std::unexpected(call_failed("nvmlDeviceGetNvLinkRemotePciInfo_v2", remote, index));
    }
    std::string bus_id = sysfs_pci_bus_id(text(pci.busId));
    if (!bus_id.empty()) remotes.push_back(std::move(bus_id));
  }
  return remotes;
}

Result<void> NvmlBackend::read_mig(int index, GpuInfo& gpu) const {
  if (nvml_.get_mig_mode == nullptr) return {};  // a driver without MIG
  const nvml::nvmlDevice_t device = devices_[index];
  unsigned int current = nvml::NVML_DEVICE_MIG_DISABLE;
  unsigned int pending = nvml::NVML_DEVICE_MIG_DISABLE;
  const nvmlReturn_t mode = nvml_.get_mig_mode(device, &current, &pending);
  if (mode == NVML_ERROR_NOT_SUPPORTED) return {};
  if (mode != NVML_SUCCESS)
    return std::unexpected(call_failed("nvmlDeviceGetMigMode", mode, index));
  if (current != nvml::NVML_DEVICE_MIG_ENABLE) return {};
  gpu.mig_enabled = true;
  unsigned int count = 0;
  if (const auto result = nvml_.get_max_mig_devices(device, &count); result != NVML_SUCCESS) {
    return std::unexpected(call_failed("nvmlDeviceGetMaxMigDeviceCount", result, index));
  }
  count = std::min(count, kMaxMigDeviceIndices);
  auto refused = [&](unsigned int mig_index, const std::string& reason) -> Result<void> {
    return fail("nvml",
                fmt::format("GPU {} ({}): MIG device {}: {}", index, gpu.uuid, mig_index, reason));
  };
  std::vector<MigInstance> instances;
  for (unsigned int mig_index = 0; mig_index < count; ++mig_index) {
    nvml::nvmlDevice_t handle = nullptr;
    const nvmlReturn_t found = nvml_.get_mig_device(device, mig_index, &handle);
    if (found == NVML_ERROR_NOT_FOUND) continue;
    if (found != NVML_SUCCESS) {
      return std::unexpected(call_failed("nvmlDeviceGetMigDeviceHandleByIndex", found, index));
    }
    auto identified = identity(handle, index, " (MIG device)");
    if (!identified) return std::unexpected(identified.error());
    MigDevice mig;
    mig.uuid = identified->uuid;
    mig.memory_mib = identified->memory_mib;
    // "NVIDIA H100 80GB HBM3 MIG 1g.10gb": the profile is the last word.
    const std::string& device_name = identified->name;
    const std::string_view profile_name =
        std::string_view(device_name).substr(device_name.rfind(' ') + 1);
    auto profile = parse_mig_profile(profile_name);
    if (!profile) {
      return refused(mig_index, fmt::format("\"{}\" is no MIG profile Tidepool knows ({})",
                                            device_name, profile.error().reason));
    }
    mig.profile = *profile;
    unsigned int instance_id = 0;
    if (const auto result = nvml_.get_gpu_instance_id(handle, &instance_id);
        result != NVML_SUCCESS) {
      return std::unexpected(call_failed("nvmlDeviceGetGpuInstanceId", result, index));
    }
    nvml::nvmlGpuInstance_t instance = nullptr;
    if (const auto result = nvml_.get_gpu_instance(device, instance_id, &instance);
        result != NVML_SUCCESS) {
      return std::unexpected(call_failed("nvmlDeviceGetGpuInstanceById", result, index));
    }
    nvml::nvmlGpuInstanceInfo_t info{};
    if (const auto result = nvml_.get_gpu_instance_info(instance, &info); result != NVML_SUCCESS) {
      return std::unexpected(call_failed("nvmlGpuInstanceGetInfo", result, index));
    }
    if (info.placement.start >= static_cast<unsigned int>(kMigMemorySlices)) {
      return refused(mig_index, fmt::format("its GPU instance starts at memory slice {}, not 0..{}",
                                            info.placement.start, kMigMemorySlices - 1));
    }
    mig.start = static_cast<int>(info.placement.start);
    instances.push_back(mig.instance());
    gpu.mig.push_back(std::move(mig));
  }
  if (auto checked = check_mig_layout(instances); !checked) {
    return fail("nvml", fmt::format("GPU {} ({}): its MIG layout is not one Tidepool accepts: {}",
                                    index, gpu.uuid, checked.error().message()));
  }
  return {};
}

Result<std::vector<GpuInfo>> NvmlBackend::discover() {
  if (auto opened = open(); !opened) return std::unexpected(opened.error());
  std::vector<GpuInfo> gpus;
  std::vector<std::string> bus_ids;
  std::vector<std::vector<std::string>> remotes;
  for (int index = 0; index < static_cast<int>(devices_.size()); ++index) {
    const nvml::nvmlDevice_t device = devices_[index];
    GpuInfo gpu;
    gpu.index = index;
    auto identified = identity(device, index, "");
    if (!identified) return std::unexpected(identified.error());
    gpu.model = std::move(identified->name);
    gpu.uuid = std::move(identified->uuid);
    gpu.memory_mib = identified->memory_mib;
    nvml::nvmlPciInfo_t pci{};
    if (const auto result = nvml_.get_pci(device, &pci); result != NVML_SUCCESS) {
      return std::unexpected(call_failed("nvmlDeviceGetPciInfo_v3", result, index));
    }
    gpu.pci_bus_id = sysfs_pci_bus_id(text(pci.busId));
    gpu.numa_node = read_numa_node(gpu.pci_bus_id);
    if (auto mig = read_mig(index, gpu); !mig) return std::unexpected(mig.error());
    auto links = nvlink_remotes(index);
    if (!links) return std::unexpected(links.error());
    bus_ids.push_back(gpu.pci_bus_id);
    remotes.push_back(std::move(*links));
    gpus.push_back(std::move(gpu));
  }
  auto peers = nvlink_peers(bus_ids, remotes);
  for (std::size_t i = 0; i < gpus.size(); ++i) gpus[i].nvlink_peers = std::move(peers[i]);
  return gpus;
}

Result<std::vector<GpuSample>> NvmlBackend::sample() {
  if (auto opened = open(); !opened) return std::unexpected(opened.error());
  std::vector<GpuSample> samples;
  for (int index = 0; index < static_cast<int>(devices_.size()); ++index) {
    const nvml::nvmlDevice_t device = devices_[index];
    // Whether an optional figure was read: NOT_SUPPORTED leaves it 0, other failures are errors.
    Error error;
    auto optional = [&](std::string_view function, nvmlReturn_t result) {
      if (result != NVML_SUCCESS && result != NVML_ERROR_NOT_SUPPORTED) {
        error = call_failed(function, result, index);
      }
      return result == NVML_SUCCESS;
    };
    GpuSample sample;
    sample.index = index;
    nvml::nvmlMemory_t memory{};
    if (const auto result = nvml_.get_memory(device, &memory); result != NVML_SUCCESS) {
      return std::unexpected(call_failed("nvmlDeviceGetMemoryInfo", result, index));
    }
    sample.memory_used_mib = static_cast<std::int64_t>(memory.used / kBytesPerMib);
    nvml::nvmlUtilization_t utilization{};
    if (optional("nvmlDeviceGetUtilizationRates", nvml_.get_utilization(device, &utilization))) {
      sample.utilization_percent = static_cast<int>(std::min(utilization.gpu, 100U));
    }
    unsigned int power = 0;
    if (optional("nvmlDeviceGetPowerUsage", nvml_.get_power(device, &power))) {
      sample.power_milliwatts = static_cast<int>(std::min<unsigned int>(power, INT32_MAX));
    }
    unsigned int temperature = 0;
    if (optional("nvmlDeviceGetTemperature",
                 nvml_.get_temperature(device, nvml::NVML_TEMPERATURE_GPU, &temperature))) {
      sample.temperature_celsius = static_cast<int>(std::min<unsigned int>(temperature, 1000));
    }
    unsigned long long reasons = 0;
    if (optional("nvmlDeviceGetCurrentClocksThrottleReasons",
                 nvml_.get_throttle_reasons(device, &reasons))) {
      sample.throttle_reasons = reasons;
    }
    unsigned long long ecc = 0;
    if (optional("nvmlDeviceGetTotalEccErrors",
                 nvml_.get_ecc_errors(device, nvml::NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                      nvml::NVML_VOLATILE_ECC, &ecc))) {
      sample.ecc_errors_uncorrected = ecc;
    }
    if (!error.reason.empty()) return std::unexpected(std::move(error));
    samples.push_back(sample);
  }
  return samples;
}

std::string sysfs_pci_bus_id(std::string_view nvml_bus_id) {
  std::string id;
  for (const char c : nvml_bus_id) {
    id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  const auto colon = id.find(':');
  if (colon == std::string::npos) return id;
  std::size_t zeros = 0;
  while (zeros + 4 < colon && id[zeros] == '0') ++zeros;
  return id.substr(zeros);
}

std::vector<std::vector<int>> nvlink_peers(const std::vector<std::string>& bus_ids,
                                           const std::vector<std::vector<std::string>>& remotes) {
  const int count = static_cast<int>(std::min(bus_ids.size(), remotes.size()));
  std::vector<std::vector<int>> peers(bus_ids.size());
  auto gpu_at = [&](const std::string& bus_id) {
    const auto found = std::ranges::find(bus_ids, bus_id);
    return found == bus_ids.end() ? -1 : static_cast<int>(found - bus_ids.begin());
  };
  for (int i = 0; i < count; ++i) {
    for (const std::string& remote : remotes[i]) {
      if (const int gpu = gpu_at(remote); gpu >= 0) {
        if (gpu == i) continue;
        peers[i].push_back(gpu);
        peers[gpu].push_back(i);
        continue;
      }
      // An NVSwitch: every other GPU whose links reach it too.
      for (int other = 0; other < count; ++other) {
        if (other != i && std::ranges::find(remotes[other], remote) != remotes[other].end()) {
          peers[i].push_back(other);
        }
      }
    }
  }
  for (auto& list : peers) {
    std::ranges::sort(list);
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return peers;
}

}  // namespace tidepool
