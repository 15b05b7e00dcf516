// libFuzzer target: the job spec reader (api/job_spec.h) on arbitrary text, as JSON or YAML
// chosen by the first input byte (even: JSON, odd: YAML; '0' and '1' in the seeds) and given the
// rest. It must return a value or an Error, never throw or crash (an exception is not caught here:
// it aborts the run). Every error must say something, in valid UTF-8 (the server writes it back
// as JSON); a parsed body must dump as JSON; and a spec that reads must survive job_spec_to_json
// and back, also through JSON text, unchanged. Built and run by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/body_fields.h"
#include "api/job_spec.h"

namespace {

void check_error(const tidepool::Error& error) {
  const std::string message = error.message();
  if (error.reason.empty() || !tidepool::body_fields::valid_utf8(message) ||
      message.size() > 4096) {
    std::fprintf(stderr, "bad error message (%zu bytes): %s\n", message.size(), message.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto format = data[0] % 2 == 0 ? tidepool::BodyFormat::kJson : tidepool::BodyFormat::kYaml;

  auto value = tidepool::parse_body(body, format);
  if (!value) {
    check_error(value.error());
    return 0;
  }
  (void)value->dump();  // throws on text that is not UTF-8

  auto spec = tidepool::parse_job_spec(body, format);
  if (!spec) {
    check_error(spec.error());
    return 0;
  }
  const nlohmann::json json = tidepool::job_spec_to_json(*spec);
  auto back = tidepool::job_spec_from_json(json);
  auto from_text = tidepool::parse_job_spec(json.dump(), tidepool::BodyFormat::kJson);
  if (!back || !from_text || !(*back == *spec) || !(*from_text == *spec)) {
    std::fprintf(stderr, "a spec does not round-trip: %s\n", json.dump().c_str());
    std::abort();
  }
  return 0;
}
