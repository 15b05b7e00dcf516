#include "core/budget.h"

#include <fmt/format.h>

#include <cassert>
#include <limits>

#include "core/civil_time.h"

namespace tidepool {
namespace {

__extension__ using Int128 = __int128;

constexpr std::int64_t kDaySeconds = kSecondsPerCivilDay;

// The Unix times the calendar functions accept: the years -10000..10000 (asserted). The
// algorithms are exact far beyond; the bound keeps every intermediate far from overflow.
[[maybe_unused]] constexpr std::int64_t kMinUnixTime = days_from_civil(-10000, 1, 1) * kDaySeconds;
[[maybe_unused]] constexpr std::int64_t kMaxUnixTime =
    days_from_civil(10001, 1, 1) * kDaySeconds - 1;

CivilDate utc_date(std::int64_t unix_seconds) {
  assert(unix_seconds >= kMinUnixTime && unix_seconds <= kMaxUnixTime);
  return civil_from_days(utc_day(unix_seconds));
}

// The value of `text` (all digits), or -1.
int date_part_value(std::string_view text) {
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

Result<Budget> make_budget(Budget budget) {
  if (budget.quarterly <= 0 || budget.quarterly > kMaxMoney) {
    return fail("quarterly",
                fmt::format("must be positive and at most {}, got {}", money_text(kMaxMoney),
                            exact_money_text(budget.quarterly)));
  }
  if (budget.soft_alert <= 0 || budget.soft_alert > kPpmOne) {
    return fail("soft_alert", fmt::format("must be above 0% and at most 100%, got {}",
                                          percent_text(budget.soft_alert)));
  }
  return budget;
}

std::string_view budget_state_name(BudgetState state) {
  switch (state) {
    case BudgetState::kWithin:
      return "within";
    case BudgetState::kAlert:
      return "alert";
    case BudgetState::kExhausted:
      return "exhausted";
  }
  return "unknown";
}

BudgetStatus budget_status(const Budget& budget, Micros charges, Micros credits) {
  const Int128 spend = Int128{charges} - credits;
  const Int128 remaining = Int128{budget.quarterly} - spend;
  assert(spend >= std::numeric_limits<Micros>::min() &&
         spend <= std::numeric_limits<Micros>::max());
  assert(remaining >= std::numeric_limits<Micros>::min() &&
         remaining <= std::numeric_limits<Micros>::max());
  BudgetState state = BudgetState::kWithin;
  if (spend >= budget.quarterly) {
    state = BudgetState::kExhausted;
  } else if (spend * kPpmOne >= Int128{budget.quarterly} * budget.soft_alert) {
    // a x B <= spend, compared exactly: spend x 1e6 >= B x a.
    state = BudgetState::kAlert;
  }
  return BudgetStatus{.state = state,
                      .budget = budget.quarterly,
                      .charges = charges,
                      .credits = credits,
                      .spend = static_cast<Micros>(spend),
                      .remaining = static_cast<Micros>(remaining)};
}

std::string budget_exhausted_reason(std::string_view tenant, const BudgetStatus& status,
                                    std::string_view quarter) {
  return fmt::format(
      "budget exhausted: tenant {} spent {} of its {} budget for {} (charges {}, lending credits "
      "{})",
      tenant, money_text(status.spend), money_text(status.budget), quarter,
      money_text(status.charges), money_text(status.credits));
}

std::int64_t utc_day(std::int64_t unix_seconds) {
  const std::int64_t days = unix_seconds / kDaySeconds;
  return unix_seconds % kDaySeconds < 0 ? days - 1 : days;
}

Quarter quarter_of(std::int64_t unix_seconds) {
  const CivilDate date = utc_date(unix_seconds);
  const int number = (date.month - 1) / 3 + 1;
  const int first_month = 3 * number - 2;
  const std::int64_t end_days = number == 4 ? days_from_civil(date.year + 1, 1, 1)
                                            : days_from_civil(date.year, first_month + 3, 1);
  return Quarter{.year = date.year,
                 .number = number,
                 .start = days_from_civil(date.year, first_month, 1) * kDaySeconds,
                 .end = end_days * kDaySeconds};
}

std::string quarter_name(const Quarter& quarter) {
  return fmt::format("{}-Q{}", quarter.year, quarter.number);
}

std::string utc_date_text(std::int64_t unix_seconds) {
  const CivilDate date = utc_date(unix_seconds);
  // Four-digit years as ISO 8601 writes them; a sign before years before 0.
  return fmt::format("{}{:04}-{:02}-{:02}", date.year < 0 ? "-" : "",
                     date.year < 0 ? -date.year : date.year, date.month, date.day);
}

Result<std::int64_t> parse_utc_date(std::string_view text, const std::string& field) {
  const auto bad = [&] {
    return fail(field, fmt::format("must be a date like 2026-11-30, got '{}'", text));
  };
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return bad();
  const int year = date_part_value(text.substr(0, 4));
  const int month = date_part_value(text.substr(5, 2));
  const int day = date_part_value(text.substr(8, 2));
  if (year < 0 || month < 1 || month > 12 || day < 1) return bad();
  if (day > days_in_month(year, month)) {
    return fail(field, fmt::format("must be a date like 2026-11-30, got '{}': {}-{:02} has {} days",
                                   text, year, month, days_in_month(year, month)));
  }
  return days_from_civil(year, month, day) * kDaySeconds;
}

}  // namespace tidepool
