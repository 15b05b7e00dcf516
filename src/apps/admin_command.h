// The admin commands that open the server's store themselves, run by tidepool-server
// (external_command.h), with the server stopped:
//
//   tidepool admin backup FILE --config server.yaml    back up the store the configuration names
//   tidepool admin restore FILE --config server.yaml   restore a backup into that store, empty
//   tidepool admin verify FILE                          check a backup file, say what it holds
//
// A backup of either kind of store restores into either kind: the way from SQLite to etcd (a
// highly available control plane) and back. `tidepool admin backup FILE` without --config asks a
// running server instead (cli/client_admin_commands.cc). Files: store/backup_file.h; the copy:
// store/store_backup.h.
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

void add_store_admin_commands(CLI::App& app, int* exit_code);

}  // namespace tidepool
