#include "agent/gpu_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "agent/fake_gpu_backend.h"

namespace tidepool {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The fake backend of `list` (the part of --gpus after "fake:"), which must parse.
FakeGpuBackend fake(std::string_view list, std::string seed = "node-a") {
  auto gpus = parse_fake_gpus(list);
  EXPECT_TRUE(gpus.has_value()) << list << ": " << (gpus ? "" : gpus.error().message());
  return FakeGpuBackend(gpus ? *gpus : std::vector<FakeGpu>{}, std::move(seed));
}

std::vector<GpuInfo> discover(GpuBackend& backend) {
  auto gpus = backend.discover();
  EXPECT_TRUE(gpus.has_value());
  return gpus ? *gpus : std::vector<GpuInfo>{};
}

std::vector<GpuSample> sample(GpuBackend& backend) {
  auto samples = backend.sample();
  EXPECT_TRUE(samples.has_value());
  return samples ? *samples : std::vector<GpuSample>{};
}

std::vector<std::string> models(const std::vector<GpuInfo>& gpus) {
  std::vector<std::string> names;
  for (const GpuInfo& gpu : gpus) names.push_back(gpu.model);
  return names;
}

TEST(GpuBackendSpec, MakesFakeBackendsOfOneModelOrSeveral) {
  auto eight = make_gpu_backend("fake:8xH100", "host-1");
  ASSERT_TRUE(eight.has_value()) << eight.error().message();
  EXPECT_EQ((*eight)->name(), "fake:8xH100");
  const auto gpus = discover(**eight);
  ASSERT_EQ(gpus.size(), 8U);
  EXPECT_EQ(gpus[5].model, "H100");
  EXPECT_EQ(gpus[5].uuid, "GPU-fake-host-1-5");

  auto mixed = make_gpu_backend("fake:2xA100,1xT4,2xA100");
  ASSERT_TRUE(mixed.has_value()) << mixed.error().message();
  EXPECT_EQ((*mixed)->name(), "fake:2xA100,1xT4,2xA100");
  EXPECT_THAT(models(discover(**mixed)), ElementsAre("A100", "A100", "T4", "A100", "A100"));
}

TEST(GpuBackendSpec, NamesConsecutiveGpusOfOneModelTogether) {
  EXPECT_EQ(fake("2xT4,2xT4,1xV100").name(), "fake:4xT4,1xV100");
}

TEST(GpuBackendSpec, TakesUpToTheGpusOfANode) {
  EXPECT_EQ(fake("16xT4").name(), "fake:16xT4");
  FakeGpuBackend two_boards = fake("8xH100,8xA100");
  EXPECT_EQ(discover(two_boards).size(), 16U);
}

TEST(GpuBackendSpec, ExplainsEveryBadSpec) {
  const std::string accepted = "use \"nvml\" for the GPUs of this machine";
  const std::string known = "known models: H100, A100, L40S, T4, V100";
  const struct {
    std::string spec;
    std::vector<std::string> says;
  } cases[] = {
      {"", {"no GPU backend given", accepted, "fake:8xH100"}},
      {"gpu", {"\"gpu\" is not a GPU backend", accepted, "fake:<count>x<model>"}},
      {"NVML", {"\"NVML\" is not a GPU backend", accepted}},
      {"fake", {"\"fake\" is not a GPU backend", accepted}},
      {"nvml:0", {"\"nvml:0\" is not a GPU backend"}},
      {"fake:", {"\"fake:\" needs a list of <count>x<model>", "fake:4xA100,4xH100", known}},
      {"fake:8xH100,", {"\"fake:8xH100,\" has an empty entry"}},
      {"fake:,8xH100", {"\"fake:,8xH100\" has an empty entry"}},
      {"fake:H100", {"\"H100\" is not <count>x<model>", "fake:8xH100"}},
      {"fake:8H100", {"\"8H100\" is not <count>x<model>"}},
      {"fake:8 xH100", {"\"8 xH100\" is not <count>x<model>"}},
      {"fake:8", {"\"8\" is not <count>x<model>"}},
      {"fake:-1xH100", {"\"-1xH100\" is not <count>x<model>"}},
      {"fake:0xH100", {"\"0xH100\": the count of GPUs must be at least 1"}},
      {"fake:17xT4", {"\"17xT4\": a node has at most 16 GPUs"}},
      {"fake:99999999999999999999xT4", {"a node has at most 16 GPUs"}},
      {"fake:9xH100,8xA100", {"\"fake:9xH100,8xA100\" has more than 16 GPUs"}},
      {"fake:8xB200", {"\"8xB200\": unknown fake GPU model \"B200\"", known}},
      {"fake:8xh100", {"unknown fake GPU model \"h100\"", known}},
      {"fake:8x", {"\"8x\": unknown fake GPU model \"\"", known}},
  };
  for (const auto& c : cases) {
    auto backend = make_gpu_backend(c.spec);
    ASSERT_FALSE(backend.has_value()) << c.spec;
    EXPECT_EQ(backend.error().field, "--gpus") << c.spec;
    for (const std::string& text : c.says) {
      EXPECT_THAT(backend.error().reason, HasSubstr(text)) << c.spec;
    }
  }
}

TEST(GpuBackendSpec, PartitionsTheGpusOfAnEntryIntoMigInstances) {
  auto backend = make_gpu_backend("fake:2xA100[3g.40gb+2g.20gb+1g.10gb],2xH100", "host-1");
  ASSERT_TRUE(backend.has_value()) << backend.error().message();
  EXPECT_EQ((*backend)->name(), "fake:2xA100[3g.40gb+2g.20gb+1g.10gb],2xH100");
  const auto gpus = discover(**backend);
  ASSERT_EQ(gpus.size(), 4U);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(gpus[i].mig_enabled) << i;
    EXPECT_EQ(gpus[i].memory_mib, 81920);
    const std::string prefix = "MIG-fake-host-1-" + std::to_string(i) + "-";
    // pack_mig: the 3g.40gb opens the high half, the 2g.20gb the low one, the 1g.10gb goes next
    // to it; listed in the order given.
    EXPECT_THAT(gpus[i].mig, ElementsAre(MigDevice{prefix + "0", MigProfile::k3g40gb, 4, 40960},
                                         MigDevice{prefix + "1", MigProfile::k2g20gb, 0, 20480},
                                         MigDevice{prefix + "2", MigProfile::k1g10gb, 2, 10240}));
  }
  for (int i = 2; i < 4; ++i) {
    EXPECT_FALSE(gpus[i].mig_enabled) << i;
    EXPECT_THAT(gpus[i].mig, IsEmpty()) << i;
  }
}

