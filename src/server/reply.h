// An answer to a command of the control plane: an HTTP status and a JSON body.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace tidepool {

// Errors have the body {"error": what failed, "field": the input at fault, "reason": why, and
// what to do}.
struct Reply {
  int status = 200;
  nlohmann::json body;
};
Reply error_reply(int status, std::string error, const Error& cause);
// 403 "forbidden" and 409 "conflict" with their field and reason.
Reply forbidden(std::string field, std::string reason);
Reply conflict(std::string field, std::string reason);

}  // namespace tidepool
