#include "server/event_log.h"

#include <fmt/format.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "api/event_text.h"

namespace tidepool {
std::string event_log_text(const EventRecord& event) {
  const auto doc = nlohmann::json::parse(event.document, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return event.document;
  return event_text(doc);
}

spdlog::level::level_enum event_log_level(const std::string& kind) {
  if (kind == "job.submitted" || kind == "job.checkpointed") return spdlog::level::debug;
  if (kind == "job.failed" || kind == "job.requeued" || kind == "node.not_ready" ||
      kind.ends_with("failed") || kind.ends_with("lost") || kind.ends_with("error") ||
      kind == "cost.anomaly" || kind == "budget.exhausted") {
    return spdlog::level::warn;
  }
  return spdlog::level::info;
}

void log_events(const std::vector<EventRecord>& events) {
  for (const EventRecord& event : events) {
    const auto level = event_log_level(event.kind);
    if (!spdlog::should_log(level)) continue;
    spdlog::log(level, "{} {}", event.kind, event_log_text(event));
  }
}

namespace {

std::string level_name(spdlog::level::level_enum level) {
  const auto name = spdlog::level::to_string_view(level);
  return {name.data(), name.size()};
}

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count();
    const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    ::gmtime_r(&seconds, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    const std::string text(msg.payload.data(), msg.payload.size());
    nlohmann::json line = {{"time", fmt::format("{}.{:03}Z", stamp, ms % 1000)},
                           {"level", level_name(msg.level)},
                           {"message", text}};
    const std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(out.data(), out.data() + out.size());
    dest.push_back('\n');
  }
  [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> json_log_formatter() {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace tidepool
