#include "core/cost_ledger.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/test_ledger.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::charge_entry;
using test_support::kA;
using test_support::kB;
using test_support::kH100;
using test_support::lending_credit_entry;

LedgerEntry burst_cost(std::uint32_t provider, Micros amount, Seconds at) {
  LedgerEntry e = charge_entry(kA, amount, at, at);
  e.kind = EntryKind::kBurstCost;
  e.debit = Account::pool();
  e.credit = Account::provider(provider);
  return e;
}

TEST(CostLedger, EntryKindsHaveNamesThatParseBack) {
  for (EntryKind kind : {EntryKind::kCharge, EntryKind::kLendingCredit, EntryKind::kBurstCharge,
                         EntryKind::kBurstCost}) {
    auto parsed = parse_entry_kind(entry_kind_name(kind));
    ASSERT_TRUE(parsed.has_value()) << entry_kind_name(kind);
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(entry_kind_name(EntryKind::kLendingCredit), "lending-credit");
  auto bad = parse_entry_kind("refund");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "kind");
}

TEST(CostLedger, AppendNumbersEntriesFromOneAndMovesMoneyBothWays) {
  CostLedger ledger;
  EXPECT_EQ(ledger.append(charge_entry(kA, 500, 0, 300)), 1U);
  EXPECT_EQ(ledger.append(lending_credit_entry(kB, 400, 0, 300)), 2U);
  LedgerEntry burst = charge_entry(kB, 250, 300, 600);
  burst.kind = EntryKind::kBurstCharge;
  EXPECT_EQ(ledger.append(burst), 3U);
  EXPECT_EQ(ledger.append(burst_cost(2, 200, 600)), 4U);

  ASSERT_EQ(ledger.entries().size(), 4U);
  EXPECT_EQ(ledger.entries()[2].seq, 3U);
  EXPECT_EQ(ledger.entries()[2].kind, EntryKind::kBurstCharge);
  EXPECT_EQ(ledger.balance(Account::tenant(kA)), -500);
  EXPECT_EQ(ledger.balance(Account::tenant(kB)), 400 - 250);
  // The pool received 500 + 250 and paid 400 + 200.
  EXPECT_EQ(ledger.balance(Account::pool()), 500 - 400 + 250 - 200);
  EXPECT_EQ(ledger.balance(Account::provider(2)), 200);
  EXPECT_EQ(ledger.balance(Account::provider(0)), 0);  // never touched
}

TEST(CostLedger, RefusesBadEntriesNamingTheFieldAndChangesNothing) {
  CostLedger ledger;
  ASSERT_TRUE(ledger.append(charge_entry(kA, 100, 0, 10)).has_value());
  const auto refused = [&](LedgerEntry e) {
    auto r = ledger.append(e);
    EXPECT_FALSE(r.has_value());
    return r.has_value() ? std::string() : r.error().field;
  };
  EXPECT_EQ(refused(charge_entry(kA, 0, 0, 10)), "amount");
  EXPECT_EQ(refused(charge_entry(kA, -5, 0, 10)), "amount");
  EXPECT_EQ(refused(charge_entry(kA, 5, 10, 9)), "to");

  LedgerEntry wrong_tenant = charge_entry(kA, 5, 0, 10);
  wrong_tenant.debit = Account::tenant(kB);  // a charge debits the entry's own tenant
  EXPECT_EQ(refused(wrong_tenant), "debit");
  LedgerEntry to_provider = charge_entry(kA, 5, 0, 10);
  to_provider.credit = Account::provider(0);
  EXPECT_EQ(refused(to_provider), "credit");
  LedgerEntry reversed = lending_credit_entry(kA, 5, 0, 10);
  std::swap(reversed.debit, reversed.credit);
  EXPECT_EQ(refused(reversed), "debit");
  LedgerEntry credit_elsewhere = lending_credit_entry(kA, 5, 0, 10);
  credit_elsewhere.credit = Account::tenant(kB);
  EXPECT_EQ(refused(credit_elsewhere), "credit");
  LedgerEntry cost_to_tenant = burst_cost(0, 5, 10);
  cost_to_tenant.credit = Account::tenant(kA);
  EXPECT_EQ(refused(cost_to_tenant), "credit");
  LedgerEntry cost_from_tenant = burst_cost(0, 5, 10);
  cost_from_tenant.debit = Account::tenant(kA);
  EXPECT_EQ(refused(cost_from_tenant), "debit");

  EXPECT_EQ(ledger.entries().size(), 1U);
  EXPECT_EQ(ledger.balance(Account::tenant(kA)), -100);
  EXPECT_EQ(ledger.balance(Account::tenant(kB)), 0);
  EXPECT_EQ(ledger.append(charge_entry(kB, 1, 10, 10)), 2U);  // numbering did not skip
}

TEST(CostLedger, BalancesSumToZeroAndRebuildFromTheEntries) {
  CostLedger ledger;
  for (int i = 0; i < 50; ++i) {
    const TenantId t{static_cast<std::uint32_t>(i % 3)};
    const Micros amount = 1 + (i * 7919) % 1000;
    if (i % 4 == 3) {
      ASSERT_TRUE(ledger.append(lending_credit_entry(t, amount, i, i + 1)).has_value());
    } else if (i % 5 == 4) {
      ASSERT_TRUE(ledger.append(burst_cost(static_cast<std::uint32_t>(i % 2), amount, i)));
    } else {
      ASSERT_TRUE(ledger.append(charge_entry(t, amount, i, i + 1)).has_value());
    }
  }
  Micros sum = 0;
  for (const auto& [account, balance] : ledger.balances()) sum += balance;
  EXPECT_EQ(sum, 0);
  EXPECT_EQ(CostLedger::rebuild_balances(ledger.entries()), ledger.balances());
  EXPECT_TRUE(CostLedger::rebuild_balances({}).empty());
}

TEST(CostLedger, TenantTotalsCountEntriesEndingInTheWindow) {
  CostLedger ledger;
  ASSERT_TRUE(ledger.append(charge_entry(kA, 100, 0, 300)).has_value());
  ASSERT_TRUE(ledger.append(charge_entry(kA, 200, 300, 600)).has_value());
  LedgerEntry burst = charge_entry(kA, 40, 500, 600);
  burst.kind = EntryKind::kBurstCharge;
  ASSERT_TRUE(ledger.append(burst).has_value());
  ASSERT_TRUE(ledger.append(lending_credit_entry(kA, 30, 0, 600)).has_value());
  ASSERT_TRUE(ledger.append(charge_entry(kB, 1000, 0, 600)).has_value());  // another tenant
  ASSERT_TRUE(ledger.append(burst_cost(0, 35, 600)).has_value());          // the pool's, not A's

  CostLedger::TenantTotals all = ledger.tenant_totals(kA, 0, 10'000);
  EXPECT_EQ(all.charges, 100 + 200 + 40);
  EXPECT_EQ(all.credits, 30);
  // [300, 600): the first charge ends at 300 and counts; those ending at 600 do not.
  CostLedger::TenantTotals first = ledger.tenant_totals(kA, 300, 600);
  EXPECT_EQ(first.charges, 100);
  EXPECT_EQ(first.credits, 0);
  CostLedger::TenantTotals second = ledger.tenant_totals(kA, 600, 601);
  EXPECT_EQ(second.charges, 240);
  EXPECT_EQ(second.credits, 30);
  EXPECT_EQ(ledger.tenant_totals(kB, 0, 600).charges, 0);
  EXPECT_EQ(ledger.tenant_totals(kB, 0, 601).charges, 1000);
}

}  // namespace
}  // namespace tidepool
