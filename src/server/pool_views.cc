// The views of the pool: nodes, tenants and their queues, tokens, and the figures for metrics.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "api/job_spec.h"
#include "server/plane_views.h"

namespace tidepool {

nlohmann::json milli_as_gpus(std::int64_t milli) {
  if (milli % 1000 == 0) return milli / 1000;
  return static_cast<double>(milli) / 1000.0;
}

// --- nodes ---

nlohmann::json PlaneViews::nodes(const Principal& who) const {
  nlohmann::json out = nlohmann::json::array();
  const auto running = state_.running_by_node();
  for (std::size_t n = 0; n < nodes_.pool_size(); ++n) {
    const PlaneNode& node = nodes_.pool_node(NodeId{static_cast<std::uint32_t>(n)});
    if (who.role == Role::kAgent && node.name != who.node) continue;
    out.push_back(cluster_node(node, running[n]));
  }
  // Rented nodes (bursting) follow the cluster file's.
  for (const PlaneNode* rented : nodes_.rented()) {
    if (who.role == Role::kAgent && rented->name != who.node) continue;
    out.push_back(rented_node(*rented));
  }
  return {{"nodes", std::move(out)}};
}

nlohmann::json PlaneViews::node(const std::string& name) const {
  const PlaneNode& node = *nodes_.find(name);
  if (node.kind == NodeKind::kRented) return rented_node(node);
  return cluster_node(node, state_.running_by_node()[node.id.value]);
}

namespace {

// A node's partitioned GPUs: each instance, with the job on it when one runs there.
nlohmann::json mig_partitions_view(const NodeSpec& spec,
                                   const std::vector<const ServerJob*>& running) {
  // The node's MIG tasks by (GPU, start), in one pass over the running jobs.
  std::map<std::pair<int, int>, const ServerJob*> on_instance;
  for (const ServerJob* job : running) {
    if (!job->spec.mig_profile) continue;
    for (const TaskPlace& p : job->placement) {
      if (p.node == spec.name && p.mig_start >= 0 && p.gpus.size() == 1) {
        on_instance[{p.gpus[0], p.mig_start}] = job;
      }
    }
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const NodeSpec::MigPartition& partition : spec.mig_partitions) {
    nlohmann::json instances = nlohmann::json::array();
    for (const MigInstance& instance : partition.instances) {
      nlohmann::json view = {{"profile", mig_profile_spec(instance.profile).name},
                             {"start", instance.start}};
      const auto it = on_instance.find({partition.gpu, instance.start});
      if (it != on_instance.end() && it->second->spec.mig_profile == instance.profile) {
        view["job"] = it->second->id;
      }
      instances.push_back(std::move(view));
    }
    gpus.push_back({{"gpu", partition.gpu}, {"instances", std::move(instances)}});
  }
  return gpus;
}

}  // namespace

std::string_view PlaneViews::node_state(const PlaneNode& node) const {
  return node.drained ? "drained" : !nodes_.schedulable(node) ? "not_ready" : "ready";
}

nlohmann::json PlaneViews::cluster_node(const PlaneNode& node,
                                        const std::vector<const ServerJob*>& running) const {
  const ClusterSpec& cluster = state_.setup().cluster;
  const NodeSpec& spec = cluster.nodes[node.id.value];
  const Topology& topology = cluster.topology;
  const LeafId leaf = spec.leaf;
  std::int64_t allocated_milli = 0;
  nlohmann::json jobs = nlohmann::json::array();
  for (const ServerJob* running_job : running) {
    const ServerJob& job = *running_job;
    int gpus = 0;
    int tasks = 0;
    for (const TaskPlace& p : job.placement) {
      if (p.node != spec.name) continue;
      ++tasks;
      gpus += static_cast<int>(p.gpus.size());
    }
    if (tasks == 0) continue;
    allocated_milli += std::int64_t{gpus} * task_gpu_milli(job.spec);
    jobs.push_back({{"job", job.id},
                    {"tenant", job.spec.tenant},
                    {"name", job.spec.name},
                    {"tasks", tasks},
                    {"gpus", gpus},
                    {"gpu_milli", task_gpu_milli(job.spec)}});
  }
  nlohmann::json out = {
      {"name", spec.name},
      {"state", node_state(node)},
      {"gpu_model", spec.gpu_count > 0 ? cluster.models.name(spec.model) : ""},
      {"gpus", spec.gpu_count},
      {"gpu_milli_allocated", allocated_milli},
      {"cpu_milli", spec.milli_cpu},
      {"memory_mib", spec.memory_mib},
      {"leaf", topology.leaves[leaf.value].name},
      {"spine", topology.spines[topology.leaves[leaf.value].spine.value].name},
      {"jobs", std::move(jobs)},
      {"registered_ms", unix_ms(node.registered_at)},
      {"last_heartbeat_ms", unix_ms(node.last_heartbeat_at)},
  };
  if (!spec.mig_partitions.empty()) out["mig"] = mig_partitions_view(spec, running);
  if (node.drained) {
    out["drain_reason"] = node.drain_reason;
    out["drained_ms"] = unix_ms(node.drained_at);
  }
  if (node.not_ready) out["not_ready_ms"] = unix_ms(node.not_ready_at);
  if (const std::string why = nodes_.unschedulable_reason(node); !why.empty()) out["reason"] = why;
  if (node.registered_at != kNotYet) out["agent"] = node_registration_to_json(node.reported);
  return out;
}

nlohmann::json PlaneViews::rented_node(const PlaneNode& node) const {
  const ServerJob& job = state_.jobs().at(node.job);
  const bool running = job.state == JobState::kRunning;
  const int gpus = rented_gpus_per_task(job.spec);
  const auto offer = job.burst ? clerk_.offer_index(job.burst->offer) : std::nullopt;
  nlohmann::json jobs = nlohmann::json::array();
  if (running) {
    jobs.push_back({{"job", job.id},
                    {"tenant", job.spec.tenant},
                    {"name", job.spec.name},
                    {"tasks", 1},
                    {"gpus", gpus},
                    {"gpu_milli", task_gpu_milli(job.spec)}});
  }
  return {{"name", node.name},
          {"state", node.registered_at == kNotYet ? "starting" : "ready"},
          {"gpu_model",
           offer ? state_.scheduler().pool().models().name(clerk_.offers()[*offer].model) : ""},
          {"gpus", gpus},
          {"gpu_milli_allocated", running ? std::int64_t{gpus} * task_gpu_milli(job.spec) : 0},
          {"leaf", "(rented)"},
          {"spine", ""},
          {"jobs", std::move(jobs)},
          {"registered_ms", unix_ms(node.registered_at)},
          {"last_heartbeat_ms", unix_ms(node.last_heartbeat_at)},
          {"address", node.reported.address},
          {"drain_reason", ""},
          {"burst", true},
          {"rental",
           {{"offer", job.burst ? job.burst->offer : ""},
            {"provider", job.burst ? job.burst->provider : ""},
            {"job", node.job},
            {"task", node.task}}}};
}

// --- tenants and queues ---

nlohmann::json PlaneViews::tenant(TenantId tenant) const {
  const Scheduler& scheduler = state_.scheduler();
  const TenantBook& book = scheduler.book();
  const GpuModelCatalog& models = book.models();
  nlohmann::json quota = nlohmann::json::object();
  for (int m = 0; m < book.model_count(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    const std::int64_t guaranteed = book.guaranteed(tenant, model);
    const std::int64_t usage = book.usage(tenant, model);
    const auto borrowing = book.borrowing_limit(tenant, model);
    if (guaranteed == 0 && usage == 0 && !borrowing) continue;
    nlohmann::json entry = {
        {"guaranteed_gpus", milli_as_gpus(guaranteed)},
        {"lending_limit_gpus", milli_as_gpus(book.lending_limit(tenant, model))},
        {"used_gpus", milli_as_gpus(usage)},
        {"borrowed_gpus", milli_as_gpus(book.borrowed(tenant, model))},
        // While a tidal window is open its GPUs come out of every guarantee in proportion.
        {"held_by_windows_gpus", milli_as_gpus(book.held_from(tenant, model))}};
    entry["borrowing_limit_gpus"] = borrowing ? milli_as_gpus(*borrowing) : nlohmann::json(nullptr);
    quota[models.name(model)] = std::move(entry);
  }
  const std::string& name = book.tenant_name(tenant);
  int pending = 0;
  int running = 0;
  for (const auto& [of, jobs] : live_jobs()) {
    if (of.first != name) continue;
    pending += jobs.pending;
    running += jobs.running;
  }
  nlohmann::json queues = nlohmann::json::array();
  for (int q = 0; q < book.queue_count(); ++q) {
    const QueueId id{static_cast<std::uint32_t>(q)};
    if (book.tenant_of(id) == tenant) queues.push_back(book.queue_name(id));
  }
  nlohmann::json out = {{"name", name},
                        {"org", book.org_name(book.org_of(tenant))},
                        {"weight", book.weight(tenant)},
                        {"queues", std::move(queues)},
                        {"quota", std::move(quota)},
                        {"gpu_milli_used", scheduler.usage_milli(tenant)},
                        {"jobs_pending", pending},
                        {"jobs_running", running}};
  // With a market that gives the tenant a budget: where its spend stands this quarter.
  if (const ServerMarket* market = clerk_.market()) {
    const MarketDesk& desk = market->desk();
    if (const auto status = desk.budget_status(tenant, desk.now())) {
      out["budget"] = {{"quarter", quarter_name(desk.quarter(desk.now()))},
                       {"state", budget_state_name(status->state)},
                       {"budget", whole_credits(status->budget)},
                       {"charges", whole_credits(status->charges)},
                       {"credits", whole_credits(status->credits)},
                       {"spent", whole_credits(status->spend)},
                       {"remaining", whole_credits(status->remaining)},
                       {"currency", market->spec().currency}};
    }
  }
  return out;
}

nlohmann::json PlaneViews::tenants(const Principal& who) const {
  const TenantBook& book = state_.scheduler().book();
  nlohmann::json out = nlohmann::json::array();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId id{static_cast<std::uint32_t>(t)};
    if (who.role == Role::kUser && book.tenant_name(id) != who.tenant) continue;
    out.push_back(tenant(id));
  }
  return {{"tenants", std::move(out)}};
}

std::map<std::pair<std::string, std::string>, PlaneViews::LiveJobs> PlaneViews::live_jobs() const {
  std::map<std::pair<std::string, std::string>, LiveJobs> counts;
  for (JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    LiveJobs& of_queue = counts[{job.spec.tenant, job.spec.queue}];
    ++(job.state == JobState::kRunning ? of_queue.running : of_queue.pending);
  }
  return counts;
}

nlohmann::json PlaneViews::queues(const Principal& who) const {
  const TenantBook& book = state_.scheduler().book();
  std::map<std::pair<std::string, std::string>, LiveJobs> counts = live_jobs();
  nlohmann::json out = nlohmann::json::array();
  for (int q = 0; q < book.queue_count(); ++q) {
    const QueueId id{static_cast<std::uint32_t>(q)};
    const std::string& tenant = book.tenant_name(book.tenant_of(id));
    if (who.role == Role::kUser && tenant != who.tenant) continue;
    const auto [pending, running] = counts[{tenant, book.queue_name(id)}];
    out.push_back({{"tenant", tenant},
                   {"queue", book.queue_name(id)},
                   {"pending", pending},
                   {"running", running}});
  }
  return {{"queues", std::move(out)}};
}

// --- tokens ---

nlohmann::json PlaneViews::token(const TokenRecord& t) {
  return {{"id", t.id},
          {"role", t.role},
          {"tenant", t.tenant},
          {"node", t.node},
          {"description", t.description},
          {"created_ms", t.created_ms},
          {"revoked", t.revoked}};
}

nlohmann::json PlaneViews::tokens() const {
  nlohmann::json out = nlohmann::json::array();
  for (const TokenRecord& t : state_.tokens().all()) out.push_back(token(t));
  return {{"tokens", std::move(out)}};
}

// --- figures ---

void PlaneViews::waiting_figures(PlaneFigures& f) const {
  const Scheduler& scheduler = state_.scheduler();
  const TenantBook& book = scheduler.book();
  const GpuModelCatalog& models = book.models();
  // (tenant, model) -> the unused guarantee, then what pending jobs ask of it.
  std::map<std::pair<TenantId, GpuModelId>, std::int64_t> unused;
  std::map<std::pair<TenantId, GpuModelId>, std::int64_t> asked;
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    for (int m = 0; m < models.size(); ++m) {
      const GpuModelId model{static_cast<std::uint32_t>(m)};
      unused[{tenant, model}] =
          std::max<std::int64_t>(0, book.guaranteed(tenant, model) - book.usage(tenant, model));
    }
  }
  for (const JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state != JobState::kPending || job.burst || !job.held.empty() ||
        !state_.unmet_dependencies(job).empty()) {
      continue;
    }
    const std::int64_t since =
        unix_ms(job.transitions.empty() ? job.submitted_at : job.transitions.back().at);
    const auto [oldest, added] = f.tenant_oldest_pending_ms.try_emplace(job.spec.tenant, since);
    if (!added) oldest->second = std::min(oldest->second, since);
    const PendingReason* reason = scheduler.reason(id);
    const PendingKind kind = reason ? reason->kind : PendingKind::kNotConsidered;
    if (kind == PendingKind::kQuota || kind == PendingKind::kBudget ||
        kind == PendingKind::kWindow) {
      continue;
    }
    // The job as the scheduler takes it: its GPUs, and the models its tasks accept.
    const std::optional<TenantId> tenant = book.find_tenant(job.spec.tenant);
    const std::optional<QueueId> queue =
        tenant ? book.find_queue(*tenant, job.spec.queue) : std::nullopt;
    if (!queue) continue;
    const Result<Job> core = core_job_of(job.spec, job.id, *tenant, *queue,
                                         unix_seconds(job.submitted_at), scheduler.pool().models());
    if (!core) continue;
    const std::int64_t milli = core->total_milli_gpu();
    for (int m = 0; m < models.size(); ++m) {
      const GpuModelId model{static_cast<std::uint32_t>(m)};
      // Only a job that the unused guarantee covers whole: a larger one borrows for the rest.
      if (milli > 0 && core->gang.task.models.accepts(model) && milli <= unused[{*tenant, model}]) {
        asked[{*tenant, model}] += milli;
      }
    }
  }
  for (const auto& [key, free] : unused) {
    const auto it = asked.find(key);
    f.guarantee_shortfall_milli[{book.tenant_name(key.first), models.name(key.second)}] =
        it == asked.end() ? 0 : std::min(free, it->second);
  }
  if (clerk_.market() != nullptr) {
    // Every tenant's count, 0 until its first: a rule's increase() sees the first one.
    for (int t = 0; t < book.tenant_count(); ++t) {
      f.tenant_spend_anomalies[book.tenant_name(TenantId{static_cast<std::uint32_t>(t)})] = 0;
    }
    for (const auto& [tenant, count] : clerk_.spend_anomalies()) {
      f.tenant_spend_anomalies[tenant] = count;
    }
  }
}

