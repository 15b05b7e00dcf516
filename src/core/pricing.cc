#include "core/pricing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <iterator>
#include <utility>
#include <vector>

#include "core/pool.h"
#include "core/tidal_window.h"

namespace tidepool {
namespace {

__extension__ using Int128 = __int128;

// amount x multiplier, rounded to whole micro-credits. Prices are held to +-kMaxMoney, the most an
// amount may hold (core/money.h), so that sums of them stay far from overflow; only multipliers
// near their x1000 bounds on a cost base near its bound reach it.
Micros apply_multiplier(Micros amount, Ppm multiplier) {
  const Int128 product = div_round(Int128{amount} * multiplier, kPpmOne);
  return static_cast<Micros>(std::clamp<Int128>(product, -kMaxMoney, kMaxMoney));
}

// A band as a tidal window, to share its notion of time of day and of when it is open.
TidalWindow as_window(const TimeOfDayBand& band) {
  return TidalWindow{
      .job_class = JobClass::kInference, .opens = band.opens, .closes = band.closes, .gpus = 1};
}

// The parts of [0, 86400) a valid band covers: one interval, or two when it wraps.
struct Interval {
  Seconds begin = 0;
  Seconds end = 0;
};
std::vector<Interval> intervals(const TimeOfDayBand& band) {
  if (band.opens < band.closes) return {{band.opens, band.closes}};
  return {{band.opens, kSecondsPerDay}, {0, band.closes}};
}

bool overlap(const TimeOfDayBand& a, const TimeOfDayBand& b) {
  for (const Interval& x : intervals(a)) {
    for (const Interval& y : intervals(b)) {
      if (std::max(x.begin, y.begin) < std::min(x.end, y.end)) return true;
    }
  }
  return false;
}

bool valid_multiplier(Ppm m) { return m > 0 && m <= kMaxMultiplier; }

std::string multiplier_range_reason(Ppm m) {
  return fmt::format("must be above 0 and at most {}, got {}", ppm_text(kMaxMultiplier),
                     ppm_text(m));
}

Result<void> check_curve(const std::vector<UtilisationPoint>& curve) {
  if (curve.size() < 2) {
    return fail("curve", fmt::format("needs at least two points, at utilisation 0 and 1; got {}",
                                     curve.size()));
  }
  for (std::size_t i = 0; i < curve.size(); ++i) {
    const UtilisationPoint& p = curve[i];
    const std::string at = fmt::format("curve[{}]", i);
    if (p.utilisation < 0 || p.utilisation > kPpmOne) {
      return fail(at + ".utilisation",
                  fmt::format("must be 0..1, got {}", ppm_text(p.utilisation)));
    }
    if (i == 0 && p.utilisation != 0) {
      return fail(at + ".utilisation",
                  fmt::format("the first point must be at 0, got {}", ppm_text(p.utilisation)));
    }
    if (i > 0 && p.utilisation <= curve[i - 1].utilisation) {
      return fail(at + ".utilisation",
                  fmt::format("must be above the previous point's {}, got {}",
                              ppm_text(curve[i - 1].utilisation), ppm_text(p.utilisation)));
    }
    if (i + 1 == curve.size() && p.utilisation != kPpmOne) {
      return fail(at + ".utilisation",
                  fmt::format("the last point must be at 1, got {}", ppm_text(p.utilisation)));
    }
    if (!valid_multiplier(p.multiplier)) {
      return fail(at + ".multiplier", multiplier_range_reason(p.multiplier));
    }
    if (i > 0 && p.multiplier < curve[i - 1].multiplier) {
      return fail(at + ".multiplier",
                  fmt::format("must not fall below the previous point's {}, got {}",
                              ppm_text(curve[i - 1].multiplier), ppm_text(p.multiplier)));
    }
  }
  return {};
}

Result<void> check_bands(const std::vector<TimeOfDayBand>& bands) {
  for (std::size_t i = 0; i < bands.size(); ++i) {
    const std::string at = fmt::format("bands[{}]", i);
    if (auto window = make_tidal_window(as_window(bands[i])); !window) {
      return fail(at + "." + window.error().field, window.error().reason);
    }
    if (!valid_multiplier(bands[i].multiplier)) {
      return fail(at + ".multiplier", multiplier_range_reason(bands[i].multiplier));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (overlap(bands[j], bands[i])) {
        return fail(at, fmt::format("{}-{} overlaps bands[{}] ({}-{}); bands must not overlap",
                                    clock_text(bands[i].opens), clock_text(bands[i].closes), j,
                                    clock_text(bands[j].opens), clock_text(bands[j].closes)));
      }
    }
  }
  return {};
}

}  // namespace

std::string_view price_class_name(PriceClass price_class) {
  switch (price_class) {
    case PriceClass::kStandard:
      return "standard";
    case PriceClass::kPreemptible:
      return "preemptible";
    case PriceClass::kEmergency:
      return "emergency";
  }
  return "unknown";
}

Result<PriceSchedule> make_price_schedule(PriceSchedule schedule) {
  if (auto curve = check_curve(schedule.curve); !curve) return std::unexpected(curve.error());
  if (auto bands = check_bands(schedule.bands); !bands) return std::unexpected(bands.error());
  for (const auto& [field, m] :
       {std::pair{"standard", schedule.standard}, std::pair{"preemptible", schedule.preemptible},
        std::pair{"emergency", schedule.emergency}}) {
    if (!valid_multiplier(m)) return fail(field, multiplier_range_reason(m));
  }
  if (schedule.period < 1 || schedule.period > kSecondsPerDay) {
    return fail("period",
                fmt::format("must be 1..{} seconds, got {}", kSecondsPerDay, schedule.period));
  }
  if (schedule.lender_share < 0 || schedule.lender_share > kPpmOne) {
    return fail("lender_share",
                fmt::format("must be 0..1, got {}", ppm_text(schedule.lender_share)));
  }
  return schedule;
}

Ppm utilisation_multiplier(const PriceSchedule& schedule, Ppm utilisation) {
  const auto& curve = schedule.curve;
  assert(curve.size() >= 2);
  const Ppm u = std::clamp<Ppm>(utilisation, 0, kPpmOne);
  // The segment [lo, hi] holding u: hi is the first point past u (the last point for u = 1).
  auto hi = std::upper_bound(curve.begin(), curve.end(), u,
                             [](Ppm v, const UtilisationPoint& p) { return v < p.utilisation; });
  if (hi == curve.end()) return curve.back().multiplier;
  if (hi == curve.begin()) return curve.front().multiplier;  // only for an invalid curve
  const auto lo = std::prev(hi);
  if (u == lo->utilisation) return lo->multiplier;
  // x and s(x) = 3x^2 - 2x^3 in ppm; each step rounds, and each is monotone in its input, so
  // the curve stays monotone; x = 1e6 gives s = 1e6 exactly, so it passes through hi.
  const Int128 x =
      div_round(Int128{u - lo->utilisation} * kPpmOne, hi->utilisation - lo->utilisation);
  const Int128 s = div_round(3 * x * x * kPpmOne - 2 * x * x * x, Int128{kPpmOne} * kPpmOne);
  const Int128 rise = div_round(Int128{hi->multiplier - lo->multiplier} * s, kPpmOne);
  return lo->multiplier + static_cast<Ppm>(rise);
}

Ppm time_of_day_multiplier(const PriceSchedule& schedule, Seconds t, Seconds day_offset) {
  // Bands do not overlap, so at most one is open.
  for (const TimeOfDayBand& band : schedule.bands) {
    if (window_open(as_window(band), t, day_offset)) return band.multiplier;
  }
  return kPpmOne;
}

Ppm class_multiplier(const PriceSchedule& schedule, PriceClass price_class) {
  switch (price_class) {
    case PriceClass::kStandard:
      return schedule.standard;
    case PriceClass::kPreemptible:
      return schedule.preemptible;
    case PriceClass::kEmergency:
      return schedule.emergency;
  }
  assert(false && "unknown price class");
  return schedule.standard;
}

PriceClass price_class_of(const Job& job) {
  return job.preemptible ? PriceClass::kPreemptible : PriceClass::kStandard;
}

Seconds price_period_start(const PriceSchedule& schedule, Seconds t) {
  assert(schedule.period > 0);
  assert(t >= -kMaxWindowTime && t <= kMaxWindowTime);
  Seconds into = t % schedule.period;
  if (into < 0) into += schedule.period;
  return t - into;
}

Price price_in_force(const PriceSchedule& schedule, Micros cost_base, Ppm utilisation, Seconds t,
                     Seconds day_offset) {
  Price price;
  price.cost_base = cost_base;
  price.utilisation = utilisation;
  price.from = price_period_start(schedule, t);
  price.until = price.from + schedule.period;
  price.utilisation_multiplier = utilisation_multiplier(schedule, utilisation);
  price.time_multiplier = time_of_day_multiplier(schedule, price.from, day_offset);
  // The utilisation multiplier first, then the time of day, each product rounded.
  price.standard_per_hour = apply_multiplier(
      apply_multiplier(cost_base, price.utilisation_multiplier), price.time_multiplier);
  return price;
}

Micros class_price(const PriceSchedule& schedule, const Price& price, PriceClass price_class) {
  return apply_multiplier(price.standard_per_hour, class_multiplier(schedule, price_class));
}

std::vector<Ppm> model_utilisation(const Pool& pool) {
  const auto models = static_cast<std::size_t>(pool.models().size());
  std::vector<std::int64_t> allocated(models, 0);
  std::vector<std::int64_t> capacity(models, 0);
  for (int i = 0; i < pool.node_count(); ++i) {
    const NodeId node{static_cast<std::uint32_t>(i)};
    if (!pool.schedulable(node)) continue;
    const NodeSpec& spec = pool.spec(node);
    const std::int64_t milli = std::int64_t{spec.gpu_count} * kMilliPerGpu;
    allocated[spec.model.value] += milli - pool.state(node).total_free_milli;
    capacity[spec.model.value] += milli;
  }
  std::vector<Ppm> share(models, 0);
  for (std::size_t m = 0; m < models; ++m) {
    if (capacity[m] > 0) share[m] = mul_div_round(allocated[m], kPpmOne, capacity[m]);
  }
  return share;
}

}  // namespace tidepool
