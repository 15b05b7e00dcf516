#include "core/tenants.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/rng.h"
#include "core/test_pool.h"
#include "core/test_random.h"

namespace tidepool {
namespace {

using test_support::chance;
using test_support::draw64;
using test_support::h100_and_a100_catalog;
using test_support::kA100;
using test_support::kH100;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TenantSpec tenant(std::string name, std::vector<ModelQuota> quotas) {
  TenantSpec spec;
  spec.name = std::move(name);
  spec.quotas = std::move(quotas);
  return spec;
}

ModelQuota quota(GpuModelId model, std::int64_t guaranteed,
                 std::optional<std::int64_t> borrowing = std::nullopt,
                 std::optional<std::int64_t> lending = std::nullopt) {
  return {model, guaranteed, borrowing, lending};
}

TenantBook book(TenantsSpec spec) {
  auto result = TenantBook::create(std::move(spec), h100_and_a100_catalog());
  EXPECT_TRUE(result.has_value()) << result.error().message();
  return std::move(*result);
}

// research: search (64 H100, borrowing limit 0), vision (16 H100, lends 8);
// products: ads (16 H100).
TenantsSpec three_tenants() {
  TenantsSpec spec;
  spec.orgs.push_back({"research",
                       {},
                       {tenant("search", {quota(kH100, 64000, 0)}),
                        tenant("vision", {quota(kH100, 16000, std::nullopt, 8000)})}});
  spec.orgs.push_back({"products", {}, {tenant("ads", {quota(kH100, 16000)})}});
  return spec;
}

constexpr TenantId kSearch{0};
constexpr TenantId kVision{1};
constexpr TenantId kAds{2};

TEST(TenantBookTest, BuildsTheTree) {
  TenantsSpec spec = three_tenants();
  spec.orgs[0].tenants[0].queues = {"ranking", "retrieval"};
  spec.orgs[0].tenants[0].weight = 2;
  const TenantBook b = book(std::move(spec));
  EXPECT_EQ(b.org_count(), 2);
  EXPECT_EQ(b.tenant_count(), 3);
  EXPECT_EQ(b.queue_count(), 4);  // ranking, retrieval, and one default each for vision and ads
  EXPECT_EQ(b.find_tenant("ads"), kAds);
  EXPECT_EQ(b.find_org("products"), OrgId{1});
  EXPECT_EQ(b.org_of(kAds), OrgId{1});
  EXPECT_THAT(b.tenants_of(OrgId{0}), ElementsAre(kSearch, kVision));
  EXPECT_EQ(b.weight(kSearch), 2);
  EXPECT_EQ(b.weight(kVision), 1);
  const auto retrieval = b.find_queue(kSearch, "retrieval");
  ASSERT_TRUE(retrieval.has_value());
  EXPECT_EQ(b.queue_name(*retrieval), "retrieval");
  EXPECT_EQ(b.tenant_of(*retrieval), kSearch);
  const auto ads_queue = b.find_queue(kAds, "default");
  ASSERT_TRUE(ads_queue.has_value());
  EXPECT_EQ(b.tenant_of(*ads_queue), kAds);
  EXPECT_FALSE(b.find_queue(kAds, "ranking").has_value());

  EXPECT_EQ(b.guaranteed(kSearch, kH100), 64000);
  EXPECT_EQ(b.borrowing_limit(kSearch, kH100), 0);
  EXPECT_EQ(b.lending_limit(kSearch, kH100), 64000);  // absent: all of the guarantee
  EXPECT_EQ(b.lending_limit(kVision, kH100), 8000);
  EXPECT_EQ(b.borrowing_limit(kVision, kH100), std::nullopt);  // absent: unlimited
  EXPECT_EQ(b.guaranteed(kAds, kA100), 0);                     // not listed
  EXPECT_EQ(b.borrowing_limit(kAds, kA100), std::nullopt);
}

TEST(TenantBookTest, AdmitsWithinGuarantee) {
  TenantBook b = book(three_tenants());
  const Admission a = b.admit(kSearch, kH100, 8000);
  EXPECT_EQ(a.kind, AdmissionKind::kWithinGuarantee);
  EXPECT_EQ(a.guaranteed_milli, 8000);
  EXPECT_EQ(a.borrowed_milli, 0);
  EXPECT_EQ(a.reclaim_milli, 0);
  EXPECT_EQ(a.reason, "within guarantee: tenant search will use 8 of its 64 guaranteed H100 GPUs");
  ASSERT_TRUE(b.charge(kSearch, kH100, 64000).has_value());
  EXPECT_EQ(b.usage(kSearch, kH100), 64000);
  EXPECT_EQ(b.borrowed(kSearch, kH100), 0);
  EXPECT_EQ(b.lendable(kSearch, kH100), 0);
}

TEST(TenantBookTest, RefusesBorrowingWithLimitZero) {
  TenantBook b = book(three_tenants());
  ASSERT_TRUE(b.charge(kSearch, kH100, 64000).has_value());
  const Admission a = b.admit(kSearch, kH100, 8000);
  EXPECT_EQ(a.kind, AdmissionKind::kRefused);
  EXPECT_FALSE(a.admitted());
  EXPECT_EQ(a.borrowable_milli, 0);
  EXPECT_EQ(a.reason,
            "tenant search uses 64 of its 64 guaranteed H100 GPUs; the job needs 8 GPUs borrowed "
            "and 0 may be (its borrowing limit is 0 GPUs)");
  const auto charged = b.charge(kSearch, kH100, 8000);
  ASSERT_FALSE(charged.has_value());
  EXPECT_EQ(charged.error().field, "tenant search");
  EXPECT_EQ(charged.error().reason, a.reason);
  EXPECT_EQ(b.usage(kSearch, kH100), 64000);  // unchanged
}

TEST(TenantBookTest, BorrowsIdleGuaranteesWithinLendingLimits) {
  TenantBook b = book(three_tenants());
  // ads may borrow what vision lends (8 of its 16) and all of search's idle 64.
  ASSERT_TRUE(b.charge(kAds, kH100, 16000).has_value());
  Admission a = b.admit(kAds, kH100, 72000);
  EXPECT_EQ(a.kind, AdmissionKind::kBorrowing);
  EXPECT_EQ(a.borrowable_milli, 72000);
  EXPECT_EQ(a.borrowed_milli, 72000);
  EXPECT_THAT(a.lenders, ElementsAre(Lender{kSearch, 64000}, Lender{kVision, 8000}));
  EXPECT_EQ(a.reason,
            "borrowing: tenant ads will use 88 H100 GPUs, 72 above its guarantee of 16; 72 was "
            "borrowable");
  a = b.admit(kAds, kH100, 72001);
  EXPECT_EQ(a.kind, AdmissionKind::kRefused);
  EXPECT_EQ(a.reason,
            "tenant ads uses 16 of its 16 guaranteed H100 GPUs; the job needs 72.001 GPUs borrowed "
            "and 72 may be (idle guarantees lendable to it: 72 GPUs)");

  ASSERT_TRUE(b.charge(kAds, kH100, 70000).has_value());
  EXPECT_EQ(b.borrowed(kAds, kH100), 70000);
  // vision's usage within guarantee leaves 8000 idle: it still lends 8000 (its limit).
  ASSERT_TRUE(b.charge(kVision, kH100, 8000).has_value());
  EXPECT_EQ(b.lendable(kVision, kH100), 8000);
  EXPECT_EQ(b.reclaim_needed(kH100), 0);
  // Only 2000 is left to lend; ads has borrowed the rest.
  EXPECT_EQ(b.admit(kAds, kH100, 2000).kind, AdmissionKind::kBorrowing);
  EXPECT_EQ(b.admit(kAds, kH100, 2001).kind, AdmissionKind::kRefused);
  // vision may take the rest of its guarantee back, but not borrow beyond it: ads has all the
  // lendable.
  EXPECT_EQ(b.admit(kVision, kH100, 8000).kind, AdmissionKind::kWithinGuarantee);
  EXPECT_EQ(b.admit(kVision, kH100, 8001).kind, AdmissionKind::kRefused);
}

TEST(TenantBookTest, GuaranteeReturnsEvenWhenLentOutAndSaysWhatToReclaim) {
  TenantBook b = book(three_tenants());
  ASSERT_TRUE(b.charge(kAds, kH100, 16000 + 72000).has_value());
  EXPECT_EQ(b.reclaim_needed(kH100), 0);
  // search comes back for 10 of its 64: within guarantee, 10 borrowed by ads must be reclaimed.
  const Admission a = b.admit(kSearch, kH100, 10000);
  EXPECT_EQ(a.kind, AdmissionKind::kWithinGuarantee);
  EXPECT_EQ(a.reclaim_milli, 10000);
  EXPECT_EQ(a.reason,
            "within guarantee: tenant search will use 10 of its 64 guaranteed H100 GPUs; 10 GPUs "
            "lent to borrowers must be reclaimed");
  ASSERT_TRUE(b.charge(kSearch, kH100, 10000).has_value());
  EXPECT_EQ(b.reclaim_needed(kH100), 10000);
  // While the debt stands, nobody borrows more.
  EXPECT_EQ(b.admit(kVision, kH100, 16001).kind, AdmissionKind::kRefused);
  EXPECT_EQ(b.admit(kAds, kH100, 1).kind, AdmissionKind::kRefused);
  ASSERT_TRUE(b.refund(kAds, kH100, 10000).has_value());  // the reclaim
  EXPECT_EQ(b.reclaim_needed(kH100), 0);
  EXPECT_EQ(b.borrowed(kAds, kH100), 62000);
}

TEST(TenantBookTest, MixedRequestSplitsGuaranteeAndBorrowing) {
  TenantBook b = book(three_tenants());
  ASSERT_TRUE(b.charge(kVision, kH100, 12000).has_value());
  const Admission a = b.admit(kVision, kH100, 10000);
  EXPECT_EQ(a.kind, AdmissionKind::kBorrowing);
  EXPECT_EQ(a.guaranteed_milli, 4000);
  EXPECT_EQ(a.borrowed_milli, 6000);
  EXPECT_EQ(a.borrowable_milli, 64000 + 16000);
  ASSERT_TRUE(b.charge(kVision, kH100, 10000).has_value());
  EXPECT_EQ(b.borrowed(kVision, kH100), 6000);
}

TEST(TenantBookTest, TenantBorrowingLimitCountsWhatIsBorrowed) {
  TenantsSpec spec = three_tenants();
  spec.orgs[1].tenants[0].quotas[0].borrowing_limit_milli = 32000;
  TenantBook b = book(std::move(spec));
  ASSERT_TRUE(b.charge(kAds, kH100, 16000 + 30000).has_value());
  const Admission a = b.admit(kAds, kH100, 4000);
  EXPECT_EQ(a.kind, AdmissionKind::kRefused);
  EXPECT_EQ(a.borrowable_milli, 2000);
  EXPECT_EQ(
      a.reason,
      "tenant ads uses 16 of its 16 guaranteed H100 GPUs and borrows 30; the job needs 4 GPUs "
      "borrowed and 2 may be (its borrowing limit is 32 GPUs)");
}

TEST(TenantBookTest, OrgCapsLimitBorrowingAndLendingAcrossOrgs) {
  TenantsSpec spec = three_tenants();
  spec.orgs[1].caps.push_back({kH100, std::nullopt, 4000, std::nullopt});  // products borrows 4
  spec.orgs[0].caps.push_back({kH100, 80000, std::nullopt, 10000});        // research lends 10
  TenantBook b = book(std::move(spec));
  ASSERT_TRUE(b.charge(kAds, kH100, 16000).has_value());
  Admission a = b.admit(kAds, kH100, 5000);
  EXPECT_EQ(a.kind, AdmissionKind::kRefused);
  EXPECT_EQ(a.borrowable_milli, 4000);
  EXPECT_EQ(a.reason,
            "tenant ads uses 16 of its 16 guaranteed H100 GPUs; the job needs 5 GPUs borrowed and "
            "4 may be (org products borrows 0 GPUs from other orgs, its limit is 4 GPUs)");
  ASSERT_TRUE(b.charge(kAds, kH100, 4000).has_value());
  EXPECT_EQ(b.org_position(OrgId{1}, kH100).borrowed_outside_milli, 4000);

  // research offers at most 10 of its 72 lendable to other orgs, but vision may borrow the rest
  // of search's idle guarantee inside the org: 72 lendable - 4 lent to ads - 8 of its own.
  ASSERT_TRUE(b.charge(kVision, kH100, 16000).has_value());
  a = b.admit(kVision, kH100, 60000);
  EXPECT_EQ(a.kind, AdmissionKind::kBorrowing);
  EXPECT_EQ(a.borrowable_milli, 64000 - 4000);
  EXPECT_THAT(a.lenders, ElementsAre(Lender{kSearch, 64000}));
  EXPECT_EQ(b.admit(kVision, kH100, 60001).kind, AdmissionKind::kRefused);
  // Other orgs get no more than research offers: 10, of which ads has 4.
  const OrgPosition research = b.org_position(OrgId{0}, kH100);
  EXPECT_EQ(research.spare_milli, 64000);
  EXPECT_EQ(research.offered_milli, 10000);
}

TEST(TenantBookTest, AdmitsPerModelOfASet) {
  TenantsSpec spec = three_tenants();
  spec.orgs[1].tenants[0].quotas.push_back(quota(kA100, 8000));
  const TenantBook b = book(std::move(spec));
  const std::vector<Admission> any = b.admit(kAds, ModelSet::any(), 8000);
  ASSERT_EQ(any.size(), 2U);
  EXPECT_EQ(any[0].model, kH100);
  EXPECT_EQ(any[0].kind, AdmissionKind::kWithinGuarantee);
  EXPECT_EQ(any[1].model, kA100);
  EXPECT_EQ(any[1].kind, AdmissionKind::kWithinGuarantee);
  const std::vector<Admission> only = b.admit(kSearch, ModelSet::only(kA100), 1000);
  ASSERT_EQ(only.size(), 1U);
  // search has no A100 quota: no guarantee, unlimited borrowing of ads' idle A100.
  EXPECT_EQ(only[0].kind, AdmissionKind::kBorrowing);
  EXPECT_EQ(only[0].borrowable_milli, 8000);
  EXPECT_THAT(only[0].lenders, ElementsAre(Lender{kAds, 8000}));
  EXPECT_EQ(b.admit(kSearch, kA100, 8001).reason,
            "tenant search uses 0 of its 0 guaranteed A100 GPUs; the job needs 8.001 GPUs borrowed "
            "and 8 may be (idle guarantees lendable to it: 8 GPUs)");
}

TEST(TenantBookTest, ChargeAndRefundAreSymmetric) {
  TenantBook b = book(three_tenants());
  ASSERT_TRUE(b.charge(kAds, kH100, 20000).has_value());
  const TenantBook before = b;
  ASSERT_TRUE(b.charge(kAds, kH100, 30000).has_value());
  ASSERT_TRUE(b.refund(kAds, kH100, 30000).has_value());
  for (TenantId t : {kSearch, kVision, kAds}) {
    EXPECT_EQ(b.usage(t, kH100), before.usage(t, kH100));
    EXPECT_EQ(b.lendable(t, kH100), before.lendable(t, kH100));
    EXPECT_EQ(b.borrowed(t, kH100), before.borrowed(t, kH100));
  }
  EXPECT_EQ(b.admit(kVision, kH100, 50000).borrowable_milli,
            before.admit(kVision, kH100, 50000).borrowable_milli);
}

TEST(ShareLeftAfterHold, TheHeldGpusComeOutOfEveryGuaranteeInProportion) {
  // 512 GPUs guaranteed in all, 64 held: each keeps 7/8 of its figure.
  EXPECT_EQ(share_left_after_hold(80'000, 512'000, 64'000), 70'000);
  EXPECT_EQ(share_left_after_hold(48'733, 512'000, 64'000), 42'641);  // rounded down
  EXPECT_EQ(share_left_after_hold(80'000, 512'000, 0), 80'000);
  EXPECT_EQ(share_left_after_hold(80'000, 512'000, 600'000), 0);
  EXPECT_EQ(share_left_after_hold(80'000, 0, 64'000), 80'000);
  // Large pools do not overflow.
  EXPECT_EQ(share_left_after_hold(900'000'000, 1'000'000'000, 500'000'000), 450'000'000);
}

TEST(TenantBookTest, AHoldOutsideTheQuotasLowersEveryGuaranteeAndLendingLimitInProportion) {
  TenantBook b = book(three_tenants());  // 64 + 16 + 16 GPUs guaranteed
  ASSERT_TRUE(b.charge(kAds, kH100, 16000).has_value());
  EXPECT_EQ(b.borrowed(kAds, kH100), 0);
  b.hold_outside_quotas(12000);  // 1/8 of all
  EXPECT_EQ(b.held_outside_quotas(), 12000);
  EXPECT_EQ(b.guaranteed(kSearch, kH100), 56000);
  EXPECT_EQ(b.guaranteed(kVision, kH100), 14000);
  EXPECT_EQ(b.lending_limit(kVision, kH100), 7000);
  EXPECT_EQ(b.guaranteed_total(kAds), 14000);
  EXPECT_EQ(b.borrowed(kAds, kH100), 2000);  // above what is left of its guarantee
  // A new hold replaces the last one; 0 gives everything back.
  b.hold_outside_quotas(12000);
  EXPECT_EQ(b.guaranteed(kSearch, kH100), 56000);
  b.hold_outside_quotas(0);
  EXPECT_EQ(b.guaranteed(kSearch, kH100), 64000);
  EXPECT_EQ(b.guaranteed(kVision, kH100), 16000);
  EXPECT_EQ(b.lending_limit(kVision, kH100), 8000);
  EXPECT_EQ(b.borrowed(kAds, kH100), 0);
}

TEST(TenantBookTest, ALoanGrantedDuringAHoldIsKeptWhenTheHoldChanges) {
  TenantBook b = book(three_tenants());
  b.hold_outside_quotas(12000);
  ASSERT_TRUE(b.adjust_guarantee(kAds, kH100, 8000).has_value());  // 14 + 8 GPUs
  b.hold_outside_quotas(0);
  EXPECT_EQ(b.guaranteed(kAds, kH100), 24000);  // 16 + 8
  b.hold_outside_quotas(13000);                 // 1/8 of 104 GPUs
  EXPECT_EQ(b.guaranteed(kAds, kH100), 21000);
  EXPECT_EQ(b.guaranteed(kSearch, kH100), 56000);
}

TEST(TenantBookTest, RefusesRefundsOfWhatWasNotCharged) {
  TenantBook b = book(three_tenants());
  ASSERT_TRUE(b.charge(kAds, kH100, 4000).has_value());
  auto refund = b.refund(kAds, kH100, 4001);
  ASSERT_FALSE(refund.has_value());
  EXPECT_EQ(refund.error().message(), "tenant ads: cannot refund 4001m H100: it uses 4000m");
  EXPECT_FALSE(b.refund(kAds, kA100, 1).has_value());
  EXPECT_FALSE(b.refund(kAds, kH100, 0).has_value());
  EXPECT_FALSE(b.refund(kAds, kH100, -5).has_value());
  EXPECT_FALSE(b.refund(TenantId{7}, kH100, 1).has_value());
  EXPECT_EQ(b.usage(kAds, kH100), 4000);
  EXPECT_TRUE(b.refund(kAds, kH100, 4000).has_value());
  EXPECT_EQ(b.usage(kAds, kH100), 0);
}

TEST(TenantBookTest, RefusesBadRequests) {
  const TenantBook b = book(three_tenants());
  EXPECT_EQ(b.admit(TenantId{9}, kH100, 1000).reason, "unknown tenant #9");
  EXPECT_EQ(b.admit(kAds, GpuModelId{5}, 1000).reason, "tenant ads asks for unknown GPU model #5");
  EXPECT_THAT(b.admit(kAds, kH100, 0).reason, HasSubstr("a request must be 0.001.."));
  EXPECT_EQ(b.admit(kAds, kH100, -1).kind, AdmissionKind::kRefused);
  EXPECT_EQ(b.admit(kAds, kH100, kMaxQuotaMilli + 1).kind, AdmissionKind::kRefused);
}

Error create_error(TenantsSpec spec) {
  auto result = TenantBook::create(std::move(spec), h100_and_a100_catalog());
  EXPECT_FALSE(result.has_value());
  return result ? Error{} : result.error();
}

TEST(TenantBookTest, ValidatesTheSpec) {
  TenantsSpec spec = three_tenants();
  spec.orgs[1].tenants[0].name = "search";
  Error e = create_error(spec);
  EXPECT_EQ(e.field, "orgs[1].tenants[0].name");
  EXPECT_EQ(e.reason, "tenant 'search' is given twice");

  spec = three_tenants();
  spec.orgs[1].name = "research";
  EXPECT_EQ(create_error(spec).field, "orgs[1].name");

  spec = three_tenants();
  spec.orgs[0].tenants[1].quotas[0].lending_limit_milli = 16001;
  e = create_error(spec);
  EXPECT_EQ(e.field, "orgs[0].tenants[1].quota.H100");
  EXPECT_EQ(e.reason, "the lending limit 16001m exceeds the guarantee 16000m");

  spec = three_tenants();
  spec.orgs[0].tenants[1].quotas[0].borrowing_limit_milli = -1;
  EXPECT_THAT(create_error(spec).reason, HasSubstr("the borrowing limit must be 0.."));

  spec = three_tenants();
  spec.orgs[0].tenants[1].quotas.push_back(quota(kH100, 1000));
  EXPECT_EQ(create_error(spec).reason, "H100 is given twice");

  spec = three_tenants();
  spec.orgs[0].tenants[1].quotas.push_back(quota(GpuModelId{2}, 1000));
  EXPECT_EQ(create_error(spec).reason, "unknown GPU model #2");

  spec = three_tenants();
  spec.orgs[0].tenants[0].weight = 0;
  EXPECT_EQ(create_error(spec).field, "orgs[0].tenants[0].weight");

  spec = three_tenants();
  spec.orgs[0].tenants[0].queues = {"a", "b", "a"};
  EXPECT_EQ(create_error(spec).reason, "queue 'a' is given twice");

  spec = three_tenants();
  spec.orgs[0].caps.push_back({kH100, 79999, std::nullopt, std::nullopt});
  e = create_error(spec);
  EXPECT_EQ(e.field, "orgs[0].caps.H100");
  EXPECT_EQ(e.reason, "its tenants' guarantees sum to 80000m, above the org's 79999m");

  EXPECT_EQ(create_error(TenantsSpec{}).reason, "the tenant tree has no tenants");
}

// ---- Property test --------------------------------------------------------------------------

constexpr int kBookSeeds = 300;
constexpr int kBookSteps = 200;

std::optional<std::int64_t> maybe_limit(Rng& rng, std::int64_t hi) {
  if (chance(rng, 50)) return std::nullopt;
  return draw64(rng, 0, hi / 500) * 500;
}

TenantsSpec random_spec(Rng& rng) {
  TenantsSpec spec;
  int next = 0;
  const int orgs = static_cast<int>(draw64(rng, 1, 3));
  for (int o = 0; o < orgs; ++o) {
    OrgSpec org;
    org.name = "org" + std::to_string(o);
    const int tenants = static_cast<int>(draw64(rng, o == 0 ? 1 : 0, 4));
    for (int t = 0; t < tenants; ++t) {
      TenantSpec ts;
      ts.name = "t" + std::to_string(next++);
      for (GpuModelId m : {kH100, kA100}) {
        if (chance(rng, 20)) continue;
        const std::int64_t g = draw64(rng, 0, 16) * 1000;
        std::optional<std::int64_t> lending = maybe_limit(rng, g);
        ts.quotas.push_back({m, g, maybe_limit(rng, 24000), lending});
      }
      org.tenants.push_back(std::move(ts));
    }
    for (GpuModelId m : {kH100, kA100}) {
      if (chance(rng, 50)) continue;
      org.caps.push_back({m, std::nullopt, maybe_limit(rng, 24000), maybe_limit(rng, 24000)});
    }
    spec.orgs.push_back(std::move(org));
  }
  return spec;
}

// The rules of core/tenants.h recomputed from the public figures alone, as an oracle.
struct Reference {
  struct Org {
    std::int64_t lendable = 0, borrowed = 0, out = 0, spare = 0, offer = 0;
  };
  std::vector<Org> orgs;
  std::int64_t over_org_limits = 0, out = 0, offer = 0;

  Reference(const TenantBook& b, GpuModelId m, TenantId changed, std::int64_t usage) {
    for (int o = 0; o < b.org_count(); ++o) {
      const OrgId org{static_cast<std::uint32_t>(o)};
      Org p;
      for (TenantId t : b.tenants_of(org)) {
        const std::int64_t u = t == changed ? usage : b.usage(t, m);
        const std::int64_t g = b.guaranteed(t, m);
        p.lendable += std::min(b.lending_limit(t, m), std::max<std::int64_t>(0, g - u));
        p.borrowed += std::max<std::int64_t>(0, u - g);
      }
      p.out = std::max<std::int64_t>(0, p.borrowed - p.lendable);
      p.spare = std::max<std::int64_t>(0, p.lendable - p.borrowed);
      p.offer = std::min(b.org_lending_limit(org, m).value_or(INT64_MAX), p.spare);
      if (auto limit = b.org_borrowing_limit(org, m)) {
        over_org_limits += std::max<std::int64_t>(0, p.out - *limit);
      }
      out += p.out;
      offer += p.offer;
      orgs.push_back(p);
    }
  }
  [[nodiscard]] std::int64_t debt() const { return std::max(over_org_limits, out - offer); }
};

// Whether tenant t, at `base` usage (at least its guarantee), may borrow `x` more by the rules:
// within its limit, without making its org or the pool less consistent.
bool may_borrow(const TenantBook& b, TenantId t, GpuModelId m, std::int64_t base, std::int64_t x) {
  const auto limit = b.borrowing_limit(t, m);
  if (limit && base + x - b.guaranteed(t, m) > *limit) return false;
  const Reference before(b, m, t, base);
  const Reference after(b, m, t, base + x);
  const OrgId org = b.org_of(t);
  if (const auto org_limit = b.org_borrowing_limit(org, m)) {
    const std::int64_t out0 = before.orgs[org.value].out;
    if (after.orgs[org.value].out > std::max(*org_limit, out0)) return false;
  }
  return after.out - after.offer <= std::max<std::int64_t>(0, before.out - before.offer);
}

void check_invariants(const TenantBook& b, std::uint64_t seed, int step) {
  for (GpuModelId m : {kH100, kA100}) {
    EXPECT_EQ(b.reclaim_needed(m), Reference(b, m, TenantId{~0U}, 0).debt())
        << "seed " << seed << " step " << step;
    for (int i = 0; i < b.tenant_count(); ++i) {
      const TenantId t{static_cast<std::uint32_t>(i)};
      ASSERT_GE(b.usage(t, m), 0) << "seed " << seed << " step " << step;
      if (const auto limit = b.borrowing_limit(t, m)) {
        ASSERT_LE(b.usage(t, m), b.guaranteed(t, m) + *limit)
            << "seed " << seed << " step " << step << " tenant " << i;
      }
    }
  }
}

// Takes back borrowed usage until the quota is consistent, as the scheduler's reclaim will: from
// borrowers of orgs past their borrowing limit first, then of orgs that borrow from others.
void reclaim(TenantBook& b, GpuModelId m, std::uint64_t seed) {
  for (int guard = 0; b.reclaim_needed(m) > 0 && guard < 1000; ++guard) {
    const std::int64_t need = b.reclaim_needed(m);
    const Reference ref(b, m, TenantId{~0U}, 0);
    std::optional<OrgId> pick;
    std::int64_t take = 0;
    for (int o = 0; o < b.org_count() && !pick; ++o) {  // past the org's limit first
      const auto limit = b.org_borrowing_limit(OrgId{static_cast<std::uint32_t>(o)}, m);
      if (limit && ref.orgs[o].out > *limit) {
        pick = OrgId{static_cast<std::uint32_t>(o)};
        take = ref.orgs[o].out - *limit;
      }
    }
    for (int o = 0; o < b.org_count() && !pick; ++o) {
      if (ref.orgs[o].out > 0) {
        pick = OrgId{static_cast<std::uint32_t>(o)};
        take = std::min(ref.orgs[o].out, need);
      }
    }
    ASSERT_TRUE(pick.has_value()) << "seed " << seed << ": a debt with no borrowing org";
    TenantId victim{};
    for (TenantId t : b.tenants_of(*pick)) {
      if (b.borrowed(t, m) > b.borrowed(victim, m) || b.org_of(victim) != *pick) victim = t;
    }
    take = std::min(take, b.borrowed(victim, m));
    ASSERT_GT(take, 0) << "seed " << seed;
    ASSERT_TRUE(b.refund(victim, m, take).has_value());
    // reclaim_needed is the least to take back: every unit taken lowers it by one.
    ASSERT_EQ(b.reclaim_needed(m), need - take) << "seed " << seed;
  }
  ASSERT_EQ(b.reclaim_needed(m), 0) << "seed " << seed;
}

TEST(TenantBookPropertyTest, RandomChargesAndRefundsKeepTheRules) {
  for (std::uint64_t seed = 1; seed <= kBookSeeds; ++seed) {
    Rng rng(seed);
    auto created = TenantBook::create(random_spec(rng), h100_and_a100_catalog());
    ASSERT_TRUE(created.has_value()) << "seed " << seed << ": " << created.error().message();
    TenantBook b = std::move(*created);
    for (int step = 0; step < kBookSteps; ++step) {
      const TenantId t{static_cast<std::uint32_t>(draw64(rng, 0, b.tenant_count() - 1))};
      const GpuModelId m = chance(rng, 50) ? kH100 : kA100;
      const std::int64_t used = b.usage(t, m);
      if (chance(rng, 60)) {
        const std::int64_t milli = draw64(rng, 1, 40) * 250;
        const Admission a = b.admit(t, m, milli);
        const std::int64_t debt = b.reclaim_needed(m);
        // The borrowable figure is exactly the most the rules allow.
        const std::int64_t base = std::max(used, b.guaranteed(t, m));
        ASSERT_TRUE(may_borrow(b, t, m, base, a.borrowable_milli))
            << "seed " << seed << " step " << step << " DBG t" << t.value << " m" << m.value
            << " used " << used << " g " << b.guaranteed(t, m) << " lim "
            << b.borrowing_limit(t, m).value_or(-1) << " borrowable " << a.borrowable_milli << " "
            << a.reason << " org " << b.org_of(t).value << " obl "
            << b.org_borrowing_limit(b.org_of(t), m).value_or(-1) << " oll "
            << b.org_lending_limit(b.org_of(t), m).value_or(-1);
        ASSERT_FALSE(may_borrow(b, t, m, base, a.borrowable_milli + 1))
            << "seed " << seed << " step " << step;
        ASSERT_EQ(a.admitted(), a.borrowed_milli <= a.borrowable_milli);
        // assess decides the same with the same figures, and writes no text.
        const Admission quiet = b.assess(t, m, milli);
        EXPECT_EQ(quiet.kind, a.kind) << "seed " << seed << " step " << step;
        EXPECT_EQ(
            std::tie(quiet.guaranteed_milli, quiet.borrowed_milli, quiet.borrowable_milli,
                     quiet.reclaim_milli),
            std::tie(a.guaranteed_milli, a.borrowed_milli, a.borrowable_milli, a.reclaim_milli));
        EXPECT_EQ(quiet.lenders.size(), a.lenders.size());
        EXPECT_TRUE(quiet.reason.empty());
        EXPECT_FALSE(a.reason.empty());
        auto charged = b.charge(t, m, milli);
        ASSERT_EQ(charged.has_value(), a.admitted()) << "seed " << seed << " step " << step;
        if (charged) {
          EXPECT_EQ(b.usage(t, m), used + milli);
          // Only a request's guaranteed part may add to the debt, by what it said.
          EXPECT_EQ(b.reclaim_needed(m), debt + a.reclaim_milli) << "seed " << seed;
          if (a.guaranteed_milli == 0) {
            EXPECT_EQ(a.reclaim_milli, 0);
          }
        } else {
          EXPECT_EQ(b.usage(t, m), used);
        }
      } else if (used > 0 && chance(rng, 90)) {
        const std::int64_t debt = b.reclaim_needed(m);
        ASSERT_TRUE(b.refund(t, m, draw64(rng, 1, used)).has_value());
        EXPECT_LE(b.reclaim_needed(m), debt) << "seed " << seed << " step " << step;
      } else {
        EXPECT_FALSE(b.refund(t, m, used + 1).has_value());
        EXPECT_EQ(b.usage(t, m), used);
      }
      check_invariants(b, seed, step);
      if (chance(rng, 70)) {
        reclaim(b, m, seed);
        // Consistent: the pool lends no more than the idle guarantees it may lend.
        std::int64_t borrowed = 0, lendable = 0;
        for (int i = 0; i < b.tenant_count(); ++i) {
          borrowed += b.borrowed(TenantId{static_cast<std::uint32_t>(i)}, m);
          lendable += b.lendable(TenantId{static_cast<std::uint32_t>(i)}, m);
        }
        ASSERT_LE(borrowed, lendable) << "seed " << seed << " step " << step;
      }
      if (testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace tidepool
