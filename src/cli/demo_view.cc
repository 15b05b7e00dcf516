#include "cli/demo_view.h"

#include <fmt/format.h>

#include <algorithm>

#include "cli/output_format.h"

namespace tidepool {
namespace {

std::string string_member(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::int64_t number_member(const nlohmann::json& object, const char* key,
                           std::int64_t fallback = 0) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<std::int64_t>() : fallback;
}

// "node-1" or "node-1,node-2": the nodes of a placement, each once, in order.
std::string distinct_placement_nodes(const nlohmann::json& data) {
  std::vector<std::string> nodes;
  if (auto it = data.find("placement"); it != data.end() && it->is_array()) {
    for (const nlohmann::json& place : *it) {
      std::string node = string_member(place, "node");
      if (std::ranges::find(nodes, node) == nodes.end()) nodes.push_back(std::move(node));
    }
  }
  return fmt::format("{}", fmt::join(nodes, ","));
}

// "within its quota" from "placed on 1 node(s) (within its quota)".
std::string start_how(const std::string& reason) {
  const auto open = reason.find(") (");
  if (open == std::string::npos || !reason.ends_with(')')) return {};
  return reason.substr(open + 3, reason.size() - open - 4);
}

bool is_final(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

int job_gpus(const nlohmann::json& job) {
  const nlohmann::json& spec = job.at("spec");
  return static_cast<int>(number_member(spec, "tasks", 1) *
                          number_member(spec, "gpus_per_task", 1));
}

}  // namespace

std::string format_clock(std::int64_t ms) {
  const std::int64_t seconds = std::max<std::int64_t>(0, ms) / 1000;
  if (seconds >= 3600) {
    return fmt::format("{}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
  }
  return fmt::format("{}:{:02}", seconds / 60, seconds % 60);
}

DemoJobRecord& DemoTally::job(const nlohmann::json& data) {
  DemoJobRecord& record = jobs_[number_member(data, "job")];
  if (std::string name = string_member(data, "name"); !name.empty()) record.name = std::move(name);
  if (std::string tenant = string_member(data, "tenant"); !tenant.empty()) {
    record.tenant = std::move(tenant);
  }
  return record;
}

std::string DemoTally::label(std::int64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.name.empty()) return fmt::format("#{}", id);
  return fmt::format("#{} {}", id, it->second.name);
}

std::string DemoTally::take(const nlohmann::json& event, std::int64_t start_ms) {
  const std::string kind = string_member(event, "kind");
  static const nlohmann::json kEmpty = nlohmann::json::object();
  auto data_it = event.find("data");
  const nlohmann::json& data = data_it != event.end() && data_it->is_object() ? *data_it : kEmpty;
  const std::string at = format_clock(number_member(event, "at_ms") - start_ms);
  const std::int64_t id = number_member(data, "job");
  std::string what;
  if (kind == "job.submitted") {
    job(data);  // its name, for later lines; the view lists waiting jobs under "pending"
    return {};
  }
  if (kind == "job.started") {
    DemoJobRecord& record = job(data);
    const std::string nodes = distinct_placement_nodes(data);
    if (record.stopped_before) {
      record.stopped_before = false;
      if (record.checkpoint_step) {
        record.resumed_from.push_back(*record.checkpoint_step);
        what = fmt::format("{} resumed on {} from its checkpoint at step {}", label(id), nodes,
                           *record.checkpoint_step);
      } else {
        ++record.restarts_from_scratch;
        what =
            fmt::format("{} restarted on {} from the beginning (no checkpoint)", label(id), nodes);
      }
    } else {
      const std::string how = start_how(string_member(data, "reason"));
      what = fmt::format("{} ({}) started on {}{}", label(id), record.tenant, nodes,
                         how.empty() ? std::string() : ", " + how);
    }
  } else if (kind == "job.preempted" || kind == "job.requeued") {
    DemoJobRecord& record = job(data);
    record.stopped_before = true;
    std::string reason = string_member(data, "reason");
    if (kind == "job.preempted") record.preemptions.push_back(reason);
    what = fmt::format("{} {}", label(id),
                       reason.empty()            ? kind.substr(4)
                       : kind == "job.preempted" ? reason
                                                 : "requeued: " + reason);
  } else if (kind == "job.checkpointed") {
    DemoJobRecord& record = job(data);
    ++checkpoints_;
    const std::int64_t step = number_member(data, "step", -1);
    if (step >= 0) record.checkpoint_step = step;
    what = step >= 0 ? fmt::format("{} checkpointed at step {}", label(id), step)
                     : fmt::format("{} checkpointed", label(id));
  } else if (kind == "job.succeeded" || kind == "job.cancelled") {
    job(data);
    what = fmt::format("{} {}", label(id), kind.substr(4));
  } else if (kind == "job.failed") {
    job(data);
    const std::string reason = string_member(data, "reason");
    what = fmt::format("{} failed{}", label(id), reason.empty() ? "" : ": " + reason);
  } else if (kind == "node.registered") {
    what = fmt::format("{} registered its agent", string_member(data, "node"));
  } else if (kind == "node.not_ready") {
    what =
        fmt::format("{} not ready: {}", string_member(data, "node"), string_member(data, "reason"));
  } else if (kind == "node.drained" || kind == "node.undrained") {
    what = fmt::format("{} {}", string_member(data, "node"), kind.substr(5));
  } else {
    return {};
  }
  return fmt::format("{:>5}  {}", at, what);
}

std::string render_demo_frame(const nlohmann::json& nodes, const nlohmann::json& jobs,
                              const DemoFrame& frame, std::size_t max_events) {
  std::map<std::string, int> states;
  std::vector<const nlohmann::json*> pending;
  for (const nlohmann::json& job : jobs) {
    const std::string state = string_member(job, "state");
    ++states[state];
    if (state == "pending") pending.push_back(&job);
  }
  std::string out = fmt::format("--- {}  running {}, pending {}, succeeded {}, failed {}",
                                format_clock(frame.elapsed_ms), states["running"],
                                states["pending"], states["succeeded"], states["failed"]);
  if (states["cancelled"] > 0) out += fmt::format(", cancelled {}", states["cancelled"]);
  if (frame.submitted < frame.to_submit) {
    out += fmt::format("  ({} of {} jobs submitted)", frame.submitted, frame.to_submit);
  }
  if (!frame.note.empty()) out += "  " + frame.note;
  out += '\n';

  std::size_t name_width = 0;
  for (const nlohmann::json& node : nodes) {
    name_width = std::max(name_width, string_member(node, "name").size());
  }
  for (const nlohmann::json& node : nodes) {
    const int gpus = static_cast<int>(number_member(node, "gpus"));
    const std::int64_t milli = number_member(node, "gpu_milli_allocated");
    const int used = static_cast<int>(std::min<std::int64_t>(gpus, (milli + 999) / 1000));
    std::string line = fmt::format("  {:<{}} [{}{}] {}/{}", string_member(node, "name"), name_width,
                                   std::string(static_cast<std::size_t>(used), '#'),
                                   std::string(static_cast<std::size_t>(gpus - used), '.'),
                                   format_gpus(milli), gpus);
    if (const std::string state = string_member(node, "state");
        !state.empty() && state != "ready") {
      line += " " + state;
    }
    if (auto list = node.find("jobs"); list != node.end() && list->is_array()) {
      for (const nlohmann::json& job : *list) {
        line += fmt::format("  #{} {}:{}", number_member(job, "job"), string_member(job, "name"),
                            number_member(job, "gpus"));
      }
    }
    out += line + '\n';
  }
  if (!pending.empty()) {
    std::vector<std::string> items;
    for (const nlohmann::json* job : pending) {
      std::string kind;
      if (auto p = job->find("pending"); p != job->end() && p->is_object()) {
        kind = string_member(*p, "kind");
      }
      if (kind.empty() || kind == "not-considered") kind = "queued";
      items.push_back(fmt::format("#{} {} ({})", number_member(*job, "id"),
                                  string_member(job->at("spec"), "name"), kind));
    }
    out += fmt::format("  pending: {}\n", fmt::join(items, ", "));
  }
  const std::size_t shown = std::min(frame.events.size(), max_events);
  for (std::size_t i = 0; i < shown; ++i) out += "  " + frame.events[i] + '\n';
  if (frame.events.size() > shown) {
    out += fmt::format("  ... {} more events\n", frame.events.size() - shown);
  }
  return out;
}

std::string render_demo_summary(const nlohmann::json& jobs, const DemoTally& tally,
                                std::int64_t elapsed_ms, const std::string& ended_because) {
  std::map<std::string, int> states;
  std::int64_t preemptions = 0;
  std::int64_t lost_gpu_ms = 0;
  for (const nlohmann::json& job : jobs) {
    const std::string state = string_member(job, "state");
    ++states[is_final(state) ? state : std::string("unfinished")];
    preemptions += number_member(job, "preemptions");
    lost_gpu_ms += number_member(job, "lost_work_ms") * job_gpus(job);
  }
  std::string out =
      fmt::format("Summary after {} ({}):\n", format_clock(elapsed_ms), ended_because);
  out += fmt::format("  jobs: {} submitted: {} succeeded, {} failed, {} cancelled, {} unfinished\n",
                     jobs.size(), states["succeeded"], states["failed"], states["cancelled"],
                     states["unfinished"]);
  for (const nlohmann::json& job : jobs) {
    if (string_member(job, "state") != "failed") continue;
    out += fmt::format("    #{} {} failed: {}\n", number_member(job, "id"),
                       string_member(job.at("spec"), "name"), string_member(job, "message"));
  }
  out += fmt::format("  preemptions: {}\n", preemptions);
  for (const auto& [id, record] : tally.jobs()) {
    for (const std::string& reason : record.preemptions) {
      out += fmt::format("    #{} {} ({}): {}\n", id, record.name, record.tenant, reason);
    }
  }
  std::vector<std::string> resumed;
  int restarts = 0;
  for (const auto& [id, record] : tally.jobs()) {
    for (std::int64_t step : record.resumed_from) {
      resumed.push_back(fmt::format("#{} {} at step {}", id, record.name, step));
    }
    restarts += record.restarts_from_scratch;
  }
  out += fmt::format("  checkpoints: {} reported\n", tally.checkpoints());
  out +=
      fmt::format("  resumed from a checkpoint: {}{}\n", resumed.size(),
                  resumed.empty() ? std::string() : fmt::format(" ({})", fmt::join(resumed, ", ")));
  if (restarts > 0) out += fmt::format("  restarted from the beginning: {}\n", restarts);
  out += fmt::format(
      "  lost work: {} GPU-seconds (run time since the last checkpoint when preempted, x GPUs)\n",
      (lost_gpu_ms + 500) / 1000);
  return out;
}

int ready_replicas(const nlohmann::json& view) {
  int ready = 0;
  if (auto it = view.find("replicas"); it != view.end() && it->is_array()) {
    for (const nlohmann::json& replica : *it) ready += string_member(replica, "phase") == "ready";
  }
  return ready;
}

std::string render_demo_service(const nlohmann::json& view, const std::string& load_line) {
  std::map<std::string, int> phases;
  if (auto it = view.find("replicas"); it != view.end() && it->is_array()) {
    for (const nlohmann::json& replica : *it) ++phases[string_member(replica, "phase")];
  }
  auto wanted = view.find("wanted");
  std::string out = fmt::format(
      "  service {}: {} ready / {} wanted", string_member(view, "name"), phases["ready"],
      wanted != view.end() && wanted->is_number() ? std::to_string(wanted->get<std::int64_t>())
                                                  : std::string("?"));
  if (auto target = view.find("target"); target != view.end() && target->is_object()) {
    const std::string metric = string_member(*target, "metric");
    auto value = target->find("value");
    const std::string amount = value == target->end() ? std::string("?") : value->dump();
    out += metric == "p95_latency_ms" ? fmt::format(" (p95 target {} ms)", amount)
                                      : fmt::format(" (target {} {})", metric, amount);
  }
  for (const char* phase : {"pending", "starting", "draining"}) {
    if (phases[phase] > 0) out += fmt::format(", {} {}", phases[phase], phase);
  }
  std::string reason;
  if (auto decision = view.find("decision"); decision != view.end() && decision->is_object()) {
    reason = string_member(*decision, "reason");
  }
  out += fmt::format(" \u2014 last decision: {}\n", reason.empty() ? "none yet" : reason);
  if (!load_line.empty()) out += fmt::format("  load: {}\n", load_line);
  return out;
}

std::string last_line_starting(const std::string& text, const std::string& prefix) {
  std::string found;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (line.starts_with(prefix)) found = std::string(line);
    start = end + 1;
  }
  return found;
}

std::string render_demo_service_summary(const std::string& name, int max_ready, int max_wanted,
                                        const std::string& load_summary) {
  return fmt::format(
      "  service {}: at most {} replica(s) ready at once ({} wanted at most)\n  load generator: "
      "{}\n",
      name, max_ready, max_wanted,
      load_summary.empty() ? "no summary (it did not finish)" : load_summary);
}

}  // namespace tidepool