TEST(GpuBackendSpec, MigLayoutsFollowTheCoresRules) {
  // Seven 1g.10gb fill the compute slices; "[]" is MIG mode with no instance yet.
  FakeGpuBackend backend =
      fake("1xH100[1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb],1xH100[]");
  const auto gpus = discover(backend);
  ASSERT_EQ(gpus.size(), 2U);
  std::vector<MigInstance> instances;
  for (const MigDevice& device : gpus[0].mig) instances.push_back(device.instance());
  EXPECT_EQ(instances.size(), 7U);
  EXPECT_TRUE(check_mig_layout(instances).has_value());
  EXPECT_EQ(gpus[0].mig[0].memory_mib, 81559 / 8);
  EXPECT_TRUE(gpus[1].mig_enabled);
  EXPECT_THAT(gpus[1].mig, IsEmpty());
  EXPECT_EQ(backend.name(),
            "fake:1xH100[1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb],"
            "1xH100[]");

  // The order given is the order placed: a 1g.10gb first takes slice 0, so a 4g.40gb has no room.
  EXPECT_FALSE(make_gpu_backend("fake:1xA100[1g.10gb+4g.40gb]").has_value());
  FakeGpuBackend big_first = fake("1xA100[4g.40gb+1g.10gb]");
  EXPECT_THAT(discover(big_first).at(0).mig,
              ElementsAre(MigDevice{"MIG-fake-node-a-0-0", MigProfile::k4g40gb, 0, 40960},
                          MigDevice{"MIG-fake-node-a-0-1", MigProfile::k1g10gb, 4, 10240}));

  // Consecutive GPUs count together only with the same partition.
  EXPECT_EQ(fake("1xA100[1g.10gb],1xA100[1g.10gb],1xA100,1xA100[]").name(),
            "fake:2xA100[1g.10gb],1xA100,1xA100[]");
  // The same seed gives the same MIG UUIDs; another seed other ones.
  EXPECT_EQ(discover(big_first), discover(big_first));
  FakeGpuBackend other = fake("1xA100[4g.40gb+1g.10gb]", "node-b");
  EXPECT_EQ(discover(other).at(0).mig.at(1).uuid, "MIG-fake-node-b-0-1");
}

