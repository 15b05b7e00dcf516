#include "core/job.h"

#include <fmt/format.h>

#include <string>

#include "core/gpus_text.h"
#include "core/tenants.h"

namespace tidepool {
namespace {

Result<void> validate_gang(const GangRequest& gang) {
  if (gang.task_count < 1 || gang.task_count > kMaxGangTasks) {
    return fail("task_count", fmt::format("must be 1..{}, got {}", kMaxGangTasks, gang.task_count));
  }
  const TaskShape& task = gang.task;
  if (task.gpu_count < 0 || task.gpu_count > kMaxGpusPerNode) {
    return fail("gpus_per_task", fmt::format("a task runs on one node, so 0..{} GPUs, got {}",
                                             kMaxGpusPerNode, task.gpu_count));
  }
  if (task.gpu_count == 0 && task.milli_per_gpu != 0) {
    return fail("milli_per_gpu",
                fmt::format("a task without GPUs asks 0, got {}", task.milli_per_gpu));
  }
  if (task.gpu_count > 0 && (task.milli_per_gpu < 1 || task.milli_per_gpu > kMilliPerGpu)) {
    return fail("milli_per_gpu",
                fmt::format("must be 1..{}, got {}", kMilliPerGpu, task.milli_per_gpu));
  }
  if (task.gpu_count > 1 && task.milli_per_gpu != kMilliPerGpu) {
    return fail("milli_per_gpu",
                fmt::format("a GPU fraction is allowed with one GPU only; {} GPUs need {} each, "
                            "got {}",
                            task.gpu_count, kMilliPerGpu, task.milli_per_gpu));
  }
  if (task.is_fractional() && gang.task_count != 1) {
    return fail("task_count", fmt::format("a task with a GPU fraction runs alone, got a gang of {}",
                                          gang.task_count));
  }
  if (auto mig = check_mig_task(task, gang.task_count); !mig) return mig;
  if (task.milli_cpu < 0) {
    return fail("cpu_milli", fmt::format("must not be negative, got {}", task.milli_cpu));
  }
  if (task.memory_mib < 0) {
    return fail("memory_mib", fmt::format("must not be negative, got {}", task.memory_mib));
  }
  if (gang.topology.level > TopologyLevel::kSpine) {
    return fail("topology",
                fmt::format("unknown level #{}", static_cast<int>(gang.topology.level)));
  }
  if (gang.topology.strength > TopologyStrength::kPreferred) {
    return fail("topology",
                fmt::format("unknown strength #{}", static_cast<int>(gang.topology.strength)));
  }
  return {};
}

}  // namespace

std::string_view job_class_name(JobClass job_class) {
  switch (job_class) {
    case JobClass::kTraining:
      return "training";
    case JobClass::kInference:
      return "inference";
    case JobClass::kDev:
      return "dev";
    case JobClass::kBatch:
      return "batch";
  }
  return "unknown";
}

Result<JobClass> parse_job_class(std::string_view name) {
  for (JobClass c : {JobClass::kTraining, JobClass::kInference, JobClass::kDev, JobClass::kBatch}) {
    if (job_class_name(c) == name) return c;
  }
  return fail("class",
              fmt::format("unknown job class '{}'; one of training, inference, dev, batch", name));
}

Result<void> validate_job(const Job& job) {
  if (job.job_class > JobClass::kBatch) {
    return fail("class", fmt::format("unknown job class #{}", static_cast<int>(job.job_class)));
  }
  if (job.priority_class < -kMaxPriorityClass || job.priority_class > kMaxPriorityClass) {
    return fail("priority_class",
                fmt::format("must be -{0}..{0}, got {1}", kMaxPriorityClass, job.priority_class));
  }
  if (auto gang = validate_gang(job.gang); !gang) return gang;
  if (job.checkpoint_interval && *job.checkpoint_interval <= 0) {
    return fail("checkpoint_interval",
                fmt::format("must be positive seconds, got {}", *job.checkpoint_interval));
  }
  if (job.submit_time < 0) {
    return fail("submit_time", fmt::format("must not be negative, got {}", job.submit_time));
  }
  if (job.deadline && *job.deadline <= job.submit_time) {
    return fail("deadline", fmt::format("must be after the submit time {}, got {}", job.submit_time,
                                        *job.deadline));
  }
  if (job.caps.max_gpus) {
    const std::int64_t cap = *job.caps.max_gpus;
    if (cap <= 0) return fail("max_gpus", fmt::format("must be positive, got {}", cap));
    // Compared in milli-GPUs, so a fraction of a GPU fits a cap of 1. A cap above the largest
    // gang is never binding (and is not multiplied, so it cannot overflow).
    constexpr std::int64_t kLargestGang = std::int64_t{kMaxGangTasks} * kMaxGpusPerNode;
    if (cap < kLargestGang && job.total_milli_gpu() > cap * kMilliPerGpu) {
      return fail("max_gpus",
                  fmt::format("job asks {}, cap is {}", gpus_text(job.total_milli_gpu()), cap));
    }
  }
  if (job.caps.max_runtime && *job.caps.max_runtime <= 0) {
    return fail("max_runtime",
                fmt::format("must be positive seconds, got {}", *job.caps.max_runtime));
  }
  if (job.runtime_estimate) {
    const Seconds estimate = *job.runtime_estimate;
    if (estimate <= 0) {
      return fail("runtime_estimate", fmt::format("must be positive seconds, got {}", estimate));
    }
    if (job.caps.max_runtime && estimate > *job.caps.max_runtime) {
      return fail("runtime_estimate", fmt::format("estimate {} s exceeds max_runtime {} s",
                                                  estimate, *job.caps.max_runtime));
    }
  }
  if (job.replica_of) {
    if (job.gang.task_count != 1) {
      return fail("task_count",
                  fmt::format("a service's replica is one task, got {}", job.gang.task_count));
    }
    if (job.replica_of->spread.max_per_node < 0) {
      return fail("max_per_node", fmt::format("must not be negative (0: no limit), got {}",
                                              job.replica_of->spread.max_per_node));
    }
  }
  return {};
}

Result<Job> make_job(Job job) {
  if (auto valid = validate_job(job); !valid) return std::unexpected(std::move(valid.error()));
  return job;
}

Result<void> validate_job_tenancy(const Job& job, const TenantBook& book) {
  if (job.tenant.value >= static_cast<std::uint32_t>(book.tenant_count())) {
    return fail("tenant", fmt::format("unknown tenant #{}", job.tenant.value));
  }
  if (job.queue.value >= static_cast<std::uint32_t>(book.queue_count())) {
    return fail("queue", fmt::format("unknown queue #{}", job.queue.value));
  }
  if (book.tenant_of(job.queue) != job.tenant) {
    return fail(
        "queue",
        fmt::format("queue '{}' belongs to tenant '{}', not '{}'", book.queue_name(job.queue),
                    book.tenant_name(book.tenant_of(job.queue)), book.tenant_name(job.tenant)));
  }
  return {};
}

}  // namespace tidepool
