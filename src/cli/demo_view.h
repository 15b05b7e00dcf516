// What `tidepool demo` prints while it runs and when it ends, built from the server's JSON
// replies (GET /v1/events, /v1/nodes, /v1/jobs; shapes: server/control_plane*.cc). Pure: no I/O,
// no clock; times are passed in. Missing keys read as empty; a value of the wrong type throws
// nlohmann::json::exception.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tidepool {

// "m:ss" (or "h:mm:ss" from an hour on) of a span of milliseconds; negative spans as "0:00".
std::string format_clock(std::int64_t ms);

// What the demo learned about one job from the events.
struct DemoJobRecord {
  std::string name;
  std::string tenant;
  bool stopped_before = false;  // preempted or requeued since its last start
  std::optional<std::int64_t> checkpoint_step;
  std::vector<std::string> preemptions;    // the reason of each
  std::vector<std::int64_t> resumed_from;  // the checkpoint step of each restart after a stop
  int restarts_from_scratch = 0;           // restarts after a stop without a checkpoint
};

// The events seen so far, for the event lines of the view and the summary.
class DemoTally {
 public:
  // Takes one event ({"seq", "at_ms", "kind", "data"}) and returns its line for the view, its
  // time relative to `start_ms`: " 0:23  #1 train-gang preempted (reclaim) for job 9"; empty for
  // events the view leaves out (submissions: the view lists pending jobs; tokens, GPU telemetry).
  std::string take(const nlohmann::json& event, std::int64_t start_ms);

  [[nodiscard]] const std::map<std::int64_t, DemoJobRecord>& jobs() const { return jobs_; }
  [[nodiscard]] int checkpoints() const { return checkpoints_; }

 private:
  DemoJobRecord& job(const nlohmann::json& data);
  std::string label(std::int64_t id) const;  // "#8 pretrain"

  std::map<std::int64_t, DemoJobRecord> jobs_;
  int checkpoints_ = 0;
};

struct DemoFrame {
  std::int64_t elapsed_ms = 0;
  int submitted = 0;                // jobs submitted so far
  int to_submit = 0;                // jobs of the workload
  std::string note;                 // appended to the title ("final", an error), may be empty
  std::vector<std::string> events;  // the event lines since the last frame
};

// One block of the view: a title with the counts of pending, running and ended jobs; per node its
// GPUs as a bar ('#' allocated, '.' free) with the jobs on it; the pending jobs with the kind of
// their reason; then the event lines (at most `max_events`, then "... N more"). `nodes` and
// `jobs` are the arrays of GET /v1/nodes and GET /v1/jobs.
std::string render_demo_frame(const nlohmann::json& nodes, const nlohmann::json& jobs,
                              const DemoFrame& frame, std::size_t max_events = 12);

// The summary at the end: jobs per final state (and those not ended), preemptions with their
// reasons, checkpoints reported and restarts from them, and the work lost to preemptions in
// GPU-seconds (the server's figure: the run time since the last checkpoint, times the job's GPUs).
// `jobs` is the array of GET /v1/jobs (every state); `ended_because` says why the demo ended.
std::string render_demo_summary(const nlohmann::json& jobs, const DemoTally& tally,
                                std::int64_t elapsed_ms, const std::string& ended_because);

// --service: the block of the view for the demo's inference service, from GET /v1/services/{id}
// ({"name", "target": {"metric", "value"}, "wanted", "decision": {"reason"}, "replicas":
// [{"phase"}], "endpoints"}), then the load generator's latest per-second line when not empty:
//   service chat: 3 ready / 3 wanted (p95 target 500 ms), 1 starting — last decision: <reason>
//   load: t  42.0s rate 40/s targets 3 used 3 in_flight 2 ok 40 failed 0 p95_ms 212
std::string render_demo_service(const nlohmann::json& view, const std::string& load_line);

// The replicas of a service view in phase "ready".
int ready_replicas(const nlohmann::json& view);

// The last line of `text` that starts with `prefix` (without its newline), or empty: the load
// generator's latest per-second line ("t ") or its summary ("sent ") from its log.
std::string last_line_starting(const std::string& text, const std::string& prefix);

// The summary's lines for the service: the most replicas it had ready (and wanted) at once, and
// the load generator's summary ("sent N ok N failed N p95_ms X"), or that it gave none.
std::string render_demo_service_summary(const std::string& name, int max_ready, int max_wanted,
                                        const std::string& load_summary);

}  // namespace tidepool
