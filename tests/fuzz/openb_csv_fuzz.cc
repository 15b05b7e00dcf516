// libFuzzer target: the openb trace readers (sim/openb_trace.h), node list and pod list, on the
// same arbitrary text from a std::istringstream. They must return a value or an Error, never
// throw or crash; a node list that reads is handed to Pool::create (which may refuse it, e.g.
// for repeated names, with an Error). Built and run by run_fuzz.sh.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>

#include "core/pool.h"
#include "core/topology.h"
#include "sim/openb_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    std::istringstream in(text);
    tidepool::GpuModelCatalog models;
    auto nodes = tidepool::read_openb_nodes(in, "fuzz.csv", models);
    if (nodes) {
      auto pool = tidepool::Pool::create(std::move(models), tidepool::Topology::single_leaf(),
                                         std::move(*nodes));
      if (pool && !pool->check_invariants()) std::abort();  // an empty pool is consistent
    }
  }
  {
    std::istringstream in(text);
    tidepool::GpuModelCatalog models;
    (void)tidepool::read_openb_pods(in, "fuzz.csv", models);
  }
  return 0;
}
