// Tenants and their quotas: the tenant tree org > tenant > team queue, and the book that says
// whether a tenant may take more GPUs of a model now, within its guarantee or by borrowing the idle
// guarantee of others.
//
// All quantities are milli-GPUs (1000 = one GPU), per GPU model. Quotas are logical: a guarantee
// is an amount of a model anywhere in the pool, never particular nodes or cards.
//
// The rules (per GPU model m; every figure below is for m):
//
//   Tenant t has a guarantee G_t (absent: 0), a borrowing limit B_t (absent: unlimited; how much
//   it may use above G_t), a lending limit L_t (absent: G_t; 0 <= L_t <= G_t; how much of its idle
//   guarantee others may use; G_t - L_t stays reserved for t) and usage U_t >= 0.
//     borrowed  b_t = max(0, U_t - G_t)                  (what reclaim may take back)
//     lendable  l_t = min(L_t, max(0, G_t - U_t))         (its idle guarantee others may use)
//
//   Org o groups tenants. Its guarantee is the sum of its tenants'. Lending is pooled, first
//   inside the org, then across orgs; no loan is pinned to one lender, as no quota is pinned to
//   cards. With Lambda_o = sum of l_t and beta_o = sum of b_t over its tenants:
//     borrowed from other orgs   out_o   = max(0, beta_o - Lambda_o)
//     spare idle guarantee       spare_o = max(0, Lambda_o - beta_o)
//     offered to other orgs      offer_o = min(OL_o, spare_o)
//   An org may cap, per model, the sum of its tenants' guarantees (OG_o, checked at creation),
//   what it borrows from other orgs (OB_o: out_o <= OB_o; absent: unlimited) and what it offers
//   them (OL_o; absent: unlimited).
//
//   The quota is consistent when, for every org, out_o <= OB_o, and sum of out_o <= sum of
//   offer_o (the pool lends no more than the idle guarantees it may lend).
//
// Admission of a request of r milli-GPUs of m by tenant t (TenantBook::admit):
//   - within guarantee when U_t + r <= G_t: always admitted, even when that guarantee is lent out
//     right now: then the quota becomes inconsistent and reclaim_milli says how much borrowed
//     capacity of others must be taken back (reclaim: a tenant gets its guarantee back);
//   - otherwise the part above the guarantee, x = U_t + r - max(U_t, G_t), is borrowed, admitted
//     when x <= borrowable; borrowable is, with t at (at least) its guarantee:
//       min(B_t - b_t,                          the tenant's borrowing limit
//           spare_o + max(0, OB_o - out_o),     its org's limit on borrowing from other orgs
//           free_o + max(0, sum offer - sum out))   idle guarantee lendable to it, where
//                                               free_o = max(0, spare_o - OL_o) is the spare of
//                                               its org that other orgs may not take
//     so that a borrow never makes the quota less consistent (reclaim_needed never grows);
//   - refused otherwise, with a reason carrying the numbers, e.g. "tenant search uses
//     64000/64000m guaranteed H100, borrowing limit 0m; needs 8000m borrowed, borrowable 0m".
// A request is taken whole or not at all (a gang's GPUs are admitted together).
//
// reclaim_needed(m) = max(sum over orgs of max(0, out_o - OB_o), sum out - sum offer), at least
// 0: the least borrowed usage that must be refunded to make the quota consistent again, taking
// it from borrowing tenants of orgs that borrow from other orgs (out_o > 0), those of orgs past
// their OB_o first. A tenant's borrowed() amount is what reclaim may take from it.
//
// TenantBook is a value type; it owns no threads and is not synchronised. All orderings are by
// id, so the same calls give the same answers.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/gpu_model.h"
#include "core/ids.h"
#include "core/lane_order.h"

