// Cost-first choice of a GPU model for an inference service's next replica: of the models the
// service accepts, the one with the lowest price per unit of work that still meets the service's
// latency target and has room for the replica (within the tenant's quota, and a place in the
// pool: the caller says which).
//
// Per model the caller gives what one replica does there (measured by the service's replicas, or
// declared in its spec): its throughput (requests per second, in thousandths) and its p95 latency
// at that load, and the price of a GPU-hour of the model (the market's price in force; without a
// market, the same price for every model, so the choice falls to throughput). The price per unit
// of work is the replica's GPUs x the price per GPU-hour / (throughput x 3600 s), in
// micro-credits per thousand requests, rounded up. Ties go to the lower latency, then the
// catalog's order.
//
// Pure: figures in, a choice out, with the reason that names the figures compared.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/gpu_model.h"
#include "core/money.h"

namespace tidepool {

struct ModelOffer {
  GpuModelId model;
  std::string name;                        // for the reason: "H100"
  std::int64_t replica_milli_gpus = 1000;  // the GPUs one replica takes, in thousandths; > 0
  std::int64_t throughput_milli_rps = 0;   // requests per second one replica serves, x1000
  std::int64_t p95_latency_ms = 0;         // at that throughput
  Micros price_per_gpu_hour = 0;           // >= 0
  bool has_room = true;                    // quota and pool room for one more replica
};

struct CostChoice {
  GpuModelId model;
  Micros per_thousand_requests = 0;
  std::string reason;
};

// The price of a thousand requests on `offer` (see the file comment); nullopt without throughput.
[[nodiscard]] std::optional<Micros> price_per_thousand_requests(const ModelOffer& offer);

// The cheapest offer that meets `latency_target_ms` and has room, or nullopt with none (the
// reason of each refusal is then in `refused`, when given).
[[nodiscard]] std::optional<CostChoice> cheapest_model(std::span<const ModelOffer> offers,
                                                       std::int64_t latency_target_ms,
                                                       std::string* refused = nullptr);

}  // namespace tidepool
