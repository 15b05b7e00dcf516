// libFuzzer target: the cluster file reader (config/cluster_file.h) on arbitrary text. It must
// return a value or an Error, never throw or crash; and a ClusterSpec it returns must be accepted
// by Pool::create, as its header promises. Built and run by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "config/cluster_file.h"
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
  return 0;
}
