#include "core/efficiency_model.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <vector>

namespace tidepool {
namespace {

__extension__ using Uint128 = unsigned __int128;

// 2^(2^-i) for i = 1..10 in Q62 fixed point (floor). Log-uniform draws use them instead of
// std::exp so that a seed gives the same model sizes bit for bit on every platform.
constexpr int kExp2StepBits = 10;  // 1024 grid steps per doubling
constexpr std::array<std::uint64_t, kExp2StepBits> kRootsOfTwoQ62 = {
    6521908912666391106ULL, 5484249825272419511ULL, 5029079263719320435ULL, 4815862801830788490ULL,
    4712668792719003883ULL, 4661903986662671289ULL, 4636727017470743990ULL, 4624189567668517720ULL,
    4617933561212708776ULL, 4614808732577250068ULL};

// floor(base x 2^(step / 1024)), in integers.
constexpr std::int64_t scale_by_exp2(std::int64_t base, std::uint32_t step) {
  Uint128 factor = Uint128{1} << 62;  // Q62
  for (int i = 0; i < kExp2StepBits; ++i) {
    if ((step >> (kExp2StepBits - 1 - i)) & 1U) factor = (factor * kRootsOfTwoQ62[i]) >> 62;
  }
  const Uint128 whole = static_cast<Uint128>(base) << (step >> kExp2StepBits);
  return static_cast<std::int64_t>((whole * factor) >> 62);
}

// Number of grid steps k with kMinGradientBytes x 2^(k/1024) <= kMaxGradientBytes.
constexpr std::uint32_t gradient_steps() {
  std::uint32_t steps = 0;
  while (scale_by_exp2(kMinGradientBytes, steps) <= kMaxGradientBytes) ++steps;
  return steps;
}
constexpr std::uint32_t kGradientSteps = gradient_steps();
static_assert(scale_by_exp2(kMinGradientBytes, 0) == kMinGradientBytes);
static_assert(scale_by_exp2(kMinGradientBytes, kGradientSteps - 1) <= kMaxGradientBytes);

// SplitMix64's finaliser: a bijection, so distinct job keys give distinct generator seeds.
std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Whether link a (gbps / oversubscription) is strictly slower than link b.
bool slower(const Bottleneck& a, const Bottleneck& b) {
  return std::int64_t{a.gbps} * b.oversubscription < std::int64_t{b.gbps} * a.oversubscription;
}

}  // namespace

JobCommProfile draw_comm_profile(Rng& rng) {
  JobCommProfile profile;
  profile.gradient_bytes =
      scale_by_exp2(kMinGradientBytes, static_cast<std::uint32_t>(rng.below(kGradientSteps)));
  profile.compute_us =
      kMinComputeUs + static_cast<std::int64_t>(
                          rng.below(static_cast<std::uint64_t>(kMaxComputeUs - kMinComputeUs + 1)));
  return profile;
}

JobCommProfile draw_comm_profile(std::uint64_t seed, std::uint64_t job_key) {
  Rng rng(seed ^ mix64(job_key));
  return draw_comm_profile(rng);
}

RingSpan ring_span(const Pool& pool, std::span<const Assignment> assignments) {
  RingSpan ring;
  ring.span = gang_span(pool, assignments);
  for (const Assignment& a : assignments) {
    ring.gpus += gpu_set_size(a.gpus);
    const LeafId leaf = pool.spec(a.node).leaf;
    const SpineId spine = pool.topology().leaves[leaf.value].spine;
    ring.oversubscription =
        std::max(ring.oversubscription, pool.topology().spines[spine.value].oversubscription);
  }
  return ring;
}

RingSpan ideal_ring_span(const Pool& pool, int gpus) {
  RingSpan ring;
  ring.gpus = gpus;
  if (gpus <= 0) return ring;
  const Topology& topology = pool.topology();
  int largest_domain = 0, largest_node = 0;
  std::vector<std::int64_t> leaf_gpus(topology.leaves.size(), 0);
  for (const NodeSpec& spec : pool.specs()) {
    std::array<int, kMaxGpusPerNode> per_domain{};
    for (int g = 0; g < spec.gpu_count; ++g) ++per_domain[spec.nvlink_domain[g]];
    largest_domain =
        std::max(largest_domain, *std::max_element(per_domain.begin(), per_domain.end()));
    largest_node = std::max(largest_node, spec.gpu_count);
    leaf_gpus[spec.leaf.value] += spec.gpu_count;
  }
  std::vector<std::int64_t> spine_gpus(topology.spines.size(), 0);
  for (std::size_t l = 0; l < topology.leaves.size(); ++l)
    spine_gpus[topology.leaves[l].spine.value] += leaf_gpus[l];
  const std::int64_t largest_leaf =
      leaf_gpus.empty() ? 0 : *std::max_element(leaf_gpus.begin(), leaf_gpus.end());
  const std::int64_t largest_spine =
      spine_gpus.empty() ? 0 : *std::max_element(spine_gpus.begin(), spine_gpus.end());
  // A pool too small for the ring still gets a span: its units are taken as the largest ones.
  largest_domain = std::max(largest_domain, 1);
  largest_node = std::max(largest_node, largest_domain);

  const std::int64_t n = gpus;
  GangSpan& span = ring.span;
  span.spines = span.leaves = span.nodes = 1;
  if (n > largest_node) span.nodes = static_cast<int>(ceil_div(n, largest_node));
  if (n > largest_leaf && largest_leaf > 0)
    span.leaves = static_cast<int>(ceil_div(n, largest_leaf));
  if (n > largest_spine && largest_spine > 0)
    span.spines = static_cast<int>(ceil_div(n, largest_spine));
  span.leaves = std::max(span.leaves, span.spines);
  span.nodes = std::max(span.nodes, span.leaves);
  span.nvlink_domains = std::max(span.nodes, static_cast<int>(ceil_div(n, largest_domain)));

  if (span.leaves > 1) {
    // Within one spine: the best spine that holds the ring; across spines: the worst one crossed.
    int best = 0, worst = 1;
    for (std::size_t s = 0; s < topology.spines.size(); ++s) {
      if (spine_gpus[s] == 0) continue;
      const int over = topology.spines[s].oversubscription;
      worst = std::max(worst, over);
      if (spine_gpus[s] >= n && (best == 0 || over < best)) best = over;
    }
    ring.oversubscription = span.spines == 1 && best > 0 ? best : worst;
  }
  return ring;
}

const char* comm_link_name(CommLink link) {
  switch (link) {
    case CommLink::kNone:
      return "none";
    case CommLink::kNvlink:
      return "nvlink";
    case CommLink::kPcie:
      return "pcie";
    case CommLink::kLeaf:
      return "leaf";
    case CommLink::kSpine:
      return "spine";
  }
  return "none";
}

Bottleneck bottleneck(const LinkSpeeds& links, const RingSpan& ring) {
  if (ring.gpus < 2) return {};
  const GangSpan& span = ring.span;
  // Outer links first, so that an outer link wins a tie.
  std::array<Bottleneck, 4> crossed{};
  int count = 0;
  if (span.leaves > 1)
    crossed[count++] = {CommLink::kSpine, links.spine_gbps, std::max(ring.oversubscription, 1)};
  if (span.nodes > 1) crossed[count++] = {CommLink::kLeaf, links.leaf_gbps, 1};
  if (span.nvlink_domains > span.nodes) crossed[count++] = {CommLink::kPcie, links.pcie_gbps, 1};
  if (span.nvlink_domains < ring.gpus || count == 0)
    crossed[count++] = {CommLink::kNvlink, links.nvlink_gbps, 1};
  Bottleneck worst = crossed[0];
  for (int i = 1; i < count; ++i) {
    if (slower(crossed[i], worst)) worst = crossed[i];
  }
  return worst;
}

double StepTime::comm_share() const {
  const std::int64_t total = total_us();
  return total > 0 ? static_cast<double>(comm_us()) / static_cast<double>(total) : 0.0;
}

double StepTime::est_mfu() const {
  const std::int64_t total = total_us();
  return total > 0 ? kMfuWithoutComm * static_cast<double>(compute_us) / static_cast<double>(total)
                   : 0.0;
}

StepTime step_time(const JobCommProfile& profile, const LinkSpeeds& links, const RingSpan& ring) {
  StepTime step;
  step.compute_us = profile.compute_us;
  const Bottleneck link = bottleneck(links, ring);
  if (link.link == CommLink::kNone) return step;
  assert(link.gbps > 0 && link.oversubscription > 0);
  const auto n = static_cast<Uint128>(ring.gpus);
  // bits / (Gbit/s / over) in us = bits x over / (gbps x 1000).
  const Uint128 numerator = 2 * (n - 1) * static_cast<Uint128>(profile.gradient_bytes) * 8 *
                            static_cast<Uint128>(link.oversubscription);
  const Uint128 denominator = n * static_cast<Uint128>(link.gbps) * 1000;
  step.bandwidth_us = static_cast<std::int64_t>((numerator + denominator - 1) / denominator);
  step.latency_us = 2 * (static_cast<std::int64_t>(ring.gpus) - 1) * kRingHopLatencyUs;
  return step;
}

double PlacementEfficiency::slowdown() const {
  const std::int64_t ideal_total = ideal.total_us();
  if (ideal_total <= 0) return 1.0;
  return std::max(1.0, static_cast<double>(actual.total_us()) / static_cast<double>(ideal_total));
}

PlacementEfficiency placement_efficiency(const JobCommProfile& profile, const Pool& pool,
                                         std::span<const Assignment> assignments) {
  const RingSpan actual = ring_span(pool, assignments);
  return placement_efficiency(profile, pool.topology().links, actual,
                              ideal_ring_span(pool, actual.gpus));
}

PlacementEfficiency placement_efficiency(const JobCommProfile& profile, const LinkSpeeds& links,
                                         const RingSpan& actual, const RingSpan& ideal) {
  return PlacementEfficiency{step_time(profile, links, actual), step_time(profile, links, ideal),
                             bottleneck(links, actual), bottleneck(links, ideal)};
}

std::int64_t scale_runtime(std::int64_t ideal_runtime, const PlacementEfficiency& efficiency) {
  const std::int64_t actual_total = efficiency.actual.total_us();
  const std::int64_t ideal_total = efficiency.ideal.total_us();
  if (ideal_runtime <= 0 || ideal_total <= 0 || actual_total <= ideal_total) return ideal_runtime;
  const Uint128 numerator =
      static_cast<Uint128>(ideal_runtime) * static_cast<Uint128>(actual_total);
  const auto denominator = static_cast<Uint128>(ideal_total);
  return static_cast<std::int64_t>((numerator + denominator - 1) / denominator);
}

}  // namespace tidepool
