// Where the source tree is, for tests that read its shipped data (header only; not part of the
// simulator library). The build sets TIDEPOOL_SOURCE_DIR for every test it registers.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace tidepool::test_support {

// The source tree; nullopt when TIDEPOOL_SOURCE_DIR is not set (tests then skip).
inline std::optional<std::filesystem::path> test_source_root() {
  const char* dir = std::getenv("TIDEPOOL_SOURCE_DIR");
  if (dir == nullptr) return std::nullopt;
  return std::filesystem::path(dir);
}

// The source tree as a string; "." (a test run from the source tree) when the variable is unset.
inline std::string test_source_dir() {
  const auto root = test_source_root();
  return root ? root->string() : ".";
}

}  // namespace tidepool::test_support
