// The services file of `tidepool sim run --services FILE` (YAML): inference services to run beside
// the trace, each with its replicas, latency target, autoscaling and request rate. Every field but
// the name, the tenant and the rate has a default; errors name the file, line and key path.
//
//   services:
//     - name: chat                 # a name: letters, digits, '.', '_', '-'
//       tenant: inference          # a tenant of the tenants file (added if it has none of that
//       name) replica:
//         gpus: 1                  # whole GPUs per replica (default 1), or
//         gpu_milli: 500           #   a fraction of one GPU in thousandths (1..999), or
//         mig_profile: 3g.40gb     #   a MIG instance (on a cluster node with mig: on_demand)
//         gpu_models: [V100]       # the models it may run on (default: any)
//         cpu_milli: 4000          # default 4000
//         memory_mib: 16384        # default 16384
//         slots: 8                 # requests it serves at once (default 1)
//         service_time: 200ms      # mean time to serve one request (required)
//         startup: 60s             # from placement to serving (default 60s)
//         drain: 30s               # from a drain to the stop (default 30s)
//       replicas: {min: 2, max: 64}          # default 1 and 16 (or min if more)
//       target: {p95_latency_ms: 800}        # required
//       scale: {tick: 10s, stable_window: 60s, panic_window: 6s, panic_percent: 200,
//               up_period: 15s, down_window: 5m, down_period: 1m}   # the autoscaler's defaults
//       spread: node               # node or leaf (default node)
//       max_per_node: 0            # 0: no limit
//       priority: 1000             # the replicas' priority class (default 1000)
//       rate:                      # requests per second (up to 3 decimals)
//         trough: 50
//         peak: 400
//         peak_at: "14:00"         # time of day of the peak (default 14:00)
//         bursts:                  # times from the start of the run
//           - {at: 2d10h, duration: 15m, factor: 2.5}
//       # or rate: {trace: rates.csv, bursts: [...]}  (CSV lines "seconds,requests_per_second",
//       #   a header line allowed; the path relative to the services file)
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/gpu_model.h"
#include "sim/service_model.h"

namespace tidepool {

// A service as the file gives it: the spec but for the tenant and queue, and the names to resolve.
struct ServiceEntry {
  SimServiceSpec spec;  // tenant and queue unset
  std::string tenant;
};

inline constexpr std::size_t kMaxServices = 64;
inline constexpr std::size_t kMaxRatePoints = 1'000'000;

// Reads the file; GPU model names are looked up in `models`.
Result<std::vector<ServiceEntry>> load_services_yaml(const std::string& path,
                                                     const GpuModelCatalog& models);
// The same from text (`source` names it in errors; a rate trace is read relative to `folder`).
Result<std::vector<ServiceEntry>> parse_services_yaml(std::string_view text,
                                                      const std::string& source,
                                                      const std::string& folder,
                                                      const GpuModelCatalog& models);

}  // namespace tidepool
