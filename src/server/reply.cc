#include "server/reply.h"

#include <utility>

namespace tidepool {

std::string_view refusal_words(Refusal refusal) {
  switch (refusal) {
    case Refusal::kInvalid:
      return "invalid request";
    case Refusal::kForbidden:
      return "forbidden";
    case Refusal::kNotFound:
      return "not found";
    case Refusal::kConflict:
      return "conflict";
    case Refusal::kTooMany:
      return "too many requests";
    case Refusal::kUnavailable:
      return "unavailable";
  }
  return "refused";
}

std::unexpected<Refused> refuse(Refusal refusal, Error cause) {
  return refuse(refusal, std::string(refusal_words(refusal)), std::move(cause));
}

std::unexpected<Refused> refuse(Refusal refusal, std::string error, Error cause) {
  return std::unexpected(Refused{refusal, std::move(error), std::move(cause), std::nullopt, {}});
}

std::unexpected<Refused> forbidden(std::string field, std::string reason) {
  return refuse(Refusal::kForbidden, Error{std::move(field), std::move(reason)});
}

std::unexpected<Refused> conflict(std::string field, std::string reason) {
  return refuse(Refusal::kConflict, Error{std::move(field), std::move(reason)});
}

}  // namespace tidepool
