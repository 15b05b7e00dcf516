// Runs the server's hooks, each call on a thread of its own, so that a hook that takes minutes
// holds nothing else up: those of burst providers (ControlPlane::take_provider_calls), as
// `<hook> up|down` with their JSON request on stdin, and the pre-warm hook
// (ControlPlane::take_prewarm_calls, prewarm_calls.h), as `<hook> prewarm`.
//
// The hook gets the server's environment plus TIDEPOOL_SERVER (the server's URL, for the agents it
// starts) and, for a provider, TIDEPOOL_PROVIDER (the provider's name); its stdout and stderr are
// read together and the last 1000 bytes reported. It succeeds when it exits 0 within the timeout;
// otherwise (another status, a signal, the timeout, a program that cannot be started) it fails with
// what it printed and why. A hook past its timeout, or still running when the server stops, gets
// SIGTERM in its process group, and SIGKILL 5 seconds later. Programs the hook leaves running in
// the background (an agent for a local test) are not waited for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/control_plane.h"

namespace tidepool {

// How one hook run ended.
struct HookOutcome {
  bool ok = false;
  std::string output;  // its last output, and why it failed
};

// Runs `hook action` with `input` on stdin and `environment` added to the server's; waits at most
// `timeout` (then stops the hook's process group), and while `stop` stays false.
HookOutcome run_hook(const std::string& hook, const std::string& action, const std::string& input,
                     const std::vector<std::pair<std::string, std::string>>& environment,
                     std::chrono::milliseconds timeout, const std::atomic<bool>& stop);

class ProviderHooks {
 public:
  // `report` is called on the hook's thread when a call ends.
  using Report = std::function<void(std::int64_t call, const HookOutcome& outcome)>;

  explicit ProviderHooks(Report report,
                         std::chrono::milliseconds timeout = std::chrono::minutes(10));
  // Stops the hooks still running and waits for their threads.
  ~ProviderHooks();
  ProviderHooks(const ProviderHooks&) = delete;
  ProviderHooks& operator=(const ProviderHooks&) = delete;

  // The URL the hooks pass to the agents they start (TIDEPOOL_SERVER).
  void set_server_url(std::string url);
  // Starts each call on a thread of its own.
  void run(std::vector<ProviderCall> calls);

  // Starts `hook action` with `input` on stdin and `environment` (and TIDEPOOL_SERVER) added, on
  // a thread of its own, stopped after `timeout`; `done` gets the outcome on that thread.
  using Done = std::function<void(const HookOutcome& outcome)>;
  void start(std::string hook, std::string action, std::string input,
             std::vector<std::pair<std::string, std::string>> environment,
             std::chrono::milliseconds timeout, Done done);

 private:
  struct Running {
    std::thread thread;
    std::atomic<bool> done = false;
  };

  // Joins the threads whose hook ended (mutex_ held).
  void join_ended();

  Report report_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> stopping_ = false;
  // Guards server_url_ and running_: the loop thread starts hooks, their threads end them.
  std::mutex mutex_;
  std::string server_url_;
  std::list<Running> running_;
};

}  // namespace tidepool
