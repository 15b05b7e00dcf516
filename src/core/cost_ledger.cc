#include "core/cost_ledger.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <utility>

namespace tidepool {
namespace {

constexpr std::array<std::pair<EntryKind, std::string_view>, 4> kKindNames = {{
    {EntryKind::kCharge, "charge"},
    {EntryKind::kLendingCredit, "lending-credit"},
    {EntryKind::kBurstCharge, "burst-charge"},
    {EntryKind::kBurstCost, "burst-cost"},
}};

std::string account_text(const Account& account) {
  switch (account.kind) {
    case AccountKind::kPool:
      return "the pool";
    case AccountKind::kTenant:
      return "tenant " + std::to_string(account.id);
    case AccountKind::kProvider:
      return "provider " + std::to_string(account.id);
  }
  return "an unknown account";
}

bool is_pool(const Account& a) { return a == Account::pool(); }

// Whether one side of an entry is the account its kind requires (the file comment of the header),
// and which that is, for the reason.
struct Side {
  bool ok = false;
  std::string_view wanted;
};

Side check_debit(const LedgerEntry& e) {
  switch (e.kind) {
    case EntryKind::kCharge:
    case EntryKind::kBurstCharge:
      return {e.debit == Account::tenant(e.tenant), "the entry's tenant"};
    case EntryKind::kLendingCredit:
    case EntryKind::kBurstCost:
      return {is_pool(e.debit), "the pool"};
  }
  return {};
}

Side check_credit(const LedgerEntry& e) {
  switch (e.kind) {
    case EntryKind::kCharge:
    case EntryKind::kBurstCharge:
      return {is_pool(e.credit), "the pool"};
    case EntryKind::kLendingCredit:
      return {e.credit == Account::tenant(e.tenant), "the entry's tenant"};
    case EntryKind::kBurstCost:
      return {e.credit.kind == AccountKind::kProvider, "a provider"};
  }
  return {};
}

}  // namespace

std::string_view entry_kind_name(EntryKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

Result<EntryKind> parse_entry_kind(std::string_view name) {
  for (const auto& [kind, text] : kKindNames) {
    if (text == name) return kind;
  }
  return fail("kind", "unknown entry kind '" + std::string(name) +
                          "'; expected charge, lending-credit, burst-charge or burst-cost");
}

std::int64_t paid_milli_seconds(const LedgerEntry& entry) {
  return entry.folded > 0 ? entry.milli_seconds : entry.milli * (entry.to - entry.from);
}

namespace {

// Why append refuses `entry`, if it does.
Result<void> check_entry(const LedgerEntry& entry) {
  if (entry.amount <= 0) {
    return fail("amount", "must be positive, got " + std::to_string(entry.amount) + " micros");
  }
  if (entry.to < entry.from) {
    return fail("to", "must not be before from (" + std::to_string(entry.to) + " < " +
                          std::to_string(entry.from) + ")");
  }
  const std::string kind(entry_kind_name(entry.kind));
  if (const Side debit = check_debit(entry); !debit.ok) {
    return fail("debit", "a " + kind + " entry debits " + std::string(debit.wanted) + ", not " +
                             account_text(entry.debit));
  }
  if (const Side credit = check_credit(entry); !credit.ok) {
    return fail("credit", "a " + kind + " entry credits " + std::string(credit.wanted) + ", not " +
                              account_text(entry.credit));
  }
  if (entry.debit == entry.credit) {
    return fail("credit", "must differ from the debit account");
  }
  return {};
}

}  // namespace

Result<std::uint64_t> CostLedger::append(LedgerEntry entry) {
  entry.seq = next_seq_;
  return restore(std::move(entry));
}

Result<std::uint64_t> CostLedger::restore(LedgerEntry entry) {
  if (auto ok = check_entry(entry); !ok) return std::unexpected(ok.error());
  if (entry.seq < next_seq_) {
    return fail("seq", "must be at least " + std::to_string(next_seq_) + ", got " +
                           std::to_string(entry.seq));
  }
  next_seq_ = entry.seq + 1;
  balances_[entry.debit] -= entry.amount;
  balances_[entry.credit] += entry.amount;
  entries_.push_back(std::move(entry));
  return entries_.back().seq;
}

Result<void> CostLedger::apply(const LedgerFold& fold) {
  const auto by_seq = [](const LedgerEntry& e, std::uint64_t seq) { return e.seq < seq; };
  const auto first = std::lower_bound(entries_.begin(), entries_.end(), fold.first_seq, by_seq);
  const auto last = std::lower_bound(first, entries_.end(), fold.last_seq + 1, by_seq);
  if (fold.last_seq < fold.first_seq || first == last) {
    return fail("fold", "the run " + std::to_string(fold.first_seq) + ".." +
                            std::to_string(fold.last_seq) + " holds no entry");
  }
  std::uint64_t previous = fold.first_seq - 1;
  for (const LedgerEntry& c : fold.carried) {
    if (c.seq <= previous || c.seq > fold.last_seq) {
      return fail("fold", "carried seq " + std::to_string(c.seq) +
                              " is outside the run or does not increase");
    }
    previous = c.seq;
    if (auto ok = check_entry(c); !ok) return ok;
  }
  const std::span<const LedgerEntry> run(first, last);
  if (rebuild_balances(run) != rebuild_balances(fold.carried)) {
    return fail("fold", "the carried entries would change a balance");
  }
  const auto at = entries_.erase(first, last);
  entries_.insert(at, fold.carried.begin(), fold.carried.end());
  return {};
}

Micros CostLedger::balance(Account account) const {
  auto it = balances_.find(account);
  return it == balances_.end() ? 0 : it->second;
}

std::map<Account, Micros> CostLedger::rebuild_balances(std::span<const LedgerEntry> entries) {
  std::map<Account, Micros> balances;
  for (const LedgerEntry& e : entries) {
    balances[e.debit] -= e.amount;
    balances[e.credit] += e.amount;
  }
  return balances;
}

CostLedger::TenantTotals CostLedger::tenant_totals(TenantId tenant, Seconds from,
                                                   Seconds to) const {
  TenantTotals totals;
  for (const LedgerEntry& e : entries_) {
    if (e.tenant != tenant || e.to < from || e.to >= to) continue;
    switch (e.kind) {
      case EntryKind::kCharge:
      case EntryKind::kBurstCharge:
        totals.charges += e.amount;
        break;
      case EntryKind::kLendingCredit:
        totals.credits += e.amount;
        break;
      case EntryKind::kBurstCost:
        break;  // the pool's debt to a provider, not the tenant's
    }
  }
  return totals;
}

}  // namespace tidepool
