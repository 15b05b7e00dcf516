#include "core/spend_anomaly.h"

#include <fmt/format.h>

#include <numeric>

namespace tidepool {
namespace {
__extension__ using Int128 = __int128;
}  // namespace

std::optional<SpendAnomaly> spend_anomaly(std::span<const Micros> previous, Micros day_spend,
                                          Ppm factor) {
  if (previous.size() < kAnomalyTrailingDays) return std::nullopt;
  const auto week = previous.last(kAnomalyTrailingDays);
  const Int128 total = std::accumulate(week.begin(), week.end(), Int128{0});
  if (total <= 0) return std::nullopt;
  // day > factor x total / 7, compared without rounding.
  if (Int128{day_spend} * kPpmOne * kAnomalyTrailingDays <= Int128{factor} * total) {
    return std::nullopt;
  }
  return SpendAnomaly{day_spend,
                      mul_div_round(static_cast<std::int64_t>(total), 1, kAnomalyTrailingDays)};
}

std::string describe_spend_anomaly(std::string_view tenant, std::string_view day,
                                   const SpendAnomaly& anomaly) {
  const double ratio =
      anomaly.trailing_average > 0
          ? static_cast<double>(anomaly.day_spend) / static_cast<double>(anomaly.trailing_average)
          : 0.0;
  return fmt::format("tenant {} spent {} on {}, {:.1f}x its {}-day average of {}", tenant,
                     money_text(anomaly.day_spend), day, ratio, kAnomalyTrailingDays,
                     money_text(anomaly.trailing_average));
}

}  // namespace tidepool
