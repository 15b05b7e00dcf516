// Cost anomalies: a tenant whose spend on one day is more than twice its average daily spend over
// the seven days before it. The alert needs a full week of history and a positive average (a
// tenant that spent nothing last week and starts now is new work, not an anomaly of spend).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/money.h"

namespace tidepool {

inline constexpr int kAnomalyTrailingDays = 7;
inline constexpr Ppm kAnomalyFactor = 2 * kPpmOne;

struct SpendAnomaly {
  Micros day_spend = 0;
  Micros trailing_average = 0;  // rounded half away from zero
};

// `previous`: the daily spends of the days before the one checked, oldest first (only the last
// kAnomalyTrailingDays count; fewer: no alert). Alert when day_spend x 1e6 > factor x the exact
// trailing average.
std::optional<SpendAnomaly> spend_anomaly(std::span<const Micros> previous, Micros day_spend,
                                          Ppm factor = kAnomalyFactor);

// "tenant vision spent 5400.00 on 2026-11-30, 2.7x its 7-day average of 2000.00"
std::string describe_spend_anomaly(std::string_view tenant, std::string_view day,
                                   const SpendAnomaly& anomaly);

}  // namespace tidepool
