#include "agent/cgroup_limits.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/magic.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/system_reason.h"
#include "core/resources.h"

namespace tidepool {
namespace {

constexpr std::string_view kMount = "/sys/fs/cgroup";
constexpr std::int64_t kPeriodUs = 100'000;  // the cpu.max period, the kernel's default
constexpr std::int64_t kLeastQuotaUs = 1'000;
constexpr std::string_view kDelegateHint =
    "run the agent with a delegated cgroup (systemd Delegate=yes) or --cgroups none";

// The membership and kill only mode at `root`, which exists and has cgroup.kill.
CgroupSetup kill_only(const std::string& root, std::string_view why) {
  return CgroupSetup{
      .usable = true,
      .limits = false,
      .root = root,
      .warning = fmt::format("{}; tasks get a cgroup each under {} and are killed with it, but "
                             "their CPU and memory limits are not enforced; delegate the cpu and "
                             "memory controllers to the agent to enforce them",
                             why, root)};
}

CgroupSetup unusable(std::string_view why, std::string_view what_to_do) {
  return CgroupSetup{
      .usable = false,
      .limits = false,
      .root = {},
      .warning = fmt::format("{}; tasks run without CPU and memory limits; {}", why, what_to_do)};
}

Result<std::string> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("", fmt::format("cannot read {}: {}", path, system_reason(errno)));
  std::string text;
  std::array<char, 4096> buffer{};
  ssize_t got = 0;
  while ((got = ::read(fd, buffer.data(), buffer.size())) != 0) {
    if (got > 0) {
      text.append(buffer.data(), static_cast<std::size_t>(got));
    } else if (errno != EINTR) {
      const int error = errno;
      ::close(fd);
      return fail("", fmt::format("cannot read {}: {}", path, system_reason(error)));
    }
  }
  ::close(fd);
  return text;
}

// Replaces the file's content with `text`, as `echo text > path` does. Without O_CREAT: a control
// file that is missing means the controller is not there, which creating a file would hide.
Result<void> write_file(const std::string& path, std::string_view text) {
  int error = 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    error = errno;
  } else {
    // A cgroup file takes its value in one write; the kernel's refusal comes back from it.
    ssize_t wrote = 0;
    do {
      wrote = ::write(fd, text.data(), text.size());
    } while (wrote < 0 && errno == EINTR);
    if (wrote < 0) {
      error = errno;
    } else if (static_cast<std::size_t>(wrote) != text.size()) {
      error = EIO;
    }
    if (::close(fd) != 0 && error == 0) error = errno;
  }
  if (error != 0) {
    return fail("", fmt::format("cannot write \"{}\" to {}: {}", text, path, system_reason(error)));
  }
  return {};
}

// mkdir that accepts a directory that is there already. True when this call made it.
Result<bool> make_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) return true;
  const int error = errno;
  struct stat info {};
  if (error == EEXIST && ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return false;
  return fail("", fmt::format("cannot make the directory {}: {}", path, system_reason(error)));
}

// The words of a space-separated list such as cgroup.controllers ("cpuset cpu io memory pids").
std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> found;
  while (true) {
    const auto start = text.find_first_not_of(" \t\n");
    if (start == std::string_view::npos) return found;
    text.remove_prefix(start);
    const auto end = text.find_first_of(" \t\n");
    found.push_back(text.substr(0, end));
    if (end == std::string_view::npos) return found;
    text.remove_prefix(end);
  }
}

bool lists_cpu_and_memory(std::string_view controllers) {
  bool cpu = false;
  bool memory = false;
  for (const auto word : words(controllers)) {
    cpu = cpu || word == "cpu";
    memory = memory || word == "memory";
  }
  return cpu && memory;
}

// The pids in a cgroup.procs text, one a line.
std::vector<pid_t> parse_pids(std::string_view text) {
  std::vector<pid_t> pids;
  for (const auto word : words(text)) {
    pid_t pid = 0;
    const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), pid);
    if (error == std::errc() && end == word.data() + word.size() && pid > 0) pids.push_back(pid);
  }
  return pids;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Checks that `dir` is a cgroup whose parent passed it the cpu and memory controllers.
