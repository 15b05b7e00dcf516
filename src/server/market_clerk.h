// The control plane's side of the internal market (server_market.h, which holds the core's market
// desk; core/budget_watch.h): the clerk meters what runs on the pool, charges rented capacity,
// posts and stores the ledger, and watches budgets and spend. A meter failure is a bug, not an
// input: it is a market.error event, so that it is seen. Without a market (none configured) every
// call does nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/budget_watch.h"
#include "core/error.h"
#include "server/plane_state.h"
#include "server/server_market.h"

namespace tidepool {

// GET /v1/bill: a tenant's ledger entries whose interval ends in [from, to), grouped.
enum class BillGrouping : std::uint8_t { kTeam, kJob, kModel, kLabel };
Result<BillGrouping> parse_bill_grouping(std::string_view text);
struct BillQuery {
  std::string tenant;
  std::int64_t from = 0;  // Unix seconds
  std::int64_t to = 0;
  BillGrouping by = BillGrouping::kTeam;
};

// Money as a JSON number in whole credits (exact to the micro-credit: doubles hold 15 digits).
[[nodiscard]] double whole_credits(Micros amount);

// The GPUs each task of a job rents on burst capacity: whole GPUs (a fraction rents one); and the
// whole job's.
[[nodiscard]] inline int rented_gpus_per_task(const JobSpec& spec) { return spec.gpus_per_task; }
[[nodiscard]] inline std::int64_t rented_gpus(const JobSpec& spec) {
  return std::int64_t{spec.tasks} * rented_gpus_per_task(spec);
}

// A running job charged its max_cost: it is stopped with `reason`, as one past its max_runtime.
struct OverCost {
  JobId job;
  std::string reason;
};

class MarketClerk {
 public:
  explicit MarketClerk(PlaneState& state) : state_(state) {}

  // Opens the market of the setup (if any) over `tenants`, with the stored ledger, and meters the
  // running jobs from now on; budget changes go to `repairs`.
  Result<void> open(const Snapshot& snapshot, const TenantsSpec& tenants, Instant now,
                    Batch& repairs);
  // The market; null without one.
  [[nodiscard]] const ServerMarket* market() const { return market_ ? &*market_ : nullptr; }

  // Accrues the meter up to now: before any change of what runs or of the nodes.
  void advance(Instant now, Batch& batch);
  // A job starts on the pool at `assignments`, or stops running there.
  void start(const ServerJob& job, const std::vector<Assignment>& assignments, Instant now,
             Batch& batch);
  void stop(const ServerJob& job, Instant now, Batch& batch);
  // Charges the job's rented GPUs up to now (burst_desk.h).
  void charge_rental(ServerJob& job, Instant now, Batch& batch);
  // When a posting is due: posts, charges the rentals, stores, checks budgets and (once a UTC day)
  // spend anomalies.
  void post_ledger(Instant now, Batch& batch);
  // The running jobs charged their max_cost.
  [[nodiscard]] std::vector<OverCost> over_cost() const;
  // Tells the scheduler which tenants are held back for budget (after a rebuild).
  void apply_budget_holds(Instant now, Batch& batch);
  // The tenants changed: the desk books by the new ones.
  void replace_book(const TenantsSpec& tenants, Instant now, Batch& batch);

  // Bursting: the offers of the market file (none without a market) and the policy, when bursting
  // is on.
  [[nodiscard]] const std::vector<BurstOffer>& offers() const;
  [[nodiscard]] std::optional<BurstPolicy> burst_policy() const;
  [[nodiscard]] std::optional<std::size_t> offer_index(const std::string& name) const;
  // The hook of a provider of the market file ("" if none).
  [[nodiscard]] std::string hook_of(const std::string& provider) const;
  // When the next posting is due, in milliseconds.
  [[nodiscard]] std::optional<Instant> next_post() const;

  // Spend anomalies raised since the server started, by tenant.
  [[nodiscard]] const std::map<std::string, std::int64_t>& spend_anomalies() const {
    return spend_anomalies_;
  }

 private:
  // Moves the entries not yet stored into the batch.
  void store_ledger(Batch& batch);
  // Closing the books (core/ledger_books.h): the next fold due, if every entry is stored and the
  // round has room for it.
  void close_books(Instant now, Batch& batch);
  // The budget watch's events as server events and settings records; `announce` false: holds are
  // applied without budget.exhausted events (at start).
  void check_budgets(Instant now, Batch& batch, bool announce = true);
  void check_anomalies(Instant now, Batch& batch);
  void failed(const Error& error, Instant now, Batch& batch);

  PlaneState& state_;
  std::optional<ServerMarket> market_;
  BudgetWatch budget_watch_;  // budgets and spend anomalies of the market
  std::map<std::string, std::int64_t> spend_anomalies_;  // raised since the start, by tenant
};

}  // namespace tidepool
