// The FGD results format: one row per (workload, policy, tune, seed) with a metric at each whole
// percent 0..130 of arrived GPU demand. Tidepool writes its own runs in it and reads the authors'
// published files to compare.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "sim/pack_grid.h"

namespace tidepool {

enum class PackMetric { kAllocation, kFragmentation };

// Writes rows in the published column layout: allocation files carry a total_gpus column after
// the seed, fragmentation files do not (as in analysis_allo_discrete.csv and
// analysis_frag_discrete.csv).
void write_fgd_results(std::ostream& out, std::span<const PackGridResult> results,
                       PackMetric metric);

// Values at one arrived percentage, per (workload, policy label), in file order.
using MetricSamples = std::map<std::pair<std::string, std::string>, std::vector<double>>;

// Reads the column `percent` of a published (or Tidepool-written) results file.
Result<MetricSamples> read_fgd_results(const std::string& path, int percent);

// Our values at `percent`, grouped the same way.
MetricSamples collect_samples(std::span<const PackGridResult> results, PackMetric metric,
                              int percent);

// The median, as pandas computes it (mean of the two middle values for an even count).
double median(std::vector<double> values);

}  // namespace tidepool
