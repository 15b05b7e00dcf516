// The views of the internal market: prices, bills and the market's figures for metrics.
#include <fmt/format.h>

#include <string>
#include <utility>

#include "core/tidal_window.h"
#include "server/plane_views.h"

namespace tidepool {
namespace {

double ratio(Ppm value) { return static_cast<double>(value) / static_cast<double>(kPpmOne); }

}  // namespace

nlohmann::json PlaneViews::prices() const {
  const ServerMarket& market = *clerk_.market();
  const ChargeMeter& meter = market.desk().meter();
  const PriceSchedule& schedule = meter.schedule();
  const GpuModelCatalog& models = state_.scheduler().pool().models();
  nlohmann::json list = nlohmann::json::array();
  for (int m = 0; m < models.size(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    const Price& price = meter.price(model);
    nlohmann::json classes = nlohmann::json::object();
    for (PriceClass c : {PriceClass::kStandard, PriceClass::kPreemptible, PriceClass::kEmergency}) {
      classes[std::string(price_class_name(c))] = whole_credits(class_price(schedule, price, c));
    }
    list.push_back({{"model", models.name(model)},
                    {"cost_base", whole_credits(price.cost_base)},
                    {"utilisation", ratio(price.utilisation)},
                    {"utilisation_multiplier", ratio(price.utilisation_multiplier)},
                    {"time_multiplier", ratio(price.time_multiplier)},
                    {"standard_per_gpu_hour", whole_credits(price.standard_per_hour)},
                    {"per_gpu_hour", std::move(classes)},
                    {"from", price.from},
                    {"until", price.until}});
  }
  return {{"currency", market.spec().currency},
          {"period", schedule.period},
          {"class_multipliers",
           {{"standard", ratio(schedule.standard)},
            {"preemptible", ratio(schedule.preemptible)},
            {"emergency", ratio(schedule.emergency)}}},
          {"models", std::move(list)}};
}

nlohmann::json PlaneViews::bill(const BillQuery& query, TenantId tenant) const {
  const ServerMarket& market = *clerk_.market();
  struct Group {
    Micros charges = 0;
    Micros credits = 0;
    std::int64_t milli_seconds = 0;
    std::int64_t entries = 0;
  };
  std::map<std::string, Group> groups;
  Group total;
  const GpuModelCatalog& models = state_.scheduler().pool().models();
  for (const LedgerEntry& e : market.desk().ledger().entries()) {
    if (e.tenant != tenant || e.to < query.from || e.to >= query.to) continue;
    if (e.kind == EntryKind::kBurstCost) continue;
    const bool credit = e.kind == EntryKind::kLendingCredit;
    const ServerJob* job = nullptr;
    if (e.job) {
      if (auto it = state_.jobs().find(*e.job); it != state_.jobs().end()) job = &it->second;
    }
    // Entries without a job: credits, and charges folded by tenant and model (closing the books).
    const char* no_job = credit                   ? "(lending credits)"
                         : e.folded > 0 && !e.job ? "(books closed: by model only)"
                                                  : "(unknown job)";
    std::string key;
    switch (query.by) {
      case BillGrouping::kModel:
        key = models.name(e.model);
        break;
      case BillGrouping::kTeam:
        key = job ? job->spec.queue : no_job;
        break;
      case BillGrouping::kJob:
        key = job ? fmt::format("{} {}", job->id, job->spec.name) : no_job;
        break;
      case BillGrouping::kLabel:
        if (!job) {
          key = no_job;
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
      target->entries += std::max<std::int64_t>(1, e.folded);
      if (credit) {
        target->credits += e.amount;
      } else {
        target->charges += e.amount;
        target->milli_seconds += paid_milli_seconds(e);
      }
    }
  }
  auto group_json = [](const Group& g) {
    return nlohmann::json{{"charges", whole_credits(g.charges)},
                          {"credits", whole_credits(g.credits)},
                          {"net", whole_credits(g.charges - g.credits)},
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
  return {{"tenant", query.tenant},
          {"from", utc_date_text(query.from)},
          {"to", utc_date_text(query.to - 1)},
          {"currency", market.spec().currency},
          {"by", kNames[static_cast<int>(query.by)]},
          {"groups", std::move(list)},
          {"total", group_json(total)}};
}

void PlaneViews::market_figures(PlaneFigures& figures) const {
  const ServerMarket* market = clerk_.market();
  if (market == nullptr) return;
  const ChargeMeter& meter = market->desk().meter();
  const GpuModelCatalog& models = state_.scheduler().pool().models();
  for (int m = 0; m < models.size(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    for (PriceClass c : {PriceClass::kStandard, PriceClass::kPreemptible, PriceClass::kEmergency}) {
      figures.price_per_gpu_hour[{models.name(model), std::string(price_class_name(c))}] =
          meter.price_per_hour(model, c);
    }
  }
  const MarketDesk& desk = market->desk();
  const TenantBook& book = state_.scheduler().book();
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
  const std::vector<std::int64_t> rented = bursts_.rented_gpus_by_offer();
  for (std::size_t i = 0; i < rented.size(); ++i) {
    figures.burst_gpus[market->burst_offers()[i].name] = rented[i];
  }
  figures.burst_rentals = bursts_.rentals();
}

}  // namespace tidepool
