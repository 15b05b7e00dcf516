#include "cli/client_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "api/exit_status.h"

namespace tidepool {

void add_client_flags(CLI::App& cmd, ClientFlags& flags, std::span<const OutputFormat> formats) {
  cmd.add_option("--server", flags.server,
                 "Server URL, e.g. http://127.0.0.1:8470, or the servers of a highly available "
                 "Tidepool as a comma-separated list (up to 16), whose leader each request "
                 "follows (else $TIDEPOOL_SERVER, the config file, or http://127.0.0.1:8470)")
      ->group("Connection");
  cmd.add_option("--token", flags.token,
                 "API token (else $TIDEPOOL_TOKEN or token/token_file in the config file)")
      ->group("Connection");
  flags.formats = formats;
  if (formats.empty()) return;
  std::vector<std::string> names;
  for (OutputFormat format : formats) names.emplace_back(output_format_name(format));
  cmd.add_option("-o,--output", flags.output, "Output format: " + output_format_names(formats))
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  if (std::ranges::find(formats, OutputFormat::kCsv) != formats.end()) {
    cmd.add_flag("--no-headers", flags.no_headers,
                 "Print no header line (-o table, wide and csv), as for scripts");
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
  return parse_output_format(flags.output, "--output", flags.formats)
      .value_or(OutputFormat::kTable);
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
    const ExitStatus met = recorded_failure();
    *exit_code = static_cast<int>(met == ExitStatus::kOk ? ExitStatus::kError : met);
  }
}

std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string connection_help() {
  return "The server is --server, else $TIDEPOOL_SERVER, else `server:` in "
         "~/.config/tidepool/config.yaml, else http://127.0.0.1:8470; several servers (a highly "
         "available Tidepool) are one comma-separated list, and each request goes to their "
         "leader. The token is --token, else $TIDEPOOL_TOKEN, else `token:` or `token_file:` in "
         "that file.";
}

}  // namespace tidepool
