// What a command of the control plane answers, as domain values: done (and whether it created
// something) with its JSON body, or refused: the kind of refusal, the input at fault and why. There
// is no HTTP here: the HTTP layer alone (http_api.cc) turns a reply into a status and a body.
#pragma once

#include <cstdint>
#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tidepool {

enum class Done : std::uint8_t {
  kOk,       // done, or nothing to do; the body is what the command read or changed
  kCreated,  // something new: a job, a token
};

struct Answer {
  Done done = Done::kOk;
  nlohmann::json body;
};

enum class Refusal : std::uint8_t {
  kInvalid,      // the request is not valid: a bad field, a job that could never run
  kForbidden,    // the caller's role or tenant may not do this
  kNotFound,     // no such job, node, tenant or token (or none the caller may see)
  kConflict,     // not in a state that allows it: a job that ended, a key used for another spec
  kTooMany,      // over a limit of the caller's: try again later
  kUnavailable,  // the server cannot answer now: its store failed, or it is stopping
};

// Refusals say why in words a user can act on: {"error": what was refused, "field": the input at
// fault, "reason": why, and what to do}.
struct Refused {
  Refusal refusal = Refusal::kInvalid;
  std::string error;  // "invalid job spec", "not found", ...
  Error cause;
  std::optional<std::int64_t> retry_after_seconds;  // kTooMany: when to try again
  // What the refusal answers instead of the error, when not null: the job whose release failed it.
  nlohmann::json body;
};

using Reply = std::expected<Answer, Refused>;
// A step of a command: its value, or the refusal the command answers.
template <class T>
using Outcome = std::expected<T, Refused>;

[[nodiscard]] inline Reply answer(nlohmann::json body) {
  return Answer{Done::kOk, std::move(body)};
}
[[nodiscard]] inline Reply created(nlohmann::json body) {
  return Answer{Done::kCreated, std::move(body)};
}

// The error words of a refusal that has none of its own: "invalid request", "forbidden", "not
// found", "conflict", "too many requests", "unavailable".
std::string_view refusal_words(Refusal refusal);

[[nodiscard]] std::unexpected<Refused> refuse(Refusal refusal, Error cause);
[[nodiscard]] std::unexpected<Refused> refuse(Refusal refusal, std::string error, Error cause);
[[nodiscard]] std::unexpected<Refused> forbidden(std::string field, std::string reason);
[[nodiscard]] std::unexpected<Refused> conflict(std::string field, std::string reason);

}  // namespace tidepool
