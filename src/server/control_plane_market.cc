// The control plane's side of the internal market: metering what runs, posting and storing the
// ledger, budgets and spend anomalies, and the prices and bills the API shows.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/tidal_window.h"
#include "server/control_plane.h"

namespace tidepool {
namespace {

// Money as a JSON number in whole credits (exact to the micro-credit: doubles hold 15 digits).
double units(Micros amount) {
  return static_cast<double>(amount) / static_cast<double>(kMicrosPerUnit);
}

double ratio(Ppm value) { return static_cast<double>(value) / static_cast<double>(kPpmOne); }

constexpr std::string_view kAlertPrefix = "market/budget_alert/";
constexpr std::string_view kAnomalyDayKey = "market/anomaly_day";

std::unexpected<Refused> no_market() {
  return refuse(Refusal::kNotFound, Error{"market",
                                          "this server runs without an internal market; add "
                                          "`market: PATH` (a market file) to its configuration"});
}

}  // namespace

Result<BillGrouping> parse_bill_grouping(std::string_view text) {
  if (text == "team") return BillGrouping::kTeam;
  if (text == "job") return BillGrouping::kJob;
  if (text == "model") return BillGrouping::kModel;
  if (text == "label") return BillGrouping::kLabel;
  return fail("by", fmt::format("unknown grouping '{}'; expected team, job, model or label", text));
}

Result<void> ControlPlane::open_market(const Snapshot& snapshot, const TenantsSpec& tenants,
                                       std::int64_t now_ms, Batch& repairs) {
  if (!setup_.market) return {};
  auto book = TenantBook::create(tenants, setup_.cluster.models);
  if (!book) return std::unexpected(book.error());
  const Seconds now = to_seconds(now_ms);
  auto market = ServerMarket::create(*setup_.market, setup_.ledger_posting_interval,
                                     scheduler_.pool(), *book, snapshot.ledger, now);
  if (!market) return std::unexpected(market.error());
  market_ = std::move(*market);
  budget_watch_ = BudgetWatch{};
  budget_watch_.set_next_spend_day(utc_day(now));
  for (const KeyedRecord& setting : snapshot.settings) {
    auto value = nlohmann::json::parse(setting.document, nullptr, false);
    if (setting.key.starts_with(kAlertPrefix) && value.is_object()) {
      budget_watch_.set_alerted(setting.key.substr(kAlertPrefix.size()),
                                value.value("quarter", ""));
    } else if (setting.key == kAnomalyDayKey && value.is_object()) {
      budget_watch_.set_next_spend_day(value.value("day", utc_day(now)));
    }
  }
  // Jobs restored running are metered again from now: the time the server was down is not
  // charged.
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (job.state != JobState::kRunning) continue;
    auto assignments = to_assignments(job);
    if (!assignments) continue;
    const auto tenant = scheduler_.book().find_tenant(job.spec.tenant);
    if (!tenant) continue;
    const std::int64_t milli =
        job.spec.gpus_per_task == 0 ? 0 : std::int64_t{job.spec.gpus_per_task} * job.spec.gpu_milli;
    auto ok = market_->desk().start(
        JobId{static_cast<std::uint32_t>(job.id)}, *tenant, *assignments, milli, scheduler_.pool(),
        job.spec.preemptible ? PriceClass::kPreemptible : PriceClass::kStandard, now);
    if (!ok) return fail("market", fmt::format("job {}: {}", id, ok.error().message()));
  }
  // The budgets as they stand: tenants that spent theirs wait from the start (announced before the
  // restart already: no second budget.exhausted).
  check_budgets(now_ms, repairs, /*announce=*/false);
  return {};
}

void ControlPlane::market_failed(const Error& error, std::int64_t now_ms, Batch& batch) {
  emit(batch, now_ms, "market.error", {{"reason", error.message()}});
}

