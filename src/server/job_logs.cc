#include "server/job_logs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "api/owned_fd.h"

namespace tidepool {
namespace {

std::string errno_text(int error) { return std::strerror(error); }

// "1 GiB", "64 MiB", or "1000 bytes".
std::string byte_count(std::int64_t bytes) {
  constexpr std::int64_t kMiB = std::int64_t{1} << 20;
  if (bytes >= 1024 * kMiB && bytes % (1024 * kMiB) == 0) {
    return fmt::format("{} GiB", bytes / (1024 * kMiB));
  }
  if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{} MiB", bytes / kMiB);
  return fmt::format("{} bytes", bytes);
}

// The size of the file at `path`: 0 if there is none.
Result<std::int64_t> file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return 0;
    return fail(path, "cannot read the log's size: " + errno_text(errno));
  }
  return static_cast<std::int64_t>(st.st_size);
}

}  // namespace

Result<std::unique_ptr<JobLogs>> JobLogs::open(const std::string& dir,
                                               std::int64_t task_limit_bytes,
                                               std::int64_t total_limit_bytes) {
  if (dir.empty()) return fail("logs", "the folder of the task logs is not set");
  if (task_limit_bytes <= 0) return fail("logs", "the limit of a task's log must be > 0 bytes");
  if (total_limit_bytes <= 0) return fail("logs", "the limit of all logs must be > 0 bytes");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (!error) {
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, error);
  }
  if (error) {
    return fail("logs", fmt::format("cannot create the folder of the task logs '{}' (private, "
                                    "mode 0700): {}",
                                    dir, error.message()));
  }
  std::int64_t total = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file(error)) total += static_cast<std::int64_t>(it->file_size(error));
  }
  if (error) {
    return fail("logs", fmt::format("cannot read the folder of the task logs '{}': {}", dir,
                                    error.message()));
  }
  return std::unique_ptr<JobLogs>(new JobLogs(dir, task_limit_bytes, total_limit_bytes, total));
}

std::string JobLogs::job_dir(std::int64_t job) const { return fmt::format("{}/{}", dir_, job); }

std::string JobLogs::run_file(std::int64_t job, int task, std::int64_t run) const {
  if (run == 0) return fmt::format("{}/{}/task-{}.log", dir_, job, task);
  return fmt::format("{}/{}/task-{}.run-{}.log", dir_, job, task, run);
}

namespace {

Result<void> check_log(std::int64_t job, int task, std::int64_t run) {
  if (job <= 0) return fail("job", fmt::format("{} is not a job id", job));
  if (task < 0) return fail("task", fmt::format("{} is not a task number (0 or more)", task));
  if (run < 0) return fail("run", fmt::format("{} is not a run number (0 or more)", run));
  return {};
}

}  // namespace

Result<std::int64_t> JobLogs::append(std::int64_t job, int task, std::int64_t run,
                                     std::int64_t offset, std::string_view bytes) {
  if (auto ok = check_log(job, task, run); !ok) return std::unexpected(ok.error());
  if (offset < 0) return fail("offset", fmt::format("{} is not a byte offset (0 or more)", offset));
  const std::lock_guard lock(append_mutex_);
  const std::string path = run_file(job, task, run);
  // Only this object writes the file, under the lock: the size stays what stat says.
  auto size = file_size(path);
  if (!size) return size;
  if (offset > *size) {
    return fail("offset", fmt::format("the log of run {} of task {} has {} bytes; send from there",
                                      run, task, *size));
  }
  const auto stored = static_cast<std::size_t>(*size - offset);
  if (stored >= bytes.size()) return *size;  // all of it was stored before
  const std::string_view rest = bytes.substr(stored);
  if (static_cast<std::int64_t>(rest.size()) > task_limit_bytes_ - *size) {
    return fail("bytes", fmt::format("the log of run {} of task {} would grow past its limit of "
                                     "{}; the rest of the run's output is not kept",
                                     run, task, byte_count(task_limit_bytes_)));
  }
  if (static_cast<std::int64_t>(rest.size()) > total_limit_bytes_ - total_bytes_) {
    return fail("bytes", fmt::format("the server's task logs hold {} of their limit of {}; the "
                                     "rest of the task's output is not kept",
                                     byte_count(total_bytes_), byte_count(total_limit_bytes_)));
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == ENOENT) {
    if (::mkdir(job_dir(job).c_str(), 0700) != 0 && errno != EEXIST) {
      return fail(job_dir(job), "cannot create the folder: " + errno_text(errno));
    }
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  }
  if (fd < 0) return fail(path, "cannot open the log: " + errno_text(errno));
  const OwnedFd file(fd);
  std::size_t written = 0;
  while (written < rest.size()) {
    const ssize_t n = ::write(file.get(), rest.data() + written, rest.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      // What was written stays: the sender resends from its last offset, and that part is
      // skipped as a resend.
      total_bytes_ += static_cast<std::int64_t>(written);
      return fail(path, "cannot write the log: " + errno_text(errno));
    }
    written += static_cast<std::size_t>(n);
  }
  total_bytes_ += static_cast<std::int64_t>(written);
  // Acknowledged bytes survive a crash of the machine.
  if (::fdatasync(file.get()) != 0) return fail(path, "cannot sync the log: " + errno_text(errno));
  return *size + static_cast<std::int64_t>(rest.size());
}