TEST(GpuBackendSpec, ExplainsEveryBadPartition) {
  const struct {
    std::string spec;
    std::vector<std::string> says;
  } cases[] = {
      {"fake:1xA100[7g.80gb+1g.10gb]",
       {"\"1xA100[7g.80gb+1g.10gb]\": a 1g.10gb instance does not fit on a GPU that already "
        "holds 7g.80gb"}},
      {"fake:2xH100[4g.40gb+4g.40gb]", {"a 4g.40gb instance does not fit", "holds 4g.40gb"}},
      {"fake:1xH100[1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb+1g.10gb]",
       {"a 1g.10gb instance does not fit"}},
      {"fake:1xH100[1g.5gb]", {"\"1xH100[1g.5gb]\": '1g.5gb' is not a MIG profile", "7g.80gb"}},
      {"fake:1xH100[1g.10gb++1g.10gb]", {"'' is not a MIG profile", "with '+'"}},
      {"fake:1xA100[1g.10gb,1g.10gb]", {"\"1xA100[1g.10gb\": a partition is written"}},
      {"fake:1xA100[1g.10gb", {"a partition is written [<profile>+<profile>...]"}},
      {"fake:2xT4[1g.10gb]", {"\"2xT4[1g.10gb]\": T4 GPUs have no MIG partitions"}},
      {"fake:2xL40S[]", {"L40S GPUs have no MIG partitions"}},
      {"fake:2xB200[1g.10gb]", {"unknown fake GPU model \"B200\""}},
  };
  for (const auto& c : cases) {
    auto backend = make_gpu_backend(c.spec);
    ASSERT_FALSE(backend.has_value()) << c.spec;
    EXPECT_EQ(backend.error().field, "--gpus") << c.spec;
    for (const std::string& text : c.says) {
      EXPECT_THAT(backend.error().reason, HasSubstr(text)) << c.spec;
    }
  }
}

TEST(GpuBackendSpec, NvmlLoadsTheDriverOrSaysWhyNot) {
  // Either machine: with the NVIDIA driver the backend opens, without it the error says so.
  auto backend = make_gpu_backend("nvml");
  if (backend) {
    EXPECT_EQ((*backend)->name(), "nvml");
  } else {
    EXPECT_EQ(backend.error().field, "--gpus");
    EXPECT_THAT(backend.error().reason,
                AllOf(HasSubstr("NVML not found (libnvidia-ml.so.1)"),
                      HasSubstr("use --gpus fake:8xH100 on a machine without GPUs")));
  }
}

TEST(FakeGpuBackend, ModelsHaveTheirDocumentedFigures) {
  struct Figures {
    std::int64_t memory_mib;
    int max_power_watts;
    bool nvlink;
  };
  const std::vector<std::pair<std::string, Figures>> expected = {
      {"H100", {81559, 700, true}}, {"A100", {81920, 400, true}},  {"L40S", {46068, 350, false}},
      {"T4", {15360, 70, false}},   {"V100", {32768, 250, false}},
  };
  ASSERT_EQ(fake_gpu_models().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, figures] = expected[i];
    const FakeGpuModel* model = find_fake_gpu_model(name);
    ASSERT_NE(model, nullptr) << name;
    EXPECT_EQ(model, &fake_gpu_models()[i]) << name;
    EXPECT_EQ(model->memory_mib, figures.memory_mib) << name;
    EXPECT_EQ(model->max_power_watts, figures.max_power_watts) << name;
    EXPECT_EQ(model->nvlink, figures.nvlink) << name;
    EXPECT_GT(model->idle_power_watts, 0) << name;
    EXPECT_LT(model->idle_power_watts * 5, model->max_power_watts) << name;
    EXPECT_LT(model->idle_temperature_celsius, model->max_temperature_celsius) << name;
  }
  EXPECT_EQ(find_fake_gpu_model("B200"), nullptr);
}

