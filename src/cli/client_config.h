// Where the user commands (`tidepool submit`, `jobs`, `nodes`, ...) find the server and which
// token they present. Each setting is taken from the first source that gives it:
//
//   server:  --server URL  >  $TIDEPOOL_SERVER  >  config file `server:`  >  http://127.0.0.1:8470
//   token:   --token T     >  $TIDEPOOL_TOKEN   >  config file `token:` or `token_file:`  >  none
//   CA:      $TIDEPOOL_CA_CERT  >  config file `ca_cert:`  >  the system's CAs (HTTPS only)
//
// The config file is $TIDEPOOL_CONFIG if set, else $XDG_CONFIG_HOME/tidepool/config.yaml, else
// ~/.config/tidepool/config.yaml; a missing file is no error (unless named by $TIDEPOOL_CONFIG).
//
//   server: https://tidepool.example.com:8470
//   token_file: ~/.config/tidepool/token     # or token: tp_...; relative paths: to this file
//   ca_cert: /etc/tidepool/ca.pem            # optional: the CA that signed the server's cert
//
// Unknown keys are errors. A server URL is http:// or https:// with a host and an optional port;
// a bare "host:port" means http://host:port. The servers of a highly available Tidepool are given
// as one comma-separated list wherever one URL may be (server_list.h):
//
//   server: https://tp1.example.com:8470, https://tp2.example.com:8470,
//   https://tp3.example.com:8470
// The resolution itself (resolve_client_settings) reads
// nothing: the loading functions gather the sources, so precedence is testable without files.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "api/server_list.h"
#include "core/error.h"

namespace tidepool {

inline constexpr std::string_view kDefaultServerUrl = "http://127.0.0.1:8470";

// The keys of a config file, as written (token_file and ca_cert resolved against its folder and
// "~/" expanded; the token file is not read yet).
struct ClientConfigFile {
  std::string path;  // where it was read from
  std::optional<std::string> server;
  std::optional<std::string> token;
  std::optional<std::string> token_file;
  std::optional<std::string> ca_cert;
};

// Every place a setting may come from; empty optionals are sources that gave nothing.
struct ClientSources {
  std::optional<std::string> flag_server;  // --server
  std::optional<std::string> flag_token;   // --token
  std::optional<std::string> env_server;   // $TIDEPOOL_SERVER
  std::optional<std::string> env_token;    // $TIDEPOOL_TOKEN
  std::optional<std::string> env_ca_cert;  // $TIDEPOOL_CA_CERT
  std::optional<ClientConfigFile> file;
};

// Where each resolved setting came from, for error messages ("--server", "$TIDEPOOL_TOKEN",
// "/home/a/.config/tidepool/config.yaml token_file", "default").
struct ClientSettings {
  // Normalized: scheme://host[:port] without a trailing slash, several joined by ',' (in the order
  // given, without duplicates; join_server_list).
  std::string server;
  std::string server_source;
  std::string token;  // empty: none
  std::string token_source;
  std::string ca_cert;  // empty: the system's CAs
};

// Reads a value of the environment; nullopt if unset. Empty values count as unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// The process environment.
EnvLookup process_environment();

// Parses the text of a config file read from `path` (for messages and relative paths); `home` is
// used to expand "~/". Errors name "path:line:column key".
Result<ClientConfigFile> parse_client_config(std::string_view text, const std::string& path,
                                             const std::string& home);

// The config file's path as the file comment says; empty when neither $TIDEPOOL_CONFIG,
// $XDG_CONFIG_HOME nor $HOME is set.
std::string client_config_path(const EnvLookup& env);

// Loads the config file at client_config_path(env): nullopt when it does not exist and was not
// named by $TIDEPOOL_CONFIG.
Result<std::optional<ClientConfigFile>> load_client_config(const EnvLookup& env);

// Picks each setting from the first source that gives it (see the file comment). A config file's
// token_file is read with `read_token_file` (its whole text, surrounding white space trimmed);
// giving both token and token_file in one file is an error.
Result<ClientSettings> resolve_client_settings(
    const ClientSources& sources,
    const std::function<Result<std::string>(const std::string& path)>& read_token_file);

// Gathers the sources from the flags, `env` and the config file, and resolves them, reading token
// files from disk.
Result<ClientSettings> load_client_settings(const std::optional<std::string>& flag_server,
                                            const std::optional<std::string>& flag_token,
                                            const EnvLookup& env);

}  // namespace tidepool
