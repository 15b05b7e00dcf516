#include "sim/fgd_results.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>

#include "config/csv.h"

namespace tidepool {
namespace {

// Python's float repr for the two-decimal values the scripts write ("2.0", "95.23").
std::string python_float(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

void write_fgd_results(std::ostream& out, std::span<const PackGridResult> results,
                       PackMetric metric) {
  const bool allocation = metric == PackMetric::kAllocation;
  out << "workload,sc_policy,tune,seed" << (allocation ? ",total_gpus" : "");
  for (int k = 0; k <= 130; ++k) out << ',' << k;
  out << '\n';
  for (const PackGridResult& r : results) {
    out << r.workload << ',' << r.policy_label << ',' << python_float(r.tune) << ',' << r.seed;
    if (allocation) out << ',' << r.total_gpus;
    const PercentCurve& curve = allocation ? r.allocation : r.fragmentation;
    for (const auto& value : curve) {
      out << ',';
      if (value) out << python_float(*value);
    }
    out << '\n';
  }
}

Result<MetricSamples> read_fgd_results(const std::string& path, int percent) {
  std::ifstream in(path);
  if (!in) return fail(path, "cannot open the file");
  auto csv = CsvReader::open(in, path);
  if (!csv) return std::unexpected(csv.error());
  const std::string column = std::to_string(percent);
  if (auto ok = csv->require({"workload", "sc_policy", column}); !ok) {
    return std::unexpected(ok.error());
  }
  MetricSamples samples;
  while (csv->next()) {
    const std::string_view raw = csv->text(column);
    if (raw.empty()) continue;
    double value = 0;
    const auto [end, error] = std::from_chars(raw.data(), raw.data() + raw.size(), value);
    if (error != std::errc{} || end != raw.data() + raw.size()) {
      return fail(csv->where(column), "expected a number, got '" + std::string(raw) + "'");
    }
    samples[{std::string(csv->text("workload")), std::string(csv->text("sc_policy"))}].push_back(
        value);
  }
  return samples;
}

MetricSamples collect_samples(std::span<const PackGridResult> results, PackMetric metric,
                              int percent) {
  MetricSamples samples;
  for (const PackGridResult& r : results) {
    const PercentCurve& curve = metric == PackMetric::kAllocation ? r.allocation : r.fragmentation;
    if (curve[percent]) samples[{r.workload, r.policy_label}].push_back(*curve[percent]);
  }
  return samples;
}

double median(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2.0;
}

}  // namespace tidepool