namespace tidepool {

// Bound on every quota figure and request, in milli-GPUs (a billion GPUs), so that sums over all
// tenants never overflow.
inline constexpr std::int64_t kMaxQuotaMilli = std::int64_t{1'000'000'000'000};
inline constexpr std::int64_t kMaxTenantWeight = 1'000'000;
inline constexpr int kMaxTenants = 100'000;

// A tenant's quota of one GPU model.
struct ModelQuota {
  GpuModelId model;
  std::int64_t guaranteed_milli = 0;
  std::optional<std::int64_t> borrowing_limit_milli;  // absent: unlimited
  std::optional<std::int64_t> lending_limit_milli;    // absent: all of the guarantee
};

// An org's caps over its tenants for one GPU model; every figure is optional.
struct OrgModelCaps {
  GpuModelId model;
  std::optional<std::int64_t> guaranteed_milli;       // bound on its tenants' guarantees, summed
  std::optional<std::int64_t> borrowing_limit_milli;  // from other orgs; absent: unlimited
  std::optional<std::int64_t> lending_limit_milli;    // to other orgs; absent: unlimited
};

struct TenantSpec {
  std::string name;                 // unique among all tenants
  std::int64_t weight = 1;          // fair-share weight, 1..kMaxTenantWeight
  std::vector<ModelQuota> quotas;   // at most one per model; models not listed: no guarantee,
                                    // unlimited borrowing
  std::vector<std::string> queues;  // team queues, unique within the tenant; none: one "default"
  // Admission limits of the server (0: the server configuration's): jobs pending at once, and new
  // jobs per second. The simulator ignores them.
  std::int64_t max_pending_jobs = 0;
  std::int64_t submissions_per_second = 0;
  // The order of the tenant's own jobs (core/lane_order.h); absent: the file's default, else the
  // scheduler's.
  std::optional<LaneOrderKind> order = std::nullopt;
};

struct OrgSpec {
  std::string name;                // unique among orgs
  std::vector<OrgModelCaps> caps;  // at most one per model
  std::vector<TenantSpec> tenants;
};

struct TenantsSpec {
  std::vector<OrgSpec> orgs;
  std::optional<LaneOrderKind> default_order = std::nullopt;  // for tenants that name none
};

enum class AdmissionKind { kWithinGuarantee, kBorrowing, kRefused };

// A tenant whose idle guarantee a borrow may draw on, with how much it can lend now.
struct Lender {
  TenantId tenant;
  std::int64_t lendable_milli = 0;

  friend bool operator==(const Lender&, const Lender&) = default;
};

// The answer to "may this tenant take r more milli-GPUs of this model now?".
struct Admission {
  AdmissionKind kind = AdmissionKind::kRefused;
  TenantId tenant;
  GpuModelId model;
  std::int64_t milli = 0;             // asked
  std::int64_t guaranteed_milli = 0;  // part of the request within the tenant's guarantee
  std::int64_t borrowed_milli = 0;    // part above it (needs borrowing)
  // The most the tenant may borrow now, once at its guarantee (see the rules above).
  std::int64_t borrowable_milli = 0;
  // Borrowed capacity of others that must be reclaimed if this request is charged.
  std::int64_t reclaim_milli = 0;
  // When borrowing: the tenants with idle guarantee lendable to this tenant, its own org's first,
  // then the others, each group by id. Lending is pooled: these are candidates, not one lender.
  std::vector<Lender> lenders;
  std::string reason;  // why refused, with numbers; for admissions, what was decided

  [[nodiscard]] bool admitted() const { return kind != AdmissionKind::kRefused; }
};

// Where an org stands for one model (the figures of the rules above).
struct OrgPosition {
  std::int64_t guaranteed_milli = 0;  // sum of its tenants' guarantees
  std::int64_t usage_milli = 0;
  std::int64_t lendable_milli = 0;          // Lambda_o
  std::int64_t borrowed_milli = 0;          // beta_o
  std::int64_t borrowed_outside_milli = 0;  // out_o
  std::int64_t spare_milli = 0;             // spare_o
  std::int64_t offered_milli = 0;           // offer_o
};

// What is left of `x` (a guarantee or lending limit, milli-GPUs) when `held` of the
// `all_guaranteed` milli-GPUs that all tenants are guaranteed is held outside the quotas:
// floor(x x (all - held) / all); 0 once all is held; x when nothing is (or nothing is guaranteed).
// No product exceeds all_guaranteed squared, so a pool of a million GPUs does not overflow.
std::int64_t share_left_after_hold(std::int64_t x, std::int64_t all_guaranteed, std::int64_t held);

class TenantBook {
 public:
  // Validates `spec` against `models` (names, weights, figures in 0..kMaxQuotaMilli, lending
  // limit <= guarantee, org caps) and builds a book with no usage. Ids are dense in spec order:
  // orgs, tenants (across orgs), queues (across tenants). `models` is copied for names in reasons;
  // the book knows models [0, models.size()).
  static Result<TenantBook> create(TenantsSpec spec, const GpuModelCatalog& models);

