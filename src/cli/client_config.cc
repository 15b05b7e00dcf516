#include "cli/client_config.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "config/yaml_reader.h"

namespace tidepool {
namespace {

namespace fs = std::filesystem;

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// "~/x" -> home/x; a relative path -> against `base_dir`.
std::string resolve_path(const std::string& path, const std::string& base_dir,
                         const std::string& home) {
  if ((path == "~" || path.starts_with("~/")) && !home.empty()) {
    return (fs::path(home) / path.substr(path.size() > 1 ? 2 : 1)).lexically_normal().string();
  }
  if (fs::path(path).is_absolute() || base_dir.empty()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

class ClientConfigReader : private YamlReader {
 public:
  using YamlReader::YamlReader;

  Result<ClientConfigFile> read(const YAML::Node& root, const std::string& home) const {
    ClientConfigFile c;
    c.path = source();
    if (!root || root.IsNull()) return c;  // an empty file
    auto f = fields(root, "", {"server", "token", "token_file", "ca_cert"});
    if (!f) return std::unexpected(f.error());
    const std::string base_dir = fs::path(source()).parent_path().string();
    for (auto [key, target] :
         {std::pair{"server", &c.server}, std::pair{"token", &c.token},
          std::pair{"token_file", &c.token_file}, std::pair{"ca_cert", &c.ca_cert}}) {
      auto node = f->get(key);
      if (!node || node->IsNull()) continue;
      if (!node->IsScalar() || node->Scalar().empty()) {
        return error_at(*node, key, "expected a non-empty string, got " + yaml_node_kind(*node));
      }
      *target = node->Scalar();
    }
    if (c.token && c.token_file) {
      return error_at(*f->get("token_file"), "token_file", "give token or token_file, not both");
    }
    if (c.token_file) c.token_file = resolve_path(*c.token_file, base_dir, home);
    if (c.ca_cert) c.ca_cert = resolve_path(*c.ca_cert, base_dir, home);
    return c;
  }
};

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

Result<ClientConfigFile> parse_client_config(std::string_view text, const std::string& path,
                                             const std::string& home) {
  return read_one_yaml_document(text, path, "config file", [&](const YAML::Node& root) {
    return ClientConfigReader(path).read(root, home);
  });
}

std::string client_config_path(const EnvLookup& env) {
  if (auto named = env("TIDEPOOL_CONFIG")) return *named;
  if (auto xdg = env("XDG_CONFIG_HOME")) return (fs::path(*xdg) / "tidepool/config.yaml").string();
  if (auto home = env("HOME")) return (fs::path(*home) / ".config/tidepool/config.yaml").string();
  return "";
}

Result<std::optional<ClientConfigFile>> load_client_config(const EnvLookup& env) {
  const std::string path = client_config_path(env);
  if (path.empty()) return std::nullopt;
  const bool named = env("TIDEPOOL_CONFIG").has_value();
  std::error_code ec;
  if (!named && !fs::exists(path, ec)) return std::nullopt;
  auto text = read_file_text(path);
  if (!text) {
    return fail(named ? "$TIDEPOOL_CONFIG" : path,
                fmt::format("cannot read the config file {}", path));
  }
  auto file = parse_client_config(*text, path, env("HOME").value_or(""));
  if (!file) return std::unexpected(file.error());
  return std::optional<ClientConfigFile>(std::move(*file));
}

Result<ClientSettings> resolve_client_settings(
    const ClientSources& sources,
    const std::function<Result<std::string>(const std::string& path)>& read_token_file) {
  ClientSettings s;
  const ClientConfigFile* file = sources.file ? &*sources.file : nullptr;
  const auto file_key = [&](std::string_view key) { return fmt::format("{} {}", file->path, key); };

  std::optional<std::string> server;
  if (sources.flag_server) {
    server = sources.flag_server;
    s.server_source = "--server";
  } else if (sources.env_server) {
    server = sources.env_server;
    s.server_source = "$TIDEPOOL_SERVER";
  } else if (file && file->server) {
    server = file->server;
    s.server_source = file_key("server");
  } else {
    server = std::string(kDefaultServerUrl);
    s.server_source = "default";
  }
  auto servers = parse_server_list(*server, s.server_source);
  if (!servers) return std::unexpected(servers.error());
  s.server = join_server_list(*servers);

  if (sources.flag_token) {
    s.token = *sources.flag_token;
    s.token_source = "--token";
  } else if (sources.env_token) {
    s.token = *sources.env_token;
    s.token_source = "$TIDEPOOL_TOKEN";
  } else if (file && file->token) {
    s.token = *file->token;
    s.token_source = file_key("token");
  } else if (file && file->token_file) {
    auto text = read_token_file(*file->token_file);
    if (!text) {
      return fail(file_key("token_file"),
                  fmt::format("cannot read the token file {}", *file->token_file));
    }
    s.token = trim(*text);
    s.token_source = file_key("token_file");
    if (s.token.empty()) return fail(s.token_source, fmt::format("{} is empty", *file->token_file));
  }
  s.token = trim(s.token);
  if (s.token.find_first_of(" \t\r\n") != std::string::npos) {
    return fail(s.token_source, "a token is one word without spaces");
  }

  if (sources.env_ca_cert) {
    s.ca_cert = *sources.env_ca_cert;
  } else if (file && file->ca_cert) {
    s.ca_cert = *file->ca_cert;
  }
  return s;
}

Result<ClientSettings> load_client_settings(const std::optional<std::string>& flag_server,
                                            const std::optional<std::string>& flag_token,
                                            const EnvLookup& env) {
  ClientSources sources;
  sources.flag_server = flag_server;
  sources.flag_token = flag_token;
  sources.env_server = env("TIDEPOOL_SERVER");
  sources.env_token = env("TIDEPOOL_TOKEN");
  sources.env_ca_cert = env("TIDEPOOL_CA_CERT");
  auto file = load_client_config(env);
  if (!file) return std::unexpected(file.error());
  sources.file = std::move(*file);
  return resolve_client_settings(sources, read_file_text);
}

}  // namespace tidepool
