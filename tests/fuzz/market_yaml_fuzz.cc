// libFuzzer target: the market file reader (config/market_file.h) on arbitrary text. It must return
// a value or an Error, never throw or crash; and a MarketSpec it returns must hold values the
// core's constructors accept, as its header promises. Built and run by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "config/market_file.h"
#include "core/budget.h"
#include "core/burst.h"
#include "core/gpu_cost.h"
#include "core/pricing.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = tidepool::read_market_yaml(text, "fuzz.yaml");
  if (!spec) {
    if (spec.error().message().empty()) std::abort();  // every error says something
    return 0;
  }
  const auto refused = [](const char* what, const tidepool::Error& e) {
    std::fprintf(stderr, "read_market_yaml accepted %s the core rejects: %s\n", what,
                 e.message().c_str());
    std::abort();
  };
  for (const tidepool::GpuCostInputs& model : spec->models) {
    if (auto ok = tidepool::make_gpu_cost_inputs(model); !ok) refused("a model", ok.error());
    (void)tidepool::gpu_cost(model);
  }
  if (auto ok = tidepool::make_price_schedule(spec->prices); !ok) refused("prices", ok.error());
  for (const auto& [tenant, budget] : spec->budgets) {
    if (auto ok = tidepool::make_budget(budget); !ok) refused("a budget", ok.error());
  }
  auto offers = tidepool::burst_offers_for(*spec, tidepool::GpuModelCatalog{});
  if (offers) {
    if (auto ok = tidepool::validate_burst(*offers, tidepool::BurstPolicy{}); !ok) {
      refused("burst offers", ok.error());
    }
  }
  return 0;
}
