#include "server/control_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <future>
#include <iterator>
#include <set>
#include <utility>

#include "server/event_log.h"

namespace tidepool {
namespace {

std::unexpected<Refused> unavailable(std::string reason) {
  return refuse(Refusal::kUnavailable, Error{"server", std::move(reason)});
}

}  // namespace

std::int64_t round_capacity(const CommitLimits& limits) {
  std::int64_t capacity = 0;
  const auto within = [&](std::int64_t limit, std::int64_t per_item) {
    if (limit <= 0) return;
    const std::int64_t items = std::max<std::int64_t>(1, limit / per_item);
    capacity = capacity == 0 ? items : std::min(capacity, items);
  };
  within(limits.writes, 8);
  within(limits.bytes, 32 * 1024);
  return capacity;
}

std::chrono::microseconds gather_time(std::chrono::microseconds commit) {
  return std::min<std::chrono::microseconds>(commit / 4, std::chrono::milliseconds(5));
}

ControlLoop::ControlLoop(std::unique_ptr<Store> store, ControlPlaneSetup setup, Options options,
                         ServerMetrics& metrics)
    : store_(std::move(store)),
      setup_(std::move(setup)),
      options_(std::move(options)),
      metrics_(metrics),
      events_(std::make_unique<EventFeed>(*store_, options_.events_kept)),
      hooks_(std::make_unique<ProviderHooks>([this](std::int64_t id, const HookOutcome& outcome) {
        const Reply reply = call([id, outcome](ControlPlane& plane, Instant now, Batch& batch) {
          return plane.provider_result(id, outcome.ok, outcome.output, now, batch);
        });
        if (!reply) {
          spdlog::warn("the result of provider hook call {} was not recorded: {}", id,
                       reply.error().cause.message());
        }
      })) {
  const std::int64_t capacity = round_capacity(store_->commit_limits());
  if (capacity > 0) {
    round_limit_ = static_cast<std::size_t>(capacity);
    int& starts = setup_.scheduler.max_starts_per_pass;
    const int most = static_cast<int>(std::min<std::int64_t>(capacity, 1'000'000));
    if (starts == 0 || starts > most) starts = most;
    setup_.ledger_entries_per_round = 2 * capacity;
  }
}

ControlLoop::~ControlLoop() { stop(); }

Instant ControlLoop::now() { return std::chrono::floor<Millis>(std::chrono::system_clock::now()); }

Result<void> ControlLoop::load() {
  auto snapshot = store_->load();
  if (!snapshot) return std::unexpected(snapshot.error());
  Batch repairs;
  auto plane = ControlPlane::create(setup_, *snapshot, now(), repairs, tokens_);
  if (!plane) return std::unexpected(plane.error());
  if (!repairs.empty()) {
    if (auto ok = store_->commit(repairs); !ok) return ok;
    // Repairs also carry the market's budget holds as they stand at start (events only).
    if (!repairs.jobs.empty()) {
      spdlog::warn("{} job(s) could not be restored and were failed; see GET /v1/events",
                   repairs.jobs.size());
    }
  }
  plane_ = std::move(*plane);
  events_->reset(plane_->last_event_seq());
  const ControlPlane::Figures figures = plane_->figures();
  const auto count = [&](const char* state) {
    const auto it = figures.jobs_by_state.find(state);
    return it == figures.jobs_by_state.end() ? std::int64_t{0} : it->second;
  };
  spdlog::info(
      "state loaded from the store: {} jobs running (kept where they run), {} pending "
      "(queued again); {} nodes, {} drained",
      count("running"), count("pending"), figures.nodes_total, figures.nodes_drained);
  return {};
}

Result<std::optional<std::string>> ControlLoop::start() {
  if (auto ok = load(); !ok) return std::unexpected(ok.error());
  std::optional<std::string> admin_secret;
  if (!tokens_->has_active_admin()) {
    Batch batch;
    admin_secret = plane_->bootstrap_admin(now(), batch);
    if (auto ok = store_->commit(batch); !ok) return std::unexpected(ok.error());
    events_->publish(batch.events);
  }
  {
    std::lock_guard lock(mutex_);
    running_ = true;
  }
  thread_ = std::thread([this] { run(); });
  return admin_secret;
}

void ControlLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    if (!running_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  listing_ready_.notify_all();
  if (thread_.joinable()) thread_.join();
  hooks_.reset();  // stops the hooks still running; their results are no longer recorded
  events_->close();
  std::lock_guard lock(mutex_);
  running_ = false;
}

std::shared_ptr<const JobListing> ControlLoop::job_listing() {
  std::unique_lock lock(mutex_);
  const std::int64_t wanted = rounds_;
  if (listing_ && listing_->version >= wanted) return listing_;
  if (!running_ || stopping_) return nullptr;
  listing_wanted_ = true;
  wake_.notify_one();
  listing_ready_.wait(lock, [&] { return (listing_ && listing_->version >= wanted) || stopping_; });
  if (listing_ && listing_->version >= wanted) return listing_;
  return nullptr;
}

bool ControlLoop::ready() const {
  std::lock_guard lock(mutex_);
  return running_ && !stopping_;
}

Reply ControlLoop::call(Command command) {
  auto reply = std::make_shared<std::promise<Reply>>();
  std::future<Reply> answered = reply->get_future();
  call_async(std::move(command), [reply](Reply r) { reply->set_value(std::move(r)); });
  return answered.get();
}

void ControlLoop::call_async(Command command, Done done) {
  {
    std::lock_guard lock(mutex_);
    if (running_ && !stopping_) {
      queue_.push_back(Pending{std::move(command), std::move(done)});
      wake_.notify_one();
      return;
    }
  }
  done(unavailable("the server is shutting down"));
}

void ControlLoop::answer(std::vector<Pending>& work, std::vector<Reply>& replies) {
  for (std::size_t i = 0; i < work.size(); ++i) {
    try {
      work[i].done(std::move(replies[i]));
    } catch (const std::exception& e) {
      spdlog::error("answering a request: {}", e.what());
    }
  }
}

void ControlLoop::run_hooks() {
  std::vector<ProviderCall> calls = plane_->take_provider_calls();
  for (const ProviderCall& c : calls) {
    spdlog::info("burst: running {} {} for job {} (provider {}, call {})", c.hook, c.action, c.job,
                 c.provider, c.id);
  }
  if (!calls.empty() && hooks_) hooks_->run(std::move(calls));
}

void ControlLoop::run_prewarm_hooks() {
  std::vector<PrewarmHookCall> calls = plane_->take_prewarm_calls();
  if (calls.empty() || !hooks_ || !setup_.prewarm) return;
  for (PrewarmHookCall& c : calls) {
    spdlog::info("prewarm: running {} prewarm for job {} on {} (predicted start {})", c.hook, c.job,
                 c.request["nodes"].dump(), c.request["predicted_start"].get<std::string>());
    // The outcome is the operator's to see; scheduling never waits for it.
    hooks_->start(std::move(c.hook), "prewarm", c.request.dump(), {}, setup_.prewarm->timeout,
                  [this, job = c.job](const HookOutcome& outcome) {
                    metrics_.count_prewarm_call(outcome.ok);
                    if (outcome.ok) {
                      spdlog::info("prewarm: job {}: the hook succeeded", job);
                    } else {
                      spdlog::warn("prewarm: job {}: the hook failed: {}", job, outcome.output);
                    }
                  });
  }
}

void ControlLoop::queue_retention() {
  const auto steady = std::chrono::steady_clock::now();
  if (steady < next_retention_) return;
  next_retention_ = steady + std::chrono::hours(1);
  // Jobs removed per round: those a store's commit limits allow (two writes each), else a bound
  // on one transaction's size.
  const std::size_t most = round_limit_ > 0 ? round_limit_ : 10'000;
  call_async(
      [this, most](ControlPlane& plane, Instant now, Batch& batch) -> Reply {
        if (auto cut = events_->seq_before(now - options_.events_kept_for); !cut) {
          spdlog::warn("retention: cannot find the events to drop: {}", cut.error().message());
        } else if (*cut > 0) {
          batch.events_dropped_through = *cut;
        }
        if (plane.remove_finished(now, most, batch)) next_retention_ = {};  // more: at once
        return ::tidepool::answer(nullptr);
      },
      [](const Reply&) {});
}

void ControlLoop::run() {
  run_hooks();  // what the restart asked for (its repairs are committed)
  auto next_tick = std::chrono::steady_clock::now() + options_.tick;
  while (true) {
    queue_retention();
    // Only this thread changes the plane, so its next wakeup holds until the round below; it is
    // found outside the queue's lock, which the HTTP threads wait on.
    const std::optional<Instant> wake = plane_->next_wakeup(now());
    auto deadline = plane_->wants_pass() ? std::chrono::steady_clock::now() : next_tick;
    if (wake) {
      deadline =
          std::min(deadline, std::chrono::steady_clock::now() + std::max(Millis{0}, *wake - now()));
    }
    Round r;
    std::vector<Pending> arrived;
    // Takes what is queued into `arrived`, up to the round's limit (the rest: the next round).
    const auto take = [&] {
      std::size_t room = queue_.size();
      if (round_limit_ > 0) room = std::min(room, round_limit_ - r.work.size());
      const auto end = queue_.begin() + static_cast<std::ptrdiff_t>(room);
      arrived.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(end));
      queue_.erase(queue_.begin(), end);
    };
    std::size_t expected = 0;
    {
      std::unique_lock lock(mutex_);
      // The clients the last round answered will be back, behind those already waiting.
      expected = last_answered_ + queue_.size();
      if (round_limit_ > 0) expected = std::min(expected, round_limit_);
      wake_.wait_until(lock, deadline,
                       [&] { return !queue_.empty() || stopping_ || listing_wanted_; });
      take();
      if (arrived.empty() && stopping_) {
        listing_ready_.notify_all();
        return;
      }
    }
    // While the others come, the commands that came run (group commit, above).
    if (expected > 1 && !arrived.empty() && arrived.size() < expected) {
      const auto until = std::chrono::steady_clock::now() + gather_time(commit_time_);
      while (true) {
        run_commands(r, arrived);
        std::unique_lock lock(mutex_);
        if (r.work.size() >= expected || stopping_ ||
            !wake_.wait_until(lock, until, [&] { return !queue_.empty() || stopping_; })) {
          break;
        }
        take();
      }
    }
    run_commands(r, arrived);
    const bool tick = std::chrono::steady_clock::now() >= next_tick;
    if (tick) next_tick = std::chrono::steady_clock::now() + options_.tick;
    last_answered_ = r.work.size();
    finish_round(r, tick || (wake && *wake <= now()));
    publish_listing();
  }
}

