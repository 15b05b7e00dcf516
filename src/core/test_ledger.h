// Ledger entries for tests (header only; not part of the core library): a charge of one H100 at
// 3.6 credits an hour, and a lending credit, over [from, to).
#pragma once

#include <cstdint>

#include "core/cost_ledger.h"
#include "core/test_pool.h"

namespace tidepool::test_support {

inline LedgerEntry charge_entry(TenantId tenant, Micros amount, Seconds from, Seconds to,
                                JobId job = JobId{7}) {
  LedgerEntry e;
  e.kind = EntryKind::kCharge;
  e.debit = Account::tenant(tenant);
  e.credit = Account::pool();
  e.amount = amount;
  e.from = from;
  e.to = to;
  e.job = job;
  e.tenant = tenant;
  e.model = kH100;
  e.milli = 1000;
  e.price_per_hour = 3'600'000;
  return e;
}

inline LedgerEntry lending_credit_entry(TenantId tenant, Micros amount, Seconds from, Seconds to) {
  LedgerEntry e = charge_entry(tenant, amount, from, to);
  e.kind = EntryKind::kLendingCredit;
  e.debit = Account::pool();
  e.credit = Account::tenant(tenant);
  e.job.reset();
  return e;
}

}  // namespace tidepool::test_support