// `is_cgroup`, when given, is set to whether `dir` is a cgroup v2 directory at all.
Result<void> check_offers_controllers(const std::string& dir, bool* is_cgroup = nullptr) {
  auto offered = read_file(dir + "/cgroup.controllers");
  if (is_cgroup != nullptr) *is_cgroup = offered.has_value();
  if (!offered) {
    return fail(
        "", fmt::format("{} is not a cgroup v2 directory ({})", dir, offered.error().message()));
  }
  if (!lists_cpu_and_memory(*offered)) {
    const auto listed = words(*offered);
    return fail("", fmt::format("the cgroup {} is not given the cpu and memory controllers (its "
                                "cgroup.controllers lists \"{}\")",
                                dir, fmt::join(listed, " ")));
  }
  return {};
}

// Enables the cpu and memory controllers for the children of `dir`. Where the agent may not change
// cgroup.subtree_control but whoever set `dir` up enabled them already, that is as good.
Result<void> enable_controllers(const std::string& dir) {
  const std::string control = dir + "/cgroup.subtree_control";
  auto written = write_file(control, "+cpu +memory");
  if (written) return {};
  if (auto enabled = read_file(control); enabled && lists_cpu_and_memory(*enabled)) return {};
  return written;
}

// The cgroup v2 path in /proc/self/cgroup's text: the "0::/path" line (the others are v1's).
std::optional<std::string_view> unified_path(std::string_view proc_self_cgroup) {
  while (!proc_self_cgroup.empty()) {
    const auto end = proc_self_cgroup.find('\n');
    const std::string_view line = proc_self_cgroup.substr(0, end);
    if (line.starts_with("0::/")) return line.substr(3);
    if (end == std::string_view::npos) break;
    proc_self_cgroup.remove_prefix(end + 1);
  }
  return std::nullopt;
}

CgroupSetup probe_own_cgroup(const std::string& mount_dir, std::string_view proc_self_cgroup) {
  const auto path = unified_path(proc_self_cgroup);
  if (!path) {
    return unusable("/proc/self/cgroup names no cgroup v2 group (no \"0::/...\" line)",
                    kDelegateHint);
  }
  const std::string own = *path == "/" ? mount_dir : mount_dir + std::string(*path);
  bool is_cgroup = false;
  if (auto offered = check_offers_controllers(own, &is_cgroup); !offered) {
    if (!is_cgroup) return unusable(offered.error().message(), kDelegateHint);
    // Membership and kill only, in a group of the agent's own cgroup; the agent stays where it is
    // (without controllers to enable, the "no internal processes" rule does not apply).
    const std::string root = own + "/tidepool-tasks";
    if (auto made = make_directory(root); !made) {
      return unusable(offered.error().message() + "; " + made.error().message(), kDelegateHint);
    }
    if (!exists(root + "/cgroup.kill")) {
      return unusable(fmt::format("{}; and {} has no cgroup.kill (Linux 5.14 or later)",
                                  offered.error().message(), root),
                      kDelegateHint);
    }
    return kill_only(root, offered.error().message());
  }
  // The "no internal processes" rule: a group with processes in it cannot enable controllers for
  // its children, so the agent leaves its group for a leaf of its own first.
  auto procs = read_file(own + "/cgroup.procs");
  if (!procs) return unusable(procs.error().message(), kDelegateHint);
  if (!parse_pids(*procs).empty()) {
    const std::string leaf = own + "/agent";
    if (auto made = make_directory(leaf); !made) {
      return unusable(made.error().message(), kDelegateHint);
    }
    if (auto moved = write_file(leaf + "/cgroup.procs", std::to_string(::getpid())); !moved) {
      return unusable(moved.error().message(), kDelegateHint);
    }
  }
  const std::string root = own + "/tasks";
  if (auto enabled = enable_controllers(own); !enabled) {
    return unusable(enabled.error().message(), kDelegateHint);
  }
  if (auto made = make_directory(root); !made) {
    return unusable(made.error().message(), kDelegateHint);
  }
  if (auto enabled = enable_controllers(root); !enabled) {
    return unusable(enabled.error().message(), kDelegateHint);
  }
  return CgroupSetup{.usable = true, .limits = true, .root = root, .warning = {}};
}

