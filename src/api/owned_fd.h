// A file descriptor closed when it goes out of scope (the agent's task processes and a replica's
// metrics file or socket; the server's task log files). Header only.
#pragma once

#include <unistd.h>

namespace tidepool {

class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;

  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace tidepool
