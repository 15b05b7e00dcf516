// For tests only: the processes a test started, found by a marker in their environment. Header
// only; used by the agent's unit tests and the end-to-end tests.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

namespace tidepool::test_support {

// The pids (as the caller's PID namespace sees them) of live processes whose environment holds
// `marker`; zombies are left out (they have no environment left, and nothing to kill).
inline std::set<pid_t> processes_with(const std::string& marker) {
  const auto text_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  std::set<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    const std::string dir = "/proc/" + std::to_string(pid);
    if (text_of(dir + "/status").find("\nState:\tZ") != std::string::npos) continue;
    if (text_of(dir + "/environ").find(marker) != std::string::npos) out.insert(pid);
  }
  ::closedir(proc);
  return out;
}

}  // namespace tidepool::test_support
