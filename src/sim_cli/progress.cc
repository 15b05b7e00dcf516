#include "sim_cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace tidepool {

ProgressLine::ProgressLine(std::string what)
    : what_(std::move(what)),
      enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() {
  if (shown_) std::fputs("\n", stderr);
}

void ProgressLine::update(int done, int total, const std::string& detail) {
  if (!enabled_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = done > 0 ? elapsed / done * (total - done) : 0.0;
  const std::string line = fmt::format("\r{}: {}/{} ({}) {:.0f}s elapsed, ~{:.0f}s left\x1b[K",
                                       what_, done, total, detail, elapsed, eta);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  shown_ = true;
}

}  // namespace tidepool
