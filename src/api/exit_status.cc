#include "api/exit_status.h"

namespace tidepool {
namespace {

// One command per process: the first specific failure it met.
ExitStatus& recorded() {
  static ExitStatus status = ExitStatus::kOk;
  return status;
}

}  // namespace

ExitStatus exit_status_of_http(int status) {
  if (status == 404) return ExitStatus::kNotFound;
  if (status == 401 || status == 403) return ExitStatus::kNotAllowed;
  return ExitStatus::kError;
}

void record_failure(ExitStatus status) {
  ExitStatus& now = recorded();
  if (now == ExitStatus::kOk || now == ExitStatus::kError) now = status;
}

ExitStatus recorded_failure() { return recorded(); }

std::string_view exit_status_help() {
  return "Exit status: 0 ok, 1 error, 2 usage error (unknown command or option), 3 not found (no "
         "such job, node, tenant, queue or token), 4 not allowed (no token, a wrong or revoked "
         "one, or one without the right), 5 the server cannot be reached.";
}

}  // namespace tidepool
