// An event of the stream (GET /v1/events) as one line for people, shared by the server's log
// (event_log.h) and `tidepool events`, so that both say the same thing the same way:
//
//   job 12 (train-resnet-50, vision/default): placed on 4 node(s) (...) on h100-a-01:8,...
//   node h100-b-02: node h100-b-02's agent sent no heartbeat for 31 s ...
//
// A job's event names the job, then its reason and placement; any other names its subject (node,
// tenant, token, offer) and then its other fields as key=value, its reason last. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tidepool {

// The line of an event's data (its "data" object), without its kind.
[[nodiscard]] std::string event_text(const nlohmann::json& data);

}  // namespace tidepool
