#include "sim_cli/command_output.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

extern char** environ;

namespace tidepool {
namespace {

constexpr std::size_t kMaxErrBytes = 64 * 1024;

struct Pipe {
  int read = -1;
  int write = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      read = fds[0];
      write = fds[1];
    }
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
};

}  // namespace

Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                  std::chrono::seconds timeout) {
  if (argv.empty()) return fail("command", "no program given");
  Pipe out;
  Pipe err;
  if (out.read < 0 || err.read < 0) {
    return fail(argv[0], std::string("cannot make a pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (std::string& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.write, 1);
  posix_spawn_file_actions_adddup2(&actions, err.write, 2);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return fail(argv[0], std::string("cannot run: ") + std::strerror(spawned));
  ::close(out.write);
  out.write = -1;
  ::close(err.write);
  err.write = -1;

  CommandOutput result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  char buffer[65536];
  while (out.read >= 0 || err.read >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{out.read, POLLIN, 0}, {err.read, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left.count(), 1000))) < 0 &&
        errno != EINTR) {
      break;
    }
    for (int k = 0; k < 2; ++k) {
      int& fd = k == 0 ? out.read : err.read;
      if (fd < 0 || (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        std::string& into = k == 0 ? result.out : result.err;
        into.append(buffer, static_cast<std::size_t>(n));
        if (k == 1 && into.size() > kMaxErrBytes) into.erase(0, into.size() - kMaxErrBytes);
      } else if (n == 0 || errno != EINTR) {
        ::close(fd);
        fd = -1;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return fail(argv[0], "did not finish within " + std::to_string(timeout.count()) + " s");
  }
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace tidepool
