// Price schedules the core's tests share (header only; not part of the core library).
#pragma once

#include "core/pricing.h"

namespace tidepool::test_support {

// A price flat at the cost base (x1) whatever the utilisation and the time of day.
inline PriceSchedule flat_price_schedule() {
  PriceSchedule s;
  s.curve = {{0, kPpmOne}, {kPpmOne, kPpmOne}};
  return s;
}

}  // namespace tidepool::test_support
