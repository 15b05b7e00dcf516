#include "core/pending_reason.h"

namespace tidepool {

std::string_view pending_kind_name(PendingKind kind) {
  switch (kind) {
    case PendingKind::kNotConsidered:
      return "not-considered";
    case PendingKind::kQuota:
      return "quota";
    case PendingKind::kCapacity:
      return "capacity";
    case PendingKind::kTopology:
      return "topology";
    case PendingKind::kReservation:
      return "reservation";
    case PendingKind::kHeadOfLine:
      return "head-of-line";
    case PendingKind::kWindow:
      return "window";
    case PendingKind::kBudget:
      return "budget";
  }
  return "not-considered";
}

std::string_view PendingReason::message() const {
  if (text) return *text;
  return kind == PendingKind::kNotConsidered ? "submitted after the last scheduling pass" : "";
}

PendingReason make_reason(PendingKind kind, std::string text) {
  return {kind, std::make_shared<const std::string>(std::move(text))};
}

}  // namespace tidepool
