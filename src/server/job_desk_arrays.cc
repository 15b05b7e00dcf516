// Job arrays (a spec's `array`, sbatch --array): one job per index, each told its index.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "server/job_desk.h"

namespace tidepool {

JobSpec JobDesk::array_member(JobSpec spec, JobId array_job, std::int64_t index) {
  spec.array.clear();
  spec.env["TIDEPOOL_ARRAY_JOB_ID"] = std::to_string(array_job.value);
  spec.env["TIDEPOOL_ARRAY_INDEX"] = std::to_string(index);
  return spec;
}

Outcome<const ServerJob*> JobDesk::submit_array(const Principal& who, const JobSpec& spec,
                                                const std::string& idempotency_key, Instant now,
                                                Batch& batch) {
  auto indexes = parse_array_indexes(spec.array);
  if (!indexes) return refuse(Refusal::kInvalid, "invalid job spec", indexes.error());
  if (spec.env.size() + 2 > kMaxEnvEntries) {
    return refuse(Refusal::kInvalid, "invalid job spec",
                  Error{"env", fmt::format("an array's jobs get TIDEPOOL_ARRAY_JOB_ID and "
                                           "TIDEPOOL_ARRAY_INDEX: at most {} entries of its own",
                                           kMaxEnvEntries - 2)});
  }
  const JobId first = next_job_id_;
  const auto count = static_cast<std::int64_t>(indexes->size());
  for (std::size_t k = 0; k < indexes->size(); ++k) {
    const std::int64_t index = (*indexes)[k];
    auto admitted = admit(who, array_member(spec, first, index), k == 0 ? idempotency_key : "", now,
                          batch, k == 0 ? count : 0, ArrayPlace{first, index});
    if (admitted) continue;
    if (k == 0) return admitted;  // nothing was submitted
    // The jobs are alike but for their index: a later one refused is not expected; those before
    // it stay submitted, and the refusal says which.
    return refuse(
        admitted.error().refusal, "array partly submitted",
        Error{"array", fmt::format("jobs {}..{} (indexes {}..{}) were submitted; index {} was "
                                   "refused: {}",
                                   first, wire_job_id(first) + static_cast<std::int64_t>(k) - 1,
                                   indexes->front(), (*indexes)[k - 1], index,
                                   admitted.error().cause.reason)});
  }
  return &state_.jobs().at(first);
}

}  // namespace tidepool
