#include "server/market_clerk.h"

#include <fmt/format.h>

#include <utility>

#include "core/tidal_window.h"

namespace tidepool {
namespace {

constexpr std::string_view kAlertPrefix = "market/budget_alert/";
constexpr std::string_view kAnomalyDayKey = "market/anomaly_day";

// A budget event's figures: {"tenant", "quarter", "state", "budget", "spend", "charges",
// "credits", "remaining"}.
nlohmann::json budget_figures(const MarketEvent& event) {
  const BudgetStatus& status = event.status;
  return {{"tenant", event.tenant_name},
          {"quarter", event.quarter},
          {"state", budget_state_name(status.state)},
          {"budget", whole_credits(status.budget)},
          {"spend", whole_credits(status.spend)},
          {"charges", whole_credits(status.charges)},
          {"credits", whole_credits(status.credits)},
          {"remaining", whole_credits(status.remaining)}};
}

// What a job's GPUs hold, for the meter: the pool's share of each of its GPUs.
std::int64_t metered_milli(const JobSpec& spec) {
  return std::int64_t{spec.gpus_per_task} * task_gpu_milli(spec);
}

PriceClass price_class(const JobSpec& spec) {
  return spec.preemptible ? PriceClass::kPreemptible : PriceClass::kStandard;
}

}  // namespace

double whole_credits(Micros amount) {
  return static_cast<double>(amount) / static_cast<double>(kMicrosPerUnit);
}

Result<BillGrouping> parse_bill_grouping(std::string_view text) {
  if (text == "team") return BillGrouping::kTeam;
  if (text == "job") return BillGrouping::kJob;
  if (text == "model") return BillGrouping::kModel;
  if (text == "label") return BillGrouping::kLabel;
  return fail("by", fmt::format("unknown grouping '{}'; expected team, job, model or label", text));
}

Result<void> MarketClerk::open(const Snapshot& snapshot, const TenantsSpec& tenants, Instant now,
                               Batch& repairs) {
  const ControlPlaneSetup& setup = state_.setup();
  if (!setup.market) return {};
  auto book = TenantBook::create(tenants, setup.cluster.models);
  if (!book) return std::unexpected(book.error());
  const Seconds now_s = unix_seconds(now);
  const Scheduler& scheduler = state_.scheduler();
  auto market = ServerMarket::create(*setup.market, setup.ledger_posting_interval, scheduler.pool(),
                                     *book, snapshot.ledger, now_s);
  if (!market) return std::unexpected(market.error());
  market_ = std::move(*market);
  budget_watch_ = BudgetWatch{};
  budget_watch_.set_next_spend_day(utc_day(now_s));
  for (const KeyedRecord& setting : snapshot.settings) {
    auto value = nlohmann::json::parse(setting.document, nullptr, false);
    if (setting.key.starts_with(kAlertPrefix) && value.is_object()) {
      budget_watch_.set_alerted(setting.key.substr(kAlertPrefix.size()),
                                value.value("quarter", ""));
    } else if (setting.key == kAnomalyDayKey && value.is_object()) {
      budget_watch_.set_next_spend_day(value.value("day", utc_day(now_s)));
    }
  }
  // Jobs restored running are metered again from now: the time the server was down is not
  // charged.
  for (JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state != JobState::kRunning) continue;
    auto assignments = state_.to_assignments(job);
    if (!assignments) continue;
    const auto tenant = scheduler.book().find_tenant(job.spec.tenant);
    if (!tenant) continue;
    auto ok = market_->desk().start(job.id, *tenant, *assignments, metered_milli(job.spec),
                                    scheduler.pool(), price_class(job.spec), now_s);
    if (!ok) return fail("market", fmt::format("job {}: {}", id, ok.error().message()));
  }
  // The budgets as they stand: tenants that spent theirs wait from the start (announced before the
  // restart already: no second budget.exhausted).
  check_budgets(now, repairs, /*announce=*/false);
  return {};
}

void MarketClerk::failed(const Error& error, Instant now, Batch& batch) {
  state_.emit(batch, now, "market.error", {{"reason", error.message()}});
}

