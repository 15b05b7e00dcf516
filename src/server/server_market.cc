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
  if (entry.folded > 0) {
    out["folded"] = entry.folded;
    out["milli_seconds"] = entry.milli_seconds;
  }
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
  if (document.contains("folded")) {
    for (auto [key, target] :
         {std::pair{"folded", &entry.folded}, std::pair{"milli_seconds", &entry.milli_seconds}}) {
      auto value = integer_field(document, key);
      if (!value) return std::unexpected(value.error());
      *target = *value;
    }
    if (entry.folded < 1) return fail("folded", "must be at least 1");
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

Result<ServerMarket> ServerMarket::create(MarketSpec spec, Seconds posting_interval,
                                          const Pool& pool, const TenantBook& book,
                                          std::span<const LedgerRecord> stored, Seconds now) {
  if (posting_interval <= 0) return fail("ledger_posting_interval", "must be positive");
  auto cost_base = cost_bases_for(spec, pool.models());
  if (!cost_base) return fail("market " + cost_base.error().field, cost_base.error().reason);
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
  auto desk = MarketDesk::create({.prices = spec.prices,
                                  .cost_base = std::move(*cost_base),
                                  .epoch = 0,
                                  .budgets = spec.budgets,
                                  .offers = std::move(*offers)},
                                 pool, book, now);
  if (!desk) return fail("market " + desk.error().field, desk.error().reason);
  ServerMarket market(std::move(spec), posting_interval, std::move(*desk), now);
  // Every run stored is over: a job still running is metered again from now.
  for (const LedgerRecord& record : stored) {
    auto document = nlohmann::json::parse(record.document, nullptr, false);
    auto entry = ledger_entry_from_json(document, book, pool.models());
    if (entry && record.seq > 0) entry->seq = static_cast<std::uint64_t>(record.seq);
    if (!entry || record.seq <= 0 || !market.desk_.restore(std::move(*entry))) ++market.skipped_;
  }
  if (!stored.empty() && stored.back().seq > 0) {
    market.desk_.skip_through(static_cast<std::uint64_t>(stored.back().seq));
  }
  market.stored_ = market.desk_.ledger().entries().size();
  return market;
}

Result<void> ServerMarket::post(Seconds now) {
  if (auto ok = desk_.post(now); !ok) return ok;
  next_post_ = desk_.now() + posting_interval_;
  return {};
}

LedgerRecord ServerMarket::record(const LedgerEntry& entry, const GpuModelCatalog& models) const {
  const TenantBook& book = desk_.book();
  return LedgerRecord{.seq = static_cast<std::int64_t>(entry.seq),
                      .at = entry.to,
                      .tenant = book.tenant_name(entry.tenant),
                      .document = ledger_entry_json(entry, book, models).dump()};
}

std::vector<LedgerRecord> ServerMarket::take_unstored(const GpuModelCatalog& models,
                                                      std::size_t most) {
  std::vector<LedgerRecord> out;
  const auto entries = desk_.ledger().entries();
  const std::size_t end = most == 0 ? entries.size() : std::min(entries.size(), stored_ + most);
  for (std::size_t i = stored_; i < end; ++i) out.push_back(record(entries[i], models));
  stored_ = end;
  return out;
}

std::optional<LedgerFoldRecord> ServerMarket::close_books(Seconds now, const BookTerms& terms,
                                                          const GpuModelCatalog& models,
                                                          std::size_t most,
                                                          std::function<bool(JobId)> live) {
  const std::int64_t period = (now - 1) / kLedgerSettled;  // what settled folds a period later
  if (period == books_checked_) return std::nullopt;
  const std::size_t before = desk_.ledger().entries().size();
  auto fold = desk_.close_books(now, terms, stored_, most, std::move(live));
  if (!fold) {
    // Nothing more is due this hour, unless entries wait to be stored (the next call looks again).
    if (stored_ == before) books_checked_ = period;
    return std::nullopt;
  }
  stored_ -= before - desk_.ledger().entries().size();
  LedgerFoldRecord out{.first_seq = static_cast<std::int64_t>(fold->first_seq),
                       .last_seq = static_cast<std::int64_t>(fold->last_seq),
                       .carried = {}};
  for (const LedgerEntry& e : fold->carried) out.carried.push_back(record(e, models));
  return out;
}

std::optional<BurstPolicy> ServerMarket::burst_policy() const {
  if (!spec_.burst_threshold) return std::nullopt;
  return BurstPolicy{.threshold = *spec_.burst_threshold};
}

}  // namespace tidepool
