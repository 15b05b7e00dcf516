#include "server/prewarm_calls.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace tidepool {

std::string rfc3339_utc(Seconds unix_time) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}",
                     std::chrono::sys_seconds{std::chrono::seconds{unix_time}});
}

nlohmann::json prewarm_request(const PrewarmCall& call, const ServerJob& job,
                               const ClusterSpec& cluster, Seconds lead, Instant now) {
  nlohmann::json nodes = nlohmann::json::array();
  for (NodeId node : call.nodes) {
    if (node.value < cluster.nodes.size()) nodes.push_back(cluster.nodes[node.value].name);
  }
  return {{"action", "prewarm"},
          {"job",
           {{"id", job.id},
            {"name", job.spec.name},
            {"tenant", job.spec.tenant},
            {"queue", job.spec.queue},
            {"tasks", job.spec.tasks},
            {"gpus_per_task", job.spec.gpus_per_task},
            {"env", job.spec.env},
            {"labels", job.spec.labels}}},
          {"nodes", std::move(nodes)},
          {"predicted_start", rfc3339_utc(call.predicted_start)},
          {"predicted_start_in_seconds",
           std::max<Seconds>(0, call.predicted_start - unix_seconds(now))},
          {"lead_seconds", lead}};
}

}  // namespace tidepool
