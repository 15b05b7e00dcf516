// The pass's tidal-window stage (see scheduler.h): which windows are in effect, what a waiting
// job must leave free beside it for them, and the drain that keeps an open window's GPUs free.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "core/scheduler.h"
#include "core/scheduler_pass_state.h"

namespace tidepool {

void Scheduler::find_windows_in_effect(Seconds now, PassState& state) const {
  std::vector<PassState::Window>& in_effect = state.windows;
  in_effect.clear();
  for (const TidalWindow& w : config_.windows) {
    PassState::Window pw;
    pw.window = &w;
    pw.open = window_open(w, now, config_.day_offset);
    if (pw.open) {
      pw.closes_at = next_window_close(w, now, config_.day_offset);
      in_effect.push_back(pw);
    } else {
      pw.opens_at = next_window_open(w, now, config_.day_offset);
      if (pw.opens_at - now <= config_.drain_lead) in_effect.push_back(pw);
    }
  }
}

Scheduler::WindowVerdict Scheduler::window_verdict(const Entry& e, Seconds now,
                                                   PassState& state) const {
  const Job& job = e.job;
  const std::int64_t gpus = whole_gpus(e.milli);
  WindowVerdict verdict;
  std::size_t binding = 0;  // the window holding the most
  std::int64_t binding_held = 0;
  for (std::size_t i = 0; i < state.windows.size(); ++i) {
    const PassState::Window& w = state.windows[i];
    const JobClass protected_class = w.window->job_class;
    const std::int64_t class_gpus = whole_gpus(class_usage_milli(protected_class));
    if (job.job_class == protected_class) {
      verdict.admitted = verdict.admitted || (w.open && class_gpus + gpus <= w.window->gpus);
      continue;
    }
    const std::int64_t held = std::max<std::int64_t>(0, w.window->gpus - class_gpus);
    const bool runs_into = w.open || now + predicted_remaining(e) > w.opens_at;
    if (!runs_into || held == 0) continue;
    verdict.hold += held;
    verdict.hold_open = verdict.hold_open || w.open;
    if (held > binding_held) {
      binding = i;
      binding_held = held;
    }
  }
  const std::int64_t hold = verdict.hold;
  if (hold > 0 && whole_free_gpus(job.gang.task.models) - gpus < hold) {
    const PassState::Window& w = state.windows[binding];
    auto& cached = state.window_reasons[{binding, hold}];
    if (!cached.text) {
      const std::string name(job_class_name(w.window->job_class));
      cached = make_reason(PendingKind::kWindow,
                           w.open ? fmt::format("{} window until {}: {} GPUs held free for {}",
                                                name, time_of_day_text(w.closes_at), hold, name)
                                  : fmt::format("{} window opens at {}; {} GPUs kept for it", name,
                                                time_of_day_text(w.opens_at), hold));
    }
    verdict.reason = cached;
  }
  return verdict;
}

void Scheduler::drain_for_windows(Seconds now, PassResult& out) {
  // An open window's GPUs are its class's own guarantee, taken out of every tenant's in
  // proportion (the book holds them, see pass): the tenants above what is left of theirs are
  // drained first.
  for (const TidalWindow& w : config_.windows) {
    if (!window_open(w, now, config_.day_offset)) continue;
    const std::int64_t used = whole_gpus(class_usage_milli(w.job_class));
    const std::int64_t keep = std::max<std::int64_t>(0, w.gpus - used);
    std::int64_t free = whole_free_gpus(ModelSet::any());
    if (free >= keep) continue;
    // Victims: preemptible jobs of other classes not admitted by a window; lowest priority, then
    // of tenants above what the windows leave of their guarantee, then the most recently
    // started, then id.
    std::vector<std::tuple<int, bool, Seconds, std::uint32_t>> order;
    for (JobId id : running_) {
      const Entry& v = entry(id);
      if (v.job.job_class == w.job_class || !v.job.preemptible || v.window_admitted) continue;
      const std::size_t t = v.job.tenant.value;
      const bool within = !config_.quotas || t >= tenant_usage_.size() ||
                          tenant_usage_[t] <= book_.guaranteed_total(v.job.tenant);
      order.emplace_back(v.job.priority_class, within, -v.segment_start, id.value);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [priority, within, neg_start, id] : order) {
      if (free >= keep) break;
      Entry& v = entry(JobId{id});
      free += whole_gpus(v.milli);
      out.preempted.push_back(preempt(v, now, PreemptionCause::kDrain, std::nullopt));
    }
  }
}

std::string Scheduler::time_of_day_text(Seconds t) const {
  const Seconds tod = (t + config_.day_offset) % kSecondsPerDay;
  return clock_text(tod == 0 ? kSecondsPerDay : tod);
}

}  // namespace tidepool
