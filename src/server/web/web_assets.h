// The web dashboard's files (web/ in the repository, and the JavaScript libraries it uses from
// Debian's packages), embedded in the binary at build time: the server needs no folder of files
// and fetches nothing at run time.
#pragma once

#include <span>
#include <string_view>

namespace tidepool {

struct WebAsset {
  std::string_view path;          // relative to web/: "index.html", "views/pool.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
  std::string_view etag;  // quoted, as the ETag field carries it
};

// Every file, in the order of their paths.
[[nodiscard]] std::span<const WebAsset> web_assets();

// The file at `path` (relative to web/), or nullptr.
[[nodiscard]] const WebAsset* find_web_asset(std::string_view path);

}  // namespace tidepool
