// Per-tenant admission of new jobs (POST /v1/jobs): a tenant may have at most max_pending_jobs
// waiting, and submits at most submissions_per_second on average, in bursts of submission_burst (a
// token bucket per tenant, refilled with time; a new tenant starts full). The server configuration
// sets the limits (`admission:`); a tenant's entry in the tenants file may set its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "server/plane_state.h"

namespace tidepool {

class SubmissionGate {
 public:
  // The limits of `setup` (admission, and the tenants' own), which must outlive the gate.
  explicit SubmissionGate(const ControlPlaneSetup& setup) : setup_(setup) {}

  // Whether `jobs` new jobs of `tenant`, which has `pending` jobs waiting, are let in at `now`:
  // each counts against max_pending_jobs, all of them as one submission (an array), which takes a
  // token. kTooMany otherwise, with when to try again.
  Outcome<void> admit(const std::string& tenant, std::int64_t pending, std::int64_t jobs,
                      Instant now);

 private:
  // A token bucket in thousandths of a submission.
  struct Bucket {
    std::int64_t milli_tokens = 0;
    Instant updated_at;
  };

  const ControlPlaneSetup& setup_;
  std::map<std::string, Bucket> buckets_;  // by tenant
};

}  // namespace tidepool
