#include "apps/admin_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "api/private_file.h"
#include "apps/etcd_options.h"
#include "core/civil_time.h"
#include "server/server_config.h"
#include "store/backup_file.h"
#include "store/etcd_election.h"
#include "store/etcd_store.h"
#include "store/file_lock.h"
#include "store/sqlite_store.h"
#include "store/store_backup.h"

namespace tidepool {
namespace {

using Clock = std::chrono::steady_clock;

struct AdminFlags {
  std::string file;
  std::string config;
  std::string database;  // overrides the configuration's, as `tidepool server --database`
};

// What the command does with the store: the words of its errors' advice.
enum class Use { kBackup, kRestore };

// The store a server configuration names, opened for an admin command.
struct NamedStore {
  std::unique_ptr<Store> store;
  std::string kind;   // "sqlite", "etcd"
  std::string where;  // for messages: the file, or the endpoints and prefix
  RestoreLimits limits;
};

std::string utc_text(std::int64_t unix_ms) {
  const std::int64_t seconds = unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000;
  std::int64_t days = seconds / kSecondsPerCivilDay;
  std::int64_t of_day = seconds % kSecondsPerCivilDay;
  if (of_day < 0) {
    of_day += kSecondsPerCivilDay;
    --days;
  }
  const CivilDate date = civil_from_days(days);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC", date.year, date.month, date.day,
                     of_day / 3600, of_day / 60 % 60, of_day % 60);
}

// "an etcd store", "a sqlite store": the kind of store a backup's header names.
std::string store_words(const std::string& kind) {
  const bool vowel =
      !kind.empty() && std::string_view("aeiou").find(kind[0]) != std::string_view::npos;
  return fmt::format("{} {} store", vowel ? "an" : "a", kind);
}

Result<ServerConfig> server_config(const AdminFlags& flags) {
  auto config = load_server_config(flags.config);
  if (!config) return std::unexpected(config.error());
  if (!flags.database.empty()) config->database_path = flags.database;
  return config;
}

Result<NamedStore> open_named_store(const ServerConfig& config, Use use) {
  if (config.store.kind == StoreKind::kSqlite) {
    const std::string& path = config.database_path;
    if (use == Use::kBackup && !std::filesystem::exists(path)) {
      return fail("database", fmt::format("there is no database at {} (the configuration's "
                                          "`database`): nothing to back up",
                                          path));
    }
    // A running server holds the database's lock; say what to do rather than sqlite's words.
    if (auto lock = FileLock::acquire(path + ".lock"); !lock) {
      return fail("database",
                  fmt::format("{}. {}", lock.error().message(),
                              use == Use::kBackup
                                  ? "A running server's database is backed up through the server: "
                                    "tidepool admin backup FILE --server URL; or stop it first"
                                  : "Stop the server before restoring into its database"));
    }
    auto store = open_sqlite_store(path);
    if (!store) return std::unexpected(store.error());
    return NamedStore{std::move(*store), "sqlite", "the SQLite database " + path, RestoreLimits{}};
  }
  const std::string where = fmt::format(
      "etcd {} (prefix {})", fmt::join(config.store.endpoints, ","), config.store.prefix);
  if (use == Use::kRestore) {
    // A server that leads on the prefix writes to it: a restore must not race it.
    // It never campaigns: it only asks.
    auto election =
        EtcdElection::open(etcd_election_options(config.store, "tidepool admin restore"));
    if (!election) return std::unexpected(election.error());
    auto leader = (*election)->leader();
    if (!leader) return std::unexpected(leader.error());
    if (*leader) {
      return fail("store", fmt::format("a server leads on {}: {}. Stop every server of the "
                                       "prefix before restoring into it",
                                       where, **leader));
    }
  }
  auto store = open_etcd_store(etcd_store_options(config.store));
  if (!store) return std::unexpected(store.error());
  return NamedStore{std::move(*store), "etcd", where,
                    RestoreLimits{.max_txn_ops = config.store.max_txn_ops,
                                  .max_request_bytes = config.store.max_request_bytes,
                                  .key_prefix_bytes = config.store.prefix.size()}};
}

Result<Backup> read_backup_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path, "cannot open the backup file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail(path, "cannot read the backup file");
  auto backup = read_backup(text.view());
  if (!backup) {
    return fail(fmt::format("{}, {}", path, backup.error().field), backup.error().reason);
  }
  return backup;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Result<void> backup_offline(const AdminFlags& flags) {
  auto config = server_config(flags);
  if (!config) return std::unexpected(config.error());
  auto named = open_named_store(*config, Use::kBackup);
  if (!named) return std::unexpected(named.error());
  const auto start = Clock::now();
  const auto taken = std::chrono::system_clock::now();
  auto contents = take_backup(*named->store);
  if (!contents) return std::unexpected(contents.error());
  const BackupHeader header{
      .taken_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(taken.time_since_epoch()).count(),
      .source = named->kind};
  auto text = write_backup(header, *contents);
  if (!text) return std::unexpected(text.error());
  if (auto written = write_private_file_atomically(flags.file, *text); !written) return written;
  fmt::print("Wrote {} (mode 0600) from {}: {}; {} bytes in {:.1f} s.\n", flags.file, named->where,
             describe_counts(count_records(*contents)), text->size(), seconds_since(start));
  return {};
}

Result<void> restore(const AdminFlags& flags) {
  auto backup = read_backup_file(flags.file);
  if (!backup) return std::unexpected(backup.error());
  auto config = server_config(flags);
  if (!config) return std::unexpected(config.error());
  auto named = open_named_store(*config, Use::kRestore);
  if (!named) return std::unexpected(named.error());
  const auto start = Clock::now();
  auto report = restore_backup(*named->store, backup->contents, named->limits);
  if (!report) {
    return fail(fmt::format("restoring into {}", named->where), report.error().reason);
  }
  fmt::print(
      "Restored {} (taken {} from {}) into {}: {}; {} commit{} in {:.1f} s, read back and "
      "compared (SHA-256 {}).\n",
      flags.file, utc_text(backup->header.taken_ms), store_words(backup->header.source),
      named->where, describe_counts(report->counts), report->commits,
      report->commits == 1 ? "" : "s", seconds_since(start), report->digest);
  fmt::print(
      "Start the server on it: its tokens are the backup's (the server creates no new admin "
      "token). The tasks' logs are files beside the server, not in a backup: copy the `logs` "
      "folder to keep them.\n");
  return {};
}

Result<void> verify(const AdminFlags& flags) {
  auto backup = read_backup_file(flags.file);
  if (!backup) return std::unexpected(backup.error());
  auto digest = backup_digest(backup->contents);
  if (!digest) return std::unexpected(digest.error());
  fmt::print(
      "{}: a whole Tidepool backup (version {}), taken {} from {}: {}; records' SHA-256 {}.\n",
      flags.file, kBackupVersion, utc_text(backup->header.taken_ms),
      store_words(backup->header.source), describe_counts(count_records(backup->contents)),
      *digest);
  return {};
}

void run(int* exit_code, const std::function<Result<void>()>& body) {
  if (auto ok = body(); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error().message());
    *exit_code = 1;
  }
}

}  // namespace

