#include "sim_cli/sim_pack_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "config/csv.h"
#include "report/text_table.h"
#include "sim/fgd_results.h"
#include "sim/openb_trace.h"
#include "sim/pack_grid.h"
#include "sim_cli/pool_source.h"
#include "sim_cli/progress.h"
#include "sim_cli/seed_list.h"

namespace tidepool {
namespace {

namespace fs = std::filesystem;

struct PackOptions {
  PoolSource pool;
  std::vector<std::string> pods;
  std::string policy = "all";
  double tune = 1.3;
  std::string seeds = "42-51";
  std::string out;
  std::string compare;
  bool published_only = false;
  int threads = 0;
};

bool is_pod_list(const fs::path& path) {
  std::ifstream in(path);
  std::string header;
  if (!std::getline(in, header)) return false;
  const auto columns = split_csv_line(header);
  auto has = [&](std::string_view c) {
    return std::find(columns.begin(), columns.end(), c) != columns.end();
  };
  return has("name") && has("num_gpu") && has("gpu_milli");
}

// Each --pods argument is a pod list or a folder of them (node lists and other files skipped).
Result<std::vector<fs::path>> expand_pod_paths(const std::vector<std::string>& args) {
  std::vector<fs::path> files;
  for (const std::string& arg : args) {
    std::error_code error;
    if (fs::is_directory(arg, error)) {
      std::vector<fs::path> found;
      for (const auto& entry : fs::directory_iterator(arg, error)) {
        if (entry.path().extension() == ".csv" && is_pod_list(entry.path()))
          found.push_back(entry.path());
      }
      if (found.empty())
        return fail("--pods",
                    "no pod list (*.csv with name,num_gpu,gpu_milli) in folder '" + arg + "'");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(arg, error)) {
      files.emplace_back(arg);
    } else {
      return fail("--pods", "'" + arg + "' is neither a file nor a folder");
    }
  }
  return files;
}

Result<std::vector<PolicyInfo>> select_policies(const std::string& spec) {
  if (spec == "all")
    return std::vector<PolicyInfo>(placement_policies().begin(), placement_policies().end());
  std::vector<PolicyInfo> chosen;
  std::string_view rest = spec;
  while (true) {
    const auto comma = rest.find(',');
    auto info = find_placement_policy(rest.substr(0, comma));
    if (!info) return fail("--policy", info.error().reason);
    chosen.push_back(*info);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return chosen;
}

std::string percent_figure(double value) {
  return std::isnan(value) ? "-" : fmt::format("{:.2f}", value);
}
std::string signed_text(double value) {
  if (std::isnan(value)) return "-";
  return fmt::format("{:+.2f}", std::abs(value) < 0.005 ? 0.0 : value);
}

void print_pack_summary(std::span<const PackGridResult> results) {
  const MetricSamples allocation = collect_samples(results, PackMetric::kAllocation, 100);
  const MetricSamples fragmentation = collect_samples(results, PackMetric::kFragmentation, 100);
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> failed;  // failed, arrived
  for (const PackGridResult& r : results) {
    auto& f = failed[{r.workload, r.policy_label}];
    f.first += r.failed_tasks;
    f.second += r.arrived_tasks;
  }
  TextTable table({"workload", "policy", "runs", "alloc@100%", "frag@100%", "failed tasks"});
  for (const auto& [key, values] : allocation) {
    auto frag = fragmentation.find(key);
    const auto& f = failed[key];
    table.add_row({key.first, key.second, std::to_string(values.size()),
                   percent_figure(median(values)),
                   frag == fragmentation.end() ? "-" : percent_figure(median(frag->second)),
                   fmt::format("{:.1f}%", 100.0 * f.first / std::max(1, f.second))});
  }
  std::cout << "\nMedians over seeds at 100% of GPU capacity arrived (% of GPU capacity):\n";
  table.print(std::cout);
}

struct PublishedResults {
  MetricSamples allocation;
  MetricSamples fragmentation;
};

Result<PublishedResults> read_published(const std::string& folder) {
  const fs::path dir(folder);
  auto allocation = read_fgd_results((dir / "analysis_allo_discrete.csv").string(), 100);
  if (!allocation) return fail("--compare", allocation.error().message());
  auto fragmentation = read_fgd_results((dir / "analysis_frag_discrete.csv").string(), 100);
  if (!fragmentation) return fail("--compare", fragmentation.error().message());
  return PublishedResults{std::move(*allocation), std::move(*fragmentation)};
}

void print_comparison(std::span<const PackGridResult> results, const PublishedResults& published) {
  const MetricSamples* published_alloc = &published.allocation;
  const MetricSamples* published_frag = &published.fragmentation;
  const MetricSamples ours_alloc = collect_samples(results, PackMetric::kAllocation, 100);
  const MetricSamples ours_frag = collect_samples(results, PackMetric::kFragmentation, 100);

  auto published_median = [](const MetricSamples& samples,
                             const std::pair<std::string, std::string>& key) {
    auto it = samples.find(key);
    return it == samples.end() ? std::nan("") : median(it->second);
  };
  TextTable table({"workload", "policy", "alloc ours", "alloc published", "diff", "frag ours",
                   "frag published", "diff"});
  for (const auto& [key, values] : ours_alloc) {
    const double ours_a = median(values);
    const double pub_a = published_median(*published_alloc, key);
    auto frag = ours_frag.find(key);
    const double ours_f = frag == ours_frag.end() ? std::nan("") : median(frag->second);
    const double pub_f = published_median(*published_frag, key);
    table.add_row({key.first, key.second, percent_figure(ours_a), percent_figure(pub_a),
                   signed_text(ours_a - pub_a), percent_figure(ours_f), percent_figure(pub_f),
                   signed_text(ours_f - pub_f)});
  }
  std::cout << "\nBeside the published FGD results (medians over seeds at 100% arrived, % of GPU "
               "capacity):\n";
  table.print(std::cout);
}

Result<void> run_sim_pack(const PackOptions& options) {
  auto seeds = parse_seed_list(options.seeds);
  if (!seeds) return std::unexpected(seeds.error());
  auto policies = select_policies(options.policy);
  if (!policies) return std::unexpected(policies.error());
  if (!(options.tune > 0 && options.tune <= 10)) return fail("--tune", "must be in (0, 10]");
  auto pod_files = expand_pod_paths(options.pods);
  if (!pod_files) return std::unexpected(pod_files.error());

  // Read the published results first: a bad --compare folder should not cost a whole grid.
  std::optional<PublishedResults> published;
  if (options.published_only && options.compare.empty()) {
    return fail("--published-only", "needs --compare");
  }
  if (!options.compare.empty()) {
    auto read = read_published(options.compare);
    if (!read) return std::unexpected(read.error());
    published = std::move(*read);
  }
  std::set<std::string> published_workloads;
  if (published) {
    for (const auto& [key, values] : published->allocation) published_workloads.insert(key.first);
  }

  auto cluster = load_pool_source(options.pool);
  if (!cluster) return std::unexpected(cluster.error());
  GpuModelCatalog& models = cluster->models;
  std::vector<PackWorkload> workloads;
  for (const fs::path& file : *pod_files) {
    const std::string name = file.stem().string();
    if (options.published_only && !published_workloads.contains(name)) continue;
    auto pods = load_openb_pods(file.string(), models);
    if (!pods) return std::unexpected(pods.error());
    std::stable_sort(pods->begin(), pods->end(),
                     [](const PodRecord& a, const PodRecord& b) { return a.name < b.name; });
    PackWorkload workload;
    workload.name = name;
    for (const PodRecord& pod : *pods) workload.tasks.push_back(pod.shape);
    workload.profile = WorkloadProfile::from_tasks(workload.tasks);
    workloads.push_back(std::move(workload));
  }
  if (workloads.empty()) return fail("--pods", "no pod list left to run");
  auto pool = Pool::create(std::move(cluster->models), std::move(cluster->topology),
                           std::move(cluster->nodes));
  if (!pool) return std::unexpected(pool.error());

  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::cerr << fmt::format(
      "pack: {} workload(s) x {} policies x {} seed(s) on {} nodes / {} GPUs, {} thread(s)\n",
      workloads.size(), policies->size(), seeds->size(), pool->node_count(), pool->total_gpus(),
      threads);
  std::vector<PackGridResult> results;
  {
    ProgressLine progress("pack");
    results = run_pack_grid(*pool, workloads, *policies, *seeds, options.tune, threads,
                            [&](int done, int total, const PackGridResult& r) {
                              progress.update(
                                  done, total,
                                  fmt::format("{} {} seed {}", r.workload, r.policy_label, r.seed));
                            });
  }

  std::error_code error;
  fs::create_directories(options.out, error);
  if (error) return fail("--out", "cannot create folder '" + options.out + "': " + error.message());
  for (auto [metric, file] : {std::pair{PackMetric::kAllocation, "allocation.csv"},
                              std::pair{PackMetric::kFragmentation, "fragmentation.csv"}}) {
    const fs::path path = fs::path(options.out) / file;
    std::ofstream out(path);
    write_fgd_results(out, results, metric);
    if (!out) return fail("--out", "cannot write '" + path.string() + "'");
  }
  print_pack_summary(results);
  if (published) print_comparison(results, *published);
  std::cout << "\nWrote " << (fs::path(options.out) / "allocation.csv").string() << " and "
            << (fs::path(options.out) / "fragmentation.csv").string() << '\n';
  return {};
}

}  // namespace

void add_sim_pack_command(CLI::App& sim, int* exit_code) {
  auto options = std::make_shared<PackOptions>();
  CLI::App* pack = sim.add_subcommand(
      "pack",
      "Packing experiment of the FGD paper: tasks arrive (resampled to --tune x GPU capacity, "
      "shuffled by seed) and never leave; writes allocation.csv and fragmentation.csv in the "
      "layout of the published FGD results");
  add_pool_options(*pack, options->pool);
  pack->add_option("--pods", options->pods,
                   "pod list (openb format) or a folder of them; repeat for several traces")
      ->required();
  pack->add_option("--policy", options->policy,
                   "policy name or label, a comma-separated list, or 'all' (random, dot-product, "
                   "gpu-clustering, gpu-packing, best-fit, fgd, tidepool)")
      ->capture_default_str();
  pack->add_option("--tune", options->tune, "arrived GPU demand at the end, x GPU capacity")
      ->capture_default_str();
  pack->add_option("--seeds", options->seeds, "seeds: 42, 42-51 or 1,5,9")->capture_default_str();
  pack->add_option("--out", options->out, "folder for allocation.csv and fragmentation.csv")
      ->required();
  pack->add_option("--compare", options->compare,
                   "folder with the published analysis_allo_discrete.csv and "
                   "analysis_frag_discrete.csv to print ours beside");
  pack->add_flag("--published-only", options->published_only,
                 "run only the pod lists that appear in the --compare results");
  pack->add_option("--threads", options->threads, "worker threads (default: all cores)");
  pack->callback([options, exit_code] {
    if (auto ok = run_sim_pack(*options); !ok) {
      std::cerr << "error: " << ok.error().message() << '\n';
      *exit_code = 1;
    }
  });
}

}  // namespace tidepool
