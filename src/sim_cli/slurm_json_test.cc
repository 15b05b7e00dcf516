#include "sim_cli/slurm_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "config/test_source_dir.h"

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A reply recorded from Slurm 22.05 on a test cluster of two nodes of 4 GPUs (tp1, tp2), jobs of
// accounts vision and speech (and none), an array of two tasks and one job cancelled while it
// waited; "early" while some ran and waited, "late" once all had ended. The sacct reply follows
// the dbv0.0.38 schema (the test cluster keeps no accounting).
nlohmann::json recorded(const std::string& name) {
  std::ifstream in(test_support::test_source_dir() + "/src/sim_cli/testdata/" + name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in, nullptr, false);
}

const ObservedJob* find(const std::vector<ObservedJob>& jobs, const std::string& id) {
  for (const ObservedJob& j : jobs) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

TEST(SlurmJson, GpusInTres) {
  EXPECT_EQ(gpus_in_tres("gres:gpu:2", "f").value(), 2);
  EXPECT_EQ(gpus_in_tres("gres:gpu:a100:3", "f").value(), 3);
  EXPECT_EQ(gpus_in_tres("cpu=1,gres/gpu=4,node=1", "f").value(), 4);
  EXPECT_EQ(gpus_in_tres("gres/gpu:h100=8", "f").value(), 8);
  EXPECT_EQ(gpus_in_tres("gpu:2(IDX:0-1)", "f").value(), 2);
  EXPECT_EQ(gpus_in_tres("cpu=1,mem=1M", "f").value(), std::nullopt);
  EXPECT_EQ(gpus_in_tres("", "f").value(), std::nullopt);
  const auto bad = gpus_in_tres("gres:gpu:many", "squeue jobs[0] tres_per_node");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "squeue jobs[0] tres_per_node");
}

TEST(SlurmJson, SqueueWhileJobsRunAndWait) {
  const auto jobs = read_squeue_json(recorded("slurm_22.05_squeue_early.json")).value();
  // The array's record before its tasks started is left out.
  ASSERT_EQ(jobs.size(), 6U);
  const ObservedJob* done = find(jobs, "1");
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->tenant, "vision");
  EXPECT_EQ(done->partition, "main");
  EXPECT_EQ(done->gpus, 2);
  EXPECT_EQ(done->submit, 1796626846);
  EXPECT_EQ(done->start, 1796626848);
  EXPECT_EQ(done->end, 1796626849);
  EXPECT_THAT(done->nodes, ElementsAre("tp1"));
  EXPECT_EQ(done->milli_cpu, 1000);
  EXPECT_EQ(done->memory_mib, 0);  // no --mem: Slurm's default does not count
  const ObservedJob* running = find(jobs, "2");
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->start, 1796626848);
  EXPECT_FALSE(running->end);  // end_time is Slurm's projection while it runs
  EXPECT_EQ(running->time_limit, 300);
  const ObservedJob* waiting = find(jobs, "3");
  ASSERT_NE(waiting, nullptr);
  EXPECT_FALSE(waiting->start);
  EXPECT_EQ(waiting->node_count, 2);
  EXPECT_EQ(waiting->gpus, 8);                 // 4 per node
  EXPECT_EQ(find(jobs, "4")->tenant, "root");  // no account: the user
  EXPECT_EQ(find(jobs, "6")->gpus, 3);         // --gpus: per job
  const ObservedJob* cancelled = find(jobs, "7");
  ASSERT_NE(cancelled, nullptr);
  EXPECT_TRUE(cancelled->cancelled);
  EXPECT_FALSE(cancelled->start);
}

TEST(SlurmJson, SqueueOnceAllEnded) {
  const auto jobs = read_squeue_json(recorded("slurm_22.05_squeue_late.json")).value();
  ASSERT_EQ(jobs.size(), 8U);
  EXPECT_THAT(find(jobs, "3")->nodes, ElementsAre("tp1", "tp2"));
  EXPECT_EQ(find(jobs, "3")->gpus, 8);
  ASSERT_NE(find(jobs, "5_0"), nullptr);
  ASSERT_NE(find(jobs, "5_1"), nullptr);
  EXPECT_EQ(find(jobs, "5_1")->end, 1796626859);
  EXPECT_TRUE(read_squeue_json(recorded("slurm_22.05_squeue_late.json"), "other")->empty());
}