CgroupSetup probe_given_root(const std::string& root) {
  constexpr std::string_view kGiveAnother =
      "give --cgroup-root a cgroup v2 directory the agent may write, or none";
  struct stat info {};
  if (::stat(root.c_str(), &info) != 0) {
    return unusable(fmt::format("cgroup root {}: {}", root, system_reason(errno)), kGiveAnother);
  }
  if (!S_ISDIR(info.st_mode)) {
    return unusable(fmt::format("cgroup root {}: is not a directory", root), kGiveAnother);
  }
  if (::access(root.c_str(), W_OK) != 0) {
    return unusable(fmt::format("cannot write in {}: {}", root, system_reason(errno)),
                    kGiveAnother);
  }
  bool is_cgroup = false;
  if (auto offered = check_offers_controllers(root, &is_cgroup); !offered) {
    if (is_cgroup && exists(root + "/cgroup.kill"))
      return kill_only(root, offered.error().message());
    return unusable(offered.error().message(), kGiveAnother);
  }
  if (auto enabled = enable_controllers(root); !enabled) {
    return unusable(enabled.error().message(), kGiveAnother);
  }
  return CgroupSetup{.usable = true, .limits = true, .root = root, .warning = {}};
}

// A limit in a unit, as the kernel takes it: "max" for 0 (no limit).
std::string limit_text(std::int64_t value) { return value == 0 ? "max" : std::to_string(value); }

}  // namespace

CgroupSetup probe_cgroups_at(const std::string& mount_dir, std::string_view proc_self_cgroup,
                             std::string_view requested) {
  if (requested == "none") return CgroupSetup{};
  if (requested == "auto") return probe_own_cgroup(mount_dir, proc_self_cgroup);
  return probe_given_root(std::string(requested));
}

std::string find_cgroup2_mount(std::string_view mountinfo, std::string* mount_root) {
  // A line: "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER".
  std::string found;
  std::string found_root;
  while (!mountinfo.empty()) {
    const auto end = mountinfo.find('\n');
    const std::string_view line = mountinfo.substr(0, end);
    const auto fields = words(line);
    const auto dash = std::ranges::find(fields, std::string_view("-"));
    if (fields.size() >= 5 && dash != fields.end() && dash + 1 != fields.end() &&
        *(dash + 1) == "cgroup2") {
      const std::string point(fields[4]);
      if (found.empty() || point == kMount) {
        found = point;
        found_root = std::string(fields[3]);
      }
    }
    if (end == std::string_view::npos) break;
    mountinfo.remove_prefix(end + 1);
  }
  if (mount_root != nullptr) *mount_root = found_root;
  return found;
}

CgroupSetup probe_cgroups(std::string_view requested) {
  if (requested != "auto") return probe_cgroups_at(std::string(kMount), {}, requested);
  std::string mount_dir(kMount);
  std::string mount_root = "/";
  struct statfs mounted {};
  if (::statfs(mount_dir.c_str(), &mounted) != 0 || mounted.f_type != CGROUP2_SUPER_MAGIC) {
    auto mountinfo = read_file("/proc/self/mountinfo");
    mount_dir = mountinfo ? find_cgroup2_mount(*mountinfo, &mount_root) : std::string();
    if (mount_dir.empty()) {
      return unusable(
          fmt::format("no cgroup v2 file system is mounted (not at {}, nor elsewhere in "
                      "/proc/self/mountinfo)",
                      kMount),
          "boot with systemd.unified_cgroup_hierarchy=1 or pass --cgroups none");
    }
  }
  auto own = read_file("/proc/self/cgroup");
  if (!own) return unusable(own.error().message(), kDelegateHint);
  // /proc/self/cgroup names the group from the hierarchy's root; the mount may show a part of it.
  std::string text = *own;
  if (const auto path = unified_path(*own);
      path && mount_root.size() > 1 && path->starts_with(mount_root)) {
    const std::string_view below = path->substr(mount_root.size());
    text = "0::" + (below.empty() ? std::string("/") : std::string(below)) + "\n";
  }
  return probe_cgroups_at(mount_dir, text, requested);
}

