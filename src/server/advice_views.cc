// The view of a job's advice (GET /v1/jobs/ID/advice, `tidepool advise`): the core's advice rule
// (core/job_advice.h) on the steps the job reported, where it runs, and its GPUs' utilisation.
#include <algorithm>
#include <utility>

#include "core/efficiency_model.h"
#include "core/job_advice.h"
#include "server/plane_views.h"

namespace tidepool {
namespace {

// What the job's reports measured, as the advice reads them: the median step, mean compute and
// all-reduce figures of the steps that gave them.
MeasuredSteps measured_steps(const ServerJob& job) {
  MeasuredSteps m;
  m.gpus = job.spec.tasks * std::max(1, job.spec.gpus_per_task);
  if (job.steps.steps.count() == 0) return m;
  m.step_us = job.steps.steps.quantile_us(0.5);
  m.compute_us = job.steps.mean_compute_us();
  m.allreduce_us = job.steps.mean_allreduce_us();
  m.allreduce_bytes = job.steps.mean_allreduce_bytes();
  return m;
}

nlohmann::json span_json(const RingSpan& ring, const Bottleneck& link) {
  return {{"gpus", ring.gpus},
          {"nvlink_domains", ring.span.nvlink_domains},
          {"nodes", ring.span.nodes},
          {"leaves", ring.span.leaves},
          {"slowest_link", comm_link_name(link.link)},
          {"slowest_link_gbps", link.gbps},
          {"oversubscription", link.oversubscription}};
}

}  // namespace

nlohmann::json PlaneViews::advice(const ServerJob& job) const {
  const MeasuredSteps steps = measured_steps(job);
  std::optional<AdvicePlacement> placement;
  if (job.state == JobState::kRunning && steps.gpus >= 2) {
    if (auto assignments = state_.to_assignments(job); assignments && !assignments->empty()) {
      const Pool& pool = state_.scheduler().pool();
      const RingSpan actual = ring_span(pool, *assignments);
      placement =
          AdvicePlacement{actual, ideal_ring_span(pool, actual.gpus), pool.topology().links};
    }
  }
  // A GPU counts as idle once its low use has lasted the idle-GPU rule's window (its alert is
  // raised), not at a single low reading.
  const std::vector<GpuUse> gpus = job.state == JobState::kRunning
                                       ? nodes_.telemetry().use_of_job(job.id.value)
                                       : std::vector<GpuUse>{};
  const JobAdvice advice = advise_job(steps, placement, gpus, AdviceConfig{});
  nlohmann::json out = {{"job", job.id.value},
                        {"advice", advice_lines(advice)},
                        {"steps_reported", job.steps.steps.count()}};
  if (!advice.comm_note.empty()) out["note"] = advice.comm_note;
  if (const auto& a = advice.accumulate) {
    out["accumulate"] = {
        {"steps", a->steps},
        {"comm_share_now", a->comm_share_now_permille / 1000.0},
        {"comm_share_expected", a->comm_share_expected_permille / 1000.0},
        {"micro_batch_us_now", a->now_us},
        {"micro_batch_us_expected", a->expected_us},
        {"throughput_gain", expected_gain_permille(a->now_us, a->expected_us) / 1000.0}};
    if (a->bus_bytes_per_second > 0) {
      out["accumulate"]["bus_bytes_per_second"] = a->bus_bytes_per_second;
      out["accumulate"]["bus_share_of_link"] = a->bus_permille_of_link / 1000.0;
      out["accumulate"]["link"] = comm_link_name(a->link.link);
    }
  }
  if (const auto& p = advice.compact) {
    out["compact"] = {{"now", span_json(p->actual, p->actual_link)},
                      {"possible", span_json(p->ideal, p->ideal_link)},
                      {"step_us_now", p->now_us},
                      {"step_us_expected", p->expected_us},
                      {"slowdown", expected_gain_permille(p->now_us, p->expected_us) / 1000.0}};
  }
  if (const auto& i = advice.idle) {
    out["idle"] = {{"idle_gpus", i->idle_gpus},
                   {"gpus", i->gpus},
                   {"mean_utilization_percent", i->mean_utilization_percent}};
  }
  // The MFU the advice would reach, where the job declared its FLOPs: MFU scales with the inverse
  // of the time per micro-batch.
  const double peak = peak_flops_per_s(job);
  if (const auto mfu = job.steps.mfu(job.spec.model_flops_per_step.value_or(0), peak)) {
    out["mfu_now"] = *mfu;
    double gain = 1.0;
    if (advice.accumulate) {
      gain = std::max(
          gain, expected_gain_permille(advice.accumulate->now_us, advice.accumulate->expected_us) /
                    1000.0);
    }
    if (advice.compact) {
      gain = std::max(
          gain,
          expected_gain_permille(advice.compact->now_us, advice.compact->expected_us) / 1000.0);
    }
    out["mfu_expected"] = *mfu * gain;
  }
  return out;
}

}  // namespace tidepool
