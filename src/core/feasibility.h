// Whether a job could ever start, whatever else runs or waits: a rule of admission that the
// drivers apply when a job is submitted, so that a job that can never run is refused at once
// instead of waiting forever with a reason that suggests it will run one day.
//
// A job could ever start when, for some GPU model it accepts (any node, for a job without GPUs):
//   - the pool as declared holds the gang: its tasks fit on the nodes of that model (GPUs, or
//     GPU fractions, CPU and memory, counted per node), enough of them for every task; and
//   - with quotas, the tenant may ever hold the gang's GPUs of that model: its guarantee plus its
//     borrowing limit (no limit: the pool's).
// Otherwise an Error names the field to change ("task_count", "gpu_count", "milli_cpu",
// "memory_mib", "models" in the core's vocabulary; "tenant" for a ceiling of the tenant's) and
// gives the ceiling in GPUs: "the pool's A100 nodes hold at most 64 GPUs (8 nodes x 8), ...".
#pragma once

#include "core/error.h"
#include "core/job.h"
#include "core/pool.h"
#include "core/tenants.h"

namespace tidepool {

// `book` null: no quotas (only the pool counts).
Result<void> check_can_ever_start(const Job& job, const Pool& pool, const TenantBook* book);

}  // namespace tidepool