Result<TaskCgroup> TaskCgroup::create(const std::string& root, const std::string& name,
                                      std::int64_t cpu_milli, std::int64_t memory_mib,
                                      bool limits) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return fail("name", fmt::format("\"{}\" is not a cgroup name (empty, \".\", \"..\" or holding "
                                    "'/')",
                                    name));
  }
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  if (cpu_milli < 0 || cpu_milli > kMax / 100) {
    return fail("cpu_milli", fmt::format("{} is not a CPU limit in millicores", cpu_milli));
  }
  if (memory_mib < 0 || memory_mib > kMax / kBytesPerMib) {
    return fail("memory_mib", fmt::format("{} is not a memory limit in MiB", memory_mib));
  }
  const std::string path = root + "/" + name;
  auto made = make_directory(path);
  if (!made) return std::unexpected(made.error());
  // Owned from here, so that a failure below removes what this call made.
  TaskCgroup group(path, *made);
  if (!limits) {
    group.owned_ = true;
    return group;
  }
  const std::string cpu =
      cpu_milli == 0 ? "max"
                     : fmt::format("{} {}", std::max(cpu_milli * 100, kLeastQuotaUs), kPeriodUs);
  Result<void> written = write_file(path + "/cpu.max", cpu);
  if (written) written = write_file(path + "/memory.max", limit_text(memory_mib * kBytesPerMib));
  if (!written) return std::unexpected(written.error());
  group.owned_ = true;
  return group;
}

TaskCgroup::TaskCgroup(TaskCgroup&& other) noexcept
    : path_(std::exchange(other.path_, {})), owned_(std::exchange(other.owned_, false)) {}

TaskCgroup& TaskCgroup::operator=(TaskCgroup&& other) noexcept {
  if (this != &other) {
    if (owned_) (void)remove();
    path_ = std::exchange(other.path_, {});
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

TaskCgroup::~TaskCgroup() {
  if (owned_) (void)remove();
}

Result<void> TaskCgroup::add_process(int pid) {
  return write_file(path_ + "/cgroup.procs", std::to_string(pid));
}

Result<void> TaskCgroup::kill_all() {
  const std::string kill_file = path_ + "/cgroup.kill";
  if (::access(kill_file.c_str(), F_OK) == 0) return write_file(kill_file, "1");
  // Killed processes cannot fork any more, so the rounds end.
  std::set<pid_t> killed;
  bool found_new = true;
  while (found_new) {
    auto procs = read_file(path_ + "/cgroup.procs");
    if (!procs) return std::unexpected(procs.error());
    found_new = false;
    for (const pid_t pid : parse_pids(*procs)) {
      if (!killed.insert(pid).second) continue;
      found_new = true;
      if (::kill(pid, SIGKILL) != 0 && errno != ESRCH) {
        const int error = errno;
        return fail("", fmt::format("cannot kill process {} of the cgroup {}: {}", pid, path_,
                                    system_reason(error)));
      }
    }
  }
  return {};
}

Result<bool> TaskCgroup::has_processes() const {
  auto procs = read_file(procs_path());
  if (!procs) return std::unexpected(procs.error());
  return !parse_pids(*procs).empty();
}

bool TaskCgroup::oom_killed() const {
  const auto events = read_file(path_ + "/memory.events");
  if (!events) return false;
  const auto listed = words(*events);  // "low 0 high 0 max 3 oom 1 oom_kill 1 oom_group_kill 0"
  for (std::size_t i = 0; i + 1 < listed.size(); i += 2) {
    if (listed[i] != "oom_kill") continue;
    std::int64_t count = 0;
    const auto value = listed[i + 1];
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), count);
    return error == std::errc() && end == value.data() + value.size() && count > 0;
  }
  return false;
}

Result<void> TaskCgroup::remove() {
  if (::rmdir(path_.c_str()) != 0) {
    return fail("", fmt::format("cannot remove the cgroup {}: {}", path_, system_reason(errno)));
  }
  owned_ = false;
  return {};
}

}  // namespace tidepool
