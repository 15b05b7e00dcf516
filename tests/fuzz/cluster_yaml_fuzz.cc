// libFuzzer target: the cluster file reader (config/cluster_file.h) on arbitrary text. It must
// return a value or an Error, never throw or crash; and a ClusterSpec it returns must be accepted
// by Pool::create, as its header promises. On the pool, every MIG profile that packing places must
// be allocated, leaving the pool's invariants whole (valid layouts). Built and run by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "config/cluster_file.h"
#include "core/mig_placement.h"
#include "core/pool.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = tidepool::read_cluster_yaml(text, "fuzz.yaml");
  if (!spec) {
    if (spec.error().message().empty()) std::abort();  // every error says something
    return 0;
  }
  auto pool = tidepool::Pool::create(std::move(spec->models), std::move(spec->topology),
                                     std::move(spec->nodes));
  if (!pool) {
    std::fprintf(stderr, "read_cluster_yaml accepted a cluster Pool::create rejects: %s\n",
                 pool.error().message().c_str());
    std::abort();
  }
  for (const tidepool::MigProfileSpec& profile : tidepool::mig_profiles()) {
    auto task = tidepool::make_mig_task_shape(profile.profile, 0, 0);
    if (!task) std::abort();
    const auto where = tidepool::pack_mig_task(*pool, *task);
    if (!where) continue;
    if (!pool->allocate(*task, *where) || !pool->check_invariants()) {
      std::fprintf(stderr, "a %s instance packing chose was refused or broke the pool\n",
                   std::string(profile.name).c_str());
      std::abort();
    }
  }
  return 0;
}
