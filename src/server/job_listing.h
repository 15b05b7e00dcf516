// GET /v1/jobs, served from a snapshot rather than on the scheduling loop.
//
// The loop thread publishes a JobListing (ControlLoop::job_listing): every job as listings show
// it, with the pending jobs' reasons as of the snapshot. Listing threads filter and page it, and
// build the reply, while the loop goes on scheduling; a listing that many clients ask for at once
// costs the loop one snapshot, not one walk each. A snapshot is immutable once published and shared
// by shared_ptr. Each job's entry is rebuilt only when the job changed (ControlPlane::
// update_listing), so a snapshot costs the loop a copy of pointers and the pending reasons.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "server/auth.h"
#include "server/reply.h"
#include "server/server_job.h"

namespace tidepool {

// Whether `who` may see a job of `tenant` that ran on `ran_on` (sorted) or runs at `placement`:
// an admin sees every job, a user its tenant's, an agent those its node runs or ran. The one rule
// for the control plane's reads and for listings.
[[nodiscard]] bool may_see_job(const Principal& who, std::string_view tenant,
                               const std::vector<std::string>& ran_on,
                               const std::vector<TaskPlace>& placement);

// GET /v1/jobs: which jobs, and one page of them. A page holds the newest `limit` matching jobs
// older than `before` (a job id; 0: from the newest), in id order; when older ones may match, the
// reply's "next" is the cursor to pass as `before` for the next page.
inline constexpr std::size_t kDefaultJobPage = 500;
inline constexpr std::size_t kMaxJobPage = 5000;
struct JobFilter {
  std::string tenant;  // empty: any
  std::string queue;
  std::string state;                    // comma-separated job states; empty: any
  std::string node;                     // jobs with a task on this node
  std::size_t limit = kDefaultJobPage;  // 1..kMaxJobPage
  std::int64_t before = 0;              // the cursor
  // Job history (sacct's window): only jobs that were in the pool at some time in [since,
  // until], i.e. submitted at or before until and not ended before since (none: no bound).
  std::optional<Instant> since{};
  std::optional<Instant> until{};
};

// One job as listings see it; `view` is server_job_to_json (without the pending reason).
struct ListedJob {
  JobId id;
  std::string tenant;
  std::string queue;
  JobState state = JobState::kPending;
  Instant submitted_at;
  Instant ended_at;  // kNotYet: not ended
  std::vector<std::string> ran_on;
  std::vector<TaskPlace> placement;
  nlohmann::json view;
};
ListedJob listed_job(const ServerJob& job);

struct JobListing {
  std::vector<std::shared_ptr<const ListedJob>> jobs;  // in id order
  // The pending jobs' reasons ({"kind", "reason"}), by job id, as of the snapshot.
  std::unordered_map<JobId, nlohmann::json> pending;
  // GPU-seconds of service each live (pending or running) job has received, as of the last pass.
  std::unordered_map<JobId, std::int64_t> attained;
  std::int64_t version = 0;  // the loop's round count when it was taken
  // What a filter may name: the tenants with their queues, and the nodes (empty: not checked).
  std::map<std::string, std::set<std::string>> queues_of_tenant;
  std::set<std::string> nodes;
};

// The page of `listing` that `filter` asks for, as `who` may see it: {"jobs": [...]} (each job
// with "pending" when it waits, "attained_gpu_seconds" while it is live) and "next" when older
// jobs may match; kInvalid for a bad state name, limit or window, kForbidden for a user naming
// another tenant, kNotFound for a tenant, queue or node the pool does not have (a typo is not an
// empty listing).
Reply list_jobs(const JobListing& listing, const Principal& who, const JobFilter& filter);

}  // namespace tidepool
