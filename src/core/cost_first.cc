#include "core/cost_first.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <tuple>
#include <vector>

namespace tidepool {

std::optional<Micros> price_per_thousand_requests(const ModelOffer& offer) {
  if (offer.throughput_milli_rps <= 0 || offer.replica_milli_gpus <= 0) return std::nullopt;
  // price/GPU-hour x GPUs (milli/1000) / (requests per hour: milli_rps/1000 x 3600) x 1000
  // = price x replica_milli x 1000 / (milli_rps x 3600), in 128 bits against overflow.
  const ExactAmount numerator =
      ExactAmount{offer.price_per_gpu_hour} * offer.replica_milli_gpus * 1000;
  const ExactAmount denominator = ExactAmount{offer.throughput_milli_rps} * 3600;
  const ExactAmount price = (numerator + denominator - 1) / denominator;
  return static_cast<Micros>(std::min<ExactAmount>(price, kMaxMoney));
}

std::optional<CostChoice> cheapest_model(std::span<const ModelOffer> offers,
                                         std::int64_t latency_target_ms, std::string* refused) {
  std::optional<std::tuple<Micros, std::int64_t, std::size_t>> best;
  std::vector<std::string> compared;
  std::vector<std::string> out;
  for (std::size_t i = 0; i < offers.size(); ++i) {
    const ModelOffer& offer = offers[i];
    const auto price = price_per_thousand_requests(offer);
    if (!price) {
      out.push_back(fmt::format("{}: no throughput figure", offer.name));
    } else if (offer.p95_latency_ms > latency_target_ms) {
      out.push_back(fmt::format("{}: p95 {} ms over the target of {} ms", offer.name,
                                offer.p95_latency_ms, latency_target_ms));
    } else if (!offer.has_room) {
      out.push_back(fmt::format("{}: no room within the quota and the pool", offer.name));
    } else {
      compared.push_back(fmt::format("{} {} per 1000 requests (p95 {} ms)", offer.name,
                                     exact_money_text(*price), offer.p95_latency_ms));
      const std::tuple key{*price, offer.p95_latency_ms, i};
      if (!best || key < *best) best = key;
    }
  }
  if (!best) {
    if (refused != nullptr) *refused = fmt::format("no model: {}", fmt::join(out, "; "));
    return std::nullopt;
  }
  const ModelOffer& chosen = offers[std::get<2>(*best)];
  std::string reason = fmt::format("{}, the cheapest per request meeting p95 {} ms: {}",
                                   chosen.name, latency_target_ms, fmt::join(compared, ", "));
  if (!out.empty()) reason += fmt::format(" (left out: {})", fmt::join(out, "; "));
  return CostChoice{chosen.model, std::get<0>(*best), std::move(reason)};
}

}  // namespace tidepool