void MarketClerk::advance(Instant now, Batch& batch) {
  if (!market_) return;
  if (auto ok = market_->desk().advance(unix_seconds(now), state_.scheduler().pool()); !ok) {
    failed(ok.error(), now, batch);
  }
}

void MarketClerk::start(const ServerJob& job, const std::vector<Assignment>& assignments,
                        Instant now, Batch& batch) {
  if (!market_) return;
  const Scheduler& scheduler = state_.scheduler();
  const auto tenant = scheduler.book().find_tenant(job.spec.tenant);
  if (!tenant) return;
  // The pass took its decisions with the state the meter was advanced over at its start.
  auto ok = market_->desk().start(job.id, *tenant, assignments, metered_milli(job.spec),
                                  scheduler.pool(), price_class(job.spec), unix_seconds(now));
  if (!ok) failed(ok.error(), now, batch);
}

void MarketClerk::stop(const ServerJob& job, Instant now, Batch& batch) {
  if (!market_) return;
  advance(now, batch);
  if (auto ok = market_->desk().stop(job.id, unix_seconds(now)); !ok) {
    failed(ok.error(), now, batch);
  }
  store_ledger(batch);
}

void MarketClerk::charge_rental(ServerJob& job, Instant now, Batch& batch) {
  if (!market_ || !job.burst) return;
  BurstRun& run = *job.burst;
  const Seconds from = unix_seconds(run.charged_to);
  const Seconds to = unix_seconds(now);
  if (to <= from) return;
  run.charged_to = instant_from_unix_seconds(to);
  const auto offer = offer_index(run.offer);
  const auto tenant = state_.scheduler().book().find_tenant(job.spec.tenant);
  if (!offer || !tenant) return;  // the files changed: nothing to charge it to
  auto charged = market_->charge_burst(job.id, *tenant, *offer, rented_gpus(job.spec), from, to);
  if (!charged) failed(charged.error(), now, batch);
  store_ledger(batch);
}

void MarketClerk::store_ledger(Batch& batch) {
  if (!market_) return;
  const std::int64_t limit = state_.setup().ledger_entries_per_round;
  const auto held = static_cast<std::int64_t>(batch.ledger.size());
  if (limit > 0 && held >= limit) {
    if (market_->has_unstored()) state_.mark_dirty();
    return;
  }
  const auto most = static_cast<std::size_t>(limit > 0 ? limit - held : 0);
  for (LedgerRecord& record : market_->take_unstored(state_.scheduler().pool().models(), most)) {
    batch.ledger.push_back(std::move(record));
  }
  if (market_->has_unstored()) state_.mark_dirty();  // the rest in the next round, at once
}

void MarketClerk::close_books(Instant now, Batch& batch) {
  if (!market_ || market_->has_unstored()) return;  // a fold takes stored entries only
  const std::int64_t limit = state_.setup().ledger_entries_per_round;
  const auto held = static_cast<std::int64_t>(batch.ledger.size());
  if (limit > 0 && held >= limit) return;  // the next round looks
  auto fold = market_->close_books(unix_seconds(now), state_.setup().ledger_books,
                                   state_.scheduler().pool().models(),
                                   static_cast<std::size_t>(limit > 0 ? limit - held : 0),
                                   [this](JobId job) { return state_.live().contains(job); });
  if (!fold) return;
  batch.ledger_folds.push_back(std::move(*fold));
  state_.mark_dirty();  // more may be due: the next round looks at once
}

void MarketClerk::post_ledger(Instant now, Batch& batch) {
  if (!market_) return;
  store_ledger(batch);  // what an earlier round had no room for
  close_books(now, batch);
  if (!market_->posting_due(unix_seconds(now))) return;
  advance(now, batch);
  if (auto ok = market_->post(unix_seconds(now)); !ok) failed(ok.error(), now, batch);
  for (JobId id : state_.live()) {
    ServerJob& job = state_.jobs().at(id);
    if (!job.burst) continue;
    charge_rental(job, now, batch);
    PlaneState::stage(batch, job);
  }
  store_ledger(batch);
  check_budgets(now, batch);
  check_anomalies(now, batch);
}

