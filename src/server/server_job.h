// A job as the server keeps it: the spec the user submitted, where it stands (its state and every
// transition, timestamped), where it runs, and what its agent reported. It is stored as the JSON
// document of a JobRecord (store/store.h) and served by the API in the same form.
//
// States: pending -> running -> succeeded | failed; pending | running -> cancelled; running ->
// preempted -> pending (a preemption is kept as two transitions at the same time). succeeded,
// failed and cancelled are final.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job_spec.h"
#include "api/step_report.h"
#include "core/error.h"
#include "core/ids.h"
#include "core/instant.h"
#include "core/prewarm.h"
#include "store/store.h"

namespace tidepool {

// Job ids are JobId (core/ids.h) in the server, as in the core; the wire and the store carry
// them as whole numbers, converted here. A number outside 1..2^32-1 names no job.
[[nodiscard]] std::optional<JobId> job_id_from_wire(std::int64_t id);
[[nodiscard]] inline std::int64_t wire_job_id(JobId id) { return id.value; }
// A job id in JSON is its number.
inline void to_json(nlohmann::json& out, JobId id) { out = id.value; }

enum class JobState : std::uint8_t {
  kPending,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kPreempted
};

// "pending", "running", "succeeded", "failed", "cancelled", "preempted"
std::string_view job_state_name(JobState state);
Result<JobState> parse_job_state(std::string_view name);
[[nodiscard]] inline bool is_final(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}
// Failed or cancelled: a job after it (after_ok) can never start.
[[nodiscard]] inline bool ended_unsuccessfully(JobState state) {
  return is_final(state) && state != JobState::kSucceeded;
}

struct Transition {
  JobState state = JobState::kPending;
  Instant at;
  std::string reason;

  friend bool operator==(const Transition&, const Transition&) = default;
};

// One task's place: the node's name and the indices of its GPUs there.
struct TaskPlace {
  std::string node;
  std::vector<int> gpus;
  int mig_start = -1;  // a task on a MIG instance: its first memory slice on its one GPU

  friend bool operator==(const TaskPlace&, const TaskPlace&) = default;
};

// A job sent to rented capacity (burst_desk.h): the offer, the nodes asked of its provider (one
// per task, named by the server), the agent tokens made for them, and the money side. While the
// nodes come up the job stays pending; once every node's agent registered it runs there, outside
// the pool's scheduler.
struct BurstRun {
  std::string offer;
  std::string provider;
  std::vector<std::string> nodes;   // node i runs task i
  std::vector<std::string> tokens;  // the ids of the nodes' agent tokens
  Instant requested_at;             // the provider's `up` was asked for
  Instant charged_to;               // the rented GPUs are charged up to here

  friend bool operator==(const BurstRun&, const BurstRun&) = default;
};

struct ServerJob {
  JobId id;
  JobSpec spec;
  std::string idempotency_key;
  // Who submitted it: the id of the token, and the token's description then ("alice's laptop").
  std::string submitter_token;
  std::string submitter;
  JobState state = JobState::kPending;
  std::vector<Transition> transitions;  // the first is the submission (pending)
  std::vector<TaskPlace> placement;     // while running: one per task
  Instant submitted_at;
  // A job of an array (its spec's `array` at submission): the first job's id and its index.
  JobId array_job;  // JobId{} (0): not of an array
  std::int64_t array_index = 0;
  // Why a pending job is held out of scheduling ("held by token 8e5f (user)"); empty: not held.
  std::string held;
  Instant started_at;  // start of the current (or last) run
  Instant ended_at;    // when it reached a final state
  int starts = 0;
  int preemptions = 0;
  std::optional<int> exit_code;
  std::string message;         // the last reason given (preemption, failure, cancellation)
  Instant last_checkpoint_at;  // kNotYet: none reported
  std::optional<std::int64_t> checkpoint_step;
  std::string checkpoint_path;      // where the last checkpoint is: the next run resumes from it
  std::vector<std::string> ran_on;  // every node a run of the job used, sorted
  // The latest run's placement (run number `starts`), kept after that run stopped: the agents of
  // these nodes may still report about it (a checkpoint after the stop notice, the last log bytes);
  // nodes of earlier runs may not.
  std::vector<TaskPlace> last_placement;
  std::vector<int> tasks_done;  // the current run's tasks that exited 0, sorted
  Millis lost_work{0};          // run time not saved by a checkpoint when a run was stopped
  // GPU-seconds of service in its runs that ended (the scheduler's count, kept so that a restart
  // or a requeue does not rank it as new work).
  std::int64_t attained_gpu_seconds = 0;
  std::int64_t faults = 0;        // runs ended by a node failure
  std::optional<BurstRun> burst;  // on rented capacity (coming up, or running there)
  int bursts = 0;                 // times it was sent to rented capacity
  // A replica of a service (service_desk.h): the service's job id (JobId{}: not a replica), the
  // port it serves on (its TIDEPOOL_PORT; 0: none), and since when it drains (kNotYet: it serves).
  JobId replica_of;
  int replica_port = 0;
  Instant draining_since = kNotYet;
  // What its tasks reported of their steps, over all its runs (core/step_stats.h; bounded): from
  // the agents' heartbeats and the tasks' exit reports. Written to the store with the job's other
  // changes, and at least every steps_stored_every while it reports (ControlPlaneSetup), not at
  // every heartbeat: a server that restarts has the figures of the last write.
  StepStats steps;
  // How its last start on the pool's nodes stood with its pre-warm (server configuration
  // `prewarm:`): whether every node it started on was called for it, and how long before the start
  // the last of those calls was made. None: not started with pre-warming on.
  std::optional<PrewarmedStart> prewarm;

  // Records a move to `state` at `at` for `reason`.
  void move_to(JobState state, Instant at, std::string reason);
  // Adds the nodes of the placement to ran_on and keeps it as last_placement (a run starts).
  void note_ran_on();

  friend bool operator==(const ServerJob&, const ServerJob&) = default;
};

nlohmann::json server_job_to_json(const ServerJob& job);
// Reads back what server_job_to_json wrote (from the store); fails naming the bad field.
Result<ServerJob> server_job_from_json(const nlohmann::json& value);

JobRecord to_record(const ServerJob& job);
Result<ServerJob> from_record(const JobRecord& record);

}  // namespace tidepool

// "job {}" and the like print a job id as its number.
template <>
struct fmt::formatter<tidepool::JobId> : fmt::formatter<std::uint32_t> {
  auto format(tidepool::JobId id, fmt::format_context& context) const {
    return fmt::formatter<std::uint32_t>::format(id.value, context);
  }
};
