// What every user command shares: the --server, --token and -o/--output flags, opening the API
// client from them (client_config.h), and running the command's body so that an Error becomes
// "error: <field>: <reason>" on stderr and exit status 1.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>

#include "cli/api_client.h"
#include "cli/output_format.h"
#include "core/error.h"

namespace tidepool {

struct ClientFlags {
  std::string server;  // empty: not given
  std::string token;
  std::string output = "table";
  bool no_headers = false;                  // listings: no header line
  std::span<const OutputFormat> formats{};  // the -o forms the command offers
};

// Adds --server and --token to `cmd`, and -o/--output offering `formats` unless they are empty;
// with the forms of a listing (kListingFormats) also --no-headers.
void add_client_flags(CLI::App& cmd, ClientFlags& flags,
                      std::span<const OutputFormat> formats = {});

// Resolves the server and token and makes a client; `options` tunes its timeouts.
Result<ApiClient> open_client(const ClientFlags& flags, ApiClientOptions options = {});

OutputFormat output_format(const ClientFlags& flags);

// Runs `body`: its Error is printed as "error: ..." (unless it is already_reported()) and sets
// *exit_code to 1; so is a reply whose JSON is not shaped as expected (nlohmann::json::exception).
void run_client_command(int* exit_code, const std::function<Result<void>()>& body);

// An Error that run_client_command does not print (the command already printed its errors) but
// that still makes the exit status 1.
inline Error already_reported() { return Error{}; }

// Prints "error: <message>" to stderr.
void print_error(const Error& error);

// Flushes stdout; false once what reads it has gone (`| head`, `| grep -m1`): a command that would
// go on printing forever (logs -f, events --watch) then ends, as tail -f does.
inline bool flush_stdout() { return std::fflush(stdout) == 0 && std::ferror(stdout) == 0; }

// "/v1/jobs/<id>", the id escaped as a path segment (it is what the user typed).
inline std::string job_path(const std::string& id) { return "/v1/jobs/" + url_escape(id); }

// The wall clock in milliseconds since the epoch (the server stamps times the same way).
std::int64_t wall_clock_ms();

// The common footer of the commands' --help: where the server and token come from.
std::string connection_help();

}  // namespace tidepool
