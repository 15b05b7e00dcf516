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

namespace tidepool {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kFakeNvml = TIDEPOOL_FAKE_NVML_PATH;

// The test's own handle on the fake NVML: dlopen of the same path gives the library the backend
// loads, so the test can read its state and inject failures.
class FakeNvml {
 public:
  FakeNvml() : handle_(::dlopen(kFakeNvml, RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_NE(handle_, nullptr) << ::dlerror();
    if (handle_ == nullptr) return;
    init_count_ = reinterpret_cast<int (*)()>(::dlsym(handle_, "tidepool_fake_nvml_init_count"));
    set_temperature_result_ = reinterpret_cast<void (*)(int)>(
        ::dlsym(handle_, "tidepool_fake_nvml_set_temperature_result"));
    EXPECT_NE(init_count_, nullptr);
    EXPECT_NE(set_temperature_result_, nullptr);
  }
  ~FakeNvml() {
    if (set_temperature_result_ != nullptr) set_temperature_result_(nvml::NVML_SUCCESS);
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;

  // How many nvmlInit_v2 calls are not yet matched by nvmlShutdown.
  int init_count() const { return init_count_ != nullptr ? init_count_() : -1; }
  void set_temperature_result(int result) {
    if (set_temperature_result_ != nullptr) set_temperature_result_(result);
  }

 private:
  void* handle_ = nullptr;
  int (*init_count_)() = nullptr;
  void (*set_temperature_result_)(int) = nullptr;
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
