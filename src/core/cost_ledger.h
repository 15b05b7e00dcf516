// The ledger of the internal market: append-only and double-entry. Every entry moves an amount
// from one account (debit) to another (credit), so the balances of all accounts always sum to 0,
// and every balance can be rebuilt from the entries alone.
//
// Accounts: one per tenant; the pool (the platform team that owns the GPUs: it receives what
// tenants pay and pays lenders their credits); one per burst provider (what rented capacity cost).
// Entries:
//   charge          tenant -> pool      a job's GPUs over an interval, at the price in force
//   lending credit  pool -> tenant      a lender's share of the price of its idle guarantee that
//                                       others used
//   burst charge    tenant -> pool      a job's rented GPUs, at the provider's price
//   burst cost      pool -> provider    what the pool owes the provider for them
// A tenant's balance is thus its credits minus its charges (negative: it has spent).
//
// CostLedger is a value type; it owns no threads and is not synchronised. Entries are numbered
// from 1 in order of appending. Closing the books (core/ledger_books.h) folds runs of old entries
// into fewer carried ones that keep seqs of the run, so the seqs of a long-lived ledger increase
// with gaps.
#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/ids.h"
#include "core/money.h"
#include "core/resources.h"

namespace tidepool {

enum class AccountKind : std::uint8_t { kPool, kTenant, kProvider };

struct Account {
  AccountKind kind = AccountKind::kPool;
  std::uint32_t id = 0;  // the tenant id or provider index; 0 for the pool

  static Account pool() { return {}; }
  static Account tenant(TenantId t) { return {AccountKind::kTenant, t.value}; }
  static Account provider(std::uint32_t index) { return {AccountKind::kProvider, index}; }

  friend auto operator<=>(const Account&, const Account&) = default;
};

enum class EntryKind : std::uint8_t { kCharge, kLendingCredit, kBurstCharge, kBurstCost };
// "charge", "lending-credit", "burst-charge", "burst-cost"
std::string_view entry_kind_name(EntryKind kind);
Result<EntryKind> parse_entry_kind(std::string_view name);

struct LedgerEntry {
  std::uint64_t seq = 0;  // set by append
  EntryKind kind = EntryKind::kCharge;
  Account debit;
  Account credit;
  Micros amount = 0;  // > 0
  Seconds from = 0;   // the interval it pays for, from < to... or an instant: from == to
  Seconds to = 0;
  std::optional<JobId> job;  // charges and burst entries
  TenantId tenant;           // the tenant charged or credited
  GpuModelId model;
  std::int64_t milli = 0;     // GPUs paid for (at the interval's end), milli-GPUs
  Micros price_per_hour = 0;  // the price in force (for a credit: the lender's rate)
  // A carried entry (closing the books) stands for `folded` (>= 1) entries of the same kind,
  // accounts, tenant, model (and job, or none): `amount` is theirs summed, [from, to] spans theirs,
  // `milli_seconds` is the GPU use they paid for, `milli` and `price_per_hour` are 0 where they
  // differed. 0 for an entry as posted.
  std::int64_t folded = 0;
  std::int64_t milli_seconds = 0;

  friend bool operator==(const LedgerEntry&, const LedgerEntry&) = default;
};

// The GPU use an entry pays for, in milli-GPU-seconds: milli x (to - from), or a carried entry's
// own figure.
[[nodiscard]] std::int64_t paid_milli_seconds(const LedgerEntry& entry);

// Closing the books (core/ledger_books.h): the entries with seq in [first_seq, last_seq] are
// replaced by `carried`, whose seqs lie in that run, increasing.
struct LedgerFold {
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
  std::vector<LedgerEntry> carried;

  friend bool operator==(const LedgerFold&, const LedgerFold&) = default;
};

class CostLedger {
 public:
  // Checks and appends `entry` (its seq is set to next_seq()): the amount must be positive, the
  // accounts different, the kind's accounts as in the file comment (a tenant account is
  // `entry.tenant`'s), to >= from. Fails, changing nothing, otherwise.
  Result<std::uint64_t> append(LedgerEntry entry);
  // An entry of a ledger kept before (a stored one, read back in seq order), checked as append
  // does, keeping its seq, which must be >= next_seq() (the seqs between were folded, or could
  // not be read back).
  Result<std::uint64_t> restore(LedgerEntry entry);
  // The seq the next entry appended takes.
  [[nodiscard]] std::uint64_t next_seq() const { return next_seq_; }
  // The next entry appended takes a seq after `seq` (the last one of a ledger read back, which
  // may have been left out).
  void skip_through(std::uint64_t seq) { next_seq_ = std::max(next_seq_, seq + 1); }
  // Replaces the run of `fold` by its carried entries. Fails, changing nothing, when the run is
  // empty or holds none of the entries, a carried seq lies outside it or does not increase, a
  // carried entry is one append refuses, or the carried entries would change a balance.
  Result<void> apply(const LedgerFold& fold);

  [[nodiscard]] std::span<const LedgerEntry> entries() const { return entries_; }
  [[nodiscard]] Micros balance(Account account) const;
  [[nodiscard]] const std::map<Account, Micros>& balances() const { return balances_; }

  // The balances the entries imply, computed from scratch.
  static std::map<Account, Micros> rebuild_balances(std::span<const LedgerEntry> entries);

  // Totals of one tenant's entries whose interval ends in [from, to): charges (both kinds), and
  // lending credits.
  struct TenantTotals {
    Micros charges = 0;
    Micros credits = 0;
  };
  [[nodiscard]] TenantTotals tenant_totals(TenantId tenant, Seconds from, Seconds to) const;

 private:
  std::vector<LedgerEntry> entries_;
  std::map<Account, Micros> balances_;
  std::uint64_t next_seq_ = 1;
};

}  // namespace tidepool
