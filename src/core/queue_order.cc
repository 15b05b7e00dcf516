#include "core/queue_order.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <utility>

#include "core/tenants.h"

namespace tidepool {
namespace {

__extension__ using Uint128 = unsigned __int128;
__extension__ using Int128 = __int128;

constexpr int kQ = 62;                  // fixed-point bits of a factor
constexpr int kDecayFractionBits = 48;  // resolution of elapsed / half_life
constexpr Uint128 kOne = Uint128{1} << kQ;

// sqrt(x) rounded to the nearest, for x < 2^124, by bisection (compile time only).
constexpr std::uint64_t isqrt(Uint128 x) {
  std::uint64_t lo = 0;
  std::uint64_t hi = std::uint64_t{1} << 62;  // sqrt(2^124)
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (Uint128{mid} * mid <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  // lo = floor(sqrt(x)); round up when x is nearer (lo + 1)^2, i.e. x > lo^2 + lo.
  return x > Uint128{lo} * lo + lo ? lo + 1 : lo;
}

// 2^(-2^-i) in Q62 for i = 1..48 (entry i - 1): each is the square root of the one before,
// starting from 2^-1. Computed from integers, so no libm result enters the schedule.
constexpr std::array<std::uint64_t, kDecayFractionBits> half_roots() {
  std::array<std::uint64_t, kDecayFractionBits> roots{};
  Uint128 previous = kOne / 2;
  for (int i = 0; i < kDecayFractionBits; ++i) {
    roots[i] = isqrt(previous << kQ);
    previous = roots[i];
  }
  return roots;
}
constexpr std::array<std::uint64_t, kDecayFractionBits> kHalfRoots = half_roots();
static_assert(kHalfRoots[0] == 3260954456333195553ULL);  // 2^-0.5 x 2^62, floor

// (value x factor) / 2^shift, rounded to the nearest; shift >= 1.
constexpr Uint128 mul_shift_round(Uint128 value, Uint128 factor, int shift) {
  return (value * factor + (Uint128{1} << (shift - 1))) >> shift;
}

// a + b, at most kMaxFairShareUsage; both in 0..kMaxFairShareUsage.
std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  return b > kMaxFairShareUsage - a ? kMaxFairShareUsage : a + b;
}

}  // namespace

std::int64_t decay(std::int64_t amount, Seconds elapsed, Seconds half_life) {
  if (amount <= 0 || elapsed <= 0) return std::max<std::int64_t>(amount, 0);
  const Seconds halvings = elapsed / half_life;
  if (halvings >= 63) return 0;  // amount < 2^63
  // (elapsed % half_life) / half_life on a 2^-48 grid, rounded to the nearest step. The rest is
  // below half_life <= 2^31, so the shift fits 128 bits and the fraction stays below 2^48.
  const auto rest = static_cast<Uint128>(elapsed % half_life);
  const auto h = static_cast<Uint128>(half_life);
  const Uint128 fraction = ((rest << kDecayFractionBits) + h / 2) / h;
  Uint128 factor = kOne;  // 2^(-fraction / 2^48)
  for (int i = 0; i < kDecayFractionBits; ++i) {
    if ((fraction >> (kDecayFractionBits - 1 - i)) & 1U) {
      factor = mul_shift_round(factor, kHalfRoots[i], kQ);
    }
  }
  const Uint128 result =
      mul_shift_round(static_cast<Uint128>(amount), factor, kQ + static_cast<int>(halvings));
  return static_cast<std::int64_t>(result);
}

Result<FairShareLedger> FairShareLedger::create(std::vector<std::int64_t> weights,
                                                Seconds half_life, Seconds start) {
  if (half_life < 1 || half_life > kMaxFairShareHalfLife) {
    return fail("half_life",
                fmt::format("must be 1..{} seconds, got {}", kMaxFairShareHalfLife, half_life));
  }
  if (start < 0) return fail("start", fmt::format("must not be negative, got {}", start));
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] < 1 || weights[i] > kMaxTenantWeight) {
      return fail(fmt::format("weights[{}]", i),
                  fmt::format("must be 1..{}, got {}", kMaxTenantWeight, weights[i]));
    }
  }
  FairShareLedger ledger;
  ledger.usage_.assign(weights.size(), 0);
  ledger.weights_ = std::move(weights);
  ledger.half_life_ = half_life;
  ledger.now_ = start;
  return ledger;
}

