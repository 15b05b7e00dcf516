// A backup of a running server's state (GET /v1/admin/backup), consistent although the server
// goes on committing while it is taken.
#pragma once

#include <string>

#include "core/error.h"
#include "server/control_loop.h"
#include "store/store.h"

namespace tidepool {

// The backup file's text (store/backup_file.h) of `store`, the store that `loop` commits to. The
// snapshot is loaded on the loop thread, as a command of a round, before that round commits: it
// holds every round committed before and nothing of a later one. The events up to its last seq
// are read afterwards, on the calling thread: they never change once committed, so they are those
// of the snapshot's moment. The loop does nothing else while the snapshot loads, about as long as
// loading the state at the server's start takes. `source` names the store's kind in the header.
//
// Errors: the server is stopping or the store failed (the field and reason of either), or the
// state cannot be written as a backup (backup_file.h).
[[nodiscard]] Result<std::string> back_up_running_store(ControlLoop& loop, Store& store,
                                                        const std::string& source);

}  // namespace tidepool
