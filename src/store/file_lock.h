// An exclusive lock on a file, held for the lifetime of the object: one server per database.
//
// The lock is an flock(2) on `<path>`, which holds the PID of the process that took it. A second
// process's acquire() fails at once (it does not wait) with the holder's PID in its reason. The
// kernel drops the lock when the holder exits, however it exits, so a crashed server never leaves
// a stale lock behind; the file itself stays.
#pragma once

#include <string>

#include "core/error.h"

namespace tidepool {

class FileLock {
 public:
  // Creates `path` if needed (mode 0600), locks it and writes this process's PID into it. Errors
  // name `path`: "held by process 1234 (another tidepool server?)" or the system's reason.
  static Result<FileLock> acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace tidepool
