// Why a job waits: one current reason per pending job, a kind (for totals) and a text with the
// numbers ("tenant search uses 64000/64000m guaranteed H100, borrowing limit 0m; ...", "no leaf
// switch with 16 free GPUs; best has 12", "behind the reservation of job 1834", "inference
// window until 24:00"). Texts are shared between the jobs a pass turns away for the same cause,
// so setting a reason costs no allocation.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/resources.h"

namespace tidepool {

enum class PendingKind : std::uint8_t {
  kNotConsidered,  // submitted after the last pass
  kQuota,          // the tenant's guarantee and borrowing limits refuse it
  kCapacity,       // fewer free GPUs (of the models it accepts) than it needs
  kTopology,       // enough free GPUs, but not within the level it requires (or on one node)
  kReservation,    // it fits, but would delay the reserved start of an earlier job
  kHeadOfLine,     // strict FIFO: behind the first job in the queue, which does not fit
  kWindow,         // capacity protected for another job class by a tidal window
  kBudget,         // its tenant's quarterly budget is spent (core/budget.h)
};
inline constexpr int kPendingKinds = 8;

// "not-considered", "quota", "capacity", "topology", "reservation", "head-of-line", "window",
// "budget"
std::string_view pending_kind_name(PendingKind kind);

struct PendingReason {
  PendingKind kind = PendingKind::kNotConsidered;
  std::shared_ptr<const std::string> text;

  [[nodiscard]] std::string_view message() const;
};

PendingReason make_reason(PendingKind kind, std::string text);

// Time spent waiting, per kind, in seconds.
using PendingSeconds = std::array<Seconds, kPendingKinds>;

}  // namespace tidepool
