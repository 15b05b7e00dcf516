// Expected failures as values. Bad input, conflicts and I/O problems are returned, never thrown:
// callers decide what to show. Assertions are kept for programmer bugs only.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace tidepool {

// What went wrong and where. `field` names the input that was wrong (a CSV column with its line, a
// YAML key, a command-line flag); `reason` says why, in words a user can act on.
struct Error {
  std::string field;
  std::string reason;

  [[nodiscard]] std::string message() const {
    return field.empty() ? reason : field + ": " + reason;
  }
};

template <class T>
using Result = std::expected<T, Error>;

[[nodiscard]] inline std::unexpected<Error> fail(std::string field, std::string reason) {
  return std::unexpected(Error{std::move(field), std::move(reason)});
}

}  // namespace tidepool
