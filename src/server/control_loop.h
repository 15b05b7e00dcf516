// The scheduling loop: one thread owns the control plane; HTTP threads hand it commands and wait
// for the replies (call), or are called back with them (call_async). Each round it takes every
// queued command, runs them in arrival order, runs a scheduling pass if something changed (or the
// tick or a wakeup is due), commits everything the round changed in one store transaction (group
// commit: one durable write for many requests), publishes the round's events, and only then
// answers (the events' log lines and the provider and pre-warm hooks the round asked for come
// after the answers, which need neither). If the commit fails, every request of the round is
// refused as unavailable, and the state is rebuilt from the store, so that nothing unacknowledged
// is kept and nothing acknowledged is lost.
//
// Group commit: clients that wait for an answer before they send again come back together after a
// round, a little apart, while others waited for that round: the round after waits until as many
// requests as the last one answered wait behind those, up to a quarter of the store's recent
// commit time (gather_time()), so that one commit carries them all rather than every other round
// carrying some; the commands that came run while the others come (all at the round's time, that
// of the first). A server whose rounds answer one request at a time never waits.
//
// A store with commit limits (etcd's transaction limits, store.h's CommitLimits) bounds a round:
// it takes at most round_capacity() commands, its pass starts at most as many jobs (the
// scheduler's max_starts_per_pass; the next pass is due at once), and it stores at most twice as
// many ledger entries (the rest in the next rounds, at once). A round refused all the same
// as too large is run again, from the reloaded state, in two halves, down to single commands: one
// request too large for any commit is refused alone, and the others go on.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "server/control_plane.h"
#include "server/event_feed.h"
#include "server/provider_hooks.h"
#include "server/server_metrics.h"
#include "store/store.h"

namespace tidepool {

// The most commands a round takes, and jobs its pass starts, under a store's commit limits (0: no
// limit): a command or a start writes a few keys (a submission three: the job, the index entry
// of its idempotency key and its event) and some KiB, so writes / 8 and bytes / 32 KiB of each
// fill at most 5/8 of a commit; a round stores at most twice as many ledger entries (one key
// each: 2/8; a posting of more is stored over the next rounds), leaving room for the rest (a node).
[[nodiscard]] std::int64_t round_capacity(const CommitLimits& limits);

// How long a round waits for the requests it expects (see group commit above): a quarter of the
// recent commit time `commit`, at most 5 ms.
[[nodiscard]] std::chrono::microseconds gather_time(std::chrono::microseconds commit);

class ControlLoop {
 public:
  using Command = std::function<Reply(ControlPlane&, Instant now, Batch&)>;

  struct Options {
    std::chrono::milliseconds tick{1000};
    std::size_t events_kept = 100'000;  // in memory, for the event stream's readers
    // Retention, checked once an hour: events older than this are dropped from the store (the
    // last one always kept), and jobs that ended the plane's finished_jobs_kept_days ago are
    // removed, a round's worth at a time.
    std::chrono::milliseconds events_kept_for = std::chrono::days{30};
    // Called once, on the loop thread, when the store refuses a commit because this server no
    // longer leads (kLeadershipLostField, a fenced etcd store): from then on every command is
    // answered unavailable and nothing is committed. It must not block; the wiring stops the
    // server.
    std::function<void(const Error&)> on_leadership_lost;
  };

  ControlLoop(std::unique_ptr<Store> store, ControlPlaneSetup setup, Options options,
              ServerMetrics& metrics);
  ~ControlLoop();
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // Loads the state from the store, commits the repairs of a restart, creates an admin token if
  // there is none (its secret is returned, to be handed to the operator once), and starts the
  // thread.
  Result<std::optional<std::string>> start();
  // Answers what is queued, then ends the thread. Later calls are refused as unavailable.
  void stop();

  // Runs `command` on the loop thread; returns once its round is committed.
  Reply call(Command command);
  // The same without waiting: `done` gets the reply on the loop thread once the round is
  // committed (or at once, on this thread, refused as unavailable when the server is shutting
  // down). It must not block; what it throws is logged and dropped.
  using Done = std::function<void(Reply)>;
  void call_async(Command command, Done done);

