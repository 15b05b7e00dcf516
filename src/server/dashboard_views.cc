// The views made for the web dashboard: the pool as a map of GPU cells.
#include <map>
#include <string_view>
#include <utility>

#include "server/plane_views.h"

namespace tidepool {

namespace {

// One job's share of a GPU, as the map shows it: `tenant` indexes the map's tenants; -1 is a
// tenant the caller may not see, whose job is not named.
nlohmann::json share_of(const ServerJob& job, int tenant, bool borrowed) {
  if (tenant < 0) return {{"tenant", -1}, {"milli", task_gpu_milli(job.spec)}};
  return {{"tenant", tenant},
          {"job", job.id},
          {"name", job.spec.name},
          {"milli", task_gpu_milli(job.spec)},
          {"borrowed", borrowed}};
}

}  // namespace

nlohmann::json PlaneViews::pool_map(const Principal& who) const {
  const Scheduler& scheduler = state_.scheduler();
  const TenantBook& book = scheduler.book();
  const ClusterSpec& cluster = state_.setup().cluster;
  const Topology& topology = cluster.topology;

  // The tenants the caller may see, numbered in the book's order; the others map to -1.
  std::vector<int> index_of(static_cast<std::size_t>(book.tenant_count()), -1);
  nlohmann::json tenants = nlohmann::json::array();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId id{static_cast<std::uint32_t>(t)};
    if (who.role == Role::kUser && book.tenant_name(id) != who.tenant) continue;
    nlohmann::json borrowing = nlohmann::json::array();
    for (int m = 0; m < book.model_count(); ++m) {
      const GpuModelId model{static_cast<std::uint32_t>(m)};
      if (book.borrowed(id, model) > 0) borrowing.push_back(book.models().name(model));
    }
    index_of[static_cast<std::size_t>(t)] = static_cast<int>(tenants.size());
    tenants.push_back({{"name", book.tenant_name(id)}, {"borrowing", std::move(borrowing)}});
  }
  // A job's tenant index and whether its tenant borrows the model of `node_model`.
  const auto place_of = [&](const ServerJob& job, const std::string& node_model) {
    const auto tenant = book.find_tenant(job.spec.tenant);
    if (!tenant) return std::pair{-1, false};
    const auto model = book.models().find(node_model);
    const bool borrowed = model && book.borrowed(*tenant, *model) > 0;
    return std::pair{index_of[tenant->value], borrowed};
  };
  // The GPU cells of a node: per GPU index, the shares of the jobs holding it.
  const auto cells_of = [&](const std::string& node, int gpus, const std::string& model,
                            const std::vector<const ServerJob*>& running) {
    std::vector<nlohmann::json> cells(static_cast<std::size_t>(gpus), nlohmann::json::array());
    for (const ServerJob* job : running) {
      const auto [tenant, borrowed] = place_of(*job, model);
      for (const TaskPlace& p : job->placement) {
        if (p.node != node) continue;
        for (int gpu : p.gpus) {
          if (gpu >= 0 && gpu < gpus) {
            cells[static_cast<std::size_t>(gpu)].push_back(share_of(*job, tenant, borrowed));
          }
        }
      }
    }
    return nlohmann::json(std::move(cells));
  };

  std::map<std::string_view, int> nodes_in = {{"ready", 0}, {"not_ready", 0}, {"drained", 0}};

  // Spines, then their leaves, then the nodes of each leaf in the cluster file's order.
  const auto running = state_.running_by_node();
  std::vector<nlohmann::json> leaves(topology.leaves.size(), nlohmann::json::array());
  for (std::size_t n = 0; n < nodes_.pool_size(); ++n) {
    const PlaneNode& node = nodes_.pool_node(NodeId{static_cast<std::uint32_t>(n)});
    const NodeSpec& spec = cluster.nodes[n];
    const std::string model = spec.gpu_count > 0 ? cluster.models.name(spec.model) : "";
    const std::string_view state = node_state(node);
    ++nodes_in[state];
    nlohmann::json entry = {{"name", spec.name},
                            {"state", state},
                            {"model", model},
                            {"gpus", spec.gpu_count},
                            {"cells", cells_of(spec.name, spec.gpu_count, model, running[n])}};
    if (const std::string why = nodes_.unschedulable_reason(node); !why.empty()) {
      entry["reason"] = why;
    }
    leaves[spec.leaf.value].push_back(std::move(entry));
  }
  nlohmann::json spines = nlohmann::json::array();
  for (std::size_t s = 0; s < topology.spines.size(); ++s) {
    nlohmann::json of_spine = nlohmann::json::array();
    for (std::size_t l = 0; l < topology.leaves.size(); ++l) {
      if (topology.leaves[l].spine.value != s) continue;
      of_spine.push_back({{"name", topology.leaves[l].name}, {"nodes", std::move(leaves[l])}});
    }
    spines.push_back({{"name", topology.spines[s].name}, {"leaves", std::move(of_spine)}});
  }

  // Rented nodes (bursting): each holds one task of one job, on all its GPUs.
  nlohmann::json rented = nlohmann::json::array();
  for (const PlaneNode* node : nodes_.rented()) {
    const ServerJob& job = state_.jobs().at(node->job);
    const int gpus = rented_gpus_per_task(job.spec);
    const std::string model = node->reported.gpu_model;
    nlohmann::json cells = nlohmann::json::array();
    for (int gpu = 0; gpu < gpus; ++gpu) {
      nlohmann::json shares = nlohmann::json::array();
      if (job.state == JobState::kRunning) {
        const auto [tenant, borrowed] = place_of(job, model);
        shares.push_back(share_of(job, tenant, borrowed));
      }
      cells.push_back(std::move(shares));
    }
    const bool up = node->registered_at != kNotYet;
    ++nodes_in[up ? "ready" : "not_ready"];
    nlohmann::json entry = {{"name", node->name},
                            {"state", up ? "ready" : "not_ready"},
                            {"model", model},
                            {"gpus", gpus},
                            {"cells", std::move(cells)}};
    if (!up) entry["reason"] = "rented: its agent has not registered yet";
    rented.push_back(std::move(entry));
  }

  const Pool& pool = scheduler.pool();
  const FreeGpuCount free = count_free_gpus(pool);
  LiveJobs jobs;
  for (const auto& [of, in_queue] : live_jobs()) {
    jobs.pending += in_queue.pending;
    jobs.running += in_queue.running;
  }
  nlohmann::json figures = {
      {"gpus", pool.total_gpus()},
      {"allocated_milli", pool.allocated_milli_gpu()},
      {"free_gpus", free.free},
      {"fragmented_gpus", free.fragmented},
      {"nodes", nodes_in["ready"] + nodes_in["not_ready"] + nodes_in["drained"]},
      {"nodes_ready", nodes_in["ready"]},
      {"nodes_not_ready", nodes_in["not_ready"]},
      {"nodes_drained", nodes_in["drained"]},
      {"jobs_pending", jobs.pending},
      {"jobs_running", jobs.running}};
  return {{"figures", std::move(figures)},
          {"tenants", std::move(tenants)},
          {"spines", std::move(spines)},
          {"rented", std::move(rented)}};
}

}  // namespace tidepool
