#include "sim_cli/sim_tenants_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "config/tenants_file.h"
#include "report/text_table.h"
#include "sim/philly_trace.h"
#include "sim/tenants_from_trace.h"
#include "sim_cli/pool_source.h"
#include "sim_cli/trace_source.h"

namespace tidepool {
namespace {

namespace fs = std::filesystem;

struct TenantsOptions {
  PoolSource pool;
  TraceSource trace;
  std::string out;
};

// GPUs with 3 decimals, as the table shows guarantees.
std::string three_decimals(std::int64_t milli) {
  return fmt::format("{}.{:03}", milli / 1000, milli % 1000);
}

// The pool's GPUs per model, in catalog order; models without GPUs are left out.
std::vector<ModelCapacity> pool_capacity(const ClusterSpec& cluster) {
  std::vector<std::int64_t> milli(cluster.models.size(), 0);
  for (const NodeSpec& node : cluster.nodes) {
    if (node.gpu_count > 0) milli[node.model.value] += std::int64_t{node.gpu_count} * 1000;
  }
  std::vector<ModelCapacity> capacity;
  for (std::size_t m = 0; m < milli.size(); ++m) {
    if (milli[m] > 0) capacity.push_back({GpuModelId{static_cast<std::uint32_t>(m)}, milli[m]});
  }
  return capacity;
}

// Reads `text` back as the tenants file it is meant to be and checks it gives `derived` exactly.
Result<void> check_reads_back(const std::string& text, const TraceTenants& derived,
                              const GpuModelCatalog& models, const std::string& source) {
  GpuModelCatalog read_models = models;
  auto spec = read_tenants_yaml(text, source, read_models);
  if (!spec) return fail("--out", "the derived file does not read back: " + spec.error().message());
  auto book = TenantBook::create(*spec, read_models);
  if (!book) return fail("--out", "the derived tenants are refused: " + book.error().message());
  if (book->tenant_count() != static_cast<int>(derived.tenants.size())) {
    return fail("--out", "the derived file reads back with a different number of tenants");
  }
  for (const TraceTenant& tenant : derived.tenants) {
    const auto id = book->find_tenant(tenant.name);
    if (!id) return fail("--out", "tenant '" + tenant.name + "' does not read back");
    for (std::size_t k = 0; k < derived.capacity.size(); ++k) {
      if (book->guaranteed(*id, derived.capacity[k].model) != tenant.guaranteed_milli[k]) {
        return fail("--out", "the guarantee of tenant '" + tenant.name + "' does not read back");
      }
    }
  }
  return {};
}

void print_tenants_table(const TraceTenants& derived, const GpuModelCatalog& models) {
  std::vector<std::string> header = {"tenant", "jobs", "GPU-hours", "share %"};
  for (const ModelCapacity& c : derived.capacity) {
    header.push_back("guaranteed " + models.name(c.model) + " GPUs");
  }
  TextTable table(std::move(header));
  int jobs = 0;
  for (const TraceTenant& t : derived.tenants) {
    std::vector<std::string> row = {
        t.name, std::to_string(t.jobs),
        fmt::format("{:.1f}", static_cast<double>(t.gpu_seconds) / 3600),
        fmt::format("{:.2f}", t.share * 100)};
    for (std::int64_t milli : t.guaranteed_milli) row.push_back(three_decimals(milli));
    table.add_row(std::move(row));
    jobs += t.jobs;
  }
  std::vector<std::string> total = {
      "total", std::to_string(jobs),
      fmt::format("{:.1f}", static_cast<double>(derived.total_gpu_seconds) / 3600), "100.00"};
  for (const ModelCapacity& c : derived.capacity) total.push_back(three_decimals(c.milli));
  table.add_row(std::move(total));
  std::cout << '\n';
  table.print(std::cout);
}

Result<void> run_sim_tenants(const TenantsOptions& options) {
  auto cluster = load_pool_source(options.pool);
  if (!cluster) return std::unexpected(cluster.error());
  auto trace = load_trace_source(options.trace);
  if (!trace) return std::unexpected(trace.error());
  const std::vector<ModelCapacity> capacity = pool_capacity(*cluster);
  auto derived = derive_tenants_from_trace(trace->jobs, capacity, "philly");
  if (!derived) {
    const Error& e = derived.error();
    if (e.field == "jobs") return fail("--jobs", e.reason);
    return fail(options.pool.cluster.empty() ? "--nodes" : "--cluster", e.reason);
  }

  const std::string pool_path =
      options.pool.cluster.empty() ? options.pool.nodes : options.pool.cluster;
  std::string pool_gpus;
  for (const ModelCapacity& c : capacity) {
    pool_gpus += fmt::format("{}{} {}", pool_gpus.empty() ? "" : ", ", c.milli / 1000,
                             cluster->models.name(c.model));
  }
  const std::string comment = fmt::format(
      "Derived by `tidepool sim tenants-from-trace` from\n"
      "  jobs: {} ({} format, {} jobs)\n"
      "  pool: {} ({} GPUs)\n"
      "One tenant per virtual cluster, all in org philly, guaranteed its share of the trace's GPU\n"
      "time (duration x GPUs) of each model's GPUs, rounded to milli-GPUs by largest remainder;\n"
      "weight 1, no borrowing limit, lends all of its guarantee, one queue \"default\".",
      options.trace.jobs, options.trace.format, trace->jobs.size(), pool_path, pool_gpus);
  const std::string text = write_tenants_yaml(derived->spec, cluster->models, comment);
  if (auto ok = check_reads_back(text, *derived, cluster->models, options.out); !ok) return ok;

  const fs::path out(options.out);
  std::error_code error;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), error);
  if (error) return fail("--out", "cannot create folder '" + out.parent_path().string() + "'");
  {
    std::ofstream file(out);
    file << text;
    if (!file) return fail("--out", "cannot write '" + options.out + "'");
  }
  print_tenants_table(*derived, cluster->models);
  std::cout << fmt::format("\nWrote {} tenants to {}\n", derived->tenants.size(), options.out);
  return {};
}

}  // namespace

void add_sim_tenants_command(CLI::App& sim, int* exit_code) {
  auto options = std::make_shared<TenantsOptions>();
  CLI::App* command = sim.add_subcommand(
      "tenants-from-trace",
      "Derive a tenants file from a job trace: one tenant per team (virtual cluster), guaranteed "
      "its share of the trace's GPU time of each GPU model of the pool");
  add_pool_options(*command, options->pool);
  add_trace_options(*command, options->trace);
  command->add_option("--out", options->out, "tenants file to write (YAML)")->required();
  command->callback([options, exit_code] {
    if (auto ok = run_sim_tenants(*options); !ok) {
      std::cerr << "error: " << ok.error().message() << '\n';
      *exit_code = 1;
    }
  });
}

}  // namespace tidepool
