// Writing a file that holds secrets, such as a backup of the server's state (every job's spec, the
// tokens' hashes), so that no one but its owner can read it and no reader ever sees part of it:
// the bytes go to a new temporary file beside it (mode 0600, whatever the umask), are flushed to
// the disk (fsync), and the file is renamed over `path`; then the folder is synced, so that the
// new name survives a crash too. A file already at `path` is replaced whole, or not at all.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace tidepool {

// Errors have `path` as their field and the system's reason; the temporary file is removed.
[[nodiscard]] Result<void> write_private_file_atomically(const std::string& path,
                                                         std::string_view bytes);

}  // namespace tidepool
