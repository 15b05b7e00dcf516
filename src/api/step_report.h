// Step telemetry on the wire: the line protocol a training job reports its steps in, the bounded
// reader the agent parses it with, and the JSON of a StepStats (core/step_stats.h) that the agent
// forwards and the server keeps. docs/step-telemetry.md says the same for job authors.
//
// The line protocol
//   The agent gives each task a file in TIDEPOOL_STEP_REPORT (in its own folder); the task
//   appends one line per step:
//
//     step=<n> time_us=<int> [compute_us=<int>] [allreduce_us=<int>] [allreduce_bytes=<int>]
//
//   - fields are key=value words separated by single or repeated spaces (or tabs), in any order;
//     the line ends with '\n' (a '\r' before it is allowed);
//   - values are decimal integers, digits only (no sign, no exponent, no fraction), at most 19
//     digits; the limits are check_step_sample's: step 0..2^62, time_us 0..10^12, compute_us and
//     allreduce_us 0..time_us, allreduce_bytes 0..2^50 and only with allreduce_us;
//   - step and time_us are required; each key at most once;
//   - keys this version does not know are ignored if they start with "x_" (a job's own notes:
//     "x_loss=..."), and refuse the line otherwise, so that a misspelt key ("compute_ms") is
//     noticed rather than silently lost;
//   - a line of more than kMaxStepLineBytes bytes (without its '\n') is refused whole;
//   - blank lines and lines starting with '#' are skipped without being counted.
//   A refused line is counted (StepStats::refused_lines, shown with the job's steps) and skipped;
//   it never stops the job or the agent.
//
// The agent reads the file as it grows, at most kMaxStepReadBytes a turn, and keeps nothing but
// the StepStats since its last report and one partial line of at most kMaxStepLineBytes: a job
// that writes faster than that, or garbage, costs the agent bounded memory and time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/step_stats.h"

namespace tidepool {

inline constexpr std::size_t kMaxStepLineBytes = 256;
inline constexpr std::int64_t kMaxStepReadBytes = 256 * 1024;

// One line of the protocol (without its '\n'): the sample, or nullopt for a blank or comment
// line; an Error naming the key ("compute_us") or "line" and saying why.
Result<std::optional<StepSample>> parse_step_line(std::string_view line);

// Reads the protocol from a stream of bytes handed over in pieces of any size (the agent reads
// the task's file from where it stopped). Complete lines go into stats() at once; the last,
// unfinished line is kept (at most kMaxStepLineBytes of it: a longer one is refused at its end).
class StepLineReader {
 public:
  void feed(std::string_view bytes);
  // What was read since the last take(), which empties it; the partial line stays.
  StepStats take();
  [[nodiscard]] const StepStats& stats() const { return stats_; }
  // The first reason a line was refused since the last take (for the agent's log), if any.
  [[nodiscard]] const std::optional<Error>& first_refusal() const { return first_refusal_; }

 private:
  void line_done();

  StepStats stats_;
  std::string partial_;
  bool overlong_ = false;  // the current line passed kMaxStepLineBytes: refused at its end
  std::optional<Error> first_refusal_;
};

// A StepStats as JSON:
//   {"steps": 120, "sum_us": 5400000, "min_us": 41000, "max_us": 52000,
//    "buckets": [[301, 7], [302, 113]],
//    "compute_steps": 120, "compute_step_us": 5400000, "compute_us": 3600000,
//    "allreduce_steps": 120, "allreduce_step_us": 5400000, "allreduce_us": 1700000,
//    "allreduce_byte_steps": 120, "allreduce_bytes": 125829120,
//    "last_step": 119, "refused_lines": 0}
// buckets: the histogram's non-empty buckets (StepHistogram) as [bucket, count] pairs, buckets
// ascending, counts > 0, their counts adding up to steps. Every key is required but last_step
// (default -1) and refused_lines (default 0); every figure an integer 0..2^63-1 (last_step
// -1..2^62); the parts of a figure no larger than the whole (compute_steps and allreduce_steps <=
// steps, allreduce_byte_steps <= allreduce_steps, compute_us <= compute_step_us, allreduce_us <=
// allreduce_step_us); the histogram's sum, min and max as StepHistogram::from_parts checks them.
// Unknown keys are errors. Errors name the field under `path` ("steps[0].stats.buckets[3]").
nlohmann::json step_stats_to_json(const StepStats& stats);
Result<StepStats> step_stats_from_json(const nlohmann::json& value, const std::string& path);

// What the API and `tidepool job` show of a job's steps (every key absent when unknown):
//   {"steps": 120, "last_step": 119, "mean_us": 45000, "p50_us": 44800, "p90_us": 47000,
//    "p99_us": 51000, "min_us": 41000, "max_us": 52000, "comm_share": 0.333,
//    "comm_share_source": "step_minus_compute", "mean_compute_us": 30000,
//    "mean_allreduce_us": 14000, "mean_allreduce_bytes": 1048576,
//    "allreduce_alg_bytes_per_s": 7.5e7, "allreduce_bus_bytes_per_s": 1.1e8,
//    "allreduce_ranks": 4, "model_flops_per_step": 1e12, "peak_flops_per_s": 3.9576e15,
//    "mfu": 0.41, "refused_lines": 0}
// `ranks`: the ring of the bus bandwidth (the job's GPUs); `model_flops_per_step` as the spec
// declares it; `peak_flops_per_s` of the GPUs the job holds (0: unknown). mfu needs both.
nlohmann::json step_summary_json(const StepStats& stats, int ranks,
                                 std::optional<double> model_flops_per_step,
                                 double peak_flops_per_s);

}  // namespace tidepool
