// store.h's rules for the ledger and the event stream, in the words every store refuses with (the
// memory store, SQLite and etcd give the same reasons).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/store.h"

namespace tidepool {

// The event stream: the last seq an event must follow once the batch's events_dropped_through
// `dropped` is applied to a store whose last stored event seq is `last` (0: it holds none), or why
// `dropped` may not apply. Then why an event with seq `seq` may not follow `last`, if it may not.
[[nodiscard]] Result<std::int64_t> events_last_after_drop(std::int64_t last, std::int64_t dropped,
                                                          const std::string& field);
[[nodiscard]] std::optional<std::string> event_append_refusal(std::int64_t seq, std::int64_t last);

// Why an entry with seq `seq` may not follow the last stored seq `last`, if it may not.
[[nodiscard]] std::optional<std::string> ledger_append_refusal(std::int64_t seq, std::int64_t last);
// Why `fold` may not apply to a ledger whose last stored seq is `last`, if it may not.
[[nodiscard]] std::optional<std::string> ledger_fold_refusal(const LedgerFoldRecord& fold,
                                                             std::int64_t last);

}  // namespace tidepool
