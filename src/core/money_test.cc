#include "core/money.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();

// The error of parsing `text`, or "" when it parses.
std::string parse_error(std::string_view text, std::int64_t max = kMaxMoney,
                        bool allow_negative = false) {
  auto parsed = parse_micro_decimal(text, "price", max, allow_negative);
  return parsed ? std::string() : parsed.error().message();
}

TEST(MoneyParseTest, ReadsDecimalsAsMicroUnits) {
  EXPECT_EQ(parse_micro_decimal("12", "f", kMaxMoney).value(), 12'000'000);
  EXPECT_EQ(parse_micro_decimal("12.5", "f", kMaxMoney).value(), 12'500'000);
  EXPECT_EQ(parse_micro_decimal("0.000125", "f", kMaxMoney).value(), 125);
  EXPECT_EQ(parse_micro_decimal("0.000001", "f", kMaxMoney).value(), 1);
  EXPECT_EQ(parse_micro_decimal("0", "f", kMaxMoney).value(), 0);
  EXPECT_EQ(parse_micro_decimal("007.10", "f", kMaxMoney).value(), 7'100'000);
  EXPECT_EQ(parse_micro_decimal("-3.25", "f", kMaxMoney, true).value(), -3'250'000);
  EXPECT_EQ(parse_micro_decimal("-0", "f", kMaxMoney, true).value(), 0);
  // Any number of leading zeros is fine: the bound is on the value, not the length.
  EXPECT_EQ(parse_micro_decimal("0000000000000000000000000000001", "f", kMaxMoney).value(),
            1'000'000);
}

TEST(MoneyParseTest, RejectsAnythingElseNamingTheField) {
  for (const char* text : {"", "-", ".", ".5", "1.", "+1", " 1", "1 ", "1e3", "1,5", "1.2.3",
                           "1.2345678", "abc", "1-", "--1", "0x10", "１"}) {
    EXPECT_THAT(parse_error(text), HasSubstr("price: must be a number with at most 6 decimals, "
                                             "like 12.5"))
        << "'" << text << "'";
  }
  auto parsed = parse_micro_decimal("1.", "budget", kMaxMoney);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().field, "budget");
  EXPECT_THAT(parsed.error().reason, HasSubstr("got '1.'"));
}

TEST(MoneyParseTest, NegativesOnlyWhenAllowed) {
  EXPECT_THAT(parse_error("-1"), HasSubstr("must not be negative"));
  EXPECT_EQ(parse_error("-1", kMaxMoney, true), "");
  EXPECT_THAT(parse_error("-.5", kMaxMoney, true), HasSubstr("at most 6 decimals"));
  EXPECT_THAT(parse_error("- 1", kMaxMoney, true), HasSubstr("at most 6 decimals"));
}

TEST(MoneyParseTest, BoundsTheMagnitudeWithoutOverflow) {
  EXPECT_EQ(parse_micro_decimal("1000000000000", "f", kMaxMoney).value(), kMaxMoney);
  EXPECT_THAT(parse_error("1000000000000.000001"),
              HasSubstr("must be at most 1000000000000, got '1000000000000.000001'"));
  EXPECT_THAT(parse_error("99999999999999999999999999999999999999999999"),
              HasSubstr("must be at most"));
  EXPECT_EQ(parse_micro_decimal("-1000000000000", "f", kMaxMoney, true).value(), -kMaxMoney);
  EXPECT_THAT(parse_error("-1000000000001", kMaxMoney, true),
              HasSubstr("must be between -1000000000000 and 1000000000000"));
  // The largest int64 bound parses right up to it.
  EXPECT_EQ(parse_micro_decimal("9223372036854.775807", "f", kInt64Max).value(), kInt64Max);
  EXPECT_THAT(parse_error("9223372036854.775808", kInt64Max), HasSubstr("must be at most"));
  EXPECT_EQ(parse_micro_decimal("-9223372036854.775807", "f", kInt64Max, true).value(), -kInt64Max);
  EXPECT_EQ(parse_error("0", 0), "");
  EXPECT_THAT(parse_error("0.000001", 0), HasSubstr("must be at most 0"));
  EXPECT_THAT(parse_error("2", 1'500'000), HasSubstr("must be at most 1.5"));
}

