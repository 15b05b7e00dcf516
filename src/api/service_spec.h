// The `service` block of a job spec with `kind: service`: an inference service whose replicas are
// the spec's one task (its command, env, GPUs or fraction, models), scaled between min_replicas
// and max_replicas by the core autoscaler (core/autoscaler.h) on one target, spread over nodes or
// leaves (core/replica_spread.h), and drained on the way down.
//
//   kind: service
//   class: inference            # the default for a service; no other class
//   command: [python3, serve.py, --port, "8000"]
//   gpus_per_task: 1             # one replica (tasks: 1, the default; no array, after_ok or
//                                #   max_runtime: a service runs until it is cancelled)
//   service:
//     min_replicas: 1            # 0..10000 (default 1)
//     max_replicas: 8            # min_replicas (and 1)..10000 (default 16, or min_replicas if
//                                #   more: core/autoscaler.h's default_max_replicas)
//     target: {p95_latency_ms: 500}   # exactly one of p95_latency_ms (1..10^9),
//                                     #   queue_per_replica or concurrency_per_replica (requests,
//                                     #   up to 3 decimals, as a number or a string)
//     stable_window: 60s         # the autoscaler's windows and periods (core/autoscaler.h):
//     panic_window: 6s           #   durations as elsewhere in the spec, these are the defaults
//     panic_percent: 200
//     tolerance_percent: 10
//     up_period: 15s
//     down_window: 5m
//     down_period: 1m
//     slots_per_replica: 1       # requests one replica serves at once (1..1024)
//     startup: 60s               # from placement to serving, at most 1h
//     drain: 30s                 # from a drain to the stop, at most 1h
//     spread: node               # node | leaf
//     max_per_node: 0            # 0: no limit
//     metrics_port: 8000         # the replica's Prometheus endpoint (http://<node>:<port>/metrics)
//     metrics_file: /srv/m.prom  # or a file the replica writes (an absolute path); neither: the
//                                #   replicas report nothing and the service stays at min_replicas
//     metrics: {preset: vllm, names: {requests_running: my_running}}   # api/replica_metrics.h
//     models:                    # what one replica does on each model of its gpu_model, for
//       H100: {throughput: 40, p95_latency_ms: 120}   # the cost-first choice of the model of
//       A100: {throughput: 15, p95_latency_ms: 260}   # each new replica (core/cost_first.h):
//                                #   requests per second (up to 3 decimals, > 0) and the p95
//                                #   at that rate (1..10^9 ms); at most 16 models
//
// Errors name the key path ("service.target", "service.metrics.names.latency_sum").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/autoscaler.h"
#include "core/error.h"
#include "core/replica_spread.h"
#include "core/resources.h"

namespace tidepool {

// What one replica of the service does on a GPU model (declared in its spec).
struct ModelThroughput {
  std::int64_t throughput_milli_rps = 0;  // requests per second, in thousandths; > 0
  std::int64_t p95_latency_ms = 0;        // at that rate; > 0

  friend bool operator==(const ModelThroughput&, const ModelThroughput&) = default;
};
inline constexpr std::size_t kMaxServiceModels = 16;

struct ServiceSpec {
  AutoscalerSpec scaler;  // min/max replicas, the target, windows, slots, lead (= startup)
  Seconds drain = 30;
  ReplicaSpread spread;
  std::optional<int> metrics_port;
  std::string metrics_file;  // empty: none
  std::string metrics_preset = "vllm";
  std::map<std::string, std::string, std::less<>> metric_names;  // overrides of the preset
  std::map<std::string, ModelThroughput, std::less<>> models;    // by GPU model name

  friend bool operator==(const ServiceSpec&, const ServiceSpec&);
};

// Reads the `service` map at `path` (see the file comment).
Result<ServiceSpec> read_service_spec(const nlohmann::json& value, const std::string& path);

// The block as JSON, every field written; read_service_spec reads it back equal.
nlohmann::json service_spec_to_json(const ServiceSpec& spec);

}  // namespace tidepool
