#include "sim/philly_trace.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <utility>

#include "config/csv.h"
#include "core/civil_time.h"
#include "core/decimal_text.h"

namespace tidepool {
namespace {

// A non-negative decimal ("123", "123.0", "0.5") of `column` (core/decimal_text.h), rounded to the
// nearest whole unit (halves up), at most `max`. A negative zero is zero.
Result<std::int64_t> rounded_number(const CsvReader& csv, std::string_view column,
                                    std::int64_t max) {
  const std::string_view raw = csv.text(column);
  if (raw.empty()) return fail(csv.where(column), "the value is missing");
  const auto value = read_decimal(raw, {.places = 0, .max = max, .round_extra = true});
  if (value) return *value;
  switch (value.error()) {
    case DecimalError::kNotANumber:
    case DecimalError::kTooManyDecimals:
      return fail(csv.where(column), "expected a number, got '" + std::string(raw) + "'");
    case DecimalError::kNegative:
      return fail(csv.where(column), "must not be negative, got " + std::string(raw));
    case DecimalError::kTooLarge:
      break;
  }
  return fail(csv.where(column), "must be 0.." + std::to_string(max) + ", got " + std::string(raw));
}

}  // namespace

Result<PhillyTrace> read_philly_jobs(std::istream& in, const std::string& source) {
  auto csv = CsvReader::open(in, source);
  if (!csv) return std::unexpected(csv.error());
  if (auto ok = csv->require({"timestamp", "duration", "num_gpus", "gpu_time", "cluster"}); !ok) {
    return std::unexpected(ok.error());
  }
  PhillyTrace trace;
  std::vector<std::int64_t> epochs;  // each job's submit time, until the earliest is known
  while (csv->next()) {
    PhillyJob job;
    job.id = "philly-" + std::to_string(trace.jobs.size());

    const std::string_view timestamp = csv->text("timestamp");
    const auto epoch = parse_utc_date_time(timestamp);
    if (!epoch) {
      return fail(csv->where("timestamp"), "expected a date and time 'YYYY-MM-DD HH:MM:SS', got '" +
                                               std::string(timestamp) + "'");
    }
    auto duration = rounded_number(*csv, "duration", kMaxPhillySeconds);
    if (!duration) return std::unexpected(duration.error());
    job.duration = *duration;

    auto gpus = csv->integer("num_gpus");
    if (!gpus) return std::unexpected(gpus.error());
    if (*gpus < 1 || *gpus > kMaxPhillyGpus) {
      return fail(csv->where("num_gpus"), "must be 1.." + std::to_string(kMaxPhillyGpus) +
                                              ", got " + std::to_string(*gpus));
    }
    job.gpus = static_cast<int>(*gpus);

    // Checked for form and sign only; see the header.
    auto gpu_time = rounded_number(*csv, "gpu_time", kMaxPhillySeconds * kMaxPhillyGpus);
    if (!gpu_time) return std::unexpected(gpu_time.error());

    job.tenant = std::string(csv->text("cluster"));
    if (job.tenant.empty()) return fail(csv->where("cluster"), "the job has no cluster");

    epochs.push_back(*epoch);
    trace.jobs.push_back(std::move(job));
  }
  if (trace.jobs.empty()) return fail(source, "the trace has no jobs");
  trace.start_epoch = *std::min_element(epochs.begin(), epochs.end());
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
    trace.jobs[i].submit = epochs[i] - trace.start_epoch;
  }
  return trace;
}

Result<PhillyTrace> load_philly_jobs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path, "cannot open the file");
  auto trace = read_philly_jobs(in, path);
  if (trace && in.bad()) return fail(path, "cannot read the file");
  return trace;
}

}  // namespace tidepool
