// tidepool token create, list, revoke (admin).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

#include "cli/client_commands.h"
#include "cli/client_session.h"
#include "cli/client_views.h"

namespace tidepool {
namespace {

struct CreateFlags {
  ClientFlags client;
  std::string role = "user";
  std::string tenant;
  std::string node;
  std::string description;
  std::string secret_file;  // empty: print the secret
};

// Writes `secret` (and a newline) to a new file at `path`, mode 0600; an existing file is left
// alone (a secret is never written over another).
Result<void> write_secret_file(const std::string& path, const std::string& secret) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return fail("--secret-file", fmt::format("cannot create '{}' (a new file, mode 0600): {}", path,
                                             std::strerror(errno)));
  }
  const std::string line = secret + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) return fail("--secret-file", fmt::format("cannot write '{}'", path));
  return {};
}

Result<void> create_token(const CreateFlags& flags) {
  if (flags.role == "user" && flags.tenant.empty()) {
    return fail("--tenant", "a user token acts for one tenant: give --tenant NAME");
  }
  if (flags.role == "agent" && flags.node.empty()) {
    return fail("--node", "an agent token speaks for one node: give --node NAME");
  }
  if (flags.role != "user" && !flags.tenant.empty()) {
    return fail("--tenant", "only user tokens have a tenant");
  }
  if (flags.role != "agent" && !flags.node.empty()) {
    return fail("--node", "only agent tokens (--role agent) have a node");
  }
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  nlohmann::json body = {{"role", flags.role}};
  if (!flags.tenant.empty()) body["tenant"] = flags.tenant;
  if (!flags.node.empty()) body["node"] = flags.node;
  if (!flags.description.empty()) body["description"] = flags.description;
  auto token = client->post("/v1/tokens", body);
  if (!token) return std::unexpected(token.error());
  if (!flags.secret_file.empty()) {
    if (auto written = write_secret_file(flags.secret_file, token->value("secret", "")); !written) {
      // The token exists but its secret is lost: revoke it rather than leave it behind.
      (void)client->del("/v1/tokens/" + url_escape(token->value("id", "")));
      return std::unexpected(written.error());
    }
    token->erase("secret");
  }
  const OutputFormat format = output_format(flags.client);
  if (is_document(format)) {
    write_document(*token, format, std::cout);
    return {};
  }
  std::string scope;
  if (!flags.tenant.empty()) scope = ", tenant " + flags.tenant;
  if (!flags.node.empty()) scope = ", node " + flags.node;
  if (!flags.secret_file.empty()) {
    fmt::print("Created token {} (role {}{}); its secret is in {} (mode 0600).\n",
               token->value("id", ""), flags.role, scope, flags.secret_file);
  } else {
    fmt::print("Created token {} (role {}{}). Its secret, shown only this once:\n\n  {}\n\n",
               token->value("id", ""), flags.role, scope, token->value("secret", ""));
    fmt::print("Keep it safe: the server stores only its hash. ");
  }
  if (flags.role == "agent") {
    fmt::print(
        "Give it to the agent of node {} in a file only it can read: tidepool agent "
        "--node {} --token-file FILE.\n",
        flags.node, flags.node);
  } else {
    fmt::print(
        "Give it to its holder privately; they can put it in a file named by token_file: "
        "in ~/.config/tidepool/config.yaml or in $TIDEPOOL_TOKEN.\n");
  }
  return {};
}

struct TokenFlags {
  ClientFlags client;
  std::string id;
};

Result<void> list_tokens(const ClientFlags& flags) {
  auto client = open_client(flags);
  if (!client) return std::unexpected(client.error());
  auto reply = client->get("/v1/tokens");
  if (!reply) return std::unexpected(reply.error());
  const OutputFormat format = output_format(flags);
  if (is_document(format)) {
    write_document(*reply, format, std::cout);
  } else {
    std::cout << render_listing(tokens_listing(reply->at("tokens")), format, !flags.no_headers);
  }
  return {};
}

Result<void> revoke_token(const TokenFlags& flags) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  auto token = client->del("/v1/tokens/" + url_escape(flags.id));
  if (!token) return std::unexpected(token.error());
  if (const OutputFormat format = output_format(flags.client); is_document(format)) {
    write_document(*token, format, std::cout);
    return {};
  }
  fmt::print("Revoked token {}; requests with it are refused from now on.\n",
             token->value("id", flags.id));
  return {};
}

}  // namespace

void add_token_commands(CLI::App& app, int* exit_code) {
  CLI::App* token = app.add_subcommand("token", "(admin) Create, list and revoke API tokens");
  token->require_subcommand(1);
  {
    auto flags = std::make_shared<CreateFlags>();
    CLI::App* cmd = token->add_subcommand("create", "Create a token and print its secret once");
    cmd->add_option("--role", flags->role,
                    "user (acts on one tenant's jobs), agent (speaks for one node) or admin")
        ->check(CLI::IsMember({"user", "agent", "admin"}))
        ->capture_default_str();
    cmd->add_option("--tenant", flags->tenant, "The tenant of a user token");
    cmd->add_option("--node", flags->node, "The node of an agent token");
    cmd->add_option("--description", flags->description, "A note: whose it is, what for");
    cmd->add_option("--secret-file", flags->secret_file,
                    "Write the secret to this new file (mode 0600) instead of printing it, e.g. "
                    "for an agent's --token-file");
    add_client_flags(*cmd, flags->client, kDocumentFormats);
    cmd->footer(
        "Examples:\n"
        "  tidepool token create --role user --tenant vision --description \"alice's laptop\"\n"
        "  tidepool token create --role agent --node h100-a-01 --secret-file agent.token\n"
        "  tidepool token create --role admin -o json\n\n" +
        connection_help());
    cmd->callback([flags, exit_code] {
      run_client_command(exit_code, [&] { return create_token(*flags); });
    });
  }
  {
    auto flags = std::make_shared<ClientFlags>();
    CLI::App* cmd = token->add_subcommand("list", "List tokens (never their secrets)");
    add_client_flags(*cmd, *flags, kListingFormats);
    cmd->footer("Example:\n  tidepool token list\n\n" + connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return list_tokens(*flags); }); });
  }
  {
    auto flags = std::make_shared<TokenFlags>();
    CLI::App* cmd = token->add_subcommand("revoke", "Revoke a token: it is refused from now on");
    cmd->add_option("ID", flags->id, "Token id, as `tidepool token list` shows it")->required();
    add_client_flags(*cmd, flags->client, kDocumentFormats);
    cmd->footer("Example:\n  tidepool token revoke 3fa9c2b1d0e4\n\n" + connection_help());
    cmd->callback([flags, exit_code] {
      run_client_command(exit_code, [&] { return revoke_token(*flags); });
    });
  }
}

}  // namespace tidepool
