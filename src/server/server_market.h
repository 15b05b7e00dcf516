// The internal market inside the server (`market: PATH` in the server's configuration): the
// market desk the simulator drives too (core/market_desk.h: meter, ledger, usage, totals) charges
// every running job at the price in force and credits lenders; the control plane stores each
// ledger entry (store.h: LedgerRecord) and, through the budget watch (core/budget_watch.h), holds
// back tenants whose quarterly budget is spent. What is the server's own: the market file, the
// posting schedule, and the store records.
//
// Time is Unix seconds (epoch 0). The caller keeps the desk in step: advance(now) before any
// change of what runs, then start()/stop() at now; post(now) every posting interval. Entries
// appended since the last take_unstored() are handed out as store records, numbered after those
// already stored.
//
// Stored entries name tenants and models (their ids may change when the files do): on restart they
// are appended again in seq order, which rebuilds every balance; an entry whose tenant or model the
// files no longer have stays in the store but out of the balances (counted in skipped()).
//
// A value type owned by the control plane; not synchronised.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "config/market_file.h"
#include "core/burst.h"
#include "core/cost_ledger.h"
#include "core/error.h"
#include "core/ledger_books.h"
#include "core/market_desk.h"
#include "core/pool.h"
#include "core/tenants.h"
#include "store/store.h"

namespace tidepool {

inline constexpr Seconds kDefaultLedgerPostingInterval = 60;

// The entry as stored: {"kind", "tenant", "model", "job" (or null), "milli", "amount"
// (micro-credits), "from", "to", "price_per_hour" (micro-credits), "provider" (burst cost only)}.
nlohmann::json ledger_entry_json(const LedgerEntry& entry, const TenantBook& book,
                                 const GpuModelCatalog& models);
// Reads a stored entry back with the current ids; fails naming the field (an unknown tenant or
// model included).
Result<LedgerEntry> ledger_entry_from_json(const nlohmann::json& document, const TenantBook& book,
                                           const GpuModelCatalog& models);

class ServerMarket {
 public:
  // `pool` and `book` with nothing running yet (usage is recorded by start()); `stored`: the
  // ledger as stored, in seq order.
  static Result<ServerMarket> create(MarketSpec spec, Seconds posting_interval, const Pool& pool,
                                     const TenantBook& book, std::span<const LedgerRecord> stored,
                                     Seconds now);

  // The desk: its meter, ledger, totals and budgets; advance, start, stop and the rest.
  [[nodiscard]] MarketDesk& desk() { return desk_; }
  [[nodiscard]] const MarketDesk& desk() const { return desk_; }

  [[nodiscard]] bool posting_due(Seconds now) const { return now >= next_post_; }
  // Posts everything accrued up to now (advance first) and sets the next posting time.
  Result<void> post(Seconds now);

  // Bursting (core/burst.h): the offers of the market file (models interned like the pool's), and
  // the policy when the file sets a threshold.
  [[nodiscard]] const std::vector<BurstOffer>& burst_offers() const { return desk_.offers(); }
  [[nodiscard]] std::optional<BurstPolicy> burst_policy() const;
  // Charges job `job` of `tenant` for `gpus` GPUs of offer `offer` over [from, to) at the offer's
  // price; returns the amount (0 for an interval too short to cost a micro-credit).
  Result<Micros> charge_burst(JobId job, TenantId tenant, std::size_t offer, std::int64_t gpus,
                              Seconds from, Seconds to) {
    return desk_.charge_burst(job, tenant, offer, gpus, from, to, to - from);
  }

  // The entries appended since the last call, as store records (tenants and models by name): the
  // first `most` of them (0: all); the rest are taken by the next calls.
  std::vector<LedgerRecord> take_unstored(const GpuModelCatalog& models, std::size_t most = 0);
  // Closing the books (core/ledger_books.h): the next fold of stored entries due at `now`, with
  // at most `most` carried entries (0: any number), applied to the desk's ledger and returned for
  // the store. Looks once each kLedgerSettled (an hour), and again after each fold until nothing
  // more is due.
  std::optional<LedgerFoldRecord> close_books(Seconds now, const BookTerms& terms,
                                              const GpuModelCatalog& models, std::size_t most,
                                              std::function<bool(JobId)> live);
  // Whether entries wait to be taken.
  [[nodiscard]] bool has_unstored() const { return stored_ < desk_.ledger().entries().size(); }

  [[nodiscard]] const MarketSpec& spec() const { return spec_; }
  [[nodiscard]] std::size_t skipped() const { return skipped_; }
  [[nodiscard]] Seconds posting_interval() const { return posting_interval_; }
  [[nodiscard]] Seconds next_post() const { return next_post_; }

 private:
  ServerMarket(MarketSpec spec, Seconds posting_interval, MarketDesk desk, Seconds now)
      : spec_(std::move(spec)),
        posting_interval_(posting_interval),
        desk_(std::move(desk)),
        next_post_(now + posting_interval) {}

  MarketSpec spec_;
  Seconds posting_interval_ = kDefaultLedgerPostingInterval;
  MarketDesk desk_;
  Seconds next_post_ = 0;
  // The entry as stored.
  [[nodiscard]] LedgerRecord record(const LedgerEntry& entry, const GpuModelCatalog& models) const;

  std::size_t stored_ = 0;  // entries already in the store (or read from it)
  std::int64_t books_checked_ =
      std::numeric_limits<std::int64_t>::min();  // the day nothing was due
  std::size_t skipped_ = 0;
};

}  // namespace tidepool
