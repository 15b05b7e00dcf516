// The `tidepool` command is a small front end: the user commands (client_commands.h) run in it,
// and the heavy ones run as programs of their own beside it, as git runs git-<command>:
//
//   tidepool server ...   ->  tidepool-server server ...
//   tidepool sim ...      ->  tidepool-sim sim ...
//   tidepool plan ...     ->  tidepool-sim plan ...
//   tidepool shadow ...   ->  tidepool-sim shadow ...
//   tidepool agent ...    ->  tidepool-agent agent ...
//   tidepool admin restore|verify ..., tidepool admin backup ... --config ...
//                         ->  tidepool-server admin ...
//
// `tidepool admin` is both: `admin backup FILE` asks a running server for its state and runs in
// the front end like every client command, while the forms that open a store themselves (SQLite,
// etcd over gRPC) run in tidepool-server, which links the stores.
//
// One `tidepool submit` per job must start as fast as sbatch does, and the dynamic libraries of the
// server and the simulator (SQLite, prometheus-cpp, spdlog, cpp-httplib with OpenSSL) cost more to
// load than a submission costs to send; the front end loads none of them.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "api/exit_status.h"
#include "core/error.h"

namespace tidepool {

struct ExternalCommand {
  std::string_view name;     // the word after `tidepool`
  std::string_view program;  // the program that runs it
  std::string_view summary;  // for `tidepool --help`
};

inline constexpr std::array kExternalCommands = {
    ExternalCommand{"server", "tidepool-server",
                    "Run the control plane: the REST API, the scheduling loop and the database"},
    ExternalCommand{"sim", "tidepool-sim", "Trace-driven simulation with the scheduler's own code"},
    ExternalCommand{"plan", "tidepool-sim",
                    "Capacity and cost planning: TCO of owning GPUs vs renting on demand or spot"},
    ExternalCommand{"shadow", "tidepool-sim",
                    "Run Tidepool's scheduler beside Slurm (or a trace) without acting, and "
                    "compare"},
    ExternalCommand{"agent", "tidepool-agent",
                    "Run the node agent of a GPU node: runs the jobs the server places there"},
};

// The admin commands that open a store: run by tidepool-server (apps/admin_command.h).
inline constexpr ExternalCommand kStoreAdminCommand{
    "admin", "tidepool-server", "Back up and restore the state of a stopped server's store"};

// The exit status of a command line the parser refused, given what CLI::App::exit returned after
// printing why: 0 for --help and --version, the one usage status (2) for every usage error, in
// the front end and in each program behind it alike.
inline int usage_exit_status(int parser_code) {
  return parser_code == 0 ? 0 : static_cast<int>(ExitStatus::kUsage);
}

// The external command that `argv[1]` names (kStoreAdminCommand for `admin` with `restore` or
// `verify`, or `backup` with --config), or nullptr.
const ExternalCommand* find_external_command(int argc, char** argv);

// Replaces this process with `command.program` run on the same arguments: first the program in the
// directory of the running executable, then one on PATH. Returns only when neither can run, with
// the reason.
Error run_external_command(const ExternalCommand& command, char** argv);

// The arguments of a program behind an external command, for CLI::App::parse (in reverse order,
// without the program name): argv[1..] with `name` put first when it is not there already, so
// that `tidepool-server --config x` and `tidepool-server server --config x` both work.
std::vector<std::string> external_program_args(int argc, char** argv, std::string_view name);

}  // namespace tidepool