TEST(SlurmJson, MergingKeepsTheNewestStageOfEachJob) {
  auto known = read_squeue_json(recorded("slurm_22.05_squeue_early.json")).value();
  merge_observations(known, read_squeue_json(recorded("slurm_22.05_squeue_late.json")).value());
  ASSERT_EQ(known.size(), 8U);
  EXPECT_EQ(known[0].id, "1");  // first-seen order
  EXPECT_EQ(find(known, "2")->end, 1796626854);
  EXPECT_EQ(find(known, "3")->start, 1796626855);
  // An older observation does not undo a newer one.
  merge_observations(known, read_squeue_json(recorded("slurm_22.05_squeue_early.json")).value());
  EXPECT_EQ(find(known, "2")->end, 1796626854);
}

TEST(SlurmJson, Sacct) {
  const auto jobs = read_sacct_json(recorded("sacct_dbv0.0.38.json")).value();
  ASSERT_EQ(jobs.size(), 3U);
  EXPECT_EQ(jobs[0].id, "41");
  EXPECT_EQ(jobs[0].tenant, "vision");
  EXPECT_EQ(jobs[0].gpus, 8);
  EXPECT_THAT(jobs[0].nodes, ElementsAre("tp1", "tp2"));
  EXPECT_EQ(jobs[0].end, 1796600130);
  EXPECT_EQ(jobs[0].time_limit, 3600);
  EXPECT_EQ(jobs[0].milli_cpu, 4000);
  EXPECT_EQ(jobs[0].memory_mib, 8192);
  EXPECT_EQ(jobs[1].id, "42_1");
  EXPECT_EQ(jobs[1].tenant, "bob");
  EXPECT_FALSE(jobs[1].end);
  EXPECT_TRUE(jobs[2].cancelled);
  EXPECT_EQ(jobs[2].gpus, 2);
}

TEST(SlurmJson, Sinfo) {
  const ClusterSpec pool = read_sinfo_json(recorded("slurm_22.05_sinfo.json"), "GPU").value();
  ASSERT_EQ(pool.nodes.size(), 2U);
  EXPECT_EQ(pool.nodes[0].name, "tp1");
  EXPECT_EQ(pool.nodes[0].gpu_count, 4);
  EXPECT_EQ(pool.nodes[0].milli_cpu, 8000);
  EXPECT_EQ(pool.models.name(pool.nodes[0].model), "GPU");
  nlohmann::json typed = {
      {"nodes", {{{"name", "a1"}, {"cpus", 64}, {"gres", "gpu:a100:8(S:0-1)"}}}}};
  const ClusterSpec a100 = read_sinfo_json(typed, "GPU").value();
  EXPECT_EQ(a100.models.name(a100.nodes[0].model), "a100");
  EXPECT_EQ(a100.nodes[0].gpu_count, 8);
  EXPECT_FALSE(read_sinfo_json(typed, "GPU", "debug"));  // no node in that partition
}

// External input: every missing or mistyped field is an error that names it, never a crash.
TEST(SlurmJson, BadFieldsAreNamed) {
  nlohmann::json reply = recorded("slurm_22.05_squeue_late.json");
  reply["jobs"][2]["submit_time"] = "soon";
  auto jobs = read_squeue_json(reply);
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().field, "squeue jobs[2] (job 3) submit_time");
  EXPECT_THAT(jobs.error().reason, HasSubstr("expected an integer"));
  reply = recorded("slurm_22.05_squeue_late.json");
  reply["jobs"][0].erase("job_id");
  jobs = read_squeue_json(reply);
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().message(), "squeue jobs[0] job_id: missing");
  reply = recorded("slurm_22.05_squeue_late.json");
  reply["jobs"][1]["nodes"] = "tp[1-";
  reply["jobs"][1].erase("job_resources");
  jobs = read_squeue_json(reply);
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().field, "squeue jobs[1] (job 2) nodes");
  EXPECT_FALSE(read_squeue_json(nlohmann::json::array()));
  EXPECT_FALSE(read_squeue_json({{"jobs", 3}}));
  EXPECT_THAT(
      read_squeue_json({{"jobs", nlohmann::json::array()}, {"errors", {"boom"}}}).error().field,
      HasSubstr("errors"));
  // Every field of every job, in turn, of the wrong type.
  const nlohmann::json late = recorded("slurm_22.05_squeue_late.json");
  for (std::size_t j = 0; j < late["jobs"].size(); ++j) {
    for (const auto& [key, value] : late["jobs"][j].items()) {
      nlohmann::json broken = late;
      broken["jobs"][j][key] = value.is_string() ? nlohmann::json(7) : nlohmann::json("x");
      (void)read_squeue_json(broken);  // an error or a reading; never a crash
    }
  }
  nlohmann::json sacct = recorded("sacct_dbv0.0.38.json");
  sacct["jobs"][0]["time"]["start"] = nullptr;
  sacct["jobs"][0]["state"] = "COMPLETED";
  const auto bad = read_sacct_json(sacct);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "sacct jobs[0] (job 41) state");
}

