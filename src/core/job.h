// A job as submitted: who asks (tenant, team queue), what it is (class, priority class, whether it
// may be preempted), what it needs (a gang of identical tasks, with a topology requirement), what
// is known of its runtime, and its caps.
//
// Units: times are integer seconds (submit time and deadline on the caller's clock, e.g. seconds
// since the start of a simulation); GPUs are whole GPUs in caps and milli-GPUs in totals.
//
// Optional figures: a missing checkpoint interval means the job does not checkpoint (preempting it
// loses all its work), a missing runtime estimate or deadline means none is known, and a missing
// cap means unlimited (a limit, not a quantity: missing is never 0).
//
// make_job() validates a Job and returns it unchanged, or an Error whose field names the offending
// input in job vocabulary ("task_count", "gpus_per_task", "max_gpus", ...) and whose reason carries
// the numbers ("job asks 16 GPUs, cap is 8").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/gang_placement.h"
#include "core/ids.h"
#include "core/replica_spread.h"
#include "core/resources.h"

namespace tidepool {

enum class JobClass : std::uint8_t { kTraining, kInference, kDev, kBatch };

// "training", "inference", "dev", "batch"
std::string_view job_class_name(JobClass job_class);
// The class named `name` (exactly as job_class_name writes it), or an error naming "class".
Result<JobClass> parse_job_class(std::string_view name);

// Bounds that keep every derived figure (total milli-GPUs, priority differences) far from
// overflow.
inline constexpr int kMaxGangTasks = 100'000;
inline constexpr int kMaxPriorityClass = 1'000'000;  // priority classes lie in [-max, max]

// Limits on the job; absent: unlimited.
struct JobCaps {
  std::optional<std::int64_t> max_gpus;  // on the whole gang, in GPUs (a fraction counts as such)
  std::optional<Seconds> max_runtime;    // the job is stopped after running this long
};

// A replica of an inference service: a job of one task that the scheduler places on its own with
// the service's spread rule (core/replica_spread.h), away from the service's other replicas.
struct ReplicaOf {
  std::uint32_t service = 0;  // the service's id, shared by its replicas
  ReplicaSpread spread;
};

struct Job {
  JobId id;
  TenantId tenant;
  QueueId queue;  // a team queue of `tenant`
  JobClass job_class = JobClass::kTraining;
  int priority_class = 0;  // higher is served first
  bool preemptible = true;
  std::optional<Seconds> checkpoint_interval;  // > 0 when present
  std::optional<Seconds> runtime_estimate;     // > 0 when present; at most caps.max_runtime
  Seconds submit_time = 0;                     // >= 0
  std::optional<Seconds> deadline;             // after submit_time when present
  GangRequest gang;                            // task count, each task's shape, topology
  JobCaps caps;
  std::optional<ReplicaOf> replica_of;  // a service's replica: one task, placed with its spread

  // The whole gang's GPUs in milli-GPUs: task_count x gpu_count x milli_per_gpu.
  [[nodiscard]] std::int64_t total_milli_gpu() const {
    return std::int64_t{gang.task_count} * gang.task.total_milli_gpu();
  }
};

// Checks `job` (see the file comment); the first problem found is returned.
Result<void> validate_job(const Job& job);

// validate_job, then the job itself.
Result<Job> make_job(Job job);

// Checks that the job's tenant and queue exist in `book` and that the queue belongs to the tenant
// (fields "tenant", "queue").
class TenantBook;
Result<void> validate_job_tenancy(const Job& job, const TenantBook& book);

}  // namespace tidepool
