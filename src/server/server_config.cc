#include "server/server_config.h"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <system_error>
#include <tuple>

#include "api/job_spec.h"
#include "config/yaml_reader.h"
#include "core/policies/placement_policy.h"

namespace tidepool {
namespace {

std::string resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute() || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

class ConfigReader : private YamlReader {
 public:
  using YamlReader::YamlReader;

  Result<ServerConfig> read(const YAML::Node& root, const std::string& base_dir) const {
    ServerConfig c;
    auto f = fields(root, "",
                    {"listen",
                     "cluster",
                     "tenants",
                     "policy",
                     "placement_policy",
                     "database",
                     "admin_token_file",
                     "tick",
                     "rate_limit",
                     "tls",
                     "http_threads",
                     "heartbeat_timeout",
                     "logs",
                     "idle_gpu_window",
                     "market",
                     "ledger_posting_interval",
                     "ledger_jobs_kept",
                     "ledger_days_kept",
                     "finished_jobs_kept",
                     "events_kept",
                     "history_interval",
                     "history_kept",
                     "admission",
                     "metrics_token_required",
                     "simulate_unregistered_nodes",
                     "store",
                     "advertise_url",
                     "prewarm",
                     "steps_stored_every"});
    if (!f) return std::unexpected(f.error());
    if (auto node = f->get("listen")) {
      auto value = text(*node, "listen");
      if (!value) return std::unexpected(value.error());
      if (auto ok = parse_listen(*value, "listen", c); !ok)
        return error_at(*node, "listen", ok.error().reason);
    }
    for (auto [key, target] :
         {std::pair{"cluster", &c.cluster_path}, std::pair{"tenants", &c.tenants_path},
          std::pair{"database", &c.database_path},
          std::pair{"admin_token_file", &c.admin_token_file}, std::pair{"logs", &c.log_dir},
          std::pair{"market", &c.market_path}}) {
      if (auto node = f->get(key)) {
        auto value = text(*node, key);
        if (!value) return std::unexpected(value.error());
        *target = resolve(base_dir, *value);
      }
    }
    for (auto [key, target] :
         {std::pair{"cluster", &c.cluster_path}, std::pair{"tenants", &c.tenants_path}}) {
      if (target->empty()) return error_at(root, key, "the key is missing: the server needs it");
    }
    if (auto node = f->get("policy")) {
      auto value = text(*node, "policy");
      if (!value) return std::unexpected(value.error());
      c.policy = *value;
    }
    if (auto node = f->get("placement_policy")) {
      auto value = text(*node, "placement_policy");
      if (!value) return std::unexpected(value.error());
      if (*value == "none") {
        c.placement_policy = "none";
      } else {
        auto known = find_placement_policy(*value);
        if (!known) return error_at(*node, "placement_policy", known.error().reason + ", or none");
        c.placement_policy = std::string(known->name);
      }
    }
    for (auto [key, target, most, example] :
         {std::tuple{"tick", &c.tick, Seconds{3600}, "1s"},
          std::tuple{"heartbeat_timeout", &c.heartbeat_timeout, Seconds{3600}, "30s"},
          std::tuple{"idle_gpu_window", &c.idle_gpu_window, Seconds{7 * 86'400}, "15m"},
          std::tuple{"ledger_posting_interval", &c.ledger_posting_interval, Seconds{86'400}, "60s"},
          std::tuple{"history_interval", &c.history_interval, Seconds{3600}, "5m"},
          std::tuple{"steps_stored_every", &c.steps_stored_every, Seconds{3600}, "1m"}}) {
      if (auto node = f->get(key)) {
        auto value = text(*node, key);
        if (!value) return std::unexpected(value.error());
        auto seconds = parse_duration(*value);
        if (!seconds || *seconds < 1 || *seconds > most) {
          return error_at(*node, key,
                          fmt::format("expected a duration from 1s to {}, e.g. {}",
                                      format_duration(most), example));
        }
        *target = millis_from_seconds(*seconds);
      }
    }
    for (auto [key, target] : {std::pair{"ledger_jobs_kept", &c.ledger_books.job_days},
                               std::pair{"ledger_days_kept", &c.ledger_books.day_days},
                               std::pair{"finished_jobs_kept", &c.finished_jobs_kept_days},
                               std::pair{"events_kept", &c.events_kept_days},
                               std::pair{"history_kept", &c.history_kept_days}}) {
      auto node = f->get(key);
      if (!node) continue;
      auto value = text(*node, key);
      if (!value) return std::unexpected(value.error());
      auto seconds = parse_duration(*value);
      constexpr Seconds kDay = 86'400;
      if (!seconds || *seconds < kDay || *seconds % kDay != 0 || *seconds > 3650 * kDay) {
        return error_at(*node, key, "expected whole days from 1d to 3650d, e.g. 92d");
      }
      *target = *seconds / kDay;
    }
    if (auto ok = validate(c.ledger_books); !ok) {
      const char* key = ok.error().field == "job_days" ? "ledger_jobs_kept" : "ledger_days_kept";
      return error_at(f->get(key) ? *f->get(key) : root, key,
                      "must be at least ledger_jobs_kept (" +
                          std::to_string(c.ledger_books.job_days) + "d), got " +
                          std::to_string(c.ledger_books.day_days) + "d");
    }
    // The history's samples are all loaded at start: at most one a minute, for at most 90 days.
    if (c.history_interval < std::chrono::minutes(1)) {
      return error_at(*f->get("history_interval"), "history_interval",
                      "expected a duration from 1m to 1h, e.g. 5m");
    }
    if (c.history_kept_days > 90) {
      return error_at(*f->get("history_kept"), "history_kept",
                      "expected whole days from 1d to 90d, e.g. 14d");
    }
    if (!c.market_path.empty() && c.finished_jobs_kept_days < c.ledger_books.job_days) {
      const auto node = f->get("finished_jobs_kept");
      if (!node) {
        c.finished_jobs_kept_days = c.ledger_books.job_days;  // the default follows the ledger
      } else {
        return error_at(
            *node, "finished_jobs_kept",
            fmt::format("must be at least ledger_jobs_kept ({}d) with a market, so that "
                        "bills by job and team name every job the ledger keeps; got {}d",
                        c.ledger_books.job_days, c.finished_jobs_kept_days));
      }
    }
    if (auto node = f->get("http_threads")) {
      auto value = text(*node, "http_threads");
      if (!value) return std::unexpected(value.error());
      auto n = parse_decimal(*value, 0);
      if (!n || *n < 4 || *n > 1024) return error_at(*node, "http_threads", "expected 4..1024");
      c.http_threads = static_cast<int>(*n);
    }
    for (auto [key, target] :
         {std::pair{"metrics_token_required", &c.metrics_token_required},
          std::pair{"simulate_unregistered_nodes", &c.simulate_unregistered_nodes}}) {
      if (auto node = f->get(key)) {
        auto value = text(*node, key);
        if (!value) return std::unexpected(value.error());
        if (*value != "true" && *value != "false") {
          return error_at(*node, key, "expected true or false");
        }
        *target = *value == "true";
      }
    }
    if (auto node = f->get("rate_limit")) {
      auto limit = fields(*node, "rate_limit", {"per_second", "burst"});
      if (!limit) return std::unexpected(limit.error());
      for (auto [key, target] :
           {std::pair{"per_second", &c.rate_per_second}, std::pair{"burst", &c.rate_burst}}) {
        if (auto value_node = limit->get(key)) {
          const std::string path = std::string("rate_limit.") + key;
          auto value = text(*value_node, path);
          if (!value) return std::unexpected(value.error());
          auto n = parse_decimal(*value, 3);
          if (!n || *n > 1'000'000'000) {
            return error_at(*value_node, path, "expected a number of requests from 0 to 1000000");
          }
          *target = static_cast<double>(*n) / 1000.0;
        }
      }
    }
    if (auto node = f->get("admission")) {
      auto limits = fields(*node, "admission",
                           {"max_pending_jobs", "submissions_per_second", "submission_burst"});
      if (!limits) return std::unexpected(limits.error());
      for (auto [key, target, least] :
           {std::tuple{"max_pending_jobs", &c.max_pending_jobs, 1},
            std::tuple{"submissions_per_second", &c.submissions_per_second, 0},
            std::tuple{"submission_burst", &c.submission_burst, 1}}) {
        if (auto value_node = limits->get(key)) {
          const std::string path = std::string("admission.") + key;
          auto value = text(*value_node, path);
          if (!value) return std::unexpected(value.error());
          auto n = parse_decimal(*value, 0);
          if (!n || *n < least || *n > 10'000'000) {
            return error_at(*value_node, path, fmt::format("expected {}..10000000", least));
          }
          *target = *n;
        }
      }
    }
    if (auto node = f->get("store")) {
      auto store = read_store(*node, base_dir);
      if (!store) return std::unexpected(store.error());
      c.store = std::move(*store);
    }
    if (auto node = f->get("advertise_url")) {
      auto value = text(*node, "advertise_url");
      if (!value) return std::unexpected(value.error());
      if (!value->starts_with("http://") && !value->starts_with("https://")) {
        return error_at(*node, "advertise_url",
                        fmt::format("expected an http:// or https:// URL, got '{}'", *value));
      }
      c.advertise_url = *value;
    }
    if (auto node = f->get("prewarm")) {
      if (auto ok = read_prewarm(*node, base_dir, c); !ok) return std::unexpected(ok.error());
    }
    if (auto node = f->get("tls")) {
      auto tls = fields(*node, "tls", {"cert", "key"});
      if (!tls) return std::unexpected(tls.error());
      for (auto [key, target] : {std::pair{"cert", &c.tls_cert}, std::pair{"key", &c.tls_key}}) {
        if (auto value_node = tls->get(key)) {
          auto value = text(*value_node, std::string("tls.") + key);
          if (!value) return std::unexpected(value.error());
          *target = resolve(base_dir, *value);
        }
      }
    }
    return c;
  }

 private:
  Result<void> read_prewarm(const YAML::Node& node, const std::string& base_dir,
                            ServerConfig& c) const {
    auto f = fields(node, "prewarm", {"hook", "lead", "timeout"});
    if (!f) return std::unexpected(f.error());
    auto hook = required(*f, node, "prewarm", "hook");
    if (!hook) return std::unexpected(hook.error());
    auto path = text(*hook, "prewarm.hook");
    if (!path) return std::unexpected(path.error());
    c.prewarm_hook = resolve(base_dir, *path);
    // The hook is checked here, so that a server that cannot pre-warm does not start; it runs
    // as the server's user.
    std::error_code error;
    const auto status = std::filesystem::status(c.prewarm_hook, error);
    if (error || !std::filesystem::is_regular_file(status)) {
      return error_at(*hook, "prewarm.hook",
                      fmt::format("'{}' is not a file{}", c.prewarm_hook,
                                  error ? ": " + error.message() : std::string()));
    }
    if (::access(c.prewarm_hook.c_str(), X_OK) != 0) {
      return error_at(*hook, "prewarm.hook",
                      fmt::format("'{}' is not executable (chmod +x it)", c.prewarm_hook));
    }
    if (auto lead = f->get("lead")) {
      auto value = text(*lead, "prewarm.lead");
      if (!value) return std::unexpected(value.error());
      auto seconds = parse_duration(*value);
      if (!seconds || *seconds < 1 || *seconds > 86'400) {
        return error_at(*lead, "prewarm.lead", "expected a duration from 1s to 1d, e.g. 10m");
      }
      c.prewarm_lead = *seconds;
    }
    if (auto timeout = f->get("timeout")) {
      auto value = text(*timeout, "prewarm.timeout");
      if (!value) return std::unexpected(value.error());
      auto seconds = parse_duration(*value);
      if (!seconds || *seconds < 1 || *seconds > 3600) {
        return error_at(*timeout, "prewarm.timeout", "expected a duration from 1s to 1h, e.g. 5m");
      }
      c.prewarm_timeout = millis_from_seconds(*seconds);
    }
    return {};
  }

  Result<StoreConfig> read_store(const YAML::Node& node, const std::string& base_dir) const {
    StoreConfig store;
    auto f = fields(
        node, "store",
        {"kind", "endpoints", "prefix", "lease_ttl", "max_txn_ops", "max_request_bytes", "tls"});
    if (!f) return std::unexpected(f.error());
    if (auto kind = f->get("kind")) {
      auto value = text(*kind, "store.kind");
      if (!value) return std::unexpected(value.error());
      if (*value == "sqlite") {
        store.kind = StoreKind::kSqlite;
      } else if (*value == "etcd") {
        store.kind = StoreKind::kEtcd;
      } else {
        return error_at(*kind, "store.kind",
                        fmt::format("expected sqlite or etcd, got '{}'", *value));
      }
    }
    const bool etcd = store.kind == StoreKind::kEtcd;
    for (const char* key :
         {"endpoints", "prefix", "lease_ttl", "max_txn_ops", "max_request_bytes", "tls"}) {
      if (auto value = f->get(key); value && !etcd) {
        return error_at(*value, std::string("store.") + key, "only for kind: etcd");
      }
    }
    if (auto endpoints = f->get("endpoints")) {
      auto list = sequence(*endpoints, "store.endpoints");
      if (!list) return std::unexpected(list.error());
      if (list->size() < 1 || list->size() > 16) {
        return error_at(*endpoints, "store.endpoints", "expected 1..16 host:port entries");
      }
      store.endpoints.clear();
      for (std::size_t i = 0; i < list->size(); ++i) {
        const std::string path = fmt::format("store.endpoints[{}]", i);
        auto value = text((*list)[i], path);
        if (!value) return std::unexpected(value.error());
        ServerConfig probe;
        if (auto ok = parse_listen(*value, path, probe); !ok || probe.port == 0) {
          return error_at((*list)[i], path,
                          fmt::format("expected host:port of an etcd member, e.g. "
                                      "127.0.0.1:2379; got '{}'",
                                      *value));
        }
        store.endpoints.push_back(*value);
      }
    }
    if (auto prefix = f->get("prefix")) {
      auto value = text(*prefix, "store.prefix");
      if (!value) return std::unexpected(value.error());
      if (!value->starts_with('/') || value->size() < 2 || value->ends_with('/')) {
        return error_at(*prefix, "store.prefix",
                        fmt::format("expected a key prefix such as /tidepool (a leading /, no "
                                    "trailing /), got '{}'",
                                    *value));
      }
      store.prefix = *value;
    }
    if (auto ttl = f->get("lease_ttl")) {
      auto value = text(*ttl, "store.lease_ttl");
      if (!value) return std::unexpected(value.error());
      auto seconds = parse_duration(*value);
      if (!seconds || *seconds < 2 || *seconds > 60) {
        return error_at(
            *ttl, "store.lease_ttl",
            fmt::format("expected whole seconds from 2s to 60s, e.g. 3s; got '{}'", *value));
      }
      store.lease_ttl = millis_from_seconds(*seconds);
    }
    if (auto tls = f->get("tls")) {
      auto files = fields(*tls, "store.tls", {"ca", "cert", "key"});
      if (!files) return std::unexpected(files.error());
      for (auto [key, target] : {std::pair{"ca", &store.tls_ca}, std::pair{"cert", &store.tls_cert},
                                 std::pair{"key", &store.tls_key}}) {
        if (auto value_node = files->get(key)) {
          auto value = text(*value_node, std::string("store.tls.") + key);
          if (!value) return std::unexpected(value.error());
          *target = resolve(base_dir, *value);
        }
      }
      if (store.tls_ca.empty()) {
        return error_at(*tls, "store.tls.ca",
                        "required: the CA that signed the etcd members' certificates");
      }
      if (store.tls_cert.empty() != store.tls_key.empty()) {
        return error_at(*tls, store.tls_cert.empty() ? "store.tls.cert" : "store.tls.key",
                        "a client certificate and its key go together: give both or neither");
      }
    }
    for (auto [key, target, least, most] :
         {std::tuple{"max_txn_ops", &store.max_txn_ops, 16, 1'000'000},
          std::tuple{"max_request_bytes", &store.max_request_bytes, 64 * 1024, 1 << 30}}) {
      if (auto value_node = f->get(key)) {
        const std::string path = std::string("store.") + key;
        auto value = text(*value_node, path);
        if (!value) return std::unexpected(value.error());
        auto n = parse_decimal(*value, 0);
        if (!n || *n < least || *n > most) {
          return error_at(*value_node, path, fmt::format("expected {}..{}", least, most));
        }
        *target = *n;
      }
    }
    return store;
  }
};

}  // namespace

Result<void> parse_listen(std::string_view text, const std::string& field, ServerConfig& config) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return fail(field, fmt::format("expected host:port, e.g. 127.0.0.1:8470; got '{}'", text));
  }
  int port = -1;
  const std::string_view digits = text.substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port < 0 || port > 65535) {
    return fail(field, fmt::format("port '{}' is not a number from 0 to 65535", digits));
  }
  config.host = std::string(text.substr(0, colon));
  config.port = port;
  return {};
}

Result<ServerConfig> read_server_config(std::string_view text, const std::string& source,
                                        const std::string& base_dir) {
  return read_one_yaml_document(text, source, "server configuration",
                                [&](const YAML::Node& root) -> Result<ServerConfig> {
                                  return ConfigReader(source).read(root, base_dir);
                                });
}

Result<ServerConfig> load_server_config(const std::string& path) {
  auto text = read_file_text(path);
  if (!text) return std::unexpected(text.error());
  return read_server_config(*text, path, std::filesystem::path(path).parent_path().string());
}

}  // namespace tidepool
