// The admission order of pending jobs, and the fair-share ledger it reads.
//
// Order (a total order; the first key that differs decides):
//   1. priority class, higher first;
//   2. fair share: the tenant's weighted share of recent GPU usage, lower first, where
//        share_t = usage_t / weight_t
//      and usage_t is the tenant's decayed usage in milli-GPU-seconds (FairShareLedger). GPUs are
//      the pool's dominant resource (CPU and memory are sized per GPU), and the pool's capacity is
//      the same divisor for every tenant, so this orders tenants as their weighted dominant shares
//      do. Shares are compared exactly, by cross-multiplication in 128-bit integers: ua * wb
//      against ub * wa;
//   3. submit time, earlier first;
//   4. job id, lower first.
// Job ids are unique among pending jobs, so no two entries compare equal and sorting gives one
// order whatever the input order.
//
// Decay: usage charged at time a counts 2^(-(now - a) / half_life) at time now (half-life 7 days
// by default). The factor is computed in Q62 fixed point from integers only (no libm), so the
// same calls give the same figures, bit for bit, on every platform; each decay step rounds to the
// nearest milli-GPU-second.
//
// FairShareLedger is a value type; it owns no threads and is not synchronised.
#pragma once

#include <compare>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/ids.h"
#include "core/job.h"
#include "core/resources.h"

namespace tidepool {

class TenantBook;

inline constexpr Seconds kDefaultFairShareHalfLife = Seconds{7} * 24 * 3600;
inline constexpr Seconds kMaxFairShareHalfLife = Seconds{1} << 31;  // about 68 years
// Usage saturates here (about 146 million GPU-years), so that usage x weight fits 128 bits.
inline constexpr std::int64_t kMaxFairShareUsage = std::int64_t{1} << 62;

// `amount` (>= 0) decayed over `elapsed` (>= 0) seconds with `half_life` (1..kMaxFairShareHalfLife)
// seconds, rounded to the nearest integer: amount x 2^(-elapsed / half_life).
std::int64_t decay(std::int64_t amount, Seconds elapsed, Seconds half_life);

class FairShareLedger {
 public:
  // One tenant per weight (TenantId i has weights[i], 1..kMaxTenantWeight), no usage, clock at
  // `start`. Fails naming "weights[i]", "half_life" or "start".
  static Result<FairShareLedger> create(std::vector<std::int64_t> weights,
                                        Seconds half_life = kDefaultFairShareHalfLife,
                                        Seconds start = 0);
  // The tenants and weights of `book`.
  static Result<FairShareLedger> for_tenants(const TenantBook& book,
                                             Seconds half_life = kDefaultFairShareHalfLife,
                                             Seconds start = 0);

  [[nodiscard]] Seconds now() const { return now_; }
  [[nodiscard]] Seconds half_life() const { return half_life_; }
  [[nodiscard]] int tenant_count() const { return static_cast<int>(weights_.size()); }
  // Unknown tenants: weight 1, usage 0 (so the order stays total for any id).
  [[nodiscard]] std::int64_t weight(TenantId t) const;
  // Decayed usage at now(), in milli-GPU-seconds.
  [[nodiscard]] std::int64_t usage(TenantId t) const;
  // usage / weight as a double, for reports only; comparisons use compare_share.
  [[nodiscard]] double share(TenantId t) const;

  // Moves the clock to `t` (>= now()), decaying every tenant's usage.
  Result<void> advance_to(Seconds t);

  // Charges `milli_gpu` (0..kMaxQuotaMilli) held by tenant `t` over [from, to): milli_gpu x
  // (to - from) milli-GPU-seconds, counted at `to`. When `to` is after now() the clock first
  // advances to `to`; an interval that ended earlier is decayed by now() - to. Fails, changing
  // nothing, naming "tenant", "milli_gpu" or "interval".
  Result<void> charge(TenantId t, std::int64_t milli_gpu, Seconds from, Seconds to);

  // Exact comparison of usage_a / weight_a with usage_b / weight_b.
  [[nodiscard]] std::strong_ordering compare_share(TenantId a, TenantId b) const;

 private:
  FairShareLedger() = default;

  std::vector<std::int64_t> weights_;
  std::vector<std::int64_t> usage_;
  Seconds half_life_ = kDefaultFairShareHalfLife;
  Seconds now_ = 0;
};

// What the order needs to know of a pending job.
struct QueueEntry {
  JobId job;
  TenantId tenant;
  int priority_class = 0;
  Seconds submit_time = 0;

  friend bool operator==(const QueueEntry&, const QueueEntry&) = default;
};

[[nodiscard]] QueueEntry queue_entry(const Job& job);

// Whether `a` is admitted before `b` (the order of the file comment).
[[nodiscard]] bool queue_before(const QueueEntry& a, const QueueEntry& b,
                                const FairShareLedger& ledger);

// The order as a comparator object for standard algorithms; holds a reference to `ledger`.
class QueueOrder {
 public:
  explicit QueueOrder(const FairShareLedger& ledger) : ledger_(&ledger) {}
  bool operator()(const QueueEntry& a, const QueueEntry& b) const {
    return queue_before(a, b, *ledger_);
  }

 private:
  const FairShareLedger* ledger_;
};

// Sorts `pending` into admission order, first admitted first.
void sort_queue(std::span<QueueEntry> pending, const FairShareLedger& ledger);

}  // namespace tidepool