// Figures beyond sim/observed_job.h's bounds are errors naming the field, whatever reads them, so
// that no sum or product overflows; Slurm's "not set" and "unlimited" numbers read as absent.
TEST(SlurmJson, FiguresBeyondTheBoundsAreNamedAndSlurmsSentinelsAreAbsent) {
  const auto sum = gpus_in_tres("gres:gpu:2147483647,gres:gpu:1", "f");
  ASSERT_FALSE(sum);
  EXPECT_THAT(sum.error().reason, HasSubstr("more than 1000000 GPUs"));

  const nlohmann::json late = recorded("slurm_22.05_squeue_late.json");
  const auto refused = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json reply = late;
    reply["jobs"][0][key] = value;
    return read_squeue_json(reply);
  };
  for (const auto& [key, value] :
       {std::pair{"submit_time", nlohmann::json(-1)},
        std::pair{"submit_time", nlohmann::json(INT64_MAX)},
        std::pair{"start_time", nlohmann::json(INT64_MAX)},
        std::pair{"end_time", nlohmann::json(INT64_MAX)},
        std::pair{"cpus", nlohmann::json(INT64_MAX / 1000 + 1)},
        std::pair{"node_count", nlohmann::json(1LL << 40)}, std::pair{"tasks", nlohmann::json(-7)},
        std::pair{"time_limit", nlohmann::json(INT64_MAX / 60 + 1)},
        std::pair{"memory_per_node", nlohmann::json(INT64_MAX)}}) {
    const auto jobs = refused(key, value);
    ASSERT_FALSE(jobs) << key << " " << value;
    EXPECT_EQ(jobs.error().field, "squeue jobs[0] (job 1) " + std::string(key));
  }
  // A per-node count times the nodes, past the bound: refused, not wrapped to a negative count.
  nlohmann::json reply = late;
  reply["jobs"][0].erase("tres_alloc_str");
  reply["jobs"][0]["tres_per_node"] = "gres:gpu:1000000";
  reply["jobs"][0]["job_resources"]["allocated_nodes"] = {{{"nodename", "tp1"}},
                                                          {{"nodename", "tp2"}}};
  const auto gpus = read_squeue_json(reply);
  ASSERT_FALSE(gpus);
  EXPECT_EQ(gpus.error().field, "squeue jobs[0] (job 1) tres_per_node");

  // NO_VAL and INFINITE (32 and 64 bits) are Slurm's "not set": no limit, no memory, one task.
  for (const nlohmann::json& unset :
       {nlohmann::json(4294967295U), nlohmann::json(4294967294U),
        nlohmann::json(18446744073709551615ULL), nlohmann::json(18446744073709551614ULL)}) {
    nlohmann::json sentinels = late;
    for (const char* key : {"time_limit", "memory_per_node", "memory_per_cpu", "tasks"}) {
      sentinels["jobs"][0][key] = unset;
    }
    const auto jobs = read_squeue_json(sentinels);
    ASSERT_TRUE(jobs) << unset << ": " << jobs.error().message();
    EXPECT_EQ(jobs->front().time_limit, std::nullopt);
    EXPECT_EQ(jobs->front().memory_mib, 0);
  }

  nlohmann::json sacct = recorded("sacct_dbv0.0.38.json");
  sacct["jobs"][0]["tres"]["allocated"] = {{{"type", "gres"}, {"name", "gpu"}, {"count", -4}}};
  const auto negative = read_sacct_json(sacct);
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.error().field, "sacct jobs[0] (job 41) tres.allocated[0] count");
  sacct = recorded("sacct_dbv0.0.38.json");
  sacct["jobs"][0]["time"]["end"] = INT64_MAX;
  EXPECT_EQ(read_sacct_json(sacct).error().field, "sacct jobs[0] (job 41) time.end");

  nlohmann::json sinfo = recorded("slurm_22.05_sinfo.json");
  sinfo["nodes"][0]["gres"] = "gpu:2147483647,gpu:1";
  const auto pool = read_sinfo_json(sinfo, "GPU");
  ASSERT_FALSE(pool);
  EXPECT_THAT(pool.error().field, HasSubstr("gres"));
  sinfo = recorded("slurm_22.05_sinfo.json");
  sinfo["nodes"][0]["cpus"] = INT64_MAX;
  EXPECT_THAT(read_sinfo_json(sinfo, "GPU").error().field, HasSubstr("cpus"));
}

}  // namespace
}  // namespace tidepool
