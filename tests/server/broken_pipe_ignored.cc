// Linked into each test here: their clients write to servers that may answer and close before
// reading everything (a 413 before a large body is read), and cpp-httplib sends without
// MSG_NOSIGNAL; such a write must fail, not end the test with SIGPIPE.
#include <csignal>

namespace {

[[maybe_unused]] const bool kBrokenPipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

}  // namespace
