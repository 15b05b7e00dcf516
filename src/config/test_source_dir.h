// Where the source tree is, for tests that read its shipped data (header only; not part of the
// simulator library). The build sets TIDEPOOL_SOURCE_DIR for every test it registers.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "config/cluster_file.h"

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

// The cluster file data/clusters/<name>.yaml of the source tree; an empty spec, and a test
// failure, when it does not load.
inline ClusterSpec shipped_cluster(const std::string& name) {
  auto spec = load_cluster_yaml(test_source_dir() + "/data/clusters/" + name + ".yaml");
  EXPECT_TRUE(spec.has_value()) << spec.error().message();
  return spec.value_or(ClusterSpec{});
}

}  // namespace tidepool::test_support
