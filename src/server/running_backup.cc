#include "server/running_backup.h"

#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "store/backup_file.h"
#include "store/store_backup.h"

namespace tidepool {

Result<std::string> back_up_running_store(ControlLoop& loop, Store& store,
                                          const std::string& source) {
  auto loaded = std::make_shared<std::optional<Result<Snapshot>>>();
  const Reply reply = loop.call([&store, loaded](ControlPlane&, Instant, Batch&) {
    *loaded = store.load();
    return answer(nullptr);
  });
  if (!reply) return std::unexpected(reply.error().cause);
  if (!*loaded) return fail("backup", "the server did not take the snapshot");
  if (!**loaded) return std::unexpected((*loaded)->error());
  const auto taken = std::chrono::system_clock::now();
  Snapshot snapshot = std::move(***loaded);
  auto events = events_through(store, snapshot.last_event_seq);
  if (!events) return std::unexpected(events.error());
  const BackupHeader header{
      .taken_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(taken.time_since_epoch()).count(),
      .source = source};
  return write_backup(header, BackupContents{std::move(snapshot), std::move(*events)});
}

}  // namespace tidepool
