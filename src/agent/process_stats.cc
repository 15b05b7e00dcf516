#include "agent/process_stats.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace tidepool {
namespace {

// The fields of /proc/PID/stat after the command name (which may hold spaces and parentheses):
// fields[0] is field 3 (state).
std::vector<std::string> stat_fields(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buffer[1024];
  const ssize_t n = ::read(fd, buffer, sizeof buffer - 1);
  ::close(fd);
  if (n <= 0) return {};
  const std::string text(buffer, static_cast<std::size_t>(n));
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::vector<std::string> fields;
  std::size_t at = close + 2;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    fields.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return fields;
}

std::uint64_t field(const std::vector<std::string>& fields, int number) {
  const std::size_t i = static_cast<std::size_t>(number - 3);
  return i < fields.size() ? std::strtoull(fields[i].c_str(), nullptr, 10) : 0;
}

}  // namespace

std::uint64_t process_start_ticks(pid_t pid) {
  if (pid <= 0) return 0;
  return field(stat_fields(pid), 22);
}

GroupUsage group_usage(pid_t group, std::int64_t now_ms) {
  GroupUsage usage;
  usage.at_ms = now_ms;
  if (group <= 0) return usage;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return usage;
  const long page_kib = ::sysconf(_SC_PAGE_SIZE) / 1024;
  std::uint64_t rss_pages = 0;
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid <= 0) continue;
    const auto fields = stat_fields(static_cast<pid_t>(pid));
    if (fields.empty() || static_cast<pid_t>(field(fields, 5)) != group) continue;
    usage.cpu_ticks += field(fields, 14) + field(fields, 15);
    rss_pages += field(fields, 24);
  }
  ::closedir(proc);
  usage.rss_mib = static_cast<std::int64_t>(rss_pages) * std::max(1L, page_kib) / 1024;
  return usage;
}

int busy_percent(const GroupUsage& before, const GroupUsage& after) {
  const std::int64_t wall_ms = after.at_ms - before.at_ms;
  if (wall_ms <= 0 || after.cpu_ticks < before.cpu_ticks) return 0;
  const long hz = ::sysconf(_SC_CLK_TCK);
  const std::int64_t cpu_ms =
      static_cast<std::int64_t>(after.cpu_ticks - before.cpu_ticks) * 1000 / std::max(1L, hz);
  return static_cast<int>(std::clamp<std::int64_t>(cpu_ms * 100 / wall_ms, 0, 100));
}

}  // namespace tidepool
