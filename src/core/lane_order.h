// The order of one tenant's pending jobs (its lane): a seam with one class per order. The order
// between tenants (priority class, then decayed weighted fair share, queue_order.h) is not an
// order's business; an order ranks the jobs of one lane after priority.
//
//   fifo  submit time, earlier first (a Kueue/Slurm queue);
//   las   least attained service, discretised as Tiresias' 2D-LAS: band = the number of thresholds
//         of attained GPU-seconds the job has passed (0 until the first), then submit time;
//   srpt  shortest predicted remaining GPU-time first (predicted runtime less what checkpoints
//         saved, times the gang's GPUs), then submit time.
//
// Aging (the same for every order, so no job starves): a job pending for `starvation_limit` or
// longer since its submission or its last preemption is promoted to band kPromotedBand, ahead of
// every unpromoted job of its lane, promoted jobs in the order they began waiting. The scheduler
// makes a promoted job's lane wait for it (the lane's later jobs do not start ahead of it), so
// its tenant's capacity drains to it, and lets it stop its own tenant's sliceable jobs whatever
// their rank (so the tenant's guarantee does not sit idle while it drains). Each promotion stops
// jobs at most once: the job starts, and its victims wait their own limit before they are
// promoted in turn. Against other tenants' jobs a promoted job compares its own rank.
//
// Time slicing: under an order that slices (las, srpt), a running job of the lane whose attained
// service passed the first threshold may be checkpointed and stopped for a waiting job of the
// same tenant that ranks ahead of it (LaneOrder::may_slice). A rank is a value: the same job gives
// the same rank, and ties are broken by job id by the caller, so every order is total.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/ids.h"
#include "core/resources.h"

namespace tidepool {

enum class LaneOrderKind : std::uint8_t { kFifo, kLeastAttained, kShortestRemaining };

// "fifo", "las", "srpt", in that order.
std::span<const std::string_view> lane_order_names();
std::string_view lane_order_name(LaneOrderKind kind);
// Fails naming "order" with the known names.
Result<LaneOrderKind> parse_lane_order(std::string_view text);

inline constexpr std::int64_t kPromotedBand = -1;

// What an order knows of a job of its lane.
struct LaneJob {
  JobId id;
  Seconds submit_time = 0;
  std::int64_t gpus = 0;                   // whole GPUs of the gang
  std::int64_t attained_gpu_seconds = 0;   // service received so far
  std::int64_t remaining_gpu_seconds = 0;  // predicted, at least a minute x GPUs
};

// Lower first: band, then value (the caller breaks ties by job id).
struct LaneRank {
  std::int64_t band = 0;
  std::int64_t value = 0;
  friend auto operator<=>(const LaneRank&, const LaneRank&) = default;
};

struct LaneOrderConfig {
  // Attained GPU-seconds that end the LAS bands, ascending and positive (band i holds jobs below
  // threshold i; past the last, the last band).
  std::vector<std::int64_t> las_thresholds = {3600, 36000};
};

class LaneOrder {
 public:
  virtual ~LaneOrder() = default;
  [[nodiscard]] virtual LaneOrderKind kind() const = 0;
  [[nodiscard]] std::string_view name() const { return lane_order_name(kind()); }
  // The job's rank in its lane (never kPromotedBand: promotion is the caller's, see above).
  [[nodiscard]] virtual LaneRank rank(const LaneJob& job) const = 0;
  // Whether running jobs of the lane may be stopped for waiting ones that rank ahead.
  [[nodiscard]] virtual bool slices() const = 0;
  // What the rank rests on, for a user: "attained 12.0 GPU-h, band 1 of 3".
  [[nodiscard]] virtual std::string explain(const LaneJob& job) const = 0;

  // Time slicing: whether `running` (its attained service counted to now) may be stopped for a
  // waiting job of rank `waiting_rank` (its own rank, never kPromotedBand). True when the order
  // slices, the running job passed the first threshold, and the waiting job is clearly ahead:
  // las, a lower band; srpt, at most half the predicted remaining GPU-time. Jobs of one band do
  // not stop each other, so slicing cannot go round in circles.
  [[nodiscard]] bool may_slice(const LaneJob& running, const LaneRank& waiting_rank) const;
  // The part of may_slice that depends on the running job alone: the order slices and the job
  // passed the first threshold.
  [[nodiscard]] bool sliceable(const LaneJob& running) const;
  // The part that compares ranks: whether `waiting` is clearly ahead of `running`. Monotone in
  // the running rank: a job ranked further back is no less clearly behind, so a waiting job has
  // a victim among sliceable jobs if and only if it is clearly ahead of the one ranked last.
  [[nodiscard]] virtual bool clearly_ahead(const LaneRank& waiting,
                                           const LaneRank& running) const = 0;
  // The part of a waiting rank that may_slice depends on (waiting jobs of one class may stop the
  // same running jobs).
  [[nodiscard]] virtual LaneRank slice_class(const LaneRank& waiting_rank) const = 0;

 protected:
  explicit LaneOrder(LaneOrderConfig config) : config_(std::move(config)) {}
  // The LAS band of `attained` GPU-seconds.
  [[nodiscard]] std::int64_t band_of(std::int64_t attained) const;
  [[nodiscard]] const LaneOrderConfig& config() const { return config_; }

 private:
  LaneOrderConfig config_;
};

// Fails naming "las_thresholds" unless they are positive and ascending, at least one.
Result<std::unique_ptr<LaneOrder>> make_lane_order(LaneOrderKind kind, LaneOrderConfig config);

// Whether a job waiting since `waiting_since` is promoted at `now` (limit 0: never).
[[nodiscard]] bool promoted_at(Seconds waiting_since, Seconds now, Seconds starvation_limit);

}  // namespace tidepool
