#include "store/ledger_rules.h"

#include <fmt/format.h>

namespace tidepool {

Result<std::int64_t> events_last_after_drop(std::int64_t last, std::int64_t dropped,
                                            const std::string& field) {
  if (dropped < 0) {
    return fail(field, fmt::format("events dropped through seq {}: not a seq", dropped));
  }
  if (last == 0) return dropped;  // where a restored stream starts
  if (dropped > last) {
    return fail(field, fmt::format("events dropped through seq {}: past the last stored seq {}",
                                   dropped, last));
  }
  return last;
}

std::optional<std::string> event_append_refusal(std::int64_t seq, std::int64_t last) {
  if (seq == last + 1) return std::nullopt;
  return fmt::format("event seq {} does not follow the last stored seq {}", seq, last);
}

std::optional<std::string> ledger_append_refusal(std::int64_t seq, std::int64_t last) {
  if (seq > last) return std::nullopt;
  return fmt::format("ledger seq {} does not follow the last stored seq {}", seq, last);
}

std::optional<std::string> ledger_fold_refusal(const LedgerFoldRecord& fold, std::int64_t last) {
  const std::string name = fmt::format("ledger fold {}..{}", fold.first_seq, fold.last_seq);
  if (fold.first_seq < 1 || fold.last_seq < fold.first_seq || fold.last_seq > last) {
    return fmt::format("{}: not a run of the stored seqs 1..{}", name, last);
  }
  const auto n = static_cast<std::int64_t>(fold.carried.size());
  if (n < 1 || n > fold.last_seq - fold.first_seq + 1) {
    return fmt::format("{}: {} carried entries, not 1..{}", name, n,
                       fold.last_seq - fold.first_seq + 1);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t wanted = fold.last_seq - n + 1 + i;
    if (fold.carried[static_cast<std::size_t>(i)].seq != wanted) {
      return fmt::format("{}: carried entry {} has seq {}, not {}", name, i,
                         fold.carried[static_cast<std::size_t>(i)].seq, wanted);
    }
  }
  return std::nullopt;
}

}  // namespace tidepool