namespace {

// A budget event's figures: {"tenant", "quarter", "state", "budget", "spend", "charges",
// "credits", "remaining"}.
nlohmann::json budget_figures(const MarketEvent& event) {
  const BudgetStatus& status = event.status;
  return {{"tenant", event.tenant_name},
          {"quarter", event.quarter},
          {"state", budget_state_name(status.state)},
          {"budget", units(status.budget)},
          {"spend", units(status.spend)},
          {"charges", units(status.charges)},
          {"credits", units(status.credits)},
          {"remaining", units(status.remaining)}};
}

}  // namespace

void ControlPlane::meter_advance(std::int64_t now_ms, Batch& batch) {
  if (!market_) return;
  if (auto ok = market_->desk().advance(to_seconds(now_ms), scheduler_.pool()); !ok) {
    market_failed(ok.error(), now_ms, batch);
  }
}

void ControlPlane::meter_start(const ServerJob& job, const std::vector<Assignment>& assignments,
                               std::int64_t now_ms, Batch& batch) {
  if (!market_) return;
  const auto tenant = scheduler_.book().find_tenant(job.spec.tenant);
  if (!tenant) return;
  const std::int64_t milli =
      job.spec.gpus_per_task == 0 ? 0 : std::int64_t{job.spec.gpus_per_task} * job.spec.gpu_milli;
  // The pass took its decisions with the state the meter was advanced over at its start.
  auto ok = market_->desk().start(
      JobId{static_cast<std::uint32_t>(job.id)}, *tenant, assignments, milli, scheduler_.pool(),
      job.spec.preemptible ? PriceClass::kPreemptible : PriceClass::kStandard, to_seconds(now_ms));
  if (!ok) market_failed(ok.error(), now_ms, batch);
}

void ControlPlane::meter_stop(const ServerJob& job, std::int64_t now_ms, Batch& batch) {
  if (!market_) return;
  meter_advance(now_ms, batch);
  if (auto ok = market_->desk().stop(JobId{static_cast<std::uint32_t>(job.id)}, to_seconds(now_ms));
      !ok) {
    market_failed(ok.error(), now_ms, batch);
  }
  store_ledger(batch);
}

void ControlPlane::store_ledger(Batch& batch) {
  if (!market_) return;
  for (LedgerRecord& record : market_->take_unstored(scheduler_.pool().models())) {
    batch.ledger.push_back(std::move(record));
  }
}

void ControlPlane::post_ledger(std::int64_t now_ms, Batch& batch) {
  if (!market_ || !market_->posting_due(to_seconds(now_ms))) return;
  meter_advance(now_ms, batch);
  if (auto ok = market_->post(to_seconds(now_ms)); !ok) market_failed(ok.error(), now_ms, batch);
  for (std::int64_t id : live_) {
    ServerJob& job = jobs_.at(id);
    if (!job.burst) continue;
    charge_burst(job, now_ms, batch);
    stage(batch, job);
  }
  store_ledger(batch);
  check_budgets(now_ms, batch);
  check_anomalies(now_ms, batch);
}

void ControlPlane::stop_over_cost(std::int64_t now_ms, Batch& batch) {
  if (!market_) return;
  std::vector<std::pair<std::int64_t, Micros>> over;
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (job.state != JobState::kRunning || !job.spec.max_cost) continue;
    const Micros cost = market_->desk().job_cost(JobId{static_cast<std::uint32_t>(id)});
    if (cost >= *job.spec.max_cost) over.emplace_back(id, cost);
  }
  for (const auto& [id, cost] : over) {
    ServerJob& job = jobs_.at(id);
    const std::string& currency = market_->spec().currency;
    end_job(job, JobState::kFailed,
            fmt::format("stopped: charged {} {}, reaching its max_cost of {} {}", money_text(cost),
                        currency, money_text(*job.spec.max_cost), currency),
            now_ms, batch);
  }
}

void ControlPlane::apply_budget_holds(std::int64_t now_ms, Batch& batch) {
  // The holds name tenants of the scheduler's own book: a refusal is a bug, shown and not hidden.
  if (auto ok = budget_watch_.apply(scheduler_); !ok) {
    internal_error("budget holds", ok.error(), now_ms, batch);
  }
}

