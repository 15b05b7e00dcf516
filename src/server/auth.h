// Access control: bearer tokens with a role. An admin may do everything; a user acts on the jobs
// of one tenant; an agent speaks for one node. A token is shown once, when it is created; the
// server keeps only the SHA-256 of its secret, so a copy of the database reveals no token.
#pragma once

#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/instant.h"
#include "store/store.h"

namespace tidepool {

enum class Role : std::uint8_t { kAdmin, kUser, kAgent };

std::string_view role_name(Role role);
Result<Role> parse_role(std::string_view name);

// Who is asking: the token's id, role and scope.
struct Principal {
  std::string token_id;
  Role role = Role::kUser;
  std::string tenant;  // users
  std::string node;    // agents
};

// Lower-case hex SHA-256 of `text`.
std::string sha256_hex(std::string_view text);

// A new token: its record (to store) and its secret ("tp_" and 64 hex digits, from the system's
// cryptographic random source), which is given to the user once and never stored.
struct NewToken {
  TokenRecord record;
  std::string secret;
};
NewToken make_token(Role role, std::string tenant, std::string node, std::string description,
                    Instant now);

// The tokens the server knows, looked up by secret. Safe to use from several threads.
class TokenTable {
 public:
  void put(const TokenRecord& record);
  // Forgets every token, then puts these (the server reloading its state).
  void replace_all(const std::vector<TokenRecord>& records);
  // The principal of an active token with this secret; nullopt for unknown or revoked ones.
  [[nodiscard]] std::optional<Principal> authenticate(std::string_view secret) const;
  [[nodiscard]] std::optional<TokenRecord> find(const std::string& id) const;
  [[nodiscard]] std::vector<TokenRecord> all() const;  // by id
  [[nodiscard]] bool has_active_admin() const;

 private:
  // Guards both maps: HTTP threads check tokens (shared), the loop thread replaces them (unique).
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, TokenRecord> by_hash_;
  std::unordered_map<std::string, std::string> hash_by_id_;
};

// The secret of an "Authorization: Bearer <secret>" header value (the scheme in any case);
// empty if it is not one, or if the value holds a control byte (NUL, CR, LF, DEL).
std::string_view bearer_secret(std::string_view header);

}  // namespace tidepool
