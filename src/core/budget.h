// Quarterly budgets per tenant, and where a tenant stands against its budget.
//
// A tenant's spend in a quarter is its charges minus its lending credits of entries whose interval
// ends in that quarter (calendar quarters of UTC: January, April, July, October). With a budget B
// and a soft alert share a (default 80%):
//   within      spend < a x B
//   alert       a x B <= spend < B       (an alert is raised once per quarter; jobs still start)
//   exhausted   spend >= B               (new non-critical jobs of the tenant wait, with reason
//                                         "budget exhausted" and the numbers; running jobs go on)
// A tenant without a budget is never refused for budget. Critical jobs (priority class at or
// above SchedulerConfig::budget_exempt_priority) start whatever the budget.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/money.h"
#include "core/resources.h"

namespace tidepool {

struct Budget {
  Micros quarterly = 0;      // > 0
  Ppm soft_alert = 800'000;  // share of the budget that raises the alert, (0, 1]
};

Result<Budget> make_budget(Budget budget);

enum class BudgetState : std::uint8_t { kWithin, kAlert, kExhausted };
// "within", "alert", "exhausted"
std::string_view budget_state_name(BudgetState state);

struct BudgetStatus {
  BudgetState state = BudgetState::kWithin;
  Micros budget = 0;
  Micros charges = 0;
  Micros credits = 0;
  Micros spend = 0;      // charges - credits
  Micros remaining = 0;  // budget - spend (negative past the budget)
};

BudgetStatus budget_status(const Budget& budget, Micros charges, Micros credits);

// "budget exhausted: tenant vision spent 1050.00 of its 1000.00 budget for 2026-Q4 (charges
// 1100.00, lending credits 50.00)"
std::string budget_exhausted_reason(std::string_view tenant, const BudgetStatus& status,
                                    std::string_view quarter);

// Calendar quarters of UTC for Unix times (seconds since 1970-01-01T00:00:00Z, negative before).
struct Quarter {
  std::int64_t year = 1970;
  int number = 1;          // 1..4
  std::int64_t start = 0;  // Unix time of its first second
  std::int64_t end = 0;    // Unix time of the next quarter's first second

  friend bool operator==(const Quarter&, const Quarter&) = default;
};
Quarter quarter_of(std::int64_t unix_seconds);
// "2026-Q4"
std::string quarter_name(const Quarter& quarter);
// The UTC day holding a Unix time, as days since 1970-01-01 (a floor, also before 1970).
std::int64_t utc_day(std::int64_t unix_seconds);
// The UTC day of a Unix time as "2026-11-30".
std::string utc_date_text(std::int64_t unix_seconds);
// Unix time of 00:00 UTC of "2026-11-30"; fails naming `field` if the text is not such a date.
Result<std::int64_t> parse_utc_date(std::string_view text, const std::string& field);

}  // namespace tidepool
