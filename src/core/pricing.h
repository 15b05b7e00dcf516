// The internal market's price of a GPU-hour, per GPU model: the cost base (core/gpu_cost.h) times
// a utilisation multiplier, a time-of-day multiplier and a class multiplier.
//
//   price = cost_base x utilisation_multiplier(u) x time_of_day_multiplier(t) x class_multiplier
//
// Utilisation multiplier: u is the share of the model's GPUs on schedulable nodes that are
// allocated. The curve is given by points (u_i, m_i), u ascending from 0 to 1 (both ends
// required), m non-decreasing; between two points it follows smoothstep,
//   m(u) = m_i + (m_{i+1} - m_i) x s(x),  x = (u - u_i) / (u_{i+1} - u_i),  s(x) = 3x^2 - 2x^3,
// which is monotone, passes through every point and has a continuous slope (flat at the points).
// The default curve: an idle discount to x0.6 when the pool is empty, x1 at 70% (the utilisation
// the cost base assumes), a peak premium up to x1.5 when it is full.
//
// Time-of-day multiplier: daily bands [opens, closes) of time of day with a multiplier, like tidal
// windows (core/tidal_window.h; a band may wrap past midnight); bands must not overlap; outside
// every band, x1. Example: x1.2 from 09:00 to 18:00, x0.8 from 00:00 to 07:00.
//
// Class multiplier: preemptible work (the scheduler may take its GPUs back, spot-like) is cheaper,
// work running on an emergency loan dearer, everything else standard.
//
// The price in force: prices change only at the start of each period (`period` seconds, periods
// aligned to time 0 of the scheduler clock), computed from the utilisation then and the time of
// day at the period's start; a price in force holds until the period ends, so users can see it
// and choose when to run.
//
// Every multiplication rounds half away from zero to whole micro-credits; the same inputs give the
// same price, bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ids.h"
#include "core/job.h"
#include "core/money.h"
#include "core/resources.h"

namespace tidepool {

class Pool;

struct UtilisationPoint {
  Ppm utilisation = 0;  // 0..kPpmOne
  Ppm multiplier = kPpmOne;

  friend bool operator==(const UtilisationPoint&, const UtilisationPoint&) = default;
};

struct TimeOfDayBand {
  Seconds opens = 0;       // seconds after midnight, 0..86399
  Seconds closes = 86400;  // 1..86400, != opens; closes < opens wraps past midnight
  Ppm multiplier = kPpmOne;

  friend bool operator==(const TimeOfDayBand&, const TimeOfDayBand&) = default;
};

enum class PriceClass : std::uint8_t { kStandard, kPreemptible, kEmergency };
// "standard", "preemptible", "emergency"
std::string_view price_class_name(PriceClass price_class);

struct PriceSchedule {
  std::vector<UtilisationPoint> curve = {{0, 600'000}, {700'000, kPpmOne}, {kPpmOne, 1'500'000}};
  std::vector<TimeOfDayBand> bands;
  Ppm standard = kPpmOne;
  Ppm preemptible = 600'000;
  Ppm emergency = 1'500'000;
  Seconds period = 300;        // 1..86400
  Ppm lender_share = 800'000;  // of the price of lent capacity, credited to its lenders, [0, 1]
};

// Checks a schedule: at least two curve points, from 0 to kPpmOne, utilisation strictly rising,
// multipliers non-decreasing and in (0, kMaxMultiplier]; bands valid and not overlapping; class
// multipliers in (0, kMaxMultiplier]; the period and the lender share in range. The error's field
// names the part ("curve[1].multiplier", "bands[0].closes", "period", ...).
Result<PriceSchedule> make_price_schedule(PriceSchedule schedule);

// The curve's multiplier at `utilisation` (clamped to 0..kPpmOne).
Ppm utilisation_multiplier(const PriceSchedule& schedule, Ppm utilisation);
// The multiplier of the band open at scheduler time t (x1 outside every band); day_offset is the
// time of day of t = 0, as for tidal windows.
Ppm time_of_day_multiplier(const PriceSchedule& schedule, Seconds t, Seconds day_offset);
Ppm class_multiplier(const PriceSchedule& schedule, PriceClass price_class);

// The price class of a job that runs outside any loan: preemptible or standard.
PriceClass price_class_of(const Job& job);

// The price of one model's GPU-hour in force over [from, until), with how it was made.
struct Price {
  Micros cost_base = 0;
  Ppm utilisation = 0;
  Ppm utilisation_multiplier = kPpmOne;
  Ppm time_multiplier = kPpmOne;
  Micros standard_per_hour = 0;  // cost base x the two multipliers
  Seconds from = 0;
  Seconds until = 0;

  friend bool operator==(const Price&, const Price&) = default;
};

// The start of the period holding t (a floor, also for negative t).
Seconds price_period_start(const PriceSchedule& schedule, Seconds t);
// The price in force over the period holding t, for a model of `cost_base` at `utilisation`.
Price price_in_force(const PriceSchedule& schedule, Micros cost_base, Ppm utilisation, Seconds t,
                     Seconds day_offset);
// The price per GPU-hour of a class: the standard price x the class multiplier.
Micros class_price(const PriceSchedule& schedule, const Price& price, PriceClass price_class);

// Allocated share of each model's GPUs on schedulable nodes (index: model id; 0 for a model with
// none).
std::vector<Ppm> model_utilisation(const Pool& pool);

}  // namespace tidepool
