// store.h's rules for the ledger, in the words every store refuses with (the memory store, SQLite
// and etcd give the same reasons).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/store.h"

namespace tidepool {

// Why an entry with seq `seq` may not follow the last stored seq `last`, if it may not.
[[nodiscard]] std::optional<std::string> ledger_append_refusal(std::int64_t seq, std::int64_t last);
// Why `fold` may not apply to a ledger whose last stored seq is `last`, if it may not.
[[nodiscard]] std::optional<std::string> ledger_fold_refusal(const LedgerFoldRecord& fold,
                                                             std::int64_t last);

}  // namespace tidepool
