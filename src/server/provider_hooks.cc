#include "server/provider_hooks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

extern char** environ;  // NOLINT: POSIX

namespace tidepool {
namespace {

constexpr std::size_t kOutputKept = 1000;
constexpr auto kKillGrace = std::chrono::seconds(5);

// Closes a descriptor once.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

void keep_tail(std::string& output, const char* data, std::size_t size) {
  output.append(data, size);
  if (output.size() > 2 * kOutputKept) output.erase(0, output.size() - kOutputKept);
}

std::string tail(std::string output) {
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (output.size() > kOutputKept) output.erase(0, output.size() - kOutputKept);
  return output;
}

std::string status_text(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return "ended";
}

}  // namespace

HookOutcome run_hook(const std::string& hook, const std::string& action, const std::string& input,
                     const std::vector<std::pair<std::string, std::string>>& environment,
                     std::chrono::milliseconds timeout, const std::atomic<bool>& stop) {
  // Writing to a hook that exited without reading must fail with EPIPE, not raise SIGPIPE: it is
  // blocked on this thread while the hook runs, and a pending one consumed before unblocking.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
  struct RestoreMask {
    sigset_t pipe_signal;
    sigset_t old_mask;
    ~RestoreMask() {
      const timespec zero{0, 0};
      while (::sigtimedwait(&pipe_signal, nullptr, &zero) > 0) {
      }
      pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    }
  } restore{pipe_signal, old_mask};
  int in_pipe[2];
  int out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
    return {false, fmt::format("cannot make a pipe: {}", std::strerror(errno))};
  }
  Fd in_read{in_pipe[0]};
  Fd in_write{in_pipe[1]};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return {false, fmt::format("cannot make a pipe: {}", std::strerror(errno))};
  }
  Fd out_read{out_pipe[0]};
  Fd out_write{out_pipe[1]};

  // The server's environment, with ours replacing variables of the same name.
  std::vector<std::string> env_text;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [n, v] : environment) replaced = replaced || n == name;
    if (!replaced) env_text.emplace_back(entry);
  }
  for (const auto& [n, v] : environment) env_text.push_back(n + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string program = hook;
  std::string verb = action;
  std::vector<char*> argv = {program.data(), verb.data(), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_read.fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, out_write.fd, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGUSR1, SIGUSR2, SIGCHLD}) {
    sigaddset(&defaults, s);
  }
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  const int spawned =
      ::posix_spawn(&pid, program.c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    return {false, fmt::format("cannot run hook {}: {}", hook, std::strerror(spawned))};
  }
  in_read.reset();
  out_write.reset();
  // The request is written as the hook reads it (a pipe holds 64 KiB; a rental of many nodes is
  // more); a hook that stops reading gets EOF once it exits or the rest is dropped.
  std::size_t written = 0;
  (void)::fcntl(in_write.fd, F_SETFL, O_NONBLOCK);
  (void)::fcntl(out_read.fd, F_SETFL, O_NONBLOCK);
  if (input.empty()) in_write.reset();

  std::string output;
  const auto started = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> term_sent;
  std::string stopped_because;
  int status = 0;
  while (true) {
    pollfd fds[2] = {{out_read.fd, POLLIN, 0}, {in_write.fd, POLLOUT, 0}};
    if (out_read.fd >= 0 || in_write.fd >= 0) {
      (void)::poll(fds, 2, 100);  // negative descriptors are ignored
    } else {
      ::usleep(100'000);
    }
    while (in_write.fd >= 0 && written < input.size()) {
      const ssize_t n = ::write(in_write.fd, input.data() + written, input.size() - written);
      if (n <= 0) {
        if (n < 0 && errno != EAGAIN && errno != EINTR) in_write.reset();  // EPIPE: not read
        break;
      }
      written += static_cast<std::size_t>(n);
    }
    if (written >= input.size()) in_write.reset();
    char buffer[4096];
    while (out_read.fd >= 0) {
      const ssize_t n = ::read(out_read.fd, buffer, sizeof buffer);
      if (n > 0) {
        keep_tail(output, buffer, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) out_read.reset();  // every writer closed it
      break;
    }
    const pid_t ended = ::waitpid(pid, &status, WNOHANG);
    if (ended == pid) break;
    const auto now = std::chrono::steady_clock::now();
    if (!term_sent && (now - started > timeout || stop.load())) {
      stopped_because = now - started > timeout
                            ? fmt::format("timed out after {} s", timeout.count() / 1000)
                            : std::string("stopped: the server is shutting down");
      (void)::kill(-pid, SIGTERM);
      term_sent = now;
    } else if (term_sent && now - *term_sent > kKillGrace) {
      (void)::kill(-pid, SIGKILL);
    }
  }
  std::string text = tail(std::move(output));
  const bool ok = stopped_because.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok) {
    const std::string why = stopped_because.empty() ? status_text(status) : stopped_because;
    text = text.empty() ? why : fmt::format("{} ({})", text, why);
  }
  return {ok, std::move(text)};
}

ProviderHooks::ProviderHooks(Report report, std::chrono::milliseconds timeout)
    : report_(std::move(report)), timeout_(timeout) {}

ProviderHooks::~ProviderHooks() {
  stopping_ = true;
  std::lock_guard lock(mutex_);
  for (Running& r : running_) {
    if (r.thread.joinable()) r.thread.join();
  }
}

void ProviderHooks::set_server_url(std::string url) {
  std::lock_guard lock(mutex_);
  server_url_ = std::move(url);
}

void ProviderHooks::join_ended() {
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->done.load()) {
      it->thread.join();
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
}

void ProviderHooks::run(std::vector<ProviderCall> calls) {
  for (ProviderCall& call : calls) {
    const std::int64_t id = call.id;
    start(std::move(call.hook), std::move(call.action), call.request.dump(),
          {{"TIDEPOOL_PROVIDER", call.provider}}, timeout_,
          [this, id](const HookOutcome& outcome) { report_(id, outcome); });
  }
}

void ProviderHooks::start(std::string hook, std::string action, std::string input,
                          std::vector<std::pair<std::string, std::string>> environment,
                          std::chrono::milliseconds timeout, Done done) {
  std::lock_guard lock(mutex_);
  join_ended();  // threads whose hook ended are joined here
  environment.insert(environment.begin(), {"TIDEPOOL_SERVER", server_url_});
  Running& slot = running_.emplace_back();
  slot.thread = std::thread([this, &slot, hook = std::move(hook), action = std::move(action),
                             input = std::move(input), environment = std::move(environment),
                             timeout, done = std::move(done)] {
    done(run_hook(hook, action, input, environment, timeout, stopping_));
    slot.done = true;
  });
}

}  // namespace tidepool
