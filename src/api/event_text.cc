#include "api/event_text.h"

#include <fmt/format.h>

namespace tidepool {
namespace {

constexpr std::size_t kMaxListed = 8;  // placements shown; the rest counted

std::string scalar_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// The text of `object[key]` whatever it holds ("" when absent): the data is read from the
// network by `tidepool events`, and a field of another type must not end the command.
std::string field_text(const nlohmann::json& object, const char* key, const char* absent = "") {
  const auto it = object.find(key);
  return it == object.end() ? std::string(absent) : scalar_text(*it);
}

// "h100-a-01:8,h100-a-02:8" (and ",+3 more").
std::string placement_text(const nlohmann::json& placement) {
  std::string out;
  std::size_t shown = 0;
  for (const auto& p : placement) {
    if (!p.is_object()) continue;
    if (shown == kMaxListed) {
      out += fmt::format(",+{} more", placement.size() - kMaxListed);
      break;
    }
    out += fmt::format("{}{}:{}", out.empty() ? "" : ",", field_text(p, "node", "?"),
                       p.contains("gpus") && p["gpus"].is_array() ? p["gpus"].size() : 0);
    ++shown;
  }
  return out;
}

}  // namespace

std::string event_text(const nlohmann::json& doc) {
  if (!doc.is_object()) return doc.dump();
  std::string out;
  // A job's event: who, then why and where.
  if (doc.contains("job") && doc.contains("tenant")) {
    out = fmt::format("job {} ({}, {}/{})", scalar_text(doc["job"]), field_text(doc, "name"),
                      field_text(doc, "tenant"), field_text(doc, "queue"));
    if (const std::string reason = field_text(doc, "reason"); !reason.empty()) out += ": " + reason;
    if (doc.contains("placement") && doc["placement"].is_array() && !doc["placement"].empty()) {
      out += " on " + placement_text(doc["placement"]);
    }
    return out;
  }
  // Any other: its subject first when it has one, then its fields as key=value.
  for (const char* subject : {"node", "tenant", "token", "offer"}) {
    if (doc.contains(subject) && doc[subject].is_string()) {
      out = fmt::format("{} {}", subject, doc[subject].get<std::string>());
      break;
    }
  }
  std::string reason;
  for (const auto& [key, value] : doc.items()) {
    if (!out.empty() && out.starts_with(key + " ")) continue;
    if (key == "reason" && value.is_string()) {
      reason = value.get<std::string>();
      continue;
    }
    if (value.is_structured()) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", key, scalar_text(value));
  }
  if (!reason.empty()) out += (out.empty() ? "" : ": ") + reason;
  return out;
}

}  // namespace tidepool