TEST(FakeGpuBackend, DiscoversGpusWithDeterministicIdentities) {
  FakeGpuBackend backend = fake("8xH100", "rack3-node07");
  const auto gpus = discover(backend);
  ASSERT_EQ(gpus.size(), 8U);
  const std::vector<std::string> buses = {"0000:18:00.0", "0000:38:00.0", "0000:58:00.0",
                                          "0000:78:00.0", "0000:98:00.0", "0000:b8:00.0",
                                          "0000:d8:00.0", "0000:f8:00.0"};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(gpus[i].index, i);
    EXPECT_EQ(gpus[i].uuid, "GPU-fake-rack3-node07-" + std::to_string(i));
    EXPECT_EQ(gpus[i].model, "H100");
    EXPECT_EQ(gpus[i].memory_mib, 81559);
    EXPECT_EQ(gpus[i].pci_bus_id, buses[i]);
    EXPECT_EQ(gpus[i].numa_node, i < 4 ? 0 : 1);
  }
}

TEST(FakeGpuBackend, SpreadsGpusOverTwoNumaNodesAndPciDomains) {
  FakeGpuBackend one = fake("1xT4");
  EXPECT_EQ(discover(one).at(0).numa_node, 0);

  FakeGpuBackend three = fake("3xL40S");
  const auto gpus3 = discover(three);
  EXPECT_EQ(gpus3.at(0).numa_node, 0);
  EXPECT_EQ(gpus3.at(1).numa_node, 0);
  EXPECT_EQ(gpus3.at(2).numa_node, 1);

  FakeGpuBackend sixteen = fake("16xT4");
  const auto gpus16 = discover(sixteen);
  EXPECT_EQ(gpus16.at(8).pci_bus_id, "0001:18:00.0");
  EXPECT_EQ(gpus16.at(15).pci_bus_id, "0001:f8:00.0");
  EXPECT_EQ(gpus16.at(7).numa_node, 0);
  EXPECT_EQ(gpus16.at(8).numa_node, 1);
  std::set<std::string> buses;
  for (const GpuInfo& gpu : gpus16) buses.insert(gpu.pci_bus_id);
  EXPECT_EQ(buses.size(), 16U);
}

