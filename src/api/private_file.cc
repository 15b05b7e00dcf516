#include "api/private_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace tidepool {
namespace {

std::string system_reason() { return std::strerror(errno); }

Result<void> write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return fail("", written < 0 ? system_reason() : "nothing was written");
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
  return {};
}

}  // namespace

Result<void> write_private_file_atomically(const std::string& path, std::string_view bytes) {
  // mkstemp makes the file with mode 0600 and a name no one else took.
  std::string temporary = path + ".XXXXXX";
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) {
    return fail(path, fmt::format("cannot create a file beside it: {}", system_reason()));
  }
  const auto abandon = [&](const std::string& what) {
    const std::string reason = fmt::format("{}: {}", what, system_reason());
    ::unlink(temporary.c_str());
    return fail(path, reason);
  };
  if (::fchmod(fd, S_IRUSR | S_IWUSR) != 0) {
    ::close(fd);
    return abandon("cannot make it private");
  }
  if (auto written = write_all(fd, bytes); !written) {
    errno = 0;
    ::close(fd);
    ::unlink(temporary.c_str());
    return fail(path, fmt::format("cannot write {}: {}", temporary, written.error().reason));
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return abandon("cannot sync it to the disk");
  }
  if (::close(fd) != 0) return abandon("cannot write it");
  if (::rename(temporary.c_str(), path.c_str()) != 0) return abandon("cannot rename it into place");
  // The rename itself is durable once the folder is synced.
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return {};
}

}  // namespace tidepool