std::vector<OverCost> MarketClerk::over_cost() const {
  std::vector<OverCost> over;
  if (!market_) return over;
  const std::string& currency = market_->spec().currency;
  for (JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state != JobState::kRunning || !job.spec.max_cost) continue;
    const Micros cost = market_->desk().job_cost(id);
    if (cost < *job.spec.max_cost) continue;
    over.push_back(
        {id, fmt::format("stopped: charged {} {}, reaching its max_cost of {} {}", money_text(cost),
                         currency, money_text(*job.spec.max_cost), currency)});
  }
  return over;
}

void MarketClerk::apply_budget_holds(Instant now, Batch& batch) {
  // The holds name tenants of the scheduler's own book: a refusal is a bug, shown and not hidden.
  if (auto ok = budget_watch_.apply(state_.scheduler()); !ok) {
    state_.internal_error("budget holds", ok.error(), now, batch);
  }
}

void MarketClerk::replace_book(const TenantsSpec& tenants, Instant now, Batch& batch) {
  if (!market_) return;
  auto book = TenantBook::create(tenants, state_.setup().cluster.models);
  if (auto ok =
          book ? market_->desk().replace_book(*book) : Result<void>(std::unexpected(book.error()));
      !ok) {
    failed(ok.error(), now, batch);
  }
}

void MarketClerk::check_budgets(Instant now, Batch& batch, bool announce) {
  for (const MarketEvent& event : budget_watch_.check_budgets(market_->desk(), unix_seconds(now))) {
    switch (event.kind) {
      case MarketEventKind::kBudgetAlert:
        batch.settings.push_back(KeyedRecord{std::string(kAlertPrefix) + event.tenant_name,
                                             nlohmann::json{{"quarter", event.quarter}}.dump()});
        break;
      case MarketEventKind::kBudgetExhausted:
        // Held before a restart already: announced then.
        if (!announce) continue;
        state_.mark_dirty();
        break;
      case MarketEventKind::kBudgetRestored:
        state_.mark_dirty();
        break;
      case MarketEventKind::kSpendAnomaly:
        continue;
    }
    state_.emit(batch, now, std::string(market_event_name(event.kind)), budget_figures(event));
  }
  apply_budget_holds(now, batch);
}

void MarketClerk::check_anomalies(Instant now, Batch& batch) {
  const std::optional<std::int64_t> checked = budget_watch_.next_spend_day();
  for (const MarketEvent& event : budget_watch_.check_spend(market_->desk(), unix_seconds(now))) {
    state_.emit(batch, now, std::string(market_event_name(event.kind)),
                {{"tenant", event.tenant_name},
                 {"day", utc_date_text(event.day * kSecondsPerDay)},
                 {"spend", whole_credits(event.anomaly.day_spend)},
                 {"trailing_average", whole_credits(event.anomaly.trailing_average)},
                 {"reason", event.reason}});
    if (event.kind == MarketEventKind::kSpendAnomaly) ++spend_anomalies_[event.tenant_name];
  }
  if (budget_watch_.next_spend_day() != checked) {
    batch.settings.push_back(
        KeyedRecord{std::string(kAnomalyDayKey),
                    nlohmann::json{{"day", *budget_watch_.next_spend_day()}}.dump()});
  }
}

const std::vector<BurstOffer>& MarketClerk::offers() const {
  static const std::vector<BurstOffer> kNone;
  return market_ ? market_->burst_offers() : kNone;
}

std::optional<BurstPolicy> MarketClerk::burst_policy() const {
  return market_ ? market_->burst_policy() : std::nullopt;
}

std::optional<std::size_t> MarketClerk::offer_index(const std::string& name) const {
  const std::vector<BurstOffer>& all = offers();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].name == name) return i;
  }
  return std::nullopt;
}

std::string MarketClerk::hook_of(const std::string& provider) const {
  if (!market_) return {};
  for (const BurstProviderSpec& p : market_->spec().burst_providers) {
    if (p.name == provider) return p.hook;
  }
  return {};
}

std::optional<Instant> MarketClerk::next_post() const {
  if (!market_) return std::nullopt;
  return instant_from_unix_seconds(market_->next_post());
}

}  // namespace tidepool
