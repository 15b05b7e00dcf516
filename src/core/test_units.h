// Units the core's tests write their figures in (header only; not part of the core library).
#pragma once

#include "core/money.h"
#include "core/resources.h"

namespace tidepool::test_support {

inline constexpr Seconds kHour = 3600;
inline constexpr Seconds kDay = 24 * kHour;
inline constexpr Micros kCredit = kMicrosPerUnit;  // one unit of money

}  // namespace tidepool::test_support
