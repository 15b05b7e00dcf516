// The Philly trace (sim/philly_trace.h) as a workload of the multi-tenant experiment
// (sim/cluster_simulation.h), and the replicas of a generated inference service
// (sim/inference_generator.h) appended to it.
//
// Contract of philly_workload():
//   - one SimJob per trace job, ordered by (submit, file index); Job::id = its index in the result,
//     SimJob::name = PhillyJob::id ("philly-<file index>");
//   - tenant: the book's tenant named as the job's virtual cluster (error with field "jobs" naming
//     the job and the tenant when the book lacks it); queue: that tenant's first queue;
//   - class training, priority class 0, preemptible, checkpoint every options.checkpoint_interval
//     seconds (none when 0: preempting such a job loses all its work);
//   - gang: num_gpus tasks of one whole GPU each, with options.cpu_per_gpu / memory_per_gpu, any
//     GPU model; topology: required node for jobs of up to options.gpus_per_node GPUs (a job
//     that fits one server runs on one server, as Philly's own scheduler preferred and
//     data-parallel jobs need: policies that know no topology ignore it), preferred leaf for larger
//     ones;
//   - submit time = the trace's submit (seconds since the earliest submit), duration = the trace's
//     duration.
// Every job is checked with make_job; a refusal is returned with field "jobs" and the job's name.
#pragma once

#include <span>
#include <vector>

#include "core/error.h"
#include "core/ids.h"
#include "core/resources.h"
#include "core/tenants.h"
#include "sim/cluster_simulation.h"
#include "sim/inference_generator.h"
#include "sim/philly_trace.h"

namespace tidepool {

struct PhillyWorkloadOptions {
  Seconds checkpoint_interval = 1800;  // every trace job checkpoints this often; 0 = none
  MilliCpu cpu_per_gpu = 4000;
  MemoryMib memory_per_gpu = 32768;
  int gpus_per_node = 8;  // jobs up to this size prefer one node; larger prefer one leaf
};

// The trace's jobs as described in the file comment.
Result<std::vector<SimJob>> philly_workload(const PhillyTrace& trace, const TenantBook& book,
                                            const PhillyWorkloadOptions& options);

// Appends one job per replica, in the order given: class inference, priority class 1000, not
// preemptible, no checkpoint, 1 task x 1 whole GPU (options.cpu_per_gpu / memory_per_gpu, any
// model), topology preferred node, submit and duration of the replica, name "inference-<i>" (i the
// replica's index in `replicas`). Ids continue from jobs.size(), so ids stay equal to indices;
// the result is no longer sorted by submit time (the simulator orders arrivals itself).
void append_inference_replicas(std::vector<SimJob>& jobs,
                               std::span<const InferenceReplica> replicas, TenantId tenant,
                               QueueId queue, const PhillyWorkloadOptions& options);

}  // namespace tidepool