void add_store_admin_commands(CLI::App& app, int* exit_code) {
  CLI::App* admin = app.add_subcommand(
      "admin", "(admin) Back up the server's state, and restore it into SQLite or etcd");
  admin->require_subcommand(1);
  const std::string stores =
      "A backup of either kind of store (SQLite, etcd) restores into either: to move a Tidepool "
      "from SQLite to etcd, back up the stopped server's database, restore into an etcd "
      "configuration, and start the servers on it.";
  {
    auto flags = std::make_shared<AdminFlags>();
    CLI::App* cmd = admin->add_subcommand(
        "backup",
        "Write a consistent backup of the state in a server configuration's store "
        "to FILE (offline: with --config)");
    cmd->add_option("FILE", flags->file,
                    "The backup file, written whole or not at all (a file there is replaced), "
                    "mode 0600: it holds every job's spec and the tokens' hashes")
        ->required();
    cmd->add_option("--config", flags->config,
                    "The server configuration whose store to back up (SQLite: the server must be "
                    "stopped; etcd: one revision's state, also while servers run)")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("--database", flags->database,
                    "SQLite database file, instead of the configuration's");
    cmd->footer("Example:\n  tidepool admin backup state.backup --config server.yaml\n\n" + stores +
                "\nWithout --config, `tidepool admin backup FILE` asks a running server.");
    cmd->callback([flags, exit_code] { run(exit_code, [&] { return backup_offline(*flags); }); });
  }
  {
    auto flags = std::make_shared<AdminFlags>();
    CLI::App* cmd = admin->add_subcommand(
        "restore",
        "Restore a backup into the empty store of a server configuration, the server "
        "stopped");
    cmd->add_option("FILE", flags->file, "The backup file (tidepool admin backup)")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("--config", flags->config,
                    "The server configuration whose store to restore into: a SQLite database "
                    "that is new or empty, or an etcd prefix with no keys")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("--database", flags->database,
                    "SQLite database file, instead of the configuration's");
    cmd->footer(
        "The backup is checked whole (its SHA-256) before anything is written; a store that "
        "holds anything is refused. Into SQLite the restore is one transaction; into etcd it "
        "takes as many as the store's max_txn_ops and max_request_bytes need, so one that fails "
        "midway leaves part of the backup, and says so: empty the prefix (etcdctl del --prefix "
        "PREFIX/) before trying again. The store is read back and compared at the end. The "
        "events keep their numbers, and the tokens keep working (their hashes are restored).\n\n"
        "Example:\n  tidepool admin restore state.backup --config etcd-server.yaml\n\n" +
        stores);
    cmd->callback([flags, exit_code] { run(exit_code, [&] { return restore(*flags); }); });
  }
  {
    auto flags = std::make_shared<AdminFlags>();
    CLI::App* cmd = admin->add_subcommand(
        "verify",
        "Check a backup file whole (format, order, counts, SHA-256) and say what it "
        "holds");
    cmd->add_option("FILE", flags->file, "The backup file")->required()->check(CLI::ExistingFile);
    cmd->footer("Example:\n  tidepool admin verify state.backup");
    cmd->callback([flags, exit_code] { run(exit_code, [&] { return verify(*flags); }); });
  }
}

}  // namespace tidepool
