// libFuzzer target: four more input parsers, chosen by the first input byte (b % 4) and given the
// rest: 0 the Philly trace reader (sim/philly_trace.h) from a std::istringstream, 1 the tenants
// file reader (config/tenants_file.h) with a catalog that already knows H100 and P100, 2 the tidal
// window text form (core/tidal_window.h), 3 the services file (sim/services_file.h; a rate trace
// it names is looked for in a folder that does not exist). A service that reads must have a valid
// autoscaler spec and a rate that is a number at any time. They must return a value or an Error,
// never throw or crash (an exception is not caught here: it aborts the run). A TenantsSpec that
// reads must be accepted by TenantBook::create with the same catalog, and a window that parses must
// describe itself and pass make_tidal_window, as their headers promise. Built and run by
// run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "config/tenants_file.h"
#include "core/gpu_model.h"
#include "core/tenants.h"
#include "core/tidal_window.h"
#include "sim/philly_trace.h"
#include "sim/services_file.h"

namespace {

void fuzz_philly(std::string_view text) {
  std::istringstream in{std::string(text)};
  auto trace = tidepool::read_philly_jobs(in, "fuzz.csv");
  if (!trace) {
    if (trace.error().message().empty()) std::abort();  // every error says something
    return;
  }
  if (trace->jobs.empty()) std::abort();  // a trace without jobs is an error
  for (const tidepool::PhillyJob& job : trace->jobs) {
    // The header's promises on every job that reads.
    if (job.submit < 0 || job.duration < 0 || job.duration > tidepool::kMaxPhillySeconds ||
        job.gpus < 1 || job.gpus > tidepool::kMaxPhillyGpus || job.tenant.empty()) {
      std::fprintf(stderr, "read_philly_jobs returned a bad job %s\n", job.id.c_str());
      std::abort();
    }
  }
}

void fuzz_tenants(std::string_view text) {
  tidepool::GpuModelCatalog models;
  if (!models.intern("H100") || !models.intern("P100")) std::abort();
  auto spec = tidepool::read_tenants_yaml(text, "fuzz.yaml", models);
  if (!spec) {
    if (spec.error().message().empty()) std::abort();
    return;
  }
  auto book = tidepool::TenantBook::create(std::move(*spec), models);
  if (!book) {
    std::fprintf(stderr, "read_tenants_yaml accepted tenants TenantBook::create rejects: %s\n",
                 book.error().message().c_str());
    std::abort();
  }
}

void fuzz_window(std::string_view text) {
  auto window = tidepool::parse_tidal_window(text);
  if (!window) {
    if (window.error().message().empty()) std::abort();
    return;
  }
  const std::string description = tidepool::describe(*window);
  if (description.empty()) __builtin_trap();
  if (!tidepool::make_tidal_window(*window)) __builtin_trap();  // a parsed window is valid
}

void fuzz_services(std::string_view text) {
  tidepool::GpuModelCatalog models;
  if (!models.intern("P100")) std::abort();
  auto services =
      tidepool::parse_services_yaml(text, "fuzz.yaml", "/nonexistent-fuzz-folder", models);
  if (!services) {
    if (services.error().message().empty()) std::abort();
    return;
  }
  for (const tidepool::ServiceEntry& service : *services) {
    if (!tidepool::make_autoscaler_spec(service.spec.scaler)) __builtin_trap();
    for (const tidepool::Seconds t : {tidepool::Seconds{0}, tidepool::Seconds{86'399}}) {
      const double rate = tidepool::rate_at(service.spec.rate, t);
      if (!(rate >= 0)) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      fuzz_philly(rest);
      break;
    case 1:
      fuzz_tenants(rest);
      break;
    case 2:
      fuzz_window(rest);
      break;
    default:
      fuzz_services(rest);
      break;
  }
  return 0;
}
