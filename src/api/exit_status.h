// The exit statuses of the user commands, documented in `tidepool --help` and the README, so that
// scripts can tell a missing job from a refused token or a server that is down (as kubectl and
// Slurm users expect):
//   0 ok, 1 an error (bad input the server refused, a conflict, a failed command), 2 a usage
//   error (unknown command or option, a missing argument), 3 not found (no such job, node,
//   tenant, queue, token), 4 not allowed (no token, a wrong or revoked one, a token without the
//   right), 5 the server cannot be reached (or its TLS certificate is not trusted).
// A command's failure keeps the most specific status its requests met (record_failure).
#pragma once

#include <string_view>

namespace tidepool {

enum class ExitStatus : int {
  kOk = 0,
  kError = 1,
  kUsage = 2,
  kNotFound = 3,
  kNotAllowed = 4,
  kUnreachable = 5,
};

// The status of an HTTP error reply.
[[nodiscard]] ExitStatus exit_status_of_http(int status);

// What the requests of this command met (the command runs once per process): kOk until a
// failure is recorded; a later failure replaces an earlier kError only.
void record_failure(ExitStatus status);
[[nodiscard]] ExitStatus recorded_failure();

// The table above, for help texts.
[[nodiscard]] std::string_view exit_status_help();

}  // namespace tidepool
