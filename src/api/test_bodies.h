// Request and response bodies for the api tests (header only; not part of the api library).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "api/job_spec.h"
#include "core/error.h"

namespace tidepool::test_support {

// `text` parsed as a JSON body; null, and a test failure, when it does not parse.
inline nlohmann::json json(std::string_view text) {
  auto value = parse_body(text, BodyFormat::kJson);
  EXPECT_TRUE(value.has_value()) << text << ": " << value.error().message();
  return value ? *value : nlohmann::json();
}

// The error `read` gives for `body`, which it must refuse.
template <class Read>
Error refused_json(Read read, const nlohmann::json& body) {
  auto result = read(body);
  EXPECT_FALSE(result.has_value()) << "accepted: " << body.dump();
  return result ? Error{} : result.error();
}

// The error `read` gives for the JSON text `body`, which it must refuse.
template <class Read>
Error refused(Read read, std::string_view body) {
  return refused_json(read, json(body));
}

// JSON of every kind, and a binary value where a reader looks for a field: no body reader may
// throw on any of them (each test adds the shapes of its own fields).
inline std::vector<nlohmann::json> odd_json_shapes() {
  using Json = nlohmann::json;
  return {Json(),
          Json(1),
          Json(-1.5),
          Json("x"),
          Json::array(),
          Json(true),
          Json::object(),
          Json({1, 2}),
          Json::binary({1, 2, 3}),
          Json({{"state", Json::binary({})}})};
}

}  // namespace tidepool::test_support
