#include "core/lane_order.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>

namespace tidepool {
namespace {

constexpr std::array<std::string_view, 3> kNames = {"fifo", "las", "srpt"};

std::string gpu_hours(std::int64_t gpu_seconds) {
  return fmt::format("{:.1f} GPU-h", static_cast<double>(gpu_seconds) / 3600.0);
}

class FifoOrder final : public LaneOrder {
 public:
  explicit FifoOrder(LaneOrderConfig config) : LaneOrder(std::move(config)) {}
  [[nodiscard]] LaneOrderKind kind() const override { return LaneOrderKind::kFifo; }
  [[nodiscard]] LaneRank rank(const LaneJob& job) const override { return {0, job.submit_time}; }
  [[nodiscard]] bool slices() const override { return false; }
  [[nodiscard]] std::string explain(const LaneJob&) const override { return "in submission order"; }

  [[nodiscard]] bool clearly_ahead(const LaneRank&, const LaneRank&) const override {
    return false;
  }
  [[nodiscard]] LaneRank slice_class(const LaneRank&) const override { return {}; }
};

class LeastAttainedOrder final : public LaneOrder {
 public:
  explicit LeastAttainedOrder(LaneOrderConfig config) : LaneOrder(std::move(config)) {}
  [[nodiscard]] LaneOrderKind kind() const override { return LaneOrderKind::kLeastAttained; }
  [[nodiscard]] LaneRank rank(const LaneJob& job) const override {
    return {band_of(job.attained_gpu_seconds), job.submit_time};
  }
  [[nodiscard]] bool slices() const override { return true; }
  [[nodiscard]] std::string explain(const LaneJob& job) const override {
    return fmt::format("attained {}, band {} of {}", gpu_hours(job.attained_gpu_seconds),
                       band_of(job.attained_gpu_seconds) + 1, config().las_thresholds.size() + 1);
  }

  [[nodiscard]] bool clearly_ahead(const LaneRank& waiting,
                                   const LaneRank& running) const override {
    return waiting.band < running.band;
  }
  [[nodiscard]] LaneRank slice_class(const LaneRank& waiting) const override {
    return {waiting.band, 0};
  }
};

class ShortestRemainingOrder final : public LaneOrder {
 public:
  explicit ShortestRemainingOrder(LaneOrderConfig config) : LaneOrder(std::move(config)) {}
  [[nodiscard]] LaneOrderKind kind() const override { return LaneOrderKind::kShortestRemaining; }
  [[nodiscard]] LaneRank rank(const LaneJob& job) const override {
    return {0, job.remaining_gpu_seconds};
  }
  [[nodiscard]] bool slices() const override { return true; }
  [[nodiscard]] std::string explain(const LaneJob& job) const override {
    return fmt::format("predicted to need {} more, attained {}",
                       gpu_hours(job.remaining_gpu_seconds), gpu_hours(job.attained_gpu_seconds));
  }

  [[nodiscard]] bool clearly_ahead(const LaneRank& waiting,
                                   const LaneRank& running) const override {
    return waiting.value <= running.value / 2;
  }
  [[nodiscard]] LaneRank slice_class(const LaneRank& waiting) const override { return waiting; }
};

}  // namespace

std::span<const std::string_view> lane_order_names() { return kNames; }

std::string_view lane_order_name(LaneOrderKind kind) {
  return kNames[static_cast<std::size_t>(kind)];
}

Result<LaneOrderKind> parse_lane_order(std::string_view text) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (text == kNames[i]) return static_cast<LaneOrderKind>(i);
  }
  return fail("order", fmt::format("unknown order '{}'; known: {}", text, fmt::join(kNames, ", ")));
}

bool LaneOrder::sliceable(const LaneJob& running) const {
  return slices() && running.attained_gpu_seconds >= config_.las_thresholds.front();
}

bool LaneOrder::may_slice(const LaneJob& running, const LaneRank& waiting_rank) const {
  return sliceable(running) && clearly_ahead(waiting_rank, rank(running));
}

std::int64_t LaneOrder::band_of(std::int64_t attained) const {
  const auto& t = config_.las_thresholds;
  return std::upper_bound(t.begin(), t.end(), attained) - t.begin();
}

Result<std::unique_ptr<LaneOrder>> make_lane_order(LaneOrderKind kind, LaneOrderConfig config) {
  const auto& t = config.las_thresholds;
  if (t.empty() || !std::is_sorted(t.begin(), t.end()) || t.front() <= 0 ||
      std::adjacent_find(t.begin(), t.end()) != t.end()) {
    return fail("las_thresholds", "must be positive and ascending, at least one");
  }
  switch (kind) {
    case LaneOrderKind::kFifo:
      return std::make_unique<FifoOrder>(std::move(config));
    case LaneOrderKind::kLeastAttained:
      return std::make_unique<LeastAttainedOrder>(std::move(config));
    case LaneOrderKind::kShortestRemaining:
      return std::make_unique<ShortestRemainingOrder>(std::move(config));
  }
  return fail("order", "unknown order");
}

bool promoted_at(Seconds waiting_since, Seconds now, Seconds starvation_limit) {
  return starvation_limit > 0 && now - waiting_since >= starvation_limit;
}

}  // namespace tidepool