HistoryValues PlaneViews::history_values() const {
  HistoryValues v;
  const Scheduler& scheduler = state_.scheduler();
  const Pool& pool = scheduler.pool();
  v[history_key("pool_milli_gpus")] = pool.total_gpus() * 1000;
  v[history_key("allocated_milli_gpus")] = pool.allocated_milli_gpu();
  const TenantBook& book = scheduler.book();
  const GpuModelCatalog& models = book.models();
  for (int m = 0; m < models.size(); ++m) {
    const GpuModelId model{static_cast<std::uint32_t>(m)};
    // What tenants borrow of the model, shared among those that lend it by what each may lend.
    std::int64_t borrowed = 0;
    std::int64_t lendable = 0;
    for (int t = 0; t < book.tenant_count(); ++t) {
      borrowed += book.borrowed(TenantId{static_cast<std::uint32_t>(t)}, model);
      lendable += book.lendable(TenantId{static_cast<std::uint32_t>(t)}, model);
    }
    for (int t = 0; t < book.tenant_count(); ++t) {
      const TenantId tenant{static_cast<std::uint32_t>(t)};
      const std::vector<std::pair<std::string, std::string>> labels = {
          {"tenant", book.tenant_name(tenant)}, {"model", models.name(model)}};
      const std::int64_t may_lend = book.lendable(tenant, model);
      const std::int64_t lent =
          lendable == 0 ? 0 : std::min(may_lend, mul_div_round(borrowed, may_lend, lendable));
      // Zeros are left out (a sample's absent series reads as 0): most pairs are all zero.
      for (const auto& [name, value] :
           {std::pair{"guaranteed_milli_gpus", book.guaranteed(tenant, model)},
            std::pair{"used_milli_gpus", book.usage(tenant, model)},
            std::pair{"borrowed_milli_gpus", book.borrowed(tenant, model)},
            std::pair{"lent_milli_gpus", lent}}) {
        if (value != 0) v[history_key(name, labels)] = value;
      }
    }
  }
  for (const auto& [of, jobs] : live_jobs()) {
    // Summed over the tenant's queues (a sample's absent series reads as 0).
    if (jobs.pending != 0) v[history_key("pending_jobs", {{"tenant", of.first}})] += jobs.pending;
    if (jobs.running != 0) v[history_key("running_jobs", {{"tenant", of.first}})] += jobs.running;
  }
  // Allocated GPUs whose agents report them below the idle threshold now: over the samples, the
  // GPU-hours allocated but idle.
  const ClusterSpec& cluster = state_.setup().cluster;
  for (const GpuTelemetry::LowUse& low : nodes_.telemetry().low_use_now()) {
    const auto id = job_id_from_wire(low.job);
    const auto job = id ? state_.jobs().find(*id) : state_.jobs().end();
    const PlaneNode* node = nodes_.find(low.node);
    if (job == state_.jobs().end() || node == nullptr) continue;
    const std::string model = node->kind == NodeKind::kCluster
                                  ? cluster.models.name(cluster.nodes[node->id.value].model)
                                  : node->reported.gpu_model;
    v[history_key("idle_milli_gpus", {{"tenant", job->second.spec.tenant}, {"model", model}})] +=
        1000;
  }
  if (const ServerMarket* market = clerk_.market()) {
    const ChargeMeter& meter = market->desk().meter();
    const GpuModelCatalog& priced = pool.models();
    for (int m = 0; m < priced.size(); ++m) {
      const GpuModelId model{static_cast<std::uint32_t>(m)};
      for (PriceClass c :
           {PriceClass::kStandard, PriceClass::kPreemptible, PriceClass::kEmergency}) {
        v[history_key("price_micros_per_gpu_hour", {{"model", priced.name(model)},
                                                    {"class", std::string(price_class_name(c))}})] =
            meter.price_per_hour(model, c);
      }
    }
  }
  return v;
}

