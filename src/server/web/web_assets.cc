#include "server/web/web_assets.h"

#include <algorithm>

namespace tidepool {

const WebAsset* find_web_asset(std::string_view path) {
  // Some tens of files: a scan costs less than the request's parsing.
  const std::span<const WebAsset> assets = web_assets();
  const auto it = std::ranges::find(assets, path, &WebAsset::path);
  return it != assets.end() ? &*it : nullptr;
}

}  // namespace tidepool
