#include "core/tenants.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_set>
#include <utility>

#include "core/gpus_text.h"

namespace tidepool {
namespace {

constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max();
// Stands for no tenant where positions() takes one whose usage to override.
constexpr TenantId kNoTenant{std::numeric_limits<std::uint32_t>::max()};

Result<void> check_figure(const std::optional<std::int64_t>& value, const std::string& field,
                          const char* what) {
  if (value && (*value < 0 || *value > kMaxQuotaMilli)) {
    return fail(field, fmt::format("{} must be 0..{}m, got {}m", what, kMaxQuotaMilli, *value));
  }
  return {};
}

bool known_model(GpuModelId m, const GpuModelCatalog& models) {
  return m.value < static_cast<std::uint32_t>(models.size());
}

}  // namespace

Result<TenantBook> TenantBook::create(TenantsSpec spec, const GpuModelCatalog& models) {
  TenantBook book;
  book.models_ = models;
  const auto model_count = static_cast<std::size_t>(models.size());
  std::unordered_set<std::string> org_names, tenant_names;
  std::vector<std::vector<ModelQuota>> quotas;  // per tenant, as given
  for (std::size_t o = 0; o < spec.orgs.size(); ++o) {
    OrgSpec& org_spec = spec.orgs[o];
    const std::string org_path = fmt::format("orgs[{}]", o);
    if (org_spec.name.empty()) return fail(org_path + ".name", "must not be empty");
    if (!org_names.insert(org_spec.name).second) {
      return fail(org_path + ".name", "org '" + org_spec.name + "' is given twice");
    }
    const OrgId org_id{static_cast<std::uint32_t>(book.orgs_.size())};
    Org org{org_spec.name, {}, std::vector<OrgModelCaps>(model_count)};
    for (std::size_t m = 0; m < model_count; ++m) {
      org.caps[m].model = GpuModelId{static_cast<std::uint32_t>(m)};
    }
    std::vector<bool> capped(model_count, false);
    for (const OrgModelCaps& caps : org_spec.caps) {
      const std::string path = org_path + ".caps";
      if (!known_model(caps.model, models)) {
        return fail(path, fmt::format("unknown GPU model #{}", caps.model.value));
      }
      const std::string& model_name = models.name(caps.model);
      if (capped[caps.model.value]) return fail(path, model_name + " is given twice");
      capped[caps.model.value] = true;
      for (auto [value, what] : {std::pair{&caps.guaranteed_milli, "the guarantee"},
                                 std::pair{&caps.borrowing_limit_milli, "the borrowing limit"},
                                 std::pair{&caps.lending_limit_milli, "the lending limit"}}) {
        if (auto ok = check_figure(*value, path + "." + model_name, what); !ok) {
          return std::unexpected(ok.error());
        }
      }
      org.caps[caps.model.value] = caps;
    }

    std::vector<std::int64_t> guaranteed_sum(model_count, 0);
    for (std::size_t t = 0; t < org_spec.tenants.size(); ++t) {
      TenantSpec& tenant_spec = org_spec.tenants[t];
      const std::string path = fmt::format("{}.tenants[{}]", org_path, t);
      if (tenant_spec.name.empty()) return fail(path + ".name", "must not be empty");
      if (!tenant_names.insert(tenant_spec.name).second) {
        return fail(path + ".name", "tenant '" + tenant_spec.name + "' is given twice");
      }
      if (book.tenants_.size() >= static_cast<std::size_t>(kMaxTenants)) {
        return fail(path, fmt::format("more than {} tenants", kMaxTenants));
      }
      if (tenant_spec.weight < 1 || tenant_spec.weight > kMaxTenantWeight) {
        return fail(path + ".weight",
                    fmt::format("must be 1..{}, got {}", kMaxTenantWeight, tenant_spec.weight));
      }
      const TenantId tenant_id{static_cast<std::uint32_t>(book.tenants_.size())};
      Tenant tenant{tenant_spec.name,
                    org_id,
                    tenant_spec.weight,
                    {},
                    tenant_spec.order ? tenant_spec.order : spec.default_order};
      if (tenant_spec.queues.empty()) tenant_spec.queues.emplace_back("default");
      std::unordered_set<std::string> queue_names;
      for (std::string& queue : tenant_spec.queues) {
        if (queue.empty()) return fail(path + ".queues", "a queue name must not be empty");
        if (!queue_names.insert(queue).second) {
          return fail(path + ".queues", "queue '" + queue + "' is given twice");
        }
        tenant.queues.push_back(QueueId{static_cast<std::uint32_t>(book.queues_.size())});
        book.queues_.push_back({std::move(queue), tenant_id});
      }

      std::vector<Figures> figures(model_count);  // models not listed: 0, unlimited, 0
      std::vector<bool> given(model_count, false);
      for (const ModelQuota& quota : tenant_spec.quotas) {
        const std::string quota_path = path + ".quota";
        if (!known_model(quota.model, models)) {
          return fail(quota_path, fmt::format("unknown GPU model #{}", quota.model.value));
        }
        const std::string& model_name = models.name(quota.model);
        const std::string where = quota_path + "." + model_name;
        if (given[quota.model.value]) return fail(quota_path, model_name + " is given twice");
        given[quota.model.value] = true;
        for (auto [value, what] :
             {std::pair{std::optional(quota.guaranteed_milli), "the guarantee"},
              std::pair{quota.borrowing_limit_milli, "the borrowing limit"},
              std::pair{quota.lending_limit_milli, "the lending limit"}}) {
          if (auto ok = check_figure(value, where, what); !ok) return std::unexpected(ok.error());
        }
        if (quota.lending_limit_milli && *quota.lending_limit_milli > quota.guaranteed_milli) {
          return fail(where, fmt::format("the lending limit {}m exceeds the guarantee {}m",
                                         *quota.lending_limit_milli, quota.guaranteed_milli));
        }
        figures[quota.model.value] = {quota.guaranteed_milli, quota.borrowing_limit_milli,
                                      quota.lending_limit_milli.value_or(quota.guaranteed_milli)};
        guaranteed_sum[quota.model.value] += quota.guaranteed_milli;
      }
      book.figures_.insert(book.figures_.end(), figures.begin(), figures.end());
      org.tenants.push_back(tenant_id);
      book.tenants_.push_back(std::move(tenant));
    }
    for (std::size_t m = 0; m < model_count; ++m) {
      const auto& cap = org.caps[m].guaranteed_milli;
      if (cap && guaranteed_sum[m] > *cap) {
        return fail(org_path + ".caps." + models.name(GpuModelId{static_cast<std::uint32_t>(m)}),
                    fmt::format("its tenants' guarantees sum to {}m, above the org's {}m",
                                guaranteed_sum[m], *cap));
      }
    }
    book.orgs_.push_back(std::move(org));
  }
  if (book.tenants_.empty()) return fail("orgs", "the tenant tree has no tenants");
  book.usage_.assign(book.figures_.size(), 0);
  return book;
}

std::optional<OrgId> TenantBook::find_org(std::string_view name) const {
  for (std::size_t i = 0; i < orgs_.size(); ++i) {
    if (orgs_[i].name == name) return OrgId{static_cast<std::uint32_t>(i)};
  }
  return std::nullopt;
}

std::optional<TenantId> TenantBook::find_tenant(std::string_view name) const {
  for (std::size_t i = 0; i < tenants_.size(); ++i) {
    if (tenants_[i].name == name) return TenantId{static_cast<std::uint32_t>(i)};
  }
  return std::nullopt;
}

std::optional<QueueId> TenantBook::find_queue(TenantId t, std::string_view name) const {
  for (QueueId q : tenants_[t.value].queues) {
    if (queues_[q.value].name == name) return q;
  }
  return std::nullopt;
}

std::int64_t TenantBook::guaranteed(TenantId t, GpuModelId m) const {
  return figures_[slot(t, m)].guaranteed;
}

std::optional<std::int64_t> TenantBook::borrowing_limit(TenantId t, GpuModelId m) const {
  return figures_[slot(t, m)].borrowing_limit;
}

std::int64_t TenantBook::lending_limit(TenantId t, GpuModelId m) const {
  return figures_[slot(t, m)].lending_limit;
}

std::optional<std::int64_t> TenantBook::org_borrowing_limit(OrgId org, GpuModelId m) const {
  return orgs_[org.value].caps[m.value].borrowing_limit_milli;
}

std::optional<std::int64_t> TenantBook::org_lending_limit(OrgId org, GpuModelId m) const {
  return orgs_[org.value].caps[m.value].lending_limit_milli;
}

std::int64_t TenantBook::usage(TenantId t, GpuModelId m) const { return usage_[slot(t, m)]; }

std::int64_t TenantBook::borrowed(TenantId t, GpuModelId m) const {
  return std::max<std::int64_t>(0, usage(t, m) - guaranteed(t, m));
}

std::int64_t TenantBook::lendable(TenantId t, GpuModelId m) const {
  const Figures& f = figures_[slot(t, m)];
  return std::min(f.lending_limit, std::max<std::int64_t>(0, f.guaranteed - usage(t, m)));
}

std::vector<OrgPosition> TenantBook::positions(GpuModelId m, TenantId t,
                                               std::int64_t usage_of_t) const {
  std::vector<OrgPosition> result(orgs_.size());
  for (std::size_t o = 0; o < orgs_.size(); ++o) {
    OrgPosition& p = result[o];
    for (TenantId member : orgs_[o].tenants) {
      const Figures& f = figures_[slot(member, m)];
      const std::int64_t u = member == t ? usage_of_t : usage_[slot(member, m)];
      p.guaranteed_milli += f.guaranteed;
      p.usage_milli += u;
      p.lendable_milli += std::min(f.lending_limit, std::max<std::int64_t>(0, f.guaranteed - u));
      p.borrowed_milli += std::max<std::int64_t>(0, u - f.guaranteed);
    }
    p.borrowed_outside_milli = std::max<std::int64_t>(0, p.borrowed_milli - p.lendable_milli);
    p.spare_milli = std::max<std::int64_t>(0, p.lendable_milli - p.borrowed_milli);
    p.offered_milli =
        std::min(orgs_[o].caps[m.value].lending_limit_milli.value_or(kUnlimited), p.spare_milli);
  }
  return result;
}

std::int64_t TenantBook::reclaim_needed(GpuModelId m,
                                        std::span<const OrgPosition> positions) const {
  std::int64_t over_org_limits = 0;
  std::int64_t outside = 0;
  std::int64_t offered = 0;
  for (std::size_t o = 0; o < positions.size(); ++o) {
    const OrgPosition& p = positions[o];
    if (const auto limit = orgs_[o].caps[m.value].borrowing_limit_milli) {
      over_org_limits += std::max<std::int64_t>(0, p.borrowed_outside_milli - *limit);
    }
    outside += p.borrowed_outside_milli;
    offered += p.offered_milli;
  }
  return std::max(over_org_limits, outside - offered);
}

OrgPosition TenantBook::org_position(OrgId org, GpuModelId m) const {
  return positions(m, kNoTenant, 0)[org.value];
}

std::int64_t TenantBook::reclaim_needed(GpuModelId m) const {
  return reclaim_needed(m, positions(m, kNoTenant, 0));
}

Admission TenantBook::decide(TenantId t, GpuModelId m, std::int64_t milli, bool explain) const {
  Admission a;
  a.tenant = t;
  a.model = m;
  a.milli = milli;
  if (t.value >= tenants_.size()) {
    if (explain) a.reason = fmt::format("unknown tenant #{}", t.value);
    return a;
  }
  const std::string& name = tenants_[t.value].name;
  if (!known_model(m, models_)) {
    if (explain) a.reason = fmt::format("tenant {} asks for unknown GPU model #{}", name, m.value);
    return a;
  }
  const std::string& model = models_.name(m);
  if (milli <= 0 || milli > kMaxQuotaMilli) {
    if (explain) {
      a.reason = fmt::format("tenant {} asks for {} {} GPUs; a request must be 0.001..{}", name,
                             gpus_number(milli), model, gpus_number(kMaxQuotaMilli));
    }
    return a;
  }

  const Figures& f = figures_[slot(t, m)];
  const std::int64_t used = usage(t, m);
  const std::int64_t borrowed_now = std::max<std::int64_t>(0, used - f.guaranteed);
  a.guaranteed_milli = std::clamp<std::int64_t>(f.guaranteed - used, 0, milli);
  a.borrowed_milli = milli - a.guaranteed_milli;

  // Charging the guaranteed part may put borrowed capacity of others in debt.
  const OrgId org = tenants_[t.value].org;
  const std::int64_t within = used + a.guaranteed_milli;
  const std::vector<OrgPosition> as_used = positions(m, t, used);
  a.reclaim_milli = a.guaranteed_milli == 0
                        ? 0
                        : reclaim_needed(m, positions(m, t, within)) - reclaim_needed(m, as_used);

  // Borrowable with t at (at least) its guarantee: the least of the three rooms of the rules.
  std::vector<OrgPosition> raised;
  if (used < f.guaranteed) raised = positions(m, t, f.guaranteed);
  const std::vector<OrgPosition>& at_guarantee = used < f.guaranteed ? raised : as_used;
  const OrgPosition& own = at_guarantee[org.value];
  std::int64_t outside = 0;
  std::int64_t offered = 0;
  for (const OrgPosition& p : at_guarantee) {
    outside += p.borrowed_outside_milli;
    offered += p.offered_milli;
  }
  const std::int64_t tenant_room =
      f.borrowing_limit ? std::max<std::int64_t>(0, *f.borrowing_limit - borrowed_now) : kUnlimited;
  const auto& caps = orgs_[org.value].caps[m.value];
  const std::int64_t org_room =
      caps.borrowing_limit_milli
          ? own.spare_milli +
                std::max<std::int64_t>(0, *caps.borrowing_limit_milli - own.borrowed_outside_milli)
          : kUnlimited;
  const std::int64_t free_in_org =
      caps.lending_limit_milli
          ? std::max<std::int64_t>(0, own.spare_milli - *caps.lending_limit_milli)
          : 0;
  const std::int64_t pool_room = free_in_org + std::max<std::int64_t>(0, offered - outside);
  a.borrowable_milli = std::min({tenant_room, org_room, pool_room});

  if (a.borrowed_milli == 0) {
    a.kind = AdmissionKind::kWithinGuarantee;
    if (!explain) return a;
    a.reason = fmt::format("within guarantee: tenant {} will use {} of its {} guaranteed {} GPUs",
                           name, gpus_number(within), gpus_number(f.guaranteed), model);
    if (a.reclaim_milli > 0) {
      a.reason +=
          fmt::format("; {} lent to borrowers must be reclaimed", gpus_text(a.reclaim_milli));
    }
    return a;
  }
  if (a.borrowed_milli <= a.borrowable_milli) {
    a.kind = AdmissionKind::kBorrowing;
    for (int pass = 0; pass < 2; ++pass) {  // its own org's tenants first, then the others
      for (std::size_t s = 0; s < tenants_.size(); ++s) {
        const TenantId other{static_cast<std::uint32_t>(s)};
        const OrgId other_org = tenants_[s].org;
        if (other == t || (other_org == org) != (pass == 0)) continue;
        if (pass == 1 && at_guarantee[other_org.value].offered_milli == 0) continue;
        if (const std::int64_t l = lendable(other, m); l > 0) a.lenders.push_back({other, l});
      }
    }
    if (!explain) return a;
    a.reason = fmt::format(
        "borrowing: tenant {} will use {} {} GPUs, {} above its guarantee of {}; {} was "
        "borrowable",
        name, gpus_number(used + milli), model, gpus_number(borrowed_now + a.borrowed_milli),
        gpus_number(f.guaranteed), gpus_number(a.borrowable_milli));
    return a;
  }

  if (!explain) return a;
  std::string binding;
  if (tenant_room <= org_room && tenant_room <= pool_room) {
    binding = fmt::format("its borrowing limit is {}", gpus_text(*f.borrowing_limit));
  } else if (org_room <= pool_room) {
    binding =
        fmt::format("org {} borrows {} from other orgs, its limit is {}", orgs_[org.value].name,
                    gpus_text(own.borrowed_outside_milli), gpus_text(*caps.borrowing_limit_milli));
  } else {
    binding = fmt::format("idle guarantees lendable to it: {}", gpus_text(pool_room));
  }
  a.reason =
      fmt::format("tenant {} uses {} of its {} guaranteed {} GPUs", name,
                  gpus_number(std::min(used, f.guaranteed)), gpus_number(f.guaranteed), model);
  if (borrowed_now > 0) a.reason += fmt::format(" and borrows {}", gpus_number(borrowed_now));
  a.reason += fmt::format("; the job needs {} borrowed and {} may be ({})",
                          gpus_text(a.borrowed_milli), gpus_number(a.borrowable_milli), binding);
  return a;
}

Admission TenantBook::admit(TenantId t, GpuModelId m, std::int64_t milli) const {
  return decide(t, m, milli, true);
}

Admission TenantBook::assess(TenantId t, GpuModelId m, std::int64_t milli) const {
  return decide(t, m, milli, false);
}

std::vector<Admission> TenantBook::decide_each(TenantId t, const ModelSet& models,
                                               std::int64_t milli, bool explain) const {
  std::vector<Admission> result;
  for (int m = 0; m < models_.size(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    if (models.accepts(model)) result.push_back(decide(t, model, milli, explain));
  }
  return result;
}

std::vector<Admission> TenantBook::admit(TenantId t, const ModelSet& models,
                                         std::int64_t milli) const {
  return decide_each(t, models, milli, true);
}

std::vector<Admission> TenantBook::assess(TenantId t, const ModelSet& models,
                                          std::int64_t milli) const {
  return decide_each(t, models, milli, false);
}

Result<Admission> TenantBook::charge(TenantId t, GpuModelId m, std::int64_t milli) {
  Admission a = admit(t, m, milli);
  if (!a.admitted()) {
    return fail(t.value < tenants_.size() ? "tenant " + tenants_[t.value].name : "tenant",
                a.reason);
  }
  usage_[slot(t, m)] += milli;
  return a;
}

Result<void> TenantBook::refund(TenantId t, GpuModelId m, std::int64_t milli) {
  if (t.value >= tenants_.size()) return fail("tenant", fmt::format("unknown tenant #{}", t.value));
  const std::string field = "tenant " + tenants_[t.value].name;
  if (!known_model(m, models_)) return fail(field, fmt::format("unknown GPU model #{}", m.value));
  const std::int64_t used = usage(t, m);
  if (milli <= 0 || milli > used) {
    return fail(field,
                fmt::format("cannot refund {}m {}: it uses {}m", milli, models_.name(m), used));
  }
  usage_[slot(t, m)] -= milli;
  return {};
}

Result<void> TenantBook::record_usage(TenantId t, GpuModelId m, std::int64_t milli) {
  if (t.value >= tenants_.size()) return fail("tenant", fmt::format("unknown tenant #{}", t.value));
  if (!known_model(m, models_)) {
    return fail("tenant " + tenants_[t.value].name, fmt::format("unknown GPU model #{}", m.value));
  }
  if (milli <= 0) return fail("milli", "usage to record must be positive");
  usage_[slot(t, m)] += milli;
  return {};
}

Result<void> TenantBook::adjust_guarantee(TenantId t, GpuModelId m, std::int64_t milli) {
  if (t.value >= tenants_.size()) return fail("tenant", fmt::format("unknown tenant #{}", t.value));
  const std::string field = "tenant " + tenants_[t.value].name;
  if (!known_model(m, models_)) return fail(field, fmt::format("unknown GPU model #{}", m.value));
  Figures& f = figures_[slot(t, m)];
  if (milli < -kMaxQuotaMilli || milli > kMaxQuotaMilli) {
    return fail(field, fmt::format("a guarantee change must be within +-{}m", kMaxQuotaMilli));
  }
  const std::int64_t next = f.guaranteed + milli;
  if (next < f.lending_limit || next > kMaxQuotaMilli) {
    return fail(field, fmt::format("guarantee of {} would become {}m; it must be {}..{}m",
                                   models_.name(m), next, f.lending_limit, kMaxQuotaMilli));
  }
  f.guaranteed = next;
  return {};
}

void TenantBook::hold_outside_quotas(std::int64_t held_milli) {
  cuts_.resize(figures_.size());
  std::int64_t all_guaranteed = 0;
  for (std::size_t i = 0; i < figures_.size(); ++i) {
    figures_[i].guaranteed += cuts_[i].guaranteed;
    figures_[i].lending_limit += cuts_[i].lending_limit;
    cuts_[i] = {};
    all_guaranteed += figures_[i].guaranteed;
  }
  held_ = std::max<std::int64_t>(0, held_milli);
  if (held_ == 0) return;
  for (std::size_t i = 0; i < figures_.size(); ++i) {
    Figures& f = figures_[i];
    const std::int64_t g = share_left_after_hold(f.guaranteed, all_guaranteed, held_);
    const std::int64_t l = share_left_after_hold(f.lending_limit, all_guaranteed, held_);
    cuts_[i] = {f.guaranteed - g, f.lending_limit - l};
    f.guaranteed = g;
    f.lending_limit = l;
  }
}

std::int64_t TenantBook::guaranteed_total(TenantId t) const {
  std::int64_t total = 0;
  for (int m = 0; m < model_count(); ++m) {
    total += guaranteed(t, GpuModelId{static_cast<std::uint32_t>(m)});
  }
  return total;
}

std::int64_t share_left_after_hold(std::int64_t x, std::int64_t all_guaranteed, std::int64_t held) {
  if (held <= 0 || all_guaranteed <= 0) return x;
  if (held >= all_guaranteed) return 0;
  // floor(x x left / all) = (x / all) x left + floor((x % all) x left / all).
  const std::int64_t left = all_guaranteed - held;
  return x / all_guaranteed * left + x % all_guaranteed * left / all_guaranteed;
}

}  // namespace tidepool