PlaneFigures PlaneViews::figures() const {
  PlaneFigures f;
  f.tenant_queue_waits = state_.queue_waits();
  f.starts_prewarmed = state_.starts_prewarmed();
  f.starts_not_prewarmed = state_.starts_not_prewarmed();
  for (const auto& [id, job] : state_.jobs()) {
    const StepHistogram& steps = job.steps.steps;
    if (job.state != JobState::kRunning || steps.count() == 0) continue;
    PlaneFigures::JobSteps& out = f.running_job_steps[wire_job_id(id)];
    out.tenant = job.spec.tenant;
    out.p50_us = steps.quantile_us(0.5);
    out.p90_us = steps.quantile_us(0.9);
    out.p99_us = steps.quantile_us(0.99);
    PlaneFigures::TenantSteps& tenant = f.tenant_steps[job.spec.tenant];
    const double seconds = static_cast<double>(steps.sum_us()) / 1e6;
    if (auto share = job.steps.comm_share()) {
      out.comm_share = share->share;
      tenant.step_seconds += seconds;
      tenant.comm_seconds += share->share * seconds;
    }
    const double peak = peak_flops_per_s(job);
    if (job.spec.model_flops_per_step) {
      out.mfu = job.steps.mfu(*job.spec.model_flops_per_step, peak);
      if (out.mfu) {
        tenant.model_flops += *job.spec.model_flops_per_step * static_cast<double>(steps.count());
        tenant.peak_flops += seconds * peak;
      }
    }
  }
  for (JobState s : {JobState::kPending, JobState::kRunning, JobState::kSucceeded,
                     JobState::kFailed, JobState::kCancelled}) {
    f.jobs_by_state[std::string(job_state_name(s))] = 0;
  }
  for (const auto& [id, job] : state_.jobs()) {
    ++f.jobs_by_state[std::string(job_state_name(job.state))];
  }
  const Scheduler& scheduler = state_.scheduler();
  const Pool& pool = scheduler.pool();
  f.gpus_total = pool.total_gpus();
  f.gpu_milli_allocated = pool.allocated_milli_gpu();
  f.nodes_total = static_cast<std::int64_t>(nodes_.pool_size());
  for (std::size_t n = 0; n < nodes_.pool_size(); ++n) {
    const PlaneNode& node = nodes_.pool_node(NodeId{static_cast<std::uint32_t>(n)});
    // NotReady: missed heartbeats, or (outside simulate_unregistered_nodes) no agent yet.
    if (node.drained) {
      ++f.nodes_drained;
    } else if (!nodes_.schedulable(node)) {
      ++f.nodes_not_ready;
    }
  }
  f.node_failures = nodes_.failures();
  f.requeued_by_cause = jobs_.requeued_by_cause();
  f.lost_work_ms_by_cause = jobs_.lost_work_ms_by_cause();
  const TenantBook& book = scheduler.book();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId id{static_cast<std::uint32_t>(t)};
    f.tenant_gpu_milli[book.tenant_name(id)] = scheduler.usage_milli(id);
  }
  waiting_figures(f);
  f.last_event_seq = state_.last_event_seq();
  f.internal_errors = state_.internal_errors();
  nodes_.telemetry().write_metrics(f.gpu_metrics);
  market_figures(f);
  return f;
}

}  // namespace tidepool
