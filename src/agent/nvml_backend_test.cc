// NvmlBackend against the fake NVML of fake_nvml_test_library.cc, loaded through the same dlopen
// and dlsym as the real libnvidia-ml.so.1; TIDEPOOL_FAKE_NVML_PATH is its path, set by CMake.
#include "agent/nvml_backend.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#ifndef TIDEPOOL_FAKE_NVML_PATH
#error "TIDEPOOL_FAKE_NVML_PATH must name the fake NVML library (see src/agent/CMakeLists.txt)"
#endif
#ifndef TIDEPOOL_FAKE_NVML_WITHOUT_MIG_PATH
#error "TIDEPOOL_FAKE_NVML_WITHOUT_MIG_PATH must name the fake NVML without MIG functions"
#endif

namespace tidepool {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kFakeNvml = TIDEPOOL_FAKE_NVML_PATH;
constexpr const char* kFakeNvmlWithoutMig = TIDEPOOL_FAKE_NVML_WITHOUT_MIG_PATH;

// The test's own handle on the fake NVML: dlopen of the same path gives the library the backend
// loads, so the test can read its state and inject failures.
class FakeNvml {
 public:
  explicit FakeNvml(const char* path = kFakeNvml) : handle_(::dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_NE(handle_, nullptr) << ::dlerror();
    if (handle_ == nullptr) return;
    init_count_ = reinterpret_cast<int (*)()>(::dlsym(handle_, "tidepool_fake_nvml_init_count"));
    set_temperature_result_ = reinterpret_cast<void (*)(int)>(
        ::dlsym(handle_, "tidepool_fake_nvml_set_temperature_result"));
    set_mig_mode_ = reinterpret_cast<void (*)(unsigned int, int, unsigned int)>(
        ::dlsym(handle_, "tidepool_fake_nvml_set_mig_mode"));
    set_max_mig_devices_ = reinterpret_cast<void (*)(unsigned int, unsigned int)>(
        ::dlsym(handle_, "tidepool_fake_nvml_set_max_mig_devices"));
    add_mig_device_ =
        reinterpret_cast<AddMigDevice>(::dlsym(handle_, "tidepool_fake_nvml_add_mig_device"));
    reset_mig_ = reinterpret_cast<void (*)()>(::dlsym(handle_, "tidepool_fake_nvml_reset_mig"));
    EXPECT_NE(init_count_, nullptr);
    EXPECT_NE(set_temperature_result_, nullptr);
    EXPECT_NE(set_mig_mode_, nullptr);
    EXPECT_NE(set_max_mig_devices_, nullptr);
    EXPECT_NE(add_mig_device_, nullptr);
    EXPECT_NE(reset_mig_, nullptr);
  }
  ~FakeNvml() {
    if (set_temperature_result_ != nullptr) set_temperature_result_(nvml::NVML_SUCCESS);
    if (reset_mig_ != nullptr) reset_mig_();
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;

  // How many nvmlInit_v2 calls are not yet matched by nvmlShutdown.
  int init_count() const { return init_count_ != nullptr ? init_count_() : -1; }
  void set_temperature_result(int result) {
    if (set_temperature_result_ != nullptr) set_temperature_result_(result);
  }
  // What nvmlDeviceGetMigMode answers for `gpu`: `result`, and `mode` when that is success.
  void set_mig_mode(unsigned int gpu, int result, unsigned int mode) {
    if (set_mig_mode_ != nullptr) set_mig_mode_(gpu, result, mode);
  }
  void enable_mig(unsigned int gpu) {
    set_mig_mode(gpu, nvml::NVML_SUCCESS, nvml::NVML_DEVICE_MIG_ENABLE);
  }
  void set_max_mig_devices(unsigned int gpu, unsigned int count) {
    if (set_max_mig_devices_ != nullptr) set_max_mig_devices_(gpu, count);
  }
  // MIG device `index` of `gpu`, UUID "MIG-fake-<gpu>-<index>".
  void add_mig_device(unsigned int gpu, unsigned int index, const char* profile, unsigned int start,
                      unsigned long long memory_mib) {
    if (add_mig_device_ != nullptr) add_mig_device_(gpu, index, profile, start, memory_mib);
  }

 private:
  using AddMigDevice = void (*)(unsigned int, unsigned int, const char*, unsigned int,
                                unsigned long long);
  void* handle_ = nullptr;
  int (*init_count_)() = nullptr;
  void (*set_temperature_result_)(int) = nullptr;
  void (*set_mig_mode_)(unsigned int, int, unsigned int) = nullptr;
  void (*set_max_mig_devices_)(unsigned int, unsigned int) = nullptr;
  AddMigDevice add_mig_device_ = nullptr;
  void (*reset_mig_)() = nullptr;
};

// A stand-in for /sys/bus/pci/devices in a fresh temporary folder, removed at the end.
class FakeSysfs {
 public:
  FakeSysfs() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tidepool_sysfs_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
    EXPECT_FALSE(path_.empty());
  }
  ~FakeSysfs() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  void set_numa_node(const std::string& bus_id, const std::string& content) {
    const auto folder = std::filesystem::path(path_) / bus_id;
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "numa_node") << content;
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(NvmlBackend, DiscoversTheGpusThroughDlopen) {
  FakeNvml fake_nvml;
  FakeSysfs sysfs;
  sysfs.set_numa_node("0000:1b:00.0", "1\n");
  NvmlBackend backend(kFakeNvml, sysfs.path());
  EXPECT_EQ(backend.name(), "nvml");

  auto gpus = backend.discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message();
  ASSERT_EQ(gpus->size(), 2U);
  const GpuInfo& first = (*gpus)[0];
  EXPECT_EQ(first.index, 0);
  EXPECT_EQ(first.uuid, "GPU-0b8d0c3e-1f2a-4d5e-9a7b-000000000001");
  EXPECT_EQ(first.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(first.memory_mib, 81559);
  EXPECT_EQ(first.pci_bus_id, "0000:1b:00.0");
  EXPECT_EQ(first.numa_node, 1);
  EXPECT_THAT(first.nvlink_peers, ElementsAre(1));
  const GpuInfo& second = (*gpus)[1];
  EXPECT_EQ(second.index, 1);
  EXPECT_EQ(second.uuid, "GPU-0b8d0c3e-1f2a-4d5e-9a7b-000000000002");
  EXPECT_EQ(second.pci_bus_id, "0000:9a:00.0");
  EXPECT_EQ(second.numa_node, -1);  // no numa_node file
  EXPECT_THAT(second.nvlink_peers, ElementsAre(0));
}

TEST(NvmlBackend, ReadsNoNumaNodeFromMinusOneOrGarbage) {
  FakeNvml fake_nvml;
  FakeSysfs sysfs;
  sysfs.set_numa_node("0000:1b:00.0", "-1\n");
  sysfs.set_numa_node("0000:9a:00.0", "none\n");
  NvmlBackend backend(kFakeNvml, sysfs.path());
  auto gpus = backend.discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message();
  EXPECT_EQ(gpus->at(0).numa_node, -1);
  EXPECT_EQ(gpus->at(1).numa_node, -1);
}

TEST(NvmlBackend, SamplesEveryGpuAndReadsNotSupportedAsZero) {
  FakeNvml fake_nvml;
  NvmlBackend backend(kFakeNvml);
  auto samples = backend.sample();  // without discover() first
  ASSERT_TRUE(samples.has_value()) << samples.error().message();
  ASSERT_EQ(samples->size(), 2U);
  const GpuSample& first = (*samples)[0];
  EXPECT_EQ(first.index, 0);
  EXPECT_EQ(first.utilization_percent, 37);
  EXPECT_EQ(first.memory_used_mib, 1024);  // 1024.5 MiB, rounded down
  EXPECT_EQ(first.power_milliwatts, 215000);
  EXPECT_EQ(first.temperature_celsius, 41);
  EXPECT_EQ(first.throttle_reasons, 0x1U);
  EXPECT_EQ(first.ecc_errors_uncorrected, 2U);  // uncorrected and volatile, not 7, 11 or 13
  const GpuSample& second = (*samples)[1];
  EXPECT_EQ(second.index, 1);
  EXPECT_EQ(second.utilization_percent, 88);
  EXPECT_EQ(second.memory_used_mib, 40960);
  EXPECT_EQ(second.power_milliwatts, 612000);
  EXPECT_EQ(second.temperature_celsius, 67);
  EXPECT_EQ(second.throttle_reasons, 0x4U);
  EXPECT_EQ(second.ecc_errors_uncorrected, 0U);  // NOT_SUPPORTED
}

TEST(NvmlBackend, InitializesOnceAndShutsDownWhenDestroyed) {
  FakeNvml fake_nvml;
  ASSERT_EQ(fake_nvml.init_count(), 0);
  {
    NvmlBackend backend(kFakeNvml);
    EXPECT_EQ(fake_nvml.init_count(), 0);  // nothing loaded before the first use
    ASSERT_TRUE(backend.open().has_value());
    EXPECT_EQ(fake_nvml.init_count(), 1);
    ASSERT_TRUE(backend.discover().has_value());
    ASSERT_TRUE(backend.sample().has_value());
    ASSERT_TRUE(backend.open().has_value());
    EXPECT_EQ(fake_nvml.init_count(), 1);
  }
  EXPECT_EQ(fake_nvml.init_count(), 0);
}

TEST(NvmlBackend, AFailedCallNamesTheFunctionTheGpuAndNvmlsReason) {
  FakeNvml fake_nvml;
  NvmlBackend backend(kFakeNvml);
  fake_nvml.set_temperature_result(nvml::NVML_ERROR_UNKNOWN);
  auto failed = backend.sample();
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().field, "nvml");
  EXPECT_EQ(failed.error().reason,
            "nvmlDeviceGetTemperature failed for GPU 0: Unknown Error (NVML error 999)");

  // NOT_SUPPORTED is no failure; and the backend keeps working once the GPU answers again.
  fake_nvml.set_temperature_result(nvml::NVML_ERROR_NOT_SUPPORTED);
  auto unsupported = backend.sample();
  ASSERT_TRUE(unsupported.has_value()) << unsupported.error().message();
  EXPECT_EQ(unsupported->at(1).temperature_celsius, 0);
  EXPECT_EQ(unsupported->at(1).power_milliwatts, 612000);
  fake_nvml.set_temperature_result(nvml::NVML_SUCCESS);
  auto again = backend.sample();
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(again->at(1).temperature_celsius, 67);
}

TEST(NvmlBackend, SaysHowToGoOnWhenTheLibraryIsMissing) {
  NvmlBackend backend("libtidepool-no-such-nvml.so.1");
  auto gpus = backend.discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_EQ(gpus.error().field, "--gpus");
  EXPECT_THAT(gpus.error().reason,
              AllOf(HasSubstr("NVML not found (libtidepool-no-such-nvml.so.1): "),
                    HasSubstr("cannot open shared object file"),
                    HasSubstr("; is the NVIDIA driver installed? use --gpus fake:8xH100 on a "
                              "machine without GPUs")));
  // Still missing on the next try.
  auto samples = backend.sample();
  ASSERT_FALSE(samples.has_value());
  EXPECT_THAT(samples.error().reason, HasSubstr("NVML not found"));
}

TEST(NvmlBackend, NamesTheFunctionsALibraryLacks) {
  NvmlBackend backend("libm.so.6");  // a library that is there, but is not NVML
  auto opened = backend.open();
  ASSERT_FALSE(opened.has_value());
  EXPECT_EQ(opened.error().field, "--gpus");
  EXPECT_THAT(opened.error().reason,
              AllOf(HasSubstr("the NVML library libm.so.6 lacks nvmlInit_v2, nvmlShutdown, "),
                    HasSubstr("nvmlDeviceGetNvLinkRemotePciInfo_v2"),
                    HasSubstr("the NVIDIA driver is too old")));
}

TEST(NvmlMig, GpusWithoutMigModeHaveNoInstances) {
  FakeNvml fake_nvml;
  fake_nvml.set_mig_mode(1, nvml::NVML_ERROR_NOT_SUPPORTED, 0);  // a GPU without MIG
  NvmlBackend backend(kFakeNvml);
  auto gpus = backend.discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message();
  ASSERT_EQ(gpus->size(), 2U);
  for (const GpuInfo& gpu : *gpus) {
    EXPECT_FALSE(gpu.mig_enabled) << gpu.index;
    EXPECT_THAT(gpu.mig, IsEmpty()) << gpu.index;
  }
}

TEST(NvmlMig, ListsTheInstancesOfAGpuInMigMode) {
  FakeNvml fake_nvml;
  fake_nvml.enable_mig(0);
  // Index 1 holds no MIG device (NOT_FOUND, skipped); the order is NVML's, not the starts'.
  fake_nvml.add_mig_device(0, 0, "3g.40gb", 4, 40192);
  fake_nvml.add_mig_device(0, 2, "2g.20gb", 0, 19968);
  fake_nvml.add_mig_device(0, 3, "1g.10gb", 2, 9856);
  fake_nvml.enable_mig(1);  // MIG on, nothing created yet
  NvmlBackend backend(kFakeNvml);
  auto gpus = backend.discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message();
  const GpuInfo& first = gpus->at(0);
  EXPECT_TRUE(first.mig_enabled);
  EXPECT_EQ(first.uuid, "GPU-0b8d0c3e-1f2a-4d5e-9a7b-000000000001");
  EXPECT_EQ(first.memory_mib, 81559);
  EXPECT_THAT(first.mig, ElementsAre(MigDevice{"MIG-fake-0-0", MigProfile::k3g40gb, 4, 40192},
                                     MigDevice{"MIG-fake-0-2", MigProfile::k2g20gb, 0, 19968},
                                     MigDevice{"MIG-fake-0-3", MigProfile::k1g10gb, 2, 9856}));
  const GpuInfo& second = gpus->at(1);
  EXPECT_TRUE(second.mig_enabled);
  EXPECT_THAT(second.mig, IsEmpty());
}

TEST(NvmlMig, BoundsTheMigDeviceIndicesItAsksAbout) {
  FakeNvml fake_nvml;
  fake_nvml.enable_mig(0);
  fake_nvml.set_max_mig_devices(0, 0xffffffffU);  // an odd count: asked about, not believed
  fake_nvml.add_mig_device(0, 5, "7g.80gb", 0, 80384);
  NvmlBackend backend(kFakeNvml);
  auto gpus = backend.discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message();
  EXPECT_THAT(gpus->at(0).mig,
              ElementsAre(MigDevice{"MIG-fake-0-5", MigProfile::k7g80gb, 0, 80384}));
}

TEST(NvmlMig, ADriverWithoutMigFunctionsReportsGpusWithoutMig) {
  FakeNvml fake_nvml(kFakeNvmlWithoutMig);
  fake_nvml.enable_mig(0);
  fake_nvml.add_mig_device(0, 0, "7g.80gb", 0, 80384);
  NvmlBackend backend(kFakeNvmlWithoutMig);
  auto gpus = backend.discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message();
  ASSERT_EQ(gpus->size(), 2U);
  EXPECT_FALSE(gpus->at(0).mig_enabled);
  EXPECT_THAT(gpus->at(0).mig, IsEmpty());
  EXPECT_EQ(gpus->at(0).uuid, "GPU-0b8d0c3e-1f2a-4d5e-9a7b-000000000001");
}

TEST(NvmlMig, ALayoutTheCoreRefusesIsAnErrorNamingTheGpu) {
  FakeNvml fake_nvml;
  fake_nvml.enable_mig(1);
  fake_nvml.add_mig_device(1, 0, "3g.40gb", 0, 40192);
  fake_nvml.add_mig_device(1, 1, "2g.20gb", 2, 19968);  // inside the 3g.40gb's slices 0-3
  NvmlBackend backend(kFakeNvml);
  auto gpus = backend.discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_EQ(gpus.error().field, "nvml");
  EXPECT_THAT(gpus.error().reason,
              AllOf(HasSubstr("GPU 1 (GPU-0b8d0c3e-1f2a-4d5e-9a7b-000000000002)"),
                    HasSubstr("MIG layout is not one Tidepool accepts"),
                    HasSubstr("a 2g.20gb instance at memory slice 2 overlaps another instance")));
}

TEST(NvmlMig, AProfileTheCoreDoesNotKnowIsAnError) {
  FakeNvml fake_nvml;
  fake_nvml.enable_mig(0);
  fake_nvml.add_mig_device(0, 0, "1g.5gb", 0, 4864);  // a 40 GB A100's profile
  NvmlBackend backend(kFakeNvml);
  auto gpus = backend.discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_THAT(gpus.error().reason,
              AllOf(HasSubstr("GPU 0 (GPU-0b8d0c3e-1f2a-4d5e-9a7b-000000000001): MIG device 0"),
                    HasSubstr("\"NVIDIA H100 80GB HBM3 MIG 1g.5gb\" is no MIG profile")));
}

TEST(NvmlMig, AStartOutsideTheMemorySlicesIsAnError) {
  FakeNvml fake_nvml;
  fake_nvml.enable_mig(0);
  fake_nvml.add_mig_device(0, 0, "1g.10gb", 0xfffffff0U, 9856);
  NvmlBackend backend(kFakeNvml);
  auto gpus = backend.discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_THAT(gpus.error().reason,
              HasSubstr("MIG device 0: its GPU instance starts at memory slice 4294967280, not "
                        "0..7"));
}

TEST(NvmlMig, AFailedMigModeCallIsAnError) {
  FakeNvml fake_nvml;
  fake_nvml.set_mig_mode(0, nvml::NVML_ERROR_UNKNOWN, 0);
  NvmlBackend backend(kFakeNvml);
  auto gpus = backend.discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_EQ(gpus.error().reason,
            "nvmlDeviceGetMigMode failed for GPU 0: Unknown Error (NVML error 999)");
}

TEST(NvmlPciBusIds, AreWrittenAsSysfsNamesDevices) {
  EXPECT_EQ(sysfs_pci_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(sysfs_pci_bus_id("0000000A:9A:00.0"), "000a:9a:00.0");
  EXPECT_EQ(sysfs_pci_bus_id("00010000:01:00.0"), "10000:01:00.0");
  EXPECT_EQ(sysfs_pci_bus_id("0000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(sysfs_pci_bus_id(""), "");
}

TEST(NvmlNvlinkPeers, DirectLinksPairGpus) {
  const std::vector<std::string> buses = {"0000:1b:00.0", "0000:9a:00.0", "0000:c0:00.0"};
  // GPU 0 reaches GPU 1 twice; GPU 2 has no NVLink; only GPU 0 reports the link.
  const auto peers = nvlink_peers(buses, {{"0000:9a:00.0", "0000:9a:00.0"}, {}, {}});
  ASSERT_EQ(peers.size(), 3U);
  EXPECT_THAT(peers[0], ElementsAre(1));
  EXPECT_THAT(peers[1], ElementsAre(0));
  EXPECT_THAT(peers[2], IsEmpty());
}

TEST(NvmlNvlinkPeers, GpusOnTheSameNvswitchArePeers) {
  const std::vector<std::string> buses = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                          "0000:5d:00.0"};
  // GPUs 0-2 reach switches 0000:05:00.0 and 0000:06:00.0 (GPU 2 only the second); GPU 3 reaches
  // another switch alone.
  const auto peers = nvlink_peers(buses, {{"0000:05:00.0", "0000:06:00.0"},
                                          {"0000:05:00.0", "0000:06:00.0"},
                                          {"0000:06:00.0"},
                                          {"0000:07:00.0"}});
  EXPECT_THAT(peers[0], ElementsAre(1, 2));
  EXPECT_THAT(peers[1], ElementsAre(0, 2));
  EXPECT_THAT(peers[2], ElementsAre(0, 1));
  EXPECT_THAT(peers[3], IsEmpty());
}

}  // namespace
}  // namespace tidepool
