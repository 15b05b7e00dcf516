// libFuzzer target: shadow mode's readers of another scheduler's jobs, chosen by the first input
// byte (b % 4) and given the rest: 0 `squeue --json`, 1 `sacct --json`, 2 `sinfo --json`
// (sim_cli/slurm_json.h; the reply parsed by nlohmann::json without exceptions, as shadow mode
// parses Slurm's output), 3 a trace file (sim_cli/shadow_trace.h: a saved reply, JSON lines or
// CSV). They must return a value or an Error, never throw or crash (an exception is not caught
// here: it aborts the run). Their promises: an error says something; every job read keeps the
// bounds of sim/observed_job.h (check_observed), which is what lets run_shadow do its arithmetic
// on them; a pool read from sinfo has nodes of at most kMaxGpusPerNode GPUs; merging a stream
// into itself changes nothing, and merging it into nothing keeps each id once. Built and run by
// run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/node.h"
#include "sim/observed_job.h"
#include "sim_cli/shadow_trace.h"
#include "sim_cli/slurm_json.h"

namespace {

using tidepool::ObservedJob;

void check(bool promise, const char* what) {
  if (!promise) {
    std::fprintf(stderr, "broken promise: %s\n", what);
    std::abort();
  }
}

void check_jobs(const tidepool::Result<std::vector<ObservedJob>>& jobs) {
  if (!jobs) {
    check(!jobs.error().message().empty(), "an error says something");
    return;
  }
  for (const ObservedJob& job : *jobs) {
    const auto kept = tidepool::check_observed(job);
    if (!kept) {
      std::fprintf(stderr, "job '%s' read out of bounds: %s\n", job.id.c_str(),
                   kept.error().message().c_str());
      std::abort();
    }
  }
  std::vector<ObservedJob> merged;
  tidepool::merge_observations(merged, *jobs);
  std::set<std::string> ids;
  for (const ObservedJob& job : merged) check(ids.insert(job.id).second, "merged ids are unique");
  check(ids.size() == merged.size(), "each id once");
  const std::size_t before = merged.size();
  tidepool::merge_observations(merged, merged);
  check(merged.size() == before, "merging a stream into itself adds nothing");
}

void fuzz_sinfo(const nlohmann::json& reply) {
  auto pool = tidepool::read_sinfo_json(reply, "A100");
  if (!pool) {
    check(!pool.error().message().empty(), "an error says something");
    return;
  }
  check(!pool->nodes.empty(), "a pool read has nodes");
  for (const tidepool::NodeSpec& node : pool->nodes) {
    check(node.gpu_count >= 0 && node.gpu_count <= tidepool::kMaxGpusPerNode,
          "a node's GPUs are within kMaxGpusPerNode");
    check(node.milli_cpu >= 0 && node.memory_mib >= 0, "a node's CPU and memory are not negative");
    check(!node.name.empty(), "a node has a name");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int reader = data[0] % 4;
  if (reader == 3) {
    check_jobs(tidepool::read_shadow_trace(rest, "fuzz.trace"));
    return 0;
  }
  const nlohmann::json reply = nlohmann::json::parse(rest, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded()) return 0;
  switch (reader) {
    case 0:
      check_jobs(tidepool::read_squeue_json(reply));
      check_jobs(tidepool::read_squeue_json(reply, "gpu"));
      break;
    case 1:
      check_jobs(tidepool::read_sacct_json(reply));
      break;
    default:
      fuzz_sinfo(reply);
      break;
  }
  return 0;
}
