#include "server/server_market.h"

#include <fmt/format.h>

#include <algorithm>

namespace tidepool {
namespace {

Result<std::int64_t> integer_field(const nlohmann::json& document, const char* key) {
  auto it = document.find(key);
  if (it == document.end() || !it->is_number_integer()) {
    return fail(key, "missing or not an integer");
  }
  return it->get<std::int64_t>();
}

Result<std::string> text_field(const nlohmann::json& document, const char* key) {
  auto it = document.find(key);
  if (it == document.end() || !it->is_string()) return fail(key, "missing or not a string");
  return it->get<std::string>();
}

}  // namespace

nlohmann::json ledger_entry_json(const LedgerEntry& entry, const TenantBook& book,
                                 const GpuModelCatalog& models) {
  nlohmann::json out = {
      {"kind", entry_kind_name(entry.kind)},
      {"tenant", book.tenant_name(entry.tenant)},
      {"model", models.name(entry.model)},
      {"job", entry.job ? nlohmann::json(entry.job->value) : nlohmann::json(nullptr)},
      {"milli", entry.milli},
      {"amount", entry.amount},
      {"from", entry.from},
      {"to", entry.to},
      {"price_per_hour", entry.price_per_hour}};
  if (entry.credit.kind == AccountKind::kProvider) out["provider"] = entry.credit.id;
  return out;
}

Result<LedgerEntry> ledger_entry_from_json(const nlohmann::json& document, const TenantBook& book,
                                           const GpuModelCatalog& models) {
  if (!document.is_object()) return fail("entry", "not a JSON object");
  LedgerEntry entry;
  auto kind_name = text_field(document, "kind");
  if (!kind_name) return std::unexpected(kind_name.error());
  auto kind = parse_entry_kind(*kind_name);
  if (!kind) return fail("kind", kind.error().reason);
  entry.kind = *kind;
  auto tenant_name = text_field(document, "tenant");
  if (!tenant_name) return std::unexpected(tenant_name.error());
  auto tenant = book.find_tenant(*tenant_name);
  if (!tenant) return fail("tenant", fmt::format("no tenant '{}' any more", *tenant_name));
  entry.tenant = *tenant;
  auto model_name = text_field(document, "model");
  if (!model_name) return std::unexpected(model_name.error());
  auto model = models.find(*model_name);
  if (!model) return fail("model", fmt::format("no GPU model '{}' any more", *model_name));
  entry.model = *model;
  for (auto [key, target] : {std::pair{"milli", &entry.milli}, std::pair{"amount", &entry.amount},
                             std::pair{"from", &entry.from}, std::pair{"to", &entry.to},
                             std::pair{"price_per_hour", &entry.price_per_hour}}) {
    auto value = integer_field(document, key);
    if (!value) return std::unexpected(value.error());
    *target = *value;
  }
  if (auto job = document.find("job"); job != document.end() && !job->is_null()) {
    if (!job->is_number_unsigned()) return fail("job", "not a job id");
    entry.job = JobId{job->get<std::uint32_t>()};
  }
  const Account tenant_account = Account::tenant(entry.tenant);
  switch (entry.kind) {
    case EntryKind::kCharge:
    case EntryKind::kBurstCharge:
      entry.debit = tenant_account;
      entry.credit = Account::pool();
      break;
    case EntryKind::kLendingCredit:
      entry.debit = Account::pool();
      entry.credit = tenant_account;
      break;
    case EntryKind::kBurstCost: {
      auto provider = integer_field(document, "provider");
      if (!provider || *provider < 0) return fail("provider", "missing or not an index");
      entry.debit = Account::pool();
      entry.credit = Account::provider(static_cast<std::uint32_t>(*provider));
      break;
    }
  }
  return entry;
}

ServerMarket::ServerMarket(MarketSpec spec, Seconds posting_interval, ChargeMeter meter,
                           TenantBook book, Seconds now)
    : spec_(std::move(spec)),
      posting_interval_(posting_interval),
      meter_(std::move(meter)),
      book_(std::move(book)),
      next_post_(now + posting_interval) {
  for (const auto& [name, budget] : spec_.budgets) budgets_.emplace(name, budget);
}

Result<ServerMarket> ServerMarket::create(MarketSpec spec, Seconds posting_interval,
                                          const Pool& pool, const TenantBook& book,
                                          std::span<const LedgerRecord> stored, Seconds now) {
  if (posting_interval <= 0) return fail("ledger_posting_interval", "must be positive");
  auto cost_base = cost_bases_for(spec, pool.models());
  if (!cost_base) return fail("market " + cost_base.error().field, cost_base.error().reason);
  auto meter = ChargeMeter::create(spec.prices, std::move(*cost_base), 0, now, pool);
  if (!meter) return fail("market " + meter.error().field, meter.error().reason);
  for (const auto& [name, budget] : spec.budgets) {
    if (!book.find_tenant(name)) {
      return fail("market budgets." + name,
                  fmt::format("no tenant '{}' in the tenants file; budgets name tenants", name));
    }
  }
  auto offers = burst_offers_for(spec, pool.models());
  if (!offers) return fail("market " + offers.error().field, offers.error().reason);
  for (std::size_t i = 0; i < offers->size(); ++i) {
    if ((*offers)[i].model.value >= static_cast<std::uint32_t>(pool.models().size())) {
      return fail("market burst", fmt::format("offer {} rents GPU model '{}', which the cluster's "
                                              "catalog lacks",
                                              (*offers)[i].name, spec.burst_offers[i].model));
    }
  }
  ServerMarket market(std::move(spec), posting_interval, std::move(*meter), book, now);
  market.offers_ = std::move(*offers);
  for (const LedgerRecord& record : stored) {
    market.next_seq_ = std::max(market.next_seq_, record.seq + 1);
    auto document = nlohmann::json::parse(record.document, nullptr, false);
    auto entry = ledger_entry_from_json(document, book, pool.models());
    if (!entry || !market.ledger_.append(std::move(*entry))) {
      ++market.skipped_;
      continue;
    }
  }
  market.stored_ = market.ledger_.entries().size();
  market.first_day_ = utc_day(now);
  if (!market.ledger_.entries().empty()) {
    market.first_day_ = std::min(market.first_day_, utc_day(market.ledger_.entries().front().from));
  }
  // Every run stored is over: a job still running is metered again from now.
  for (const LedgerEntry& e : market.ledger_.entries()) {
    if (e.job && (e.kind == EntryKind::kCharge || e.kind == EntryKind::kBurstCharge)) {
      market.ended_runs_[*e.job] += e.amount;
    }
  }
  market.absorb();
  return market;
}

Result<void> ServerMarket::advance(Seconds now, const Pool& pool) {
  return meter_.advance(std::max(now, meter_.now()), pool, book_);
}

Result<void> ServerMarket::start(JobId job, TenantId tenant,
                                 std::span<const Assignment> assignments,
                                 std::int64_t milli_per_task, const Pool& pool,
                                 PriceClass price_class, Seconds now) {
  std::vector<ModelMilli> gpus = gpus_by_model(pool, assignments, milli_per_task);
  if (gpus.empty()) return {};  // a CPU-only job costs nothing
  if (auto ok = meter_.start(job, tenant, gpus, price_class, std::max(now, meter_.now())); !ok) {
    return ok;
  }
  for (const ModelMilli& g : gpus) {
    if (auto ok = book_.record_usage(tenant, g.model, g.milli); !ok) return ok;
  }
  running_.emplace(job, std::make_pair(tenant, std::move(gpus)));
  return {};
}

Result<void> ServerMarket::stop(JobId job, Seconds now) {
  const auto it = running_.find(job);
  if (it == running_.end()) return {};
  const Micros run_total = meter_.job_total(job);
  if (auto ok = meter_.stop(job, std::max(now, meter_.now()), ledger_); !ok) return ok;
  ended_runs_[job] += run_total;
  const auto& [tenant, gpus] = it->second;
  for (const ModelMilli& g : gpus) {
    if (auto ok = book_.refund(tenant, g.model, g.milli); !ok) return ok;
  }
  running_.erase(it);
  absorb();
  return {};
}

Result<void> ServerMarket::post(Seconds now) {
  const Seconds at = std::max(now, meter_.now());
  if (auto ok = meter_.post(at, ledger_); !ok) return ok;
  next_post_ = at + posting_interval_;
  absorb();
  return {};
}

Result<void> ServerMarket::replace_book(const TenantBook& book) {
  TenantBook fresh = book;
  for (const auto& [job, run] : running_) {
    for (const ModelMilli& g : run.second) {
      if (auto ok = fresh.record_usage(run.first, g.model, g.milli); !ok) return ok;
    }
  }
  book_ = std::move(fresh);
  return {};
}

std::vector<LedgerRecord> ServerMarket::take_unstored(const GpuModelCatalog& models) {
  std::vector<LedgerRecord> out;
  const auto entries = ledger_.entries();
  for (std::size_t i = stored_; i < entries.size(); ++i) {
    const LedgerEntry& e = entries[i];
    out.push_back(LedgerRecord{.seq = next_seq_++,
                               .at = e.to,
                               .tenant = book_.tenant_name(e.tenant),
                               .document = ledger_entry_json(e, book_, models).dump()});
  }
  stored_ = entries.size();
  return out;
}

std::optional<BurstPolicy> ServerMarket::burst_policy() const {
  if (!spec_.burst_threshold) return std::nullopt;
  return BurstPolicy{.threshold = *spec_.burst_threshold};
}

Result<Micros> ServerMarket::charge_burst(JobId job, TenantId tenant, std::size_t offer,
                                          std::int64_t gpus, Seconds from, Seconds to) {
  if (offer >= offers_.size()) return fail("offer", fmt::format("no burst offer {}", offer));
  const BurstOffer& o = offers_[offer];
  const Micros amount = rented_cost(gpus, std::max<Seconds>(0, to - from), o.price_per_gpu_hour);
  if (amount <= 0) return Micros{0};
  for (const LedgerEntry& entry :
       burst_entries(job, tenant, static_cast<std::uint32_t>(offer), o, gpus, from, to, amount)) {
    if (auto ok = ledger_.append(entry); !ok) return std::unexpected(ok.error());
  }
  ended_runs_[job] += amount;
  absorb();
  return amount;
}

std::vector<std::optional<Micros>> ServerMarket::remaining_budgets(Seconds now) const {
  const Quarter quarter = quarter_of(now);
  std::vector<std::optional<Micros>> out(static_cast<std::size_t>(book_.tenant_count()));
  for (std::size_t t = 0; t < out.size(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    const auto limit = budget(tenant);
    if (!limit) continue;
    const MoneyTotals totals = days_totals(tenant, quarter.start, quarter.end);
    out[t] = budget_status(*limit, totals.charges, totals.credits).remaining;
  }
  return out;
}

Micros ServerMarket::job_cost(JobId job) const {
  auto it = ended_runs_.find(job);
  return (it == ended_runs_.end() ? 0 : it->second) + meter_.job_total(job);
}

std::optional<Budget> ServerMarket::budget(TenantId tenant) const {
  auto it = budgets_.find(book_.tenant_name(tenant));
  if (it == budgets_.end()) return std::nullopt;
  return it->second;
}

MoneyTotals ServerMarket::tenant_totals(TenantId tenant) const {
  auto it = totals_.find(tenant.value);
  return it == totals_.end() ? MoneyTotals{} : it->second;
}

MoneyTotals ServerMarket::days_totals(TenantId tenant, Seconds from, Seconds to) const {
  MoneyTotals sum;
  for (auto it = days_.lower_bound({tenant.value, utc_day(from)});
       it != days_.end() && it->first.first == tenant.value && it->first.second < utc_day(to);
       ++it) {
    sum.charges += it->second.charges;
    sum.credits += it->second.credits;
  }
  return sum;
}

std::vector<Micros> ServerMarket::daily_charges(TenantId tenant, std::int64_t first_day,
                                                int count) const {
  std::vector<Micros> out(static_cast<std::size_t>(std::max(count, 0)), 0);
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto it = days_.find({tenant.value, first_day + static_cast<std::int64_t>(i)});
    if (it != days_.end()) out[i] = it->second.charges;
  }
  return out;
}

void ServerMarket::absorb() {
  const auto entries = ledger_.entries();
  for (std::size_t i = absorbed_; i < entries.size(); ++i) {
    const LedgerEntry& e = entries[i];
    MoneyTotals& all = totals_[e.tenant.value];
    MoneyTotals& day = days_[{e.tenant.value, utc_day(e.to)}];
    switch (e.kind) {
      case EntryKind::kCharge:
      case EntryKind::kBurstCharge:
        all.charges += e.amount;
        day.charges += e.amount;
        break;
      case EntryKind::kLendingCredit:
        all.credits += e.amount;
        day.credits += e.amount;
        break;
      case EntryKind::kBurstCost:
        break;
    }
  }
  absorbed_ = entries.size();
}

}  // namespace tidepool
