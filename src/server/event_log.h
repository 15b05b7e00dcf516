// The server's log of what happens in the pool: one line per event the loop committed (a job
// started, preempted, requeued, failed; a node registered, went NotReady, was drained; a budget
// alert; ...), so that an operator reading the log sees placements, preemptions, recoveries and
// failures without querying the API. Job submissions and checkpoints (many, and all in
// GET /v1/events) are logged at debug level only.
//
//   job.started job 12 (train-resnet-50, vision/default): placed on 4 node(s) (...) on
//     h100-a-01:8,h100-a-02:8
//   node.not_ready node h100-b-02: node h100-b-02's agent sent no heartbeat for 31 s ...
//
// The JSON form (`tidepool server --log-format json`) writes each log line, these and the
// others, as one JSON object: {"time" (UTC, ms), "level", "message"}.
#pragma once

#include <spdlog/common.h>
#include <spdlog/formatter.h>

#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace tidepool {

// The line of an event, without its kind.
[[nodiscard]] std::string event_log_text(const EventRecord& event);
// The level it is logged at: warn for failures and faults, debug for submissions and
// checkpoints, info otherwise.
[[nodiscard]] spdlog::level::level_enum event_log_level(const std::string& kind);
// Logs the events (after their batch committed).
void log_events(const std::vector<EventRecord>& events);

// A formatter that writes each log line as one JSON object.
std::unique_ptr<spdlog::formatter> json_log_formatter();

}  // namespace tidepool