void ControlPlane::check_budgets(std::int64_t now_ms, Batch& batch, bool announce) {
  for (const MarketEvent& event :
       budget_watch_.check_budgets(market_->desk(), to_seconds(now_ms))) {
    switch (event.kind) {
      case MarketEventKind::kBudgetAlert:
        batch.settings.push_back(KeyedRecord{std::string(kAlertPrefix) + event.tenant_name,
                                             nlohmann::json{{"quarter", event.quarter}}.dump()});
        break;
      case MarketEventKind::kBudgetExhausted:
        // Held before a restart already: announced then.
        if (!announce) continue;
        dirty_ = true;
        break;
      case MarketEventKind::kBudgetRestored:
        dirty_ = true;
        break;
      case MarketEventKind::kSpendAnomaly:
        continue;
    }
    emit(batch, now_ms, std::string(market_event_name(event.kind)), budget_figures(event));
  }
  apply_budget_holds(now_ms, batch);
}

void ControlPlane::check_anomalies(std::int64_t now_ms, Batch& batch) {
  const std::optional<std::int64_t> checked = budget_watch_.next_spend_day();
  for (const MarketEvent& event : budget_watch_.check_spend(market_->desk(), to_seconds(now_ms))) {
    emit(batch, now_ms, std::string(market_event_name(event.kind)),
         {{"tenant", event.tenant_name},
          {"day", utc_date_text(event.day * kSecondsPerDay)},
          {"spend", units(event.anomaly.day_spend)},
          {"trailing_average", units(event.anomaly.trailing_average)},
          {"reason", event.reason}});
  }
  if (budget_watch_.next_spend_day() != checked) {
    batch.settings.push_back(
        KeyedRecord{std::string(kAnomalyDayKey),
                    nlohmann::json{{"day", *budget_watch_.next_spend_day()}}.dump()});
  }
}

void ControlPlane::market_figures(Figures& figures) const {
  if (!market_) return;
  const ChargeMeter& meter = market_->desk().meter();
  const GpuModelCatalog& models = scheduler_.pool().models();
  for (int m = 0; m < models.size(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    for (PriceClass c : {PriceClass::kStandard, PriceClass::kPreemptible, PriceClass::kEmergency}) {
      figures.price_per_gpu_hour[{models.name(model), std::string(price_class_name(c))}] =
          meter.price_per_hour(model, c);
    }
  }
  const MarketDesk& desk = market_->desk();
  const TenantBook& book = scheduler_.book();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    const std::string& name = book.tenant_name(tenant);
    const MoneyTotals all = desk.tenant_totals(tenant);
    figures.tenant_charges[name] = all.charges;
    figures.tenant_credits[name] = all.credits;
    if (const auto status = desk.budget_status(tenant, desk.now())) {
      figures.tenant_budget_spend[name] = mul_div_round(status->spend, kPpmOne, status->budget);
    }
  }
  const std::vector<std::int64_t> rented = rented_gpus_by_offer();
  for (std::size_t i = 0; i < rented.size(); ++i) {
    figures.burst_gpus[market_->burst_offers()[i].name] = rented[i];
  }
  figures.burst_rentals = burst_rentals_;
}

