// For tests only: the processes a test started, found by a marker in their environment, waiting
// for them, and what an agent wrote down of its tasks. Header only; used by the agent's unit tests
// and the end-to-end tests.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

namespace tidepool::test_support {

// Whether `condition` holds within `limit`, checked every 10 ms and once more at the end.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

// The bytes of the file at `path`; empty when it cannot be opened. A file of /proc whose process
// ends while it is read reads as what was read until then (std::ifstream throws there, whatever
// its exception mask, for the ESRCH of the read).
inline std::string read_text(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

// The pids (as the caller's PID namespace sees them) of live processes whose environment holds
// `marker`; zombies are left out (they have no environment left, and nothing to kill).
inline std::set<pid_t> processes_with(const std::string& marker) {
  std::set<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    const std::string dir = "/proc/" + std::to_string(pid);
    if (read_text(dir + "/status").find("\nState:\tZ") != std::string::npos) continue;
    if (read_text(dir + "/environ").find(marker) != std::string::npos) out.insert(pid);
  }
  ::closedir(proc);
  return out;
}

// Whether the agent whose --state-dir is `state_dir` has written down a task of `job` (its
// tasks.json lists it): from then on, an agent killed and started again takes the task back. A
// test that kills an agent under a task waits for this first; before it, the task is started but
// not yet written down.
inline bool state_lists_job(const std::string& state_dir, std::int64_t job) {
  const auto state = nlohmann::json::parse(read_text(state_dir + "/tasks.json"), nullptr, false);
  if (!state.is_object() || !state.contains("tasks") || !state["tasks"].is_array()) return false;
  for (const auto& task : state["tasks"]) {
    if (task.is_object() && task.value("job", std::int64_t{0}) == job) return true;
  }
  return false;
}

}  // namespace tidepool::test_support
