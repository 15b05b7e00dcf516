// What the node agents report about their GPUs, kept by the server: the latest figures of every
// GPU for /metrics, and the idle-GPU alerts. An alert is raised for a GPU allocated to a job whose
// utilisation stays low for a whole window (15 minutes by default): "idle" when its memory is low
// too (the job holds the GPU and does nothing with it), "stalled" when its memory is high (the
// model is loaded but no kernel runs: typically a stalled data loader).
//
// Pure like the control plane: no I/O, threads or clock; time comes in as now (milliseconds of
// any monotonic clock the caller keeps). Not thread-safe: one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/agent_wire.h"  // GpuReading: one GPU's sample as the heartbeat carries it
#include "core/error.h"
#include "core/instant.h"
#include "core/job_advice.h"  // GpuUse

namespace tidepool {

// When an allocated GPU counts as idle.
struct IdleGpuRule {
  Millis window = std::chrono::minutes{15};  // how long the condition must hold, > 0
  int low_utilization_percent = 5;           // utilisation below this is low, 0..100 (0: never)
  int high_memory_percent = 50;  // memory used at or above this share of the total is high, 1..100
};

// The rule, or an Error naming the field at fault ("window_ms", "low_utilization_percent",
// "high_memory_percent") for the configuration reader to report.
Result<IdleGpuRule> validate_idle_gpu_rule(const IdleGpuRule& rule);

enum class IdleKind : std::uint8_t {
  kIdle,     // low utilisation, low memory
  kStalled,  // low utilisation, high memory: a stalled data loader
};
std::string_view idle_kind_name(IdleKind kind);  // "idle", "stalled"

struct IdleGpuAlert {
  std::string node;
  int gpu = 0;           // the GPU's index on the node
  std::int64_t job = 0;  // the job holding the GPU
  IdleKind kind = IdleKind::kIdle;
  Instant since;  // the first reading of the condition
  // One line for people, with the figures of the GPU's latest reading: "GPU 3 on node gpu-a1,
  // held by job 42, below 5% utilisation with memory at or above 50% for 15m (a stalled data
  // loader?): 2% utilisation, 61440 of 81920 MiB used".
  std::string reason;
};

class GpuTelemetry {
 public:
  // `rule` must pass validate_idle_gpu_rule.
  explicit GpuTelemetry(IdleGpuRule rule = {});

  // All the GPUs of `node` at now; they replace what the node reported before (a GPU missing
  // from `readings` loses its series). Indices should be distinct (the heartbeat parser checks
  // it); of two readings with one index, the later counts. job_by_gpu[i] is the job holding GPU
  // index i on that node; 0 (or an index past its end): none.
  //
  // Returns the alerts raised by this update, by GPU index. The condition of an alert is keyed by
  // (node, gpu, job, kind): it starts at the first reading with an allocated GPU below the
  // utilisation threshold, and the alert is raised once, at the first update where the condition
  // has held for window. It is raised again only after the condition broke and then held for
  // a whole window again. The condition breaks at a reading outside it (utilisation back up, or
  // the memory crossing the threshold, which starts the condition of the other kind), when the GPU
  // is released or given to another job, at a gap without readings longer than the window, and
  // when now goes back in time.
  std::vector<IdleGpuAlert> update(const std::string& node, std::span<const GpuReading> readings,
                                   std::span<const std::int64_t> job_by_gpu, Instant now);

  // The node went away: its series disappear and its conditions end. The alert counters stay.
  void forget_node(const std::string& node);

  // The alerts whose condition is past the window as of each GPU's latest reading, for views;
  // ordered by node, then GPU. Their reason gives the latest figures.
  [[nodiscard]] std::vector<IdleGpuAlert> active() const;

  // An allocated GPU whose latest reading is below the utilisation threshold (idle or stalled),
  // however long it has been: what the dashboard's idle GPU-hours add up. Ordered by node, then
  // GPU.
  struct LowUse {
    std::string node;
    int gpu = 0;
    std::int64_t job = 0;
  };
  [[nodiscard]] std::vector<LowUse> low_use_now() const;

  // Each GPU allocated to `job`, by node, then GPU: its latest utilisation (percent), and whether
  // it has been idle or stalled for the rule's whole window (its alert raised).
  [[nodiscard]] std::vector<GpuUse> use_of_job(std::int64_t job) const;

  // Appends the Prometheus text exposition format (version 0.0.4), with HELP and TYPE once per
  // family, every family even when it has no sample, series ordered by node, then GPU:
  //   tidepool_gpu_utilization_percent{node,gpu,model}           gauge
  //   tidepool_gpu_memory_used_bytes{node,gpu,model}             gauge
  //   tidepool_gpu_memory_total_bytes{node,gpu,model}            gauge
  //   tidepool_gpu_power_watts{node,gpu,model}                   gauge (312.5 from 312500 mW)
  //   tidepool_gpu_temperature_celsius{node,gpu,model}           gauge
  //   tidepool_gpu_throttle_reasons{node,gpu,model}              gauge, NVML's bit mask
  //   tidepool_gpu_ecc_errors_uncorrected_total{node,gpu,model}  counter
  //   tidepool_gpu_in_use{node,gpu,model}                     gauge, 1 allocated, 0 free
  //                                                              without the job label
  //   tidepool_gpu_idle{node,gpu,kind}                           gauge, 1 while an alert's
  //                                                              condition is past the window
  //   tidepool_gpu_idle_alerts_total{kind}                       counter of alerts raised
  void write_metrics(std::string& out) const;

 private:
  struct GpuState {
    GpuReading reading;  // the latest
    std::int64_t job = 0;
    Instant seen_at;               // when `reading` came
    std::optional<IdleKind> kind;  // the condition holding at `reading`, if any
    Instant since;                 // the condition's first reading
    bool raised = false;           // its alert was raised
  };

  [[nodiscard]] std::optional<IdleKind> condition(const GpuReading& reading,
                                                  std::int64_t job) const;
  [[nodiscard]] IdleGpuAlert alert(const std::string& node, const GpuState& gpu) const;

  IdleGpuRule rule_;
  std::map<std::string, std::map<int, GpuState>> nodes_;  // ordered: the metrics' order
  std::array<std::uint64_t, 2> alerts_raised_{};          // by IdleKind
};

}  // namespace tidepool
