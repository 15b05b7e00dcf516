#include "cli/client_session.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <optional>

namespace tidepool {

void add_client_flags(CLI::App& cmd, ClientFlags& flags, bool with_output) {
  cmd.add_option("--server", flags.server,
                 "Server URL, e.g. http://127.0.0.1:8470 (else $TIDEPOOL_SERVER, the config file, "
                 "or http://127.0.0.1:8470)")
      ->group("Connection");
  cmd.add_option("--token", flags.token,
                 "API token (else $TIDEPOOL_TOKEN or token/token_file in the config file)")
      ->group("Connection");
  if (with_output) {
    cmd.add_option("-o,--output", flags.output, "Output format: table, json or yaml")
        ->check(CLI::IsMember({"table", "json", "yaml"}))
        ->capture_default_str();
  }
}

Result<ApiClient> open_client(const ClientFlags& flags, ApiClientOptions options) {
  auto settings = load_client_settings(
      flags.server.empty() ? std::nullopt : std::optional<std::string>(flags.server),
      flags.token.empty() ? std::nullopt : std::optional<std::string>(flags.token),
      process_environment());
  if (!settings) return std::unexpected(settings.error());
  return ApiClient(*settings, options);
}

OutputFormat output_format(const ClientFlags& flags) {
  return parse_output_format(flags.output, "--output").value_or(OutputFormat::kTable);
}

void print_error(const Error& error) {
  std::fflush(stdout);
  fmt::print(stderr, "error: {}\n", error.message());
}

void run_client_command(int* exit_code, const std::function<Result<void>()>& body) {
  Result<void> ok;
  try {
    ok = body();
  } catch (const nlohmann::json::exception& e) {
    ok = fail("", fmt::format("unexpected reply from the server ({}); are the client and the "
                              "server the same version?",
                              e.what()));
  }
  if (!ok) {
    if (!ok.error().message().empty()) print_error(ok.error());
    *exit_code = 1;
  }
}

std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string connection_help() {
  return "The server is --server, else $TIDEPOOL_SERVER, else `server:` in "
         "~/.config/tidepool/config.yaml, else http://127.0.0.1:8470; the token is --token, else "
         "$TIDEPOOL_TOKEN, else `token:` or `token_file:` in that file.";
}

}  // namespace tidepool