  // The jobs as GET /v1/jobs lists them (job_listing.h): a snapshot at least as new as every
  // round committed before this call, so that a client sees what it was answered. The loop takes
  // one after its next round when someone waits (at once when idle), shared by every listing
  // until a round changes something. Null when the server is shutting down.
  std::shared_ptr<const JobListing> job_listing();

  // The server's URL, handed to burst providers' hooks (call before start).
  void set_server_url(std::string url) { hooks_->set_server_url(std::move(url)); }
  // Called on the loop thread with the ids of the jobs a committed round removed (retention),
  // after its answers: their task logs go too (call before start). It must not block long.
  using JobsRemoved = std::function<void(const std::vector<std::int64_t>&)>;
  void set_jobs_removed(JobsRemoved listener) { jobs_removed_ = std::move(listener); }

  [[nodiscard]] bool ready() const;
  // The wall clock, in the plane's time.
  [[nodiscard]] static Instant now();
  [[nodiscard]] const std::shared_ptr<TokenTable>& tokens() const { return tokens_; }
  [[nodiscard]] EventFeed& events() { return *events_; }

 private:
  struct Pending {
    Command command;
    Done done;
  };

  // A round: the commands run so far, their replies and what they changed, and the time they ran
  // at (that of the first).
  struct Round {
    std::vector<Pending> work;
    std::vector<Reply> replies;
    Batch batch;
    std::optional<Instant> now;
  };

  Result<void> load();
  void run();
  // Runs the commands; a pass too if one is due or something changed.
  void round(std::vector<Pending>& work, bool pass_due);
  // Runs the commands `arrived` into the round (its time set by the first), then moves them in.
  void run_commands(Round& r, std::vector<Pending>& arrived);
  // Runs a pass if one is due or something changed, commits the round and answers it.
  void finish_round(Round& current, bool pass_due);
  // Takes a listing snapshot if someone waits for one.
  void publish_listing();
  // Queues the retention command when it is due (Options::events_kept_for).
  void queue_retention();
  // Starts the provider hooks the plane asked for (after their round was committed).
  void run_hooks();
  // Starts the pre-warm hook's calls the plane asked for (prewarm_calls.h): logged and counted.
  void run_prewarm_hooks();
  // Hands a committed round's replies to their callers.
  static void answer(std::vector<Pending>& work, std::vector<Reply>& replies);

  std::unique_ptr<Store> store_;
  ControlPlaneSetup setup_;
  Options options_;
  ServerMetrics& metrics_;
  std::size_t round_limit_ = 0;  // the most commands per round (0: no limit)
  // Loop thread: when retention is next due; the retention command sets it again (at once
  // while more jobs are due).
  std::chrono::steady_clock::time_point next_retention_{};
  // Loop thread: the commands the last round answered, and the store's recent commit time (a
  // moving average), for group commit.
  std::size_t last_answered_ = 0;
  std::chrono::microseconds commit_time_{0};
  std::shared_ptr<TokenTable> tokens_ = std::make_shared<TokenTable>();
  JobsRemoved jobs_removed_;
  std::optional<Error> deposed_;  // loop thread: why this server no longer leads
  std::unique_ptr<EventFeed> events_;
  std::unique_ptr<ControlPlane> plane_;  // owned by the loop thread once started
  // Listings (loop thread): each job's listed entry, and the jobs changed since the last snapshot.
  std::map<JobId, std::shared_ptr<const ListedJob>> listed_;
  std::set<JobId> listing_changed_;

  // Guards what follows up to thread_: the callers' queue, the listing handed out and the flags
  // (HTTP threads and the loop thread); waited on by wake_ and listing_ready_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Pending> queue_;
  std::int64_t rounds_ = 0;  // rounds that may have changed a listing (a batch or a pass)
  bool listing_wanted_ = false;
  std::shared_ptr<const JobListing> listing_;
  std::condition_variable listing_ready_;
  bool stopping_ = false;
  bool running_ = false;
  std::thread thread_;
  // Last: destroyed first, so that a hook still reporting finds the loop whole.
  std::unique_ptr<ProviderHooks> hooks_;
};

}  // namespace tidepool
