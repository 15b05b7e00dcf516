// `tidepool server --config server.yaml`: the control plane (server/http_api.h over
// server/control_loop.h) on its SQLite database. Flags override the file: --listen, --database,
// --tls-cert, --tls-key; --port-file writes the port it listens on (for --listen host:0).
// On its first start it creates an admin token and writes it to the admin token file (mode 0600).
// SIGTERM or SIGINT stop it cleanly: requests in flight are answered, then the database is closed.
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

void add_server_command(CLI::App& app, int* exit_code);

}  // namespace tidepool