TEST(MoneyParseTest, MoneyAndPpmUseTheirBounds) {
  EXPECT_EQ(parse_money("1234.5", "budget").value(), 1'234'500'000);
  EXPECT_FALSE(parse_money("1000000000000.1", "budget").has_value());
  EXPECT_FALSE(parse_money("-1", "budget").has_value());
  EXPECT_EQ(parse_ppm("1.5", "multiplier").value(), 1'500'000);
  EXPECT_EQ(parse_ppm("1000", "multiplier").value(), kMaxMultiplier);
  auto too_big = parse_ppm("1000.000001", "multiplier");
  ASSERT_FALSE(too_big.has_value());
  EXPECT_EQ(too_big.error().field, "multiplier");
  EXPECT_THAT(too_big.error().reason, HasSubstr("at most 1000"));
}

TEST(MoneyTextTest, TwoDecimalsRoundedHalfAwayFromZero) {
  EXPECT_EQ(money_text(1'234'567'891), "1234.57");
  EXPECT_EQ(money_text(0), "0.00");
  EXPECT_EQ(money_text(-500'000), "-0.50");
  EXPECT_EQ(money_text(12'000'000), "12.00");
  EXPECT_EQ(money_text(5'000), "0.01");  // half a cent rounds up
  EXPECT_EQ(money_text(4'999), "0.00");
  EXPECT_EQ(money_text(-5'000), "-0.01");  // and away from zero below it
  EXPECT_EQ(money_text(-4'999), "0.00");   // no "-0.00"
  EXPECT_EQ(money_text(994'999), "0.99");
  EXPECT_EQ(money_text(995'000), "1.00");
  EXPECT_EQ(money_text(kMaxMoney), "1000000000000.00");
  EXPECT_EQ(money_text(kInt64Max), "9223372036854.78");
  EXPECT_EQ(money_text(kInt64Min), "-9223372036854.78");
}

TEST(MoneyTextTest, ExactMoneyShowsEveryMicroCredit) {
  EXPECT_EQ(exact_money_text(1'234'567'891), "1234.567891");
  EXPECT_EQ(exact_money_text(12'500'000), "12.5");
  EXPECT_EQ(exact_money_text(12'000'000), "12");
  EXPECT_EQ(exact_money_text(125), "0.000125");
  EXPECT_EQ(exact_money_text(0), "0");
  EXPECT_EQ(exact_money_text(-3'250'000), "-3.25");
  EXPECT_EQ(exact_money_text(-1), "-0.000001");
  EXPECT_EQ(exact_money_text(kInt64Min), "-9223372036854.775808");
  // It reads back as parsed.
  for (Micros m : {Micros{0}, Micros{1}, Micros{999'999}, Micros{1'000'001}, kMaxMoney}) {
    EXPECT_EQ(parse_money(exact_money_text(m), "f").value(), m);
  }
}

TEST(MoneyTextTest, PpmAndPercent) {
  EXPECT_EQ(ppm_text(1'500'000), "1.5");
  EXPECT_EQ(ppm_text(800'000), "0.8");
  EXPECT_EQ(ppm_text(kPpmOne), "1");
  EXPECT_EQ(ppm_text(1), "0.000001");
  EXPECT_EQ(ppm_text(-250'000), "-0.25");
  EXPECT_EQ(percent_text(800'000), "80%");
  EXPECT_EQ(percent_text(125'000), "12.5%");
  EXPECT_EQ(percent_text(kPpmOne), "100%");
  EXPECT_EQ(percent_text(0), "0%");
  EXPECT_EQ(percent_text(123'456), "12.35%");  // 12.3456% rounds half away from zero
  EXPECT_EQ(percent_text(123'449), "12.34%");
  EXPECT_EQ(percent_text(50), "0.01%");
  EXPECT_EQ(percent_text(49), "0%");
  EXPECT_EQ(percent_text(-125'000), "-12.5%");
  EXPECT_EQ(percent_text(2'500'000), "250%");
}

TEST(MoneyMulDivTest, RoundsHalfAwayFromZero) {
  EXPECT_EQ(mul_div_round(10, 1, 4), 3);    // 2.5
  EXPECT_EQ(mul_div_round(-10, 1, 4), -3);  // -2.5
  EXPECT_EQ(mul_div_round(10, -1, 4), -3);
  EXPECT_EQ(mul_div_round(-10, -1, 4), 3);
  EXPECT_EQ(mul_div_round(9, 1, 4), 2);  // 2.25
  EXPECT_EQ(mul_div_round(-9, 1, 4), -2);
  EXPECT_EQ(mul_div_round(11, 1, 4), 3);  // 2.75
  EXPECT_EQ(mul_div_round(1, 1, 3), 0);
  EXPECT_EQ(mul_div_round(2, 1, 3), 1);
  EXPECT_EQ(mul_div_round(0, 5, 7), 0);
  EXPECT_EQ(mul_div_round(7, 5, 1), 35);
}

TEST(MoneyMulDivTest, IntermediateProductsUse128Bits) {
  // 1e18 x 1e6 overflows 64 bits; the quotient fits.
  EXPECT_EQ(mul_div_round(kMaxMoney, kPpmOne, 2'000'000), kMaxMoney / 2);
  EXPECT_EQ(mul_div_round(kInt64Max, kInt64Max, kInt64Max), kInt64Max);
  EXPECT_EQ(mul_div_round(kInt64Min, kInt64Max, kInt64Max), kInt64Min);
  EXPECT_EQ(mul_div_round(kInt64Max, 3, 6), kInt64Max / 2 + 1);  // x.5 rounds up
}

}  // namespace
}  // namespace tidepool
