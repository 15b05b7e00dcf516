#include "sim/philly_trace.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <utility>

#include "sim/csv.h"

namespace tidepool {
namespace {

bool all_digits(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The digits at [pos, pos + n) of `text` as a number; the caller has checked they are digits.
int digits_at(std::string_view text, std::size_t pos, std::size_t n) {
  int value = 0;
  for (std::size_t i = pos; i < pos + n; ++i) value = value * 10 + (text[i] - '0');
  return value;
}

bool is_leap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int days_in_month(int year, int month) {
  static constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : kDays[month - 1];
}

// Days from 1970-01-01 to the given date of the proleptic Gregorian calendar (Howard Hinnant's
// days_from_civil): exact for any year, independent of the C library and its time zone.
std::int64_t days_from_civil(std::int64_t year, int month, int day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const std::int64_t year_of_era = year - era * 400;  // [0, 399]
  const std::int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const std::int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;  // [0, 146096]
  return era * 146097 + day_of_era - 719468;
}

// A non-negative decimal ("123", "123.0", "0.5") of `column`, rounded to the nearest whole unit
// (halves up), at most `max`. Signs other than a negative zero, exponents and spaces are errors.
Result<std::int64_t> rounded_number(const CsvReader& csv, std::string_view column,
                                    std::int64_t max) {
  const std::string_view raw = csv.text(column);
  if (raw.empty()) return fail(csv.where(column), "the value is missing");
  std::string_view text = raw;
  const bool negative = text.starts_with('-');
  if (negative) text.remove_prefix(1);
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty() || !all_digits(whole) || !all_digits(fraction) ||
      (dot != std::string_view::npos && fraction.empty())) {
    return fail(csv.where(column), "expected a number, got '" + std::string(raw) + "'");
  }
  const auto nonzero = [](char c) { return c != '0'; };
  if (negative && (std::any_of(whole.begin(), whole.end(), nonzero) ||
                   std::any_of(fraction.begin(), fraction.end(), nonzero))) {
    return fail(csv.where(column), "must not be negative, got " + std::string(raw));
  }
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(whole.data(), whole.data() + whole.size(), value);
  if (error != std::errc()) value = std::numeric_limits<std::int64_t>::max();  // too large
  if (value < max && !fraction.empty() && fraction.front() >= '5') ++value;
  if (value > max) {
    return fail(csv.where(column),
                "must be 0.." + std::to_string(max) + ", got " + std::string(raw));
  }
  return value;
}

}  // namespace

std::optional<std::int64_t> parse_philly_timestamp(std::string_view text) {
  // "YYYY-MM-DD HH:MM:SS"
  if (text.size() != 19 || text[4] != '-' || text[7] != '-' || text[10] != ' ' || text[13] != ':' ||
      text[16] != ':') {
    return std::nullopt;
  }
  for (std::size_t pos : {0, 5, 8, 11, 14, 17}) {
    if (!all_digits(text.substr(pos, pos == 0 ? 4 : 2))) return std::nullopt;
  }
  const int year = digits_at(text, 0, 4);
  const int month = digits_at(text, 5, 2);
  const int day = digits_at(text, 8, 2);
  const int hour = digits_at(text, 11, 2);
  const int minute = digits_at(text, 14, 2);
  const int second = digits_at(text, 17, 2);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) ||
      hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  return days_from_civil(year, month, day) * 86'400 + hour * 3'600 + minute * 60 + second;
}

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
    const auto epoch = parse_philly_timestamp(timestamp);
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