Reply ControlPlane::prices(const Principal& who, std::int64_t now_ms) {
  (void)who;  // every role may read the prices
  if (!market_) return no_market();
  Batch ignored;
  meter_advance(now_ms, ignored);
  const ChargeMeter& meter = market_->desk().meter();
  const PriceSchedule& schedule = meter.schedule();
  const GpuModelCatalog& models = scheduler_.pool().models();
  nlohmann::json list = nlohmann::json::array();
  for (int m = 0; m < models.size(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    const Price& price = meter.price(model);
    nlohmann::json classes = nlohmann::json::object();
    for (PriceClass c : {PriceClass::kStandard, PriceClass::kPreemptible, PriceClass::kEmergency}) {
      classes[std::string(price_class_name(c))] = units(class_price(schedule, price, c));
    }
    list.push_back({{"model", models.name(model)},
                    {"cost_base", units(price.cost_base)},
                    {"utilisation", ratio(price.utilisation)},
                    {"utilisation_multiplier", ratio(price.utilisation_multiplier)},
                    {"time_multiplier", ratio(price.time_multiplier)},
                    {"standard_per_gpu_hour", units(price.standard_per_hour)},
                    {"per_gpu_hour", std::move(classes)},
                    {"from", price.from},
                    {"until", price.until}});
  }
  return answer({{"currency", market_->spec().currency},
                 {"period", schedule.period},
                 {"class_multipliers",
                  {{"standard", ratio(schedule.standard)},
                   {"preemptible", ratio(schedule.preemptible)},
                   {"emergency", ratio(schedule.emergency)}}},
                 {"models", std::move(list)}});
}

Reply ControlPlane::bill(const Principal& who, const BillQuery& query) const {
  if (who.role == Role::kAgent) {
    return refuse(Refusal::kForbidden, Error{"role", "agent tokens cannot read bills"});
  }
  if (who.role == Role::kUser && query.tenant != who.tenant) {
    return refuse(Refusal::kForbidden,
                  Error{"tenant", fmt::format("this token sees tenant '{}' only", who.tenant)});
  }
  if (!market_) return no_market();
  const TenantBook& book = scheduler_.book();
  const auto tenant = book.find_tenant(query.tenant);
  if (!tenant) {
    return refuse(Refusal::kNotFound, Error{"tenant", fmt::format("no tenant '{}'", query.tenant)});
  }
  struct Group {
    Micros charges = 0;
    Micros credits = 0;
    std::int64_t milli_seconds = 0;
    std::int64_t entries = 0;
  };
  std::map<std::string, Group> groups;
  Group total;
  const GpuModelCatalog& models = scheduler_.pool().models();
  for (const LedgerEntry& e : market_->desk().ledger().entries()) {
    if (e.tenant != *tenant || e.to < query.from || e.to >= query.to) continue;
    if (e.kind == EntryKind::kBurstCost) continue;
    const bool credit = e.kind == EntryKind::kLendingCredit;
    const ServerJob* job = nullptr;
    if (e.job) {
      if (auto it = jobs_.find(e.job->value); it != jobs_.end()) job = &it->second;
    }
    std::string key;
    switch (query.by) {
      case BillGrouping::kModel:
        key = models.name(e.model);
        break;
      case BillGrouping::kTeam:
        key = job ? job->spec.queue : credit ? "(lending credits)" : "(unknown job)";
        break;
      case BillGrouping::kJob:
        key = job      ? fmt::format("{} {}", job->id, job->spec.name)
              : credit ? "(lending credits)"
                       : "(unknown job)";
        break;
      case BillGrouping::kLabel:
        if (!job) {
          key = credit ? "(lending credits)" : "(unknown job)";
        } else if (job->spec.labels.empty()) {
          key = "(no labels)";
        } else {
          for (const auto& [label, value] : job->spec.labels) {
            if (!key.empty()) key += ",";
            key += label + "=" + value;
          }
        }
        break;
    }
    Group& g = groups[key];
    for (Group* target : {&g, &total}) {
      ++target->entries;
      if (credit) {
        target->credits += e.amount;
      } else {
        target->charges += e.amount;
        target->milli_seconds += e.milli * (e.to - e.from);
      }
    }
  }
  auto group_json = [](const Group& g) {
    return nlohmann::json{{"charges", units(g.charges)},
                          {"credits", units(g.credits)},
                          {"net", units(g.charges - g.credits)},
                          {"gpu_hours", static_cast<double>(g.milli_seconds) / 3'600'000.0},
                          {"entries", g.entries}};
  };
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [key, g] : groups) {
    nlohmann::json row = group_json(g);
    row["group"] = key;
    list.push_back(std::move(row));
  }
  constexpr std::string_view kNames[] = {"team", "job", "model", "label"};
  return answer({{"tenant", query.tenant},
                 {"from", utc_date_text(query.from)},
                 {"to", utc_date_text(query.to - 1)},
                 {"currency", market_->spec().currency},
                 {"by", kNames[static_cast<int>(query.by)]},
                 {"groups", std::move(list)},
                 {"total", group_json(total)}});
}

}  // namespace tidepool
