// tidepool admin backup FILE: a backup of a running server's state (GET /v1/admin/backup), written
// whole or not at all. The other admin commands open a store themselves and run in tidepool-server
// (apps/admin_command.h); they are listed here for --help and completion.
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/private_file.h"
#include "cli/client_commands.h"
#include "cli/client_session.h"

namespace tidepool {
namespace {

struct BackupFlags {
  ClientFlags client;
  std::string file;
  std::string config;  // the offline backup: never set here (tidepool-server runs it)
};

// "5 jobs, 2 tokens, ...", from the trailer that ends a whole backup (store/backup_file.h: its
// last line, {"type":"trailer","counts":{...},"sha256":...}); an error for anything else, such as
// a reply cut short or not a backup at all. The file's SHA-256 is checked when it is restored, or
// by `tidepool admin verify`.
Result<std::string> backup_summary(std::string_view body) {
  const auto not_backup = [](std::string_view why) {
    return fail("backup", fmt::format("the server's reply is not a whole backup ({}); nothing "
                                      "was written",
                                      why));
  };
  if (body.empty() || body.back() != '\n') return not_backup("it does not end with a line end");
  const std::string_view rest = body.substr(0, body.size() - 1);
  const std::size_t start = rest.rfind('\n');
  if (start == std::string_view::npos) return not_backup("it has a single line");
  const auto trailer = nlohmann::json::parse(rest.substr(start + 1), nullptr, false);
  if (!trailer.is_object() || trailer.value("type", "") != "trailer" ||
      !trailer.contains("counts") || !trailer["counts"].is_object()) {
    return not_backup("its last line is not the trailer");
  }
  std::string summary;
  for (const auto& [name, one, many] :
       {std::tuple{"jobs", "job", "jobs"}, std::tuple{"tokens", "token", "tokens"},
        std::tuple{"nodes", "node", "nodes"}, std::tuple{"settings", "setting", "settings"},
        std::tuple{"ledger", "ledger entry", "ledger entries"},
        std::tuple{"events", "event", "events"}}) {
    const auto count = trailer["counts"].value(name, std::int64_t{-1});
    if (count < 0) return not_backup(fmt::format("its trailer has no count of {}", name));
    summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", count, count == 1 ? one : many);
  }
  return summary;
}

std::string size_text(std::size_t bytes) {
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024 * 1024));
}

Result<void> backup(const BackupFlags& flags) {
  if (!flags.config.empty()) {
    // find_external_command hands `admin backup --config` to tidepool-server before parsing.
    return fail("--config", "the offline backup runs in tidepool-server, which was not found");
  }
  // The server loads the whole state before it answers.
  ApiClientOptions options;
  options.read_timeout = std::chrono::minutes(10);
  auto client = open_client(flags.client, options);
  if (!client) return std::unexpected(client.error());
  const auto start = std::chrono::steady_clock::now();
  auto reply = client->get_text("/v1/admin/backup");
  if (!reply) return std::unexpected(reply.error());
  auto summary = backup_summary(reply->body);
  if (!summary) return std::unexpected(summary.error());
  if (auto written = write_private_file_atomically(flags.file, reply->body); !written) {
    return written;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("Wrote {} (mode 0600): {}; {} in {:.1f} s.\n", flags.file, *summary,
             size_text(reply->body.size()), seconds);
  fmt::print(
      "Restore it, into an empty SQLite or etcd store: tidepool admin restore {} --config "
      "server.yaml\n",
      flags.file);
  return {};
}

}  // namespace

void add_admin_commands(CLI::App& app, int* exit_code) {
  CLI::App* admin = app.add_subcommand(
      "admin", "(admin) Back up the server's state, and restore it into SQLite or etcd");
  admin->require_subcommand(1);
  {
    auto flags = std::make_shared<BackupFlags>();
    CLI::App* cmd = admin->add_subcommand(
        "backup",
        "Write a consistent backup of the server's state (jobs, tokens, nodes, "
        "settings, ledger, events) to FILE");
    cmd->add_option("FILE", flags->file,
                    "The backup file, written whole or not at all (a file there is replaced), "
                    "mode 0600: it holds every job's spec and the tokens' hashes")
        ->required();
    cmd->add_option("--config", flags->config,
                    "Offline: back up the store this server configuration names instead of "
                    "asking a running server (SQLite: with the server stopped; etcd: also while "
                    "servers run)")
        ->check(CLI::ExistingFile);
    add_client_flags(*cmd, flags->client);
    cmd->footer(
        "A backup is a snapshot of one moment: the server takes it between two of its commits, "
        "with the events up to it.\n\n"
        "Examples:\n"
        "  tidepool admin backup tidepool-$(date +%F).backup\n"
        "  tidepool admin backup state.backup --config server.yaml   # the server stopped\n\n" +
        connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return backup(*flags); }); });
  }
  // Run by tidepool-server, which opens the store (apps/admin_command.h).
  admin
      ->add_subcommand("restore",
                       "Restore a backup into the empty store of a server configuration, "
                       "the server stopped (`tidepool admin restore --help`)")
      ->allow_extras()
      ->prefix_command();
  admin
      ->add_subcommand("verify",
                       "Check a backup file whole and say what it holds "
                       "(`tidepool admin verify --help`)")
      ->allow_extras()
      ->prefix_command();
}

}  // namespace tidepool