void ControlLoop::run_commands(Round& r, std::vector<Pending>& arrived) {
  if (arrived.empty()) return;
  if (!r.now) r.now = now();
  for (Pending& p : arrived) {
    r.replies.push_back(deposed_ ? unavailable("this server no longer leads: " + deposed_->reason)
                                 : p.command(*plane_, *r.now, r.batch));
    r.work.push_back(std::move(p));
  }
  arrived.clear();
}

void ControlLoop::publish_listing() {
  std::int64_t version = 0;
  {
    std::lock_guard lock(mutex_);
    if (!listing_wanted_) return;
    listing_wanted_ = false;
    version = rounds_;
  }
  auto listing = plane_->update_listing(listed_, listing_changed_, version);
  listing_changed_.clear();
  {
    std::lock_guard lock(mutex_);
    listing_ = std::move(listing);
  }
  listing_ready_.notify_all();
}

void ControlLoop::round(std::vector<Pending>& work, bool pass_due) {
  Round r;
  run_commands(r, work);
  finish_round(r, pass_due);
}

void ControlLoop::finish_round(Round& current, bool pass_due) {
  std::vector<Pending>& work = current.work;
  std::vector<Reply>& replies = current.replies;
  Batch& batch = current.batch;
  const Instant now = current.now.value_or(ControlLoop::now());
  if (deposed_) {
    answer(work, replies);
    return;
  }
  const bool pass = pass_due || plane_->wants_pass();
  if (pass) {
    const auto pass_start = std::chrono::steady_clock::now();
    plane_->schedule(now, batch);
    metrics_.count_pass(seconds_since(pass_start));
  }
  // The events committed, logged once the round is answered (with the hooks it asked for), and
  // the jobs it removed.
  std::optional<std::vector<EventRecord>> logged;
  std::vector<std::int64_t> removed;
  if (!batch.empty()) {
    plane_->seal(batch);
    const auto commit_start = std::chrono::steady_clock::now();
    auto committed = store_->commit(batch);
    if (committed) {
      const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - commit_start);
      commit_time_ = (3 * commit_time_ + took) / 4;
      metrics_.count_commit(batch, seconds_since(commit_start));
      for (const JobRecord& job : batch.jobs) {
        if (auto id = job_id_from_wire(job.id)) listing_changed_.insert(*id);
      }
      for (const std::int64_t gone : batch.jobs_removed) {
        if (auto id = job_id_from_wire(gone)) listing_changed_.insert(*id);
      }
      removed = std::move(batch.jobs_removed);
      events_->publish(batch.events);
      logged = std::move(batch.events);
    } else if (committed.error().field == kLeadershipLostField) {
      // Another server leads: nothing of this round was written, nor will anything later be.
      metrics_.count_commit_failure();
      spdlog::critical("{}; this server stops serving", committed.error().message());
      deposed_ = committed.error();
      for (Reply& r : replies) r = unavailable("this server no longer leads: " + deposed_->reason);
      if (options_.on_leadership_lost) options_.on_leadership_lost(*deposed_);
    } else {
      metrics_.count_commit_failure();
      spdlog::error("store commit failed ({}); reloading the state from the store",
                    committed.error().message());
      if (auto reloaded = load(); !reloaded) {
        spdlog::critical("cannot reload the state from the store: {}", reloaded.error().message());
        std::abort();
      }
      listed_.clear();  // the next snapshot is built anew from the reloaded plane
      if (committed.error().field == kBatchTooLargeField && work.size() > 1) {
        // Nothing of it was written: its commands run again on the reloaded state, in halves.
        const auto half = work.begin() + static_cast<std::ptrdiff_t>(work.size() / 2);
        std::vector<Pending> second(std::make_move_iterator(half),
                                    std::make_move_iterator(work.end()));
        work.erase(half, work.end());
        spdlog::warn("running the round's {} requests again in two rounds",
                     work.size() + second.size());
        round(work, false);
        round(second, pass_due);
        return;  // each half answered its own
      }
      for (Reply& r : replies) r = unavailable("the store failed: " + committed.error().message());
    }
  }
  if (pass || !batch.empty()) {
    std::lock_guard lock(mutex_);
    ++rounds_;
  }
  answer(work, replies);
  // What the answers need not wait for: the log lines of the round's events, and the hooks.
  if (logged) {
    log_events(*logged);
    run_hooks();
  }
  // A pass may ask for pre-warm calls without changing anything to commit.
  run_prewarm_hooks();
  if (!removed.empty()) {
    spdlog::info("retention: {} job(s) that ended long ago removed", removed.size());
    if (jobs_removed_) jobs_removed_(removed);
  }
}

}  // namespace tidepool
