#include "server/auth.h"

#include <fmt/format.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <span>
#include <utility>

namespace tidepool {
namespace {

std::string hex(std::span<const unsigned char> bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (RAND_bytes(buffer.data(), static_cast<int>(buffer.size())) != 1) {
    // The system's random source failing is not an input error: nothing safe can continue.
    std::abort();
  }
  return hex(buffer);
}

}  // namespace

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kUser:
      return "user";
    case Role::kAgent:
      return "agent";
  }
  return "user";
}

Result<Role> parse_role(std::string_view name) {
  for (Role r : {Role::kAdmin, Role::kUser, Role::kAgent}) {
    if (role_name(r) == name) return r;
  }
  return fail("role", fmt::format("unknown role '{}'; roles: admin, user, agent", name));
}

std::string sha256_hex(std::string_view text) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return hex(digest);
}

NewToken make_token(Role role, std::string tenant, std::string node, std::string description,
                    Instant now) {
  NewToken t;
  t.secret = "tp_" + random_hex(32);
  t.record.id = random_hex(6);
  t.record.hash = sha256_hex(t.secret);
  t.record.role = std::string(role_name(role));
  t.record.tenant = std::move(tenant);
  t.record.node = std::move(node);
  t.record.description = std::move(description);
  t.record.created_ms = unix_ms(now);
  return t;
}

void TokenTable::put(const TokenRecord& record) {
  std::unique_lock lock(mutex_);
  if (auto old = hash_by_id_.find(record.id); old != hash_by_id_.end()) by_hash_.erase(old->second);
  hash_by_id_[record.id] = record.hash;
  by_hash_[record.hash] = record;
}

void TokenTable::replace_all(const std::vector<TokenRecord>& records) {
  std::unique_lock lock(mutex_);
  by_hash_.clear();
  hash_by_id_.clear();
  for (const TokenRecord& record : records) {
    hash_by_id_[record.id] = record.hash;
    by_hash_[record.hash] = record;
  }
}

std::optional<Principal> TokenTable::authenticate(std::string_view secret) const {
  if (secret.empty()) return std::nullopt;
  const std::string hash = sha256_hex(secret);
  std::shared_lock lock(mutex_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || it->second.revoked) return std::nullopt;
  auto role = parse_role(it->second.role);
  if (!role) return std::nullopt;
  return Principal{it->second.id, *role, it->second.tenant, it->second.node};
}

std::optional<TokenRecord> TokenTable::find(const std::string& id) const {
  std::shared_lock lock(mutex_);
  auto it = hash_by_id_.find(id);
  if (it == hash_by_id_.end()) return std::nullopt;
  return by_hash_.at(it->second);
}

std::vector<TokenRecord> TokenTable::all() const {
  std::shared_lock lock(mutex_);
  std::vector<TokenRecord> out;
  out.reserve(by_hash_.size());
  for (const auto& [hash, record] : by_hash_) out.push_back(record);
  std::ranges::sort(out, {}, &TokenRecord::id);
  return out;
}

bool TokenTable::has_active_admin() const {
  std::shared_lock lock(mutex_);
  return std::ranges::any_of(by_hash_, [](const auto& entry) {
    return !entry.second.revoked && entry.second.role == "admin";
  });
}

std::string_view bearer_secret(std::string_view header) {
  // RFC 7235: the scheme is case-insensitive. A control byte anywhere (a NUL that would cut the
  // value short, a CR or LF) refuses the whole header.
  constexpr std::string_view kScheme = "bearer";
  if (std::ranges::any_of(header, [](char c) {
        const auto b = static_cast<unsigned char>(c);
        return (b < 0x20 && b != '\t') || b == 0x7f;
      })) {
    return {};
  }
  if (header.size() <= kScheme.size() + 1) return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return {};
  }
  if (header[kScheme.size()] != ' ') return {};
  std::string_view secret = header.substr(kScheme.size() + 1);
  while (!secret.empty() && (secret.front() == ' ' || secret.front() == '\t')) {
    secret.remove_prefix(1);
  }
  while (!secret.empty() && (secret.back() == ' ' || secret.back() == '\t')) {
    secret.remove_suffix(1);
  }
  return secret;
}

}  // namespace tidepool