  [[nodiscard]] int org_count() const { return static_cast<int>(orgs_.size()); }
  [[nodiscard]] int tenant_count() const { return static_cast<int>(tenants_.size()); }
  [[nodiscard]] int queue_count() const { return static_cast<int>(queues_.size()); }
  [[nodiscard]] int model_count() const { return models_.size(); }
  [[nodiscard]] const GpuModelCatalog& models() const { return models_; }

  [[nodiscard]] const std::string& org_name(OrgId org) const { return orgs_[org.value].name; }
  [[nodiscard]] const std::string& tenant_name(TenantId t) const { return tenants_[t.value].name; }
  [[nodiscard]] const std::string& queue_name(QueueId q) const { return queues_[q.value].name; }
  [[nodiscard]] OrgId org_of(TenantId t) const { return tenants_[t.value].org; }
  [[nodiscard]] TenantId tenant_of(QueueId q) const { return queues_[q.value].tenant; }
  [[nodiscard]] std::span<const TenantId> tenants_of(OrgId org) const {
    return orgs_[org.value].tenants;
  }
  [[nodiscard]] std::span<const QueueId> queues_of(TenantId t) const {
    return tenants_[t.value].queues;
  }
  [[nodiscard]] std::int64_t weight(TenantId t) const { return tenants_[t.value].weight; }
  // The tenant's own order, else the file's default; nullopt: the scheduler's default.
  [[nodiscard]] std::optional<LaneOrderKind> order(TenantId t) const {
    return tenants_[t.value].order;
  }
  [[nodiscard]] std::optional<OrgId> find_org(std::string_view name) const;
  [[nodiscard]] std::optional<TenantId> find_tenant(std::string_view name) const;
  [[nodiscard]] std::optional<QueueId> find_queue(TenantId t, std::string_view name) const;

  // Quota figures; limits resolved (lending: the guarantee when absent; nullopt: unlimited).
  [[nodiscard]] std::int64_t guaranteed(TenantId t, GpuModelId m) const;
  [[nodiscard]] std::optional<std::int64_t> borrowing_limit(TenantId t, GpuModelId m) const;
  [[nodiscard]] std::int64_t lending_limit(TenantId t, GpuModelId m) const;
  [[nodiscard]] std::optional<std::int64_t> org_borrowing_limit(OrgId org, GpuModelId m) const;
  [[nodiscard]] std::optional<std::int64_t> org_lending_limit(OrgId org, GpuModelId m) const;

  // Usage and what follows from it (b_t, l_t, the org figures, reclaim_needed of the rules).
  [[nodiscard]] std::int64_t usage(TenantId t, GpuModelId m) const;
  [[nodiscard]] std::int64_t borrowed(TenantId t, GpuModelId m) const;
  [[nodiscard]] std::int64_t lendable(TenantId t, GpuModelId m) const;
  [[nodiscard]] OrgPosition org_position(OrgId org, GpuModelId m) const;
  [[nodiscard]] std::int64_t reclaim_needed(GpuModelId m) const;

  // Whether `t` may take `milli` more of model `m` now; changes nothing. Unknown tenants or
  // models and non-positive or oversized requests are refused with a reason.
  [[nodiscard]] Admission admit(TenantId t, GpuModelId m, std::int64_t milli) const;
  // One admission per model of `models` the book knows, in id order (a task that accepts several
  // models: placement picks among the admitted ones).
  [[nodiscard]] std::vector<Admission> admit(TenantId t, const ModelSet& models,
                                             std::int64_t milli) const;
  // The same decisions with the same figures, but no reason text (for callers that only act on
  // them, many times a pass: the text is what admission costs most).
  [[nodiscard]] Admission assess(TenantId t, GpuModelId m, std::int64_t milli) const;
  [[nodiscard]] std::vector<Admission> assess(TenantId t, const ModelSet& models,
                                              std::int64_t milli) const;