TEST(FakeGpuBackend, HgxModelsFormOneNvlinkDomainPerBoard) {
  FakeGpuBackend backend = fake("8xH100");
  const auto gpus = discover(backend);
  EXPECT_THAT(gpus.at(0).nvlink_peers, ElementsAre(1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(gpus.at(5).nvlink_peers, ElementsAre(0, 1, 2, 3, 4, 6, 7));

  FakeGpuBackend pcie = fake("4xT4,2xL40S,2xV100");
  for (const GpuInfo& gpu : discover(pcie)) {
    EXPECT_THAT(gpu.nvlink_peers, IsEmpty()) << gpu.index;
  }
}

TEST(FakeGpuBackend, NvlinkDomainsFollowTheModelAcrossTheList) {
  FakeGpuBackend backend = fake("2xA100,2xT4,3xH100,1xA100");
  const auto gpus = discover(backend);
  ASSERT_EQ(gpus.size(), 8U);
  EXPECT_THAT(gpus[0].nvlink_peers, ElementsAre(1, 7));
  EXPECT_THAT(gpus[1].nvlink_peers, ElementsAre(0, 7));
  EXPECT_THAT(gpus[2].nvlink_peers, IsEmpty());
  EXPECT_THAT(gpus[3].nvlink_peers, IsEmpty());
  EXPECT_THAT(gpus[4].nvlink_peers, ElementsAre(5, 6));
  EXPECT_THAT(gpus[6].nvlink_peers, ElementsAre(4, 5));
  EXPECT_THAT(gpus[7].nvlink_peers, ElementsAre(0, 1));
}

TEST(FakeGpuBackend, SixteenHgxGpusAreTwoBoards) {
  FakeGpuBackend backend = fake("16xA100");
  const auto gpus = discover(backend);
  EXPECT_THAT(gpus.at(7).nvlink_peers, ElementsAre(0, 1, 2, 3, 4, 5, 6));
  EXPECT_THAT(gpus.at(8).nvlink_peers, ElementsAre(9, 10, 11, 12, 13, 14, 15));
}

TEST(FakeGpuBackend, IdleUntilALoadIsSet) {
  FakeGpuBackend backend = fake("2xH100,1xT4");
  for (const GpuSample& s : sample(backend)) {
    EXPECT_EQ(s.utilization_percent, 0) << s.index;
    EXPECT_EQ(s.memory_used_mib, 0) << s.index;
    EXPECT_EQ(s.throttle_reasons, 0U) << s.index;
    EXPECT_EQ(s.ecc_errors_uncorrected, 0U) << s.index;
  }
  const auto idle = sample(backend);
  ASSERT_EQ(idle.size(), 3U);
  EXPECT_EQ(idle[0].power_milliwatts, 70'000);
  EXPECT_EQ(idle[0].temperature_celsius, 30);
  EXPECT_EQ(idle[2].power_milliwatts, 10'000);
  EXPECT_EQ(idle[2].temperature_celsius, 30);
}

TEST(FakeGpuBackend, LoadScalesPowerAndTemperatureLinearly) {
  FakeGpuBackend backend = fake("2xH100,1xT4");
  backend.set_load(1, 50, 40'000);
  backend.set_load(2, 100, 15'000);
  const auto samples = sample(backend);
  ASSERT_EQ(samples.size(), 3U);
  // H100: 70 W + (700 - 70) W x 50 %; 30 C + (75 - 30) C x 50 %, rounded down.
  EXPECT_EQ(samples[1].utilization_percent, 50);
  EXPECT_EQ(samples[1].memory_used_mib, 40'000);
  EXPECT_EQ(samples[1].power_milliwatts, 385'000);
  EXPECT_EQ(samples[1].temperature_celsius, 52);
  EXPECT_EQ(samples[2].power_milliwatts, 70'000);
  EXPECT_EQ(samples[2].temperature_celsius, 75);
  EXPECT_EQ(samples[2].memory_used_mib, 15'000);
  // The other GPU stays idle.
  EXPECT_EQ(samples[0].utilization_percent, 0);
  EXPECT_EQ(samples[0].power_milliwatts, 70'000);

  backend.set_load(1, 0, 0);
  FakeGpuBackend idle = fake("2xH100,1xT4");
  EXPECT_EQ(sample(backend).at(1), sample(idle).at(1));
}

TEST(FakeGpuBackend, ClampsLoadsNoGpuCouldReport) {
  FakeGpuBackend backend = fake("2xA100");
  backend.set_load(0, 250, 1'000'000);
  backend.set_load(1, -5, -1);
  const auto samples = sample(backend);
  EXPECT_EQ(samples.at(0).utilization_percent, 100);
  EXPECT_EQ(samples.at(0).memory_used_mib, 81920);
  EXPECT_EQ(samples.at(0).power_milliwatts, 400'000);
  EXPECT_EQ(samples.at(1).utilization_percent, 0);
  EXPECT_EQ(samples.at(1).memory_used_mib, 0);
  EXPECT_EQ(samples.at(1).power_milliwatts, 55'000);
}

TEST(FakeGpuBackend, SameSpecAndSeedGiveTheSameGpus) {
  FakeGpuBackend a = fake("4xA100,4xH100", "node-a");
  FakeGpuBackend b = fake("4xA100,4xH100", "node-a");
  a.set_load(3, 70, 123);
  b.set_load(3, 70, 123);
  EXPECT_EQ(discover(a), discover(b));
  EXPECT_EQ(sample(a), sample(b));
  EXPECT_EQ(sample(a), sample(a));

  FakeGpuBackend other = fake("4xA100,4xH100", "node-b");
  const auto gpus_a = discover(a);
  const auto gpus_other = discover(other);
  std::set<std::string> uuids;
  for (std::size_t i = 0; i < gpus_a.size(); ++i) {
    uuids.insert(gpus_a[i].uuid);
    uuids.insert(gpus_other[i].uuid);
    GpuInfo renamed = gpus_other[i];
    renamed.uuid = gpus_a[i].uuid;
    EXPECT_EQ(renamed, gpus_a[i]) << i;
  }
  EXPECT_EQ(uuids.size(), 2 * gpus_a.size());
}

}  // namespace
}  // namespace tidepool
