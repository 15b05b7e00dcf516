#include "agent/task_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <memory>
#include <optional>
#include <tuple>

#include "agent/system_reason.h"

namespace tidepool {
namespace {

std::optional<std::string> real_path(const std::string& path) {
  std::unique_ptr<char, decltype(&::free)> resolved(::realpath(path.c_str(), nullptr), &::free);
  if (!resolved) return std::nullopt;
  return std::string(resolved.get());
}

bool within(const std::string& path, const std::string& folder) {
  if (path == folder) return true;
  const std::string prefix = folder.ends_with('/') ? folder : folder + "/";
  return path.starts_with(prefix);
}

}  // namespace

Result<void> make_owned_dir(const std::string& path, mode_t mode, int uid) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return fail(path, "cannot create the folder: " + ec.message());
  if (uid >= 0 && ::lchown(path.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0) {
    return fail(path,
                fmt::format("cannot give the folder to uid {}: {}", uid, system_reason(errno)));
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return fail(path, fmt::format("cannot set the folder's mode to {:04o}: {}", mode,
                                  system_reason(errno)));
  }
  return {};
}

namespace {

// Gives what is in the open folder `dir` (at `path`, for messages) to uid:uid, descending with
// openat(O_NOFOLLOW | O_DIRECTORY): the job may rename or replace what is in its folder meanwhile,
// but never makes the walk leave it through a link. Takes `dir` over (closes it).
Result<void> give_contents_to(int dir, const std::string& path, int uid, int depth) {
  DIR* listing = ::fdopendir(dir);
  if (listing == nullptr) {
    ::close(dir);
    return fail(path, fmt::format("cannot list it: {}", system_reason(errno)));
  }
  Result<void> result;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (::fchownat(dir, name.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid),
                   AT_SYMLINK_NOFOLLOW) != 0 &&
        errno != ENOENT) {
      result = fail(path + "/" + name,
                    fmt::format("cannot give it to uid {}: {}", uid, system_reason(errno)));
      break;
    }
    const int child = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) continue;  // not a folder (or a link to one): nothing below it
    if (depth >= 64) {
      ::close(child);
      continue;
    }
    result = give_contents_to(child, path + "/" + name, uid, depth + 1);
    if (!result) break;
  }
  ::closedir(listing);
  return result;
}

}  // namespace

Result<void> give_tree_to(const std::string& path, int uid) {
  const int dir = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return fail(path, fmt::format("cannot open the folder: {}", system_reason(errno)));
  struct stat info {};
  if (::fstat(dir, &info) != 0 || info.st_uid == static_cast<uid_t>(uid)) {
    ::close(dir);
    return {};
  }
  if (::fchown(dir, static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0) {
    const int error = errno;
    ::close(dir);
    return fail(path, fmt::format("cannot give it to uid {}: {}", uid, system_reason(error)));
  }
  return give_contents_to(dir, path, uid, 0);
}

Result<void> write_fresh_file(const std::string& folder, const std::string& name,
                              const std::string& text, int uid) {
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return fail(folder, fmt::format("cannot open the folder: {}", system_reason(errno)));
  int error = 0;
  if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) error = errno;
  int fd = -1;
  if (error == 0) {
    fd = ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) error = errno;
  }
  if (fd >= 0) {
    if (uid >= 0 && ::fchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0) {
      error = errno;
    }
    if (error == 0 && ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      error = errno != 0 ? errno : EIO;
    }
    ::close(fd);
  }
  ::close(dir);
  if (error != 0) {
    return fail(folder + "/" + name, fmt::format("cannot write it: {}", system_reason(error)));
  }
  return {};
}

std::string read_regular_file(const std::string& path, std::int64_t offset, std::int64_t limit,
                              std::int64_t* size) {
  *size = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat info {};
  std::string out;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
    *size = static_cast<std::int64_t>(info.st_size);
    const std::int64_t wanted = std::clamp<std::int64_t>(*size - offset, 0, limit);
    out.resize(static_cast<std::size_t>(wanted));
    const ssize_t n = wanted > 0 ? ::pread(fd, out.data(), out.size(), offset) : 0;
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  return out;
}

