#include "core/decimal_text.h"

#include <gtest/gtest.h>

#include <limits>
#include <string_view>

namespace tidepool {
namespace {

TEST(ReadDecimal, ReadsWholeAndFractionalNumbersInUnitsOfThePlaces) {
  EXPECT_EQ(read_decimal("12", {.places = 3}), 12'000);
  EXPECT_EQ(read_decimal("12.5", {.places = 3}), 12'500);
  EXPECT_EQ(read_decimal("0.125", {.places = 3}), 125);
  EXPECT_EQ(read_decimal("007.50", {.places = 3}), 7'500);
  EXPECT_EQ(read_decimal("0.000001", {.places = 6}), 1);
  EXPECT_EQ(read_decimal("-3.25", {.places = 6, .allow_negative = true}), -3'250'000);
  EXPECT_EQ(read_decimal("5", {}), 5);
}

TEST(ReadDecimal, RefusesWhatIsNotOfTheGrammar) {
  for (std::string_view text :
       {"", "-", ".5", "5.", "+5", "1e3", "1 ", " 1", "1,000", "1.2.3", "--1", "0x10", "nan"}) {
    EXPECT_EQ(read_decimal(text, {.places = 3, .allow_negative = true}),
              std::unexpected(DecimalError::kNotANumber))
        << text;
  }
}

TEST(ReadDecimal, NegativesOnlyWhereAllowedButANegativeZeroIsZero) {
  EXPECT_EQ(read_decimal("-1", {.places = 3}), std::unexpected(DecimalError::kNegative));
  EXPECT_EQ(read_decimal("-0.001", {.places = 3}), std::unexpected(DecimalError::kNegative));
  EXPECT_EQ(read_decimal("-0", {.places = 3}), 0);
  EXPECT_EQ(read_decimal("-0.000", {.places = 3}), 0);
}

TEST(ReadDecimal, ExtraDecimalsFailOrRoundHalfUp) {
  EXPECT_EQ(read_decimal("0.1234", {.places = 3}), std::unexpected(DecimalError::kTooManyDecimals));
  EXPECT_EQ(read_decimal("2240194.0", {.places = 0, .round_extra = true}), 2'240'194);
  EXPECT_EQ(read_decimal("0.4999", {.places = 0, .round_extra = true}), 0);
  EXPECT_EQ(read_decimal("0.5", {.places = 0, .round_extra = true}), 1);
  EXPECT_EQ(read_decimal("-2.5", {.places = 0, .allow_negative = true, .round_extra = true}), -3);
  EXPECT_EQ(read_decimal("-0.4", {.places = 0, .round_extra = true}), 0);  // rounds to zero
}

TEST(ReadDecimal, MagnitudesAboveTheBoundFailWithoutOverflow) {
  EXPECT_EQ(read_decimal("1000", {.places = 0, .max = 1000}), 1000);
  EXPECT_EQ(read_decimal("1000.001", {.places = 3, .max = 1'000'000}),
            std::unexpected(DecimalError::kTooLarge));
  EXPECT_EQ(read_decimal("999.5", {.places = 0, .max = 999, .round_extra = true}),
            std::unexpected(DecimalError::kTooLarge));
  EXPECT_EQ(read_decimal("99999999999999999999999999999999", {}),
            std::unexpected(DecimalError::kTooLarge));
  EXPECT_EQ(read_decimal("0000000000000000000000000000000042", {}), 42);
  EXPECT_EQ(read_decimal("-9223372036854775807", {.allow_negative = true}),
            -std::numeric_limits<std::int64_t>::max());
}

TEST(FormatDecimal, WritesTheDigitsTheValueNeeds) {
  EXPECT_EQ(format_decimal(12'500, 3), "12.5");
  EXPECT_EQ(format_decimal(3'000, 3), "3");
  EXPECT_EQ(format_decimal(-500, 3), "-0.5");
  EXPECT_EQ(format_decimal(1, 6), "0.000001");
  EXPECT_EQ(format_decimal(0, 6), "0");
  EXPECT_EQ(format_decimal(42, 0), "42");
  EXPECT_EQ(format_decimal(std::numeric_limits<std::int64_t>::min(), 6), "-9223372036854.775808");
}

TEST(FormatDecimal, ReadsBackExactly) {
  for (std::int64_t value : {0L, 1L, -1L, 10L, 999'999L, 1'000'000L, -123'456'789L,
                             std::numeric_limits<std::int64_t>::max()}) {
    for (int places : {0, 3, 6}) {
      EXPECT_EQ(
          read_decimal(format_decimal(value, places), {.places = places, .allow_negative = true}),
          value)
          << value << " " << places;
    }
  }
}

}  // namespace
}  // namespace tidepool
