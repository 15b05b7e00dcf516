// Progress lines for long runs: rewritten in place on stderr when it is a terminal, silent
// otherwise (so logs and pipes stay clean).
#pragma once

#include <chrono>
#include <string>

namespace tidepool {

class ProgressLine {
 public:
  explicit ProgressLine(std::string what);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Shows "what: done/total (detail), elapsed, eta" if stderr is a terminal.
  void update(int done, int total, const std::string& detail);

 private:
  std::string what_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tidepool