  // Admits and records the usage; fails, changing nothing, with the refusal's reason.
  Result<Admission> charge(TenantId t, GpuModelId m, std::int64_t milli);
  // Gives back usage; fails, changing nothing, if `milli` is not positive or more than the
  // tenant uses of the model.
  Result<void> refund(TenantId t, GpuModelId m, std::int64_t milli);
  // Adds usage without admission, past any limit: what already runs (restored after a restart)
  // is recorded as it is. Fails only for an unknown tenant or model or a non-positive amount.
  Result<void> record_usage(TenantId t, GpuModelId m, std::int64_t milli);

  // An emergency loan: adds `milli` (may be negative, to return one) to the tenant's guarantee of
  // the model; the lending limit is unchanged (a loan is not lent on). Fails, changing nothing,
  // if the guarantee would leave 0..kMaxQuotaMilli or fall below the lending limit. The quota may
  // become inconsistent: reclaim_needed says how much borrowed capacity must come back.
  Result<void> adjust_guarantee(TenantId t, GpuModelId m, std::int64_t milli);

  // Capacity held outside the quotas (the open tidal windows' GPUs, their class's own guarantee):
  // every guarantee and lending limit is lowered by its share of `held_milli`, in proportion to
  // the guarantees (share_left_after_hold over all tenants and models). The previous hold is given
  // back first, so 0 restores the figures; loans granted between two holds are kept. A tenant
  // then above its lowered guarantee borrows, and reclaim may take the difference back.
  void hold_outside_quotas(std::int64_t held_milli);
  [[nodiscard]] std::int64_t held_outside_quotas() const { return held_; }
  // What the hold took from the tenant's guarantee of model m (milli-GPUs).
  [[nodiscard]] std::int64_t held_from(TenantId t, GpuModelId m) const {
    return cuts_.empty() ? 0 : cuts_[slot(t, m)].guaranteed;
  }
  // The tenant's guarantee summed over all models (milli-GPUs), the hold deducted.
  [[nodiscard]] std::int64_t guaranteed_total(TenantId t) const;

 private:
  struct Figures {
    std::int64_t guaranteed = 0;
    std::optional<std::int64_t> borrowing_limit;
    std::int64_t lending_limit = 0;
  };
  struct Org {
    std::string name;
    std::vector<TenantId> tenants;
    std::vector<OrgModelCaps> caps;  // one per model, indexed by model id
  };
  struct Tenant {
    std::string name;
    OrgId org;
    std::int64_t weight = 1;
    std::vector<QueueId> queues;
    std::optional<LaneOrderKind> order;
  };
  struct Queue {
    std::string name;
    TenantId tenant;
  };

  TenantBook() = default;
  [[nodiscard]] std::size_t slot(TenantId t, GpuModelId m) const {
    return static_cast<std::size_t>(t.value) * models_.size() + m.value;
  }
  // admit and assess: `explain` writes the reason.
  [[nodiscard]] Admission decide(TenantId t, GpuModelId m, std::int64_t milli, bool explain) const;
  [[nodiscard]] std::vector<Admission> decide_each(TenantId t, const ModelSet& models,
                                                   std::int64_t milli, bool explain) const;
  // Org positions for model m, with tenant `t`'s usage taken as `usage_of_t` (an id past the
  // last tenant overrides nothing).
  [[nodiscard]] std::vector<OrgPosition> positions(GpuModelId m, TenantId t,
                                                   std::int64_t usage_of_t) const;
  [[nodiscard]] std::int64_t reclaim_needed(GpuModelId m,
                                            std::span<const OrgPosition> positions) const;

  GpuModelCatalog models_;
  std::vector<Org> orgs_;
  std::vector<Tenant> tenants_;
  std::vector<Queue> queues_;
  std::vector<Figures> figures_;     // per tenant x model
  std::vector<std::int64_t> usage_;  // per tenant x model
  // What hold_outside_quotas took from each figure: per tenant x model.
  struct Cut {
    std::int64_t guaranteed = 0;
    std::int64_t lending_limit = 0;
  };
  std::vector<Cut> cuts_;
  std::int64_t held_ = 0;
};

}  // namespace tidepool