Result<std::string> resolve_within(const std::string& reported, const std::string& folder) {
  const auto root = real_path(folder);
  if (!root) {
    return fail("path", fmt::format("the checkpoint folder {} cannot be resolved: {}", folder,
                                    system_reason(errno)));
  }
  std::filesystem::path wanted(reported);
  if (wanted.is_relative()) wanted = std::filesystem::path(*root) / wanted;
  std::optional<std::string> resolved = real_path(wanted.string());
  if (!resolved) {
    // Not there (yet): its folder must be, and the last part must be a name.
    const std::string last = wanted.filename().string();
    const auto parent = real_path(wanted.parent_path().string());
    if (!parent || last.empty() || last == "." || last == "..") {
      return fail("path", fmt::format("{} does not resolve to a place in {}", reported, folder));
    }
    resolved = (std::filesystem::path(*parent) / last).string();
  }
  if (!within(*resolved, *root)) {
    return fail("path", fmt::format("{} resolves to {}, outside the job's checkpoint folder {}",
                                    reported, *resolved, *root));
  }
  return *resolved;
}

Result<void> sync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail(path, fmt::format("cannot open it: {}", system_reason(errno)));
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) return fail(path, fmt::format("fsync failed: {}", system_reason(error)));
  return {};
}

std::vector<std::string> enforce_log_quota(const std::string& logs_dir,
                                           const std::set<std::string>& live,
                                           std::int64_t quota_bytes) {
  namespace fs = std::filesystem;
  // (modification time, path, size): oldest first, ties by path.
  std::vector<std::tuple<std::int64_t, std::string, std::int64_t>> files;
  std::int64_t total = 0;
  std::error_code ec;
  for (const auto& job : fs::directory_iterator(logs_dir, ec)) {
    if (!job.is_directory(ec) || job.is_symlink(ec)) continue;
    for (const auto& file : fs::directory_iterator(job.path(), ec)) {
      struct stat info {};
      if (::lstat(file.path().c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
      const std::int64_t size = static_cast<std::int64_t>(info.st_size);
      total += size;
      files.emplace_back(
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec,
          file.path().string(), size);
    }
  }
  std::vector<std::string> removed;
  if (total <= quota_bytes) return removed;
  std::ranges::sort(files);
  for (const auto& [mtime, path, size] : files) {
    if (total <= quota_bytes) break;
    if (live.contains(path)) continue;
    if (::unlink(path.c_str()) == 0) {
      total -= size;
      removed.push_back(path);
    }
  }
  return removed;
}

int kill_processes_of_uid(int uid) {
  int found = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  while (const dirent* entry = ::readdir(proc)) {
    pid_t pid = 0;
    const std::string_view name(entry->d_name);
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (error != std::errc() || end != name.data() + name.size() || pid <= 0) continue;
    // Read as it is: /proc files report a size of 0.
    const int fd = ::open(fmt::format("/proc/{}/status", pid).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string text(4096, '\0');
    const ssize_t n = ::read(fd, text.data(), text.size());
    ::close(fd);
    text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    if (text.find("\nState:\tZ") != std::string::npos) continue;  // dead; its parent reaps it
    const auto at = text.find("\nUid:");
    if (at == std::string::npos) continue;
    const auto line_end = text.find('\n', at + 1);
    std::string_view line(text.data() + at + 5,
                          (line_end == std::string::npos ? text.size() : line_end) - at - 5);
    bool matches = false;
    for (int field = 0; field < 3; ++field) {
      const auto start = line.find_first_not_of(" \t");
      if (start == std::string_view::npos) break;
      line.remove_prefix(start);
      int value = -1;
      const auto [stop, bad] = std::from_chars(line.data(), line.data() + line.size(), value);
      if (bad != std::errc()) break;
      matches = matches || value == uid;
      line.remove_prefix(static_cast<std::size_t>(stop - line.data()));
    }
    if (!matches) continue;
    ++found;
    ::kill(pid, SIGKILL);
  }
  ::closedir(proc);
  return found;
}

}  // namespace tidepool
