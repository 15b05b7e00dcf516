#include "sim/philly_workload.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace tidepool {
namespace {

// `count` tasks of one whole GPU each.
GangRequest one_gpu_tasks(int count, TopologyRequirement topology,
                          const PhillyWorkloadOptions& options) {
  GangRequest gang;
  gang.task_count = count;
  gang.task.gpu_count = 1;
  gang.task.milli_per_gpu = kMilliPerGpu;
  gang.task.milli_cpu = options.cpu_per_gpu;
  gang.task.memory_mib = options.memory_per_gpu;
  gang.task.models = ModelSet::any();
  gang.topology = topology;
  return gang;
}

}  // namespace

Result<std::vector<SimJob>> philly_workload(const PhillyTrace& trace, const TenantBook& book,
                                            const PhillyWorkloadOptions& options) {
  std::vector<std::size_t> order(trace.jobs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return trace.jobs[a].submit < trace.jobs[b].submit;
  });

  std::vector<SimJob> jobs;
  jobs.reserve(order.size());
  for (std::size_t index : order) {
    const PhillyJob& p = trace.jobs[index];
    const auto tenant = book.find_tenant(p.tenant);
    if (!tenant) {
      return fail("jobs", "job " + p.id + " belongs to tenant '" + p.tenant +
                              "', which the tenants file lacks");
    }
    Job job;
    job.id = JobId{static_cast<std::uint32_t>(jobs.size())};
    job.tenant = *tenant;
    job.queue = book.queues_of(*tenant).front();
    job.job_class = JobClass::kTraining;
    job.priority_class = 0;
    job.preemptible = true;
    if (options.checkpoint_interval > 0) job.checkpoint_interval = options.checkpoint_interval;
    job.submit_time = p.submit;
    job.gang =
        one_gpu_tasks(p.gpus,
                      p.gpus <= options.gpus_per_node
                          ? TopologyRequirement{TopologyLevel::kNode, TopologyStrength::kRequired}
                          : TopologyRequirement{TopologyLevel::kLeaf, TopologyStrength::kPreferred},
                      options);
    auto made = make_job(std::move(job));
    if (!made) return fail("jobs", "job " + p.id + ": " + made.error().message());
    jobs.push_back(SimJob{std::move(*made), p.duration, p.id});
  }
  return jobs;
}

void append_inference_replicas(std::vector<SimJob>& jobs,
                               std::span<const InferenceReplica> replicas, TenantId tenant,
                               QueueId queue, const PhillyWorkloadOptions& options) {
  jobs.reserve(jobs.size() + replicas.size());
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    Job job;
    job.id = JobId{static_cast<std::uint32_t>(jobs.size())};
    job.tenant = tenant;
    job.queue = queue;
    job.job_class = JobClass::kInference;
    job.priority_class = 1000;
    job.preemptible = false;
    job.submit_time = replicas[i].submit;
    job.gang = one_gpu_tasks(1, {TopologyLevel::kNode, TopologyStrength::kPreferred}, options);
    jobs.push_back(SimJob{std::move(job), replicas[i].duration, "inference-" + std::to_string(i)});
  }
}

}  // namespace tidepool
