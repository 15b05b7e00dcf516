#include "cli/demo_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace tidepool {
namespace {

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = sigabbrev_np(signal);
    return fmt::format("killed by signal {}{}", signal,
                       name == nullptr ? std::string() : fmt::format(" (SIG{})", name));
  }
  return fmt::format("ended with wait status {}", status);
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool is_zombie(pid_t pid) {
  const std::string stat = read_whole(fmt::format("/proc/{}/stat", pid));
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z' ||
         stat[paren + 2] == 'X';
}

}  // namespace

std::string executable_dir() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string() : self.parent_path().string();
}

Result<std::string> locate_program(const std::string& name) {
  const std::string dir = executable_dir();
  const std::string beside = dir.empty() ? std::string() : dir + "/" + name;
  if (!beside.empty() && ::access(beside.c_str(), X_OK) == 0) return beside;
  const char* path = std::getenv("PATH");
  std::string_view rest = path == nullptr ? std::string_view() : std::string_view(path);
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    const std::string_view entry = rest.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (!entry.starts_with('/')) continue;
    const std::string candidate = fmt::format("{}/{}", entry, name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return fail("", fmt::format("the program {} is neither beside tidepool ({}) nor on PATH", name,
                              beside.empty() ? "its folder is unknown" : beside));
}

Result<DemoChild> DemoChild::start(std::string label, const std::vector<std::string>& argv,
                                   const std::string& log_path) {
  std::vector<char*> args;
  for (const std::string& word : argv) args.push_back(const_cast<char*>(word.c_str()));
  args.push_back(nullptr);
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return fail(log_path, fmt::format("cannot open the log: {}", std::strerror(errno)));
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2];
  if (null < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(log);
    if (null >= 0) ::close(null);
    return fail(label, fmt::format("cannot start: {}", std::strerror(error)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(null, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execv(args[0], args.data());
    const int error = errno;
    (void)!::write(report[1], &error, sizeof error);
    ::_exit(127);
  }
  const int fork_error = errno;
  ::close(report[1]);
  ::close(log);
  ::close(null);
  if (pid < 0) {
    ::close(report[0]);
    return fail(label, fmt::format("cannot start: {}", std::strerror(fork_error)));
  }
  int exec_error = 0;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == sizeof exec_error) {
    ::waitpid(pid, nullptr, 0);
    return fail(label, fmt::format("cannot run {}: {}", argv[0], std::strerror(exec_error)));
  }
  return DemoChild(std::move(label), pid, log_path);
}

DemoChild::DemoChild(DemoChild&& other) noexcept
    : label_(std::move(other.label_)),
      pid_(std::exchange(other.pid_, -1)),
      log_path_(std::move(other.log_path_)),
      exit_reason_(std::move(other.exit_reason_)) {}

DemoChild& DemoChild::operator=(DemoChild&& other) noexcept {
  if (this != &other) {
    DemoChild gone(std::move(*this));
    label_ = std::move(other.label_);
    pid_ = std::exchange(other.pid_, -1);
    log_path_ = std::move(other.log_path_);
    exit_reason_ = std::move(other.exit_reason_);
  }
  return *this;
}

DemoChild::~DemoChild() {
  if (pid_ > 0 && exit_reason_.empty()) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

bool DemoChild::running() {
  if (pid_ <= 0 || !exit_reason_.empty()) return false;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == 0 || (done < 0 && errno == EINTR)) return true;
  exit_reason_ = done == pid_ ? describe_status(status) : "gone";
  return false;
}

void DemoChild::send(int signal) {
  if (running()) ::kill(pid_, signal);
}

std::vector<StopOutcome> stop_children(const std::vector<DemoChild*>& children,
                                       std::chrono::milliseconds grace,
                                       const std::function<bool()>& hurry) {
  std::vector<StopOutcome> out;
  std::vector<DemoChild*> signalled;
  for (DemoChild* child : children) {
    if (child->running()) {
      child->send(SIGTERM);
      signalled.push_back(child);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  auto any_running = [&] {
    bool any = false;
    for (DemoChild* child : signalled) any = child->running() || any;
    return any;
  };
  while (any_running() && std::chrono::steady_clock::now() < deadline && !hurry())
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool hurried = std::chrono::steady_clock::now() < deadline;
  for (DemoChild* child : children) {
    if (std::ranges::find(signalled, child) == signalled.end()) {
      out.push_back({child->label(), "had ended before: " + child->exit_reason()});
    } else if (!child->running()) {
      out.push_back({child->label(), "stopped"});
    } else {
      child->send(SIGKILL);
      while (child->running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      out.push_back({child->label(),
                     hurried
                         ? std::string("killed")
                         : fmt::format("killed after {} s",
                                       std::chrono::ceil<std::chrono::seconds>(grace).count())});
    }
  }
  return out;
}

std::vector<pid_t> processes_with_env(const std::string& name, const std::string& value) {
  std::vector<pid_t> out;
  const std::string wanted = name + "=" + value;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  const pid_t self = ::getpid();
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == self) continue;
    const std::string environ = read_whole(fmt::format("/proc/{}/environ", pid));
    for (std::size_t at = 0; at < environ.size();) {
      std::size_t stop = environ.find('\0', at);
      if (stop == std::string::npos) stop = environ.size();
      if (std::string_view(environ).substr(at, stop - at) == wanted) {
        if (!is_zombie(static_cast<pid_t>(pid))) out.push_back(static_cast<pid_t>(pid));
        break;
      }
      at = stop + 1;
    }
  }
  ::closedir(proc);
  return out;
}

int stop_marked_processes(const std::string& name, const std::string& value,
                          std::chrono::milliseconds grace, const std::function<bool()>& hurry) {
  const std::vector<pid_t> found = processes_with_env(name, value);
  for (pid_t pid : found) ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  std::vector<pid_t> left = found;
  while (!left.empty() && std::chrono::steady_clock::now() < deadline && !hurry()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = processes_with_env(name, value);
  }
  for (pid_t pid : left) ::kill(pid, SIGKILL);
  for (int i = 0; i < 20 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = processes_with_env(name, value);
  }
  return static_cast<int>(found.size());
}

std::string tail_of_file(const std::string& path, int lines) {
  const std::string text = read_whole(path);
  // Back over `lines` line ends, not counting the final one.
  std::size_t start = text.size();
  if (start > 0 && text[start - 1] == '\n') --start;
  int seen = 0;
  while (start > 0) {
    const auto newline = text.rfind('\n', start - 1);
    if (newline == std::string::npos) {
      start = 0;
      break;
    }
    if (++seen == lines) {
      start = newline + 1;
      break;
    }
    start = newline;
  }
  return text.substr(start);
}

}  // namespace tidepool