Result<FairShareLedger> FairShareLedger::for_tenants(const TenantBook& book, Seconds half_life,
                                                     Seconds start) {
  std::vector<std::int64_t> weights;
  weights.reserve(static_cast<std::size_t>(book.tenant_count()));
  for (int t = 0; t < book.tenant_count(); ++t) {
    weights.push_back(book.weight(TenantId{static_cast<std::uint32_t>(t)}));
  }
  return create(std::move(weights), half_life, start);
}

std::int64_t FairShareLedger::weight(TenantId t) const {
  return t.value < weights_.size() ? weights_[t.value] : 1;
}

std::int64_t FairShareLedger::usage(TenantId t) const {
  return t.value < usage_.size() ? usage_[t.value] : 0;
}

double FairShareLedger::share(TenantId t) const {
  return static_cast<double>(usage(t)) / static_cast<double>(weight(t));
}

Result<void> FairShareLedger::advance_to(Seconds t) {
  if (t < now_) {
    return fail("time", fmt::format("the ledger is at {}; it cannot go back to {}", now_, t));
  }
  if (t == now_) return {};
  for (std::int64_t& u : usage_) u = decay(u, t - now_, half_life_);
  now_ = t;
  return {};
}

Result<void> FairShareLedger::charge(TenantId t, std::int64_t milli_gpu, Seconds from, Seconds to) {
  if (t.value >= usage_.size()) return fail("tenant", fmt::format("unknown tenant #{}", t.value));
  if (milli_gpu < 0 || milli_gpu > kMaxQuotaMilli) {
    return fail("milli_gpu", fmt::format("must be 0..{}, got {}", kMaxQuotaMilli, milli_gpu));
  }
  if (from < 0 || to < from) {
    return fail("interval", fmt::format("[{}, {}) is not an interval of times >= 0", from, to));
  }
  // Both factors are below 2^63, so the product fits; saturate before narrowing.
  const Int128 raw = Int128{milli_gpu} * (to - from);
  auto amount = static_cast<std::int64_t>(std::min<Int128>(raw, kMaxFairShareUsage));
  if (to > now_) {
    if (auto advanced = advance_to(to); !advanced) return advanced;
  } else {
    amount = decay(amount, now_ - to, half_life_);
  }
  usage_[t.value] = saturating_add(usage_[t.value], amount);
  return {};
}

std::strong_ordering FairShareLedger::compare_share(TenantId a, TenantId b) const {
  // usage < 2^62 and weight <= 10^6 < 2^20: both products fit in 128 bits.
  const Int128 lhs = Int128{usage(a)} * weight(b);
  const Int128 rhs = Int128{usage(b)} * weight(a);
  return lhs <=> rhs;
}

QueueEntry queue_entry(const Job& job) {
  return QueueEntry{job.id, job.tenant, job.priority_class, job.submit_time};
}

bool queue_before(const QueueEntry& a, const QueueEntry& b, const FairShareLedger& ledger) {
  if (a.priority_class != b.priority_class) return a.priority_class > b.priority_class;
  if (a.tenant != b.tenant) {
    const std::strong_ordering share = ledger.compare_share(a.tenant, b.tenant);
    if (share != 0) return share < 0;
  }
  if (a.submit_time != b.submit_time) return a.submit_time < b.submit_time;
  return a.job < b.job;
}

void sort_queue(std::span<QueueEntry> pending, const FairShareLedger& ledger) {
  std::sort(pending.begin(), pending.end(), QueueOrder(ledger));
}

}  // namespace tidepool
