#include "server/submission_gate.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace tidepool {
namespace {

const TenantSpec* tenant_spec(const TenantsSpec& tenants, const std::string& name) {
  for (const OrgSpec& org : tenants.orgs) {
    for (const TenantSpec& t : org.tenants) {
      if (t.name == name) return &t;
    }
  }
  return nullptr;
}

// kTooMany naming the tenant, with when to try again.
std::unexpected<Refused> too_many(std::string reason, std::int64_t retry_after_seconds) {
  auto refused = refuse(Refusal::kTooMany, Error{"tenant", std::move(reason)});
  refused.error().retry_after_seconds = retry_after_seconds;
  return refused;
}

}  // namespace

Outcome<void> SubmissionGate::admit(const std::string& tenant, std::int64_t pending,
                                    std::int64_t jobs, Instant now) {
  const AdmissionLimits& limits = setup_.admission;
  const TenantSpec* spec = tenant_spec(setup_.tenants, tenant);
  const std::int64_t max_pending =
      spec && spec->max_pending_jobs > 0 ? spec->max_pending_jobs : limits.max_pending_jobs;
  const std::int64_t rate = spec && spec->submissions_per_second > 0
                                ? spec->submissions_per_second
                                : limits.submissions_per_second;
  if (pending + jobs > max_pending) {
    if (jobs > 1) {
      return too_many(fmt::format("tenant '{}' has {} jobs pending and may have {}: {} more do "
                                  "not fit; submit a smaller array, or again when some have "
                                  "started or been cancelled",
                                  tenant, pending, max_pending, jobs),
                      10);
    }
    return too_many(fmt::format("tenant '{}' has {} jobs pending, its limit; submit again when "
                                "some have started or been cancelled",
                                tenant, max_pending),
                    10);
  }
  if (rate <= 0) return {};
  // Refilled at `rate` per second up to the burst; a new tenant starts full.
  const std::int64_t capacity = std::max(limits.submission_burst, rate) * 1000;
  auto [it, added] = buckets_.try_emplace(tenant, Bucket{capacity, now});
  Bucket& bucket = it->second;
  const std::int64_t elapsed = std::max(Millis{0}, now - bucket.updated_at).count();
  bucket.milli_tokens = std::min(capacity, bucket.milli_tokens + elapsed * rate);
  bucket.updated_at = std::max(bucket.updated_at, now);
  if (bucket.milli_tokens < 1000) {
    return too_many(fmt::format("tenant '{}' submits more than {} jobs per second, its limit; "
                                "retry in a second",
                                tenant, rate),
                    1);
  }
  bucket.milli_tokens -= 1000;
  return {};
}

}  // namespace tidepool