Result<std::int64_t> JobLogs::remove(std::int64_t job) {
  if (job <= 0) return fail("job", fmt::format("{} is not a job id", job));
  const std::lock_guard lock(append_mutex_);
  const std::string dir = job_dir(job);
  std::error_code error;
  std::int64_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::error_code size_error;
    if (entry.is_regular_file(size_error)) {
      bytes += static_cast<std::int64_t>(entry.file_size(size_error));
    }
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return fail(dir, "cannot read the folder: " + error.message());
  }
  std::filesystem::remove_all(dir, error);
  if (error) return fail(dir, "cannot delete the folder: " + error.message());
  total_bytes_ -= bytes;
  return bytes;
}

Result<LogChunk> JobLogs::read(std::int64_t job, int task, std::int64_t run, std::int64_t offset,
                               std::int64_t limit) const {
  if (auto ok = check_log(job, task, run); !ok) return std::unexpected(ok.error());
  if (offset < 0) return fail("offset", fmt::format("{} is not a byte offset (0 or more)", offset));
  if (limit < 0) return fail("limit", fmt::format("{} is not a byte count (0 or more)", limit));
  const std::string path = run_file(job, task, run);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return LogChunk{};
    return fail(path, "cannot open the log: " + errno_text(errno));
  }
  const OwnedFd file(fd);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) {
    return fail(path, "cannot read the log's size: " + errno_text(errno));
  }
  LogChunk chunk{.bytes = {}, .size = static_cast<std::int64_t>(st.st_size)};
  if (offset >= chunk.size) return chunk;
  chunk.bytes.resize(static_cast<std::size_t>(std::min(limit, chunk.size - offset)));
  std::size_t got = 0;
  while (got < chunk.bytes.size()) {
    const ssize_t n = ::pread(file.get(), chunk.bytes.data() + got, chunk.bytes.size() - got,
                              static_cast<off_t>(offset) + static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(path, "cannot read the log: " + errno_text(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  chunk.bytes.resize(got);
  return chunk;
}

Result<std::vector<RunLog>> JobLogs::runs(std::int64_t job, int task) const {
  if (auto ok = check_log(job, task, 0); !ok) return std::unexpected(ok.error());
  std::vector<RunLog> found;
  std::error_code error;
  const std::string dir = job_dir(job);
  const std::string legacy = fmt::format("task-{}.log", task);
  const std::string prefix = fmt::format("task-{}.run-", task);
  for (auto it = std::filesystem::directory_iterator(dir, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::int64_t run = 0;
    if (name != legacy) {
      if (!name.starts_with(prefix) || !name.ends_with(".log")) continue;
      const std::string_view digits =
          std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - 4);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), run);
      if (ec != std::errc() || end != digits.data() + digits.size() || run <= 0) continue;
    }
    auto size = file_size(it->path().string());
    if (!size) return std::unexpected(size.error());
    found.push_back(RunLog{run, *size});
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return fail(dir, "cannot list the task's logs: " + error.message());
  }
  std::sort(found.begin(), found.end(),
            [](const RunLog& a, const RunLog& b) { return a.run < b.run; });
  return found;
}

Result<LogChunk> JobLogs::read_runs(std::int64_t job, int task, std::int64_t offset,
                                    std::int64_t limit) const {
  if (offset < 0) return fail("offset", fmt::format("{} is not a byte offset (0 or more)", offset));
  if (limit < 0) return fail("limit", fmt::format("{} is not a byte count (0 or more)", limit));
  auto runs = this->runs(job, task);
  if (!runs) return std::unexpected(runs.error());
  LogChunk all;
  std::int64_t start = 0;  // of the run's log in the whole
  for (const RunLog& r : *runs) {
    // Where the next byte is, in the whole and in this run's log (which may grow meanwhile: no
    // more than its size as listed is read, so the whole stays consistent).
    const std::int64_t at = offset + static_cast<std::int64_t>(all.bytes.size());
    const std::int64_t want = limit - static_cast<std::int64_t>(all.bytes.size());
    if (want > 0 && at >= start && at < start + r.size) {
      auto part = read(job, task, r.run, at - start, std::min(want, start + r.size - at));
      if (!part) return std::unexpected(part.error());
      all.bytes += part->bytes;
    }
    start += r.size;
  }
  all.size = start;
  return all;
}

}  // namespace tidepool
