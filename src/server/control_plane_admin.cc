// The control plane: nodes, tenants and queues, tokens, and the figures for metrics.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "server/control_plane.h"

namespace tidepool {
namespace {

std::unexpected<Refused> admin_only(const Principal& who) {
  return refuse(Refusal::kForbidden,
                Error{"role", fmt::format("an admin token is needed; this one is a {} token",
                                          role_name(who.role))});
}

nlohmann::json milli_as_gpus(std::int64_t milli) {
  if (milli % 1000 == 0) return milli / 1000;
  return static_cast<double>(milli) / 1000.0;
}

nlohmann::json tenant_update_to_json(const TenantUpdate& update) {
  nlohmann::json quota = nlohmann::json::object();
  for (const auto& [model, q] : update.quota) {
    nlohmann::json entry = {{"guaranteed_gpus", milli_as_gpus(q.guaranteed_milli)}};
    if (q.borrowing_limit_milli) {
      entry["borrowing_limit_gpus"] = milli_as_gpus(*q.borrowing_limit_milli);
    }
    if (q.lending_limit_milli) entry["lending_limit_gpus"] = milli_as_gpus(*q.lending_limit_milli);
    quota[model] = std::move(entry);
  }
  return {{"weight", update.weight}, {"queues", update.queues}, {"quota", std::move(quota)}};
}

}  // namespace

Result<TenantsSpec> ControlPlane::apply_overrides(
    TenantsSpec base, const std::map<std::string, TenantUpdate>& overrides,
    GpuModelCatalog& models) {
  for (const auto& [name, update] : overrides) {
    TenantSpec* target = nullptr;
    for (OrgSpec& org : base.orgs) {
      for (TenantSpec& t : org.tenants) {
        if (t.name == name) target = &t;
      }
    }
    if (target == nullptr) {
      return fail("tenant", fmt::format("no tenant '{}' in the tenants file", name));
    }
    target->weight = update.weight;
    target->queues = update.queues;
    target->quotas.clear();
    for (const auto& [model_name, q] : update.quota) {
      auto model = models.find(model_name);
      if (!model) {
        return fail(fmt::format("quota.{}", model_name),
                    fmt::format("the cluster has no GPU model '{}'", model_name));
      }
      target->quotas.push_back(
          ModelQuota{*model, q.guaranteed_milli, q.borrowing_limit_milli, q.lending_limit_milli});
    }
  }
  return base;
}

// --- nodes ---

std::vector<std::vector<const ServerJob*>> ControlPlane::running_by_node() const {
  std::vector<std::vector<const ServerJob*>> out(nodes_.size());
  for (std::int64_t job_id : live_) {
    const ServerJob& job = jobs_.at(job_id);
    if (job.state != JobState::kRunning) continue;
    for (const TaskPlace& p : job.placement) {
      auto it = node_ids_.find(p.node);
      if (it == node_ids_.end()) continue;
      std::vector<const ServerJob*>& here = out[it->second.value];
      if (here.empty() || here.back() != &job) here.push_back(&job);
    }
  }
  return out;
}

nlohmann::json ControlPlane::node_json(NodeId id,
                                       const std::vector<const ServerJob*>& running) const {
  const NodeSpec& spec = setup_.cluster.nodes[id.value];
  const NodeInfo& info = nodes_[id.value];
  const Topology& topology = setup_.cluster.topology;
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
    allocated_milli += std::int64_t{gpus} * (job.spec.gpus_per_task == 0 ? 0 : job.spec.gpu_milli);
    jobs.push_back({{"job", job.id},
                    {"tenant", job.spec.tenant},
                    {"name", job.spec.name},
                    {"tasks", tasks},
                    {"gpus", gpus},
                    {"gpu_milli", job.spec.gpu_milli}});
  }
  const std::string state = info.drained ? "drained" : !schedulable(info) ? "not_ready" : "ready";
  nlohmann::json out = {
      {"name", spec.name},
      {"state", state},
      {"gpu_model", spec.gpu_count > 0 ? setup_.cluster.models.name(spec.model) : ""},
      {"gpus", spec.gpu_count},
      {"gpu_milli_allocated", allocated_milli},
      {"cpu_milli", spec.milli_cpu},
      {"memory_mib", spec.memory_mib},
      {"leaf", topology.leaves[leaf.value].name},
      {"spine", topology.spines[topology.leaves[leaf.value].spine.value].name},
      {"jobs", std::move(jobs)},
      {"registered_ms", info.registered_ms},
      {"last_heartbeat_ms", info.last_heartbeat_ms},
  };
  if (info.drained) {
    out["drain_reason"] = info.drain_reason;
    out["drained_ms"] = info.drained_ms;
  }
  if (info.not_ready) out["not_ready_ms"] = info.not_ready_ms;
  if (const std::string why = unschedulable_reason(info); !why.empty()) out["reason"] = why;
  if (info.registered_ms != 0) out["agent"] = node_registration_to_json(info.reported);
  return out;
}

bool ControlPlane::schedulable(const NodeInfo& info) const {
  return !info.drained && !info.not_ready &&
         (info.registered_ms != 0 || setup_.simulate_unregistered_nodes);
}

std::string ControlPlane::unschedulable_reason(const NodeInfo& info) const {
  if (info.drained) return info.drain_reason;
  if (info.not_ready) {
    return fmt::format("its agent sent no heartbeat for more than {} s (timeout)",
                       setup_.heartbeat_timeout_ms / 1000);
  }
  if (info.registered_ms == 0 && !setup_.simulate_unregistered_nodes) {
    return "no agent has registered the node: start `tidepool agent --node " + info.name +
           "` there";
  }
  return "";
}

Reply ControlPlane::list_nodes(const Principal& who) const {
  nlohmann::json nodes = nlohmann::json::array();
  const auto running = running_by_node();
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    if (who.role == Role::kAgent && nodes_[n].name != who.node) continue;
    nodes.push_back(node_json(NodeId{static_cast<std::uint32_t>(n)}, running[n]));
  }
  // Rented nodes (bursting) follow the cluster file's.
  for (const auto& [name, rented] : burst_nodes_) {
    if (who.role == Role::kAgent && name != who.node) continue;
    nodes.push_back(burst_node_json(name));
  }
  return answer({{"nodes", std::move(nodes)}});
}

void ControlPlane::record_node(Batch& batch, const NodeInfo& node) {
  batch.nodes.push_back(KeyedRecord{node.name,
                                    nlohmann::json{
                                        {"drained", node.drained},
                                        {"drain_reason", node.drain_reason},
                                        {"drained_ms", node.drained_ms},
                                        {"not_ready", node.not_ready},
                                        {"not_ready_ms", node.not_ready_ms},
                                        {"registered_ms", node.registered_ms},
                                        {"last_heartbeat_ms", node.last_heartbeat_ms},
                                        {"reported", node_registration_to_json(node.reported)},
                                    }
                                        .dump()});
}

Reply ControlPlane::set_drained(const Principal& who, const std::string& node, bool drained,
                                const std::string& reason, std::int64_t now_ms, Batch& batch) {
  if (who.role != Role::kAdmin) return admin_only(who);
  auto it = node_ids_.find(node);
  if (it == node_ids_.end()) {
    return refuse(Refusal::kNotFound, Error{"node", fmt::format("no node '{}'", node)});
  }
  NodeInfo& info = nodes_[it->second.value];
  // Draining a drained node again with another reason replaces the reason (and keeps the time).
  const bool new_reason = drained && info.drained && !reason.empty() && reason != info.drain_reason;
  if (info.drained != drained || new_reason) {
    meter_advance(now_ms, batch);
    if (!new_reason) info.drained_ms = drained ? now_ms : 0;
    info.drained = drained;
    // A node of the cluster file is the pool's: a refusal is a bug, shown and not hidden.
    if (auto ok = scheduler_.set_node_schedulable(it->second, schedulable(info)); !ok) {
      internal_error("node " + node + ": scheduler set_node_schedulable", ok.error(), now_ms,
                     batch);
    }
    info.drain_reason = drained ? (reason.empty() ? "drained by an admin" : reason) : "";
    dirty_ = true;
    record_node(batch, info);
    emit(batch, now_ms, drained ? "node.drained" : "node.undrained",
         {{"node", node}, {"reason", info.drain_reason}});
  }
  return answer(node_json(it->second, running_by_node()[it->second.value]));
}

// --- tenants and queues ---

nlohmann::json ControlPlane::tenant_json(TenantId tenant) const {
  const TenantBook& book = scheduler_.book();
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
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (job.spec.tenant != name) continue;
    (job.state == JobState::kRunning ? running : pending) += 1;
  }
  nlohmann::json queues = nlohmann::json::array();
  for (int q = 0; q < book.queue_count(); ++q) {
    const QueueId id{static_cast<std::uint32_t>(q)};
    if (book.tenant_of(id) == tenant) queues.push_back(book.queue_name(id));
  }
  return {{"name", name},
          {"org", book.org_name(book.org_of(tenant))},
          {"weight", book.weight(tenant)},
          {"queues", std::move(queues)},
          {"quota", std::move(quota)},
          {"gpu_milli_used", scheduler_.usage_milli(tenant)},
          {"jobs_pending", pending},
          {"jobs_running", running}};
}

Reply ControlPlane::list_tenants(const Principal& who) const {
  const TenantBook& book = scheduler_.book();
  nlohmann::json tenants = nlohmann::json::array();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId id{static_cast<std::uint32_t>(t)};
    if (who.role == Role::kUser && book.tenant_name(id) != who.tenant) continue;
    tenants.push_back(tenant_json(id));
  }
  return answer({{"tenants", std::move(tenants)}});
}

Reply ControlPlane::get_tenant(const Principal& who, const std::string& name) const {
  auto tenant = scheduler_.book().find_tenant(name);
  if (!tenant || (who.role == Role::kUser && who.tenant != name)) {
    return refuse(Refusal::kNotFound, Error{"tenant", fmt::format("no tenant '{}'", name)});
  }
  return answer(tenant_json(*tenant));
}

Reply ControlPlane::put_tenant(const Principal& who, const std::string& name,
                               const TenantUpdate& update, std::int64_t now_ms, Batch& batch) {
  if (who.role != Role::kAdmin) return admin_only(who);
  if (!scheduler_.book().find_tenant(name)) {
    return refuse(Refusal::kNotFound,
                  Error{"tenant", fmt::format("no tenant '{}'; tenants come from the tenants "
                                              "file",
                                              name)});
  }
  auto overrides = tenant_overrides_;
  overrides[name] = update;
  auto tenants = apply_overrides(setup_.tenants, overrides, setup_.cluster.models);
  if (!tenants) return refuse(Refusal::kInvalid, "invalid tenant", tenants.error());
  if (auto book = TenantBook::create(*tenants, setup_.cluster.models); !book) {
    return refuse(Refusal::kInvalid, "invalid tenant", book.error());
  }
  auto scheduler = rebuild_scheduler(*tenants, now_ms);
  if (!scheduler) return refuse(Refusal::kConflict, scheduler.error());
  meter_advance(now_ms, batch);
  scheduler_ = std::move(*scheduler);
  apply_budget_holds(now_ms, batch);
  if (market_) {
    auto book = TenantBook::create(*tenants, setup_.cluster.models);
    if (auto ok = book ? market_->desk().replace_book(*book)
                       : Result<void>(std::unexpected(book.error()));
        !ok) {
      market_failed(ok.error(), now_ms, batch);
    }
  }
  tenant_overrides_ = std::move(overrides);
  dirty_ = true;
  batch.settings.push_back(KeyedRecord{"tenant/" + name, tenant_update_to_json(update).dump()});
  emit(batch, now_ms, "tenant.updated", {{"tenant", name}});
  return answer(tenant_json(*scheduler_.book().find_tenant(name)));
}

Reply ControlPlane::list_queues(const Principal& who) const {
  const TenantBook& book = scheduler_.book();
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> counts;
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    auto& [pending, running] = counts[{job.spec.tenant, job.spec.queue}];
    (job.state == JobState::kRunning ? running : pending) += 1;
  }
  nlohmann::json queues = nlohmann::json::array();
  for (int q = 0; q < book.queue_count(); ++q) {
    const QueueId id{static_cast<std::uint32_t>(q)};
    const std::string& tenant = book.tenant_name(book.tenant_of(id));
    if (who.role == Role::kUser && tenant != who.tenant) continue;
    const auto [pending, running] = counts[{tenant, book.queue_name(id)}];
    queues.push_back({{"tenant", tenant},
                      {"queue", book.queue_name(id)},
                      {"pending", pending},
                      {"running", running}});
  }
  return answer({{"queues", std::move(queues)}});
}

// --- tokens ---

namespace {

nlohmann::json token_json(const TokenRecord& t) {
  return {{"id", t.id},
          {"role", t.role},
          {"tenant", t.tenant},
          {"node", t.node},
          {"description", t.description},
          {"created_ms", t.created_ms},
          {"revoked", t.revoked}};
}

}  // namespace

Reply ControlPlane::create_token(const Principal& who, const TokenRequest& request,
                                 std::int64_t now_ms, Batch& batch) {
  if (who.role != Role::kAdmin) return admin_only(who);
  auto role = parse_role(request.role);
  if (!role) return refuse(Refusal::kInvalid, role.error());
  if (*role == Role::kUser && !scheduler_.book().find_tenant(request.tenant)) {
    return refuse(Refusal::kInvalid,
                  Error{"tenant", fmt::format("no tenant '{}'", request.tenant)});
  }
  if (*role == Role::kAgent && !node_ids_.contains(request.node)) {
    return refuse(Refusal::kInvalid,
                  Error{"node", fmt::format("no node '{}' in the cluster", request.node)});
  }
  NewToken token = make_token(*role, request.tenant, request.node, request.description, now_ms);
  tokens_->put(token.record);
  batch.tokens.push_back(token.record);
  emit(batch, now_ms, "token.created", {{"token", token.record.id}, {"role", token.record.role}});
  nlohmann::json out = token_json(token.record);
  out["secret"] = token.secret;
  return created(std::move(out));
}

std::string ControlPlane::bootstrap_admin(std::int64_t now_ms, Batch& batch) {
  NewToken token = make_token(Role::kAdmin, "", "", "created at the server's first start", now_ms);
  tokens_->put(token.record);
  batch.tokens.push_back(token.record);
  emit(batch, now_ms, "token.created", {{"token", token.record.id}, {"role", "admin"}});
  return token.secret;
}

Reply ControlPlane::list_tokens(const Principal& who) const {
  if (who.role != Role::kAdmin) return admin_only(who);
  nlohmann::json tokens = nlohmann::json::array();
  for (const TokenRecord& t : tokens_->all()) tokens.push_back(token_json(t));
  return answer({{"tokens", std::move(tokens)}});
}

Reply ControlPlane::revoke_token(const Principal& who, const std::string& id, std::int64_t now_ms,
                                 Batch& batch) {
  if (who.role != Role::kAdmin) return admin_only(who);
  auto token = tokens_->find(id);
  if (!token) {
    return refuse(Refusal::kNotFound, Error{"token", fmt::format("no token '{}'", id)});
  }
  token->revoked = true;
  tokens_->put(*token);
  batch.tokens.push_back(*token);
  emit(batch, now_ms, "token.revoked", {{"token", id}});
  return answer(token_json(*token));
}

// --- figures ---

ControlPlane::Figures ControlPlane::figures() const {
  Figures f;
  f.tenant_queue_waits = queue_waits_;
  for (JobState s : {JobState::kPending, JobState::kRunning, JobState::kSucceeded,
                     JobState::kFailed, JobState::kCancelled}) {
    f.jobs_by_state[std::string(job_state_name(s))] = 0;
  }
  for (const auto& [id, job] : jobs_) ++f.jobs_by_state[std::string(job_state_name(job.state))];
  const Pool& pool = scheduler_.pool();
  f.gpus_total = pool.total_gpus();
  f.gpu_milli_allocated = pool.allocated_milli_gpu();
  f.nodes_total = static_cast<std::int64_t>(nodes_.size());
  f.nodes_drained = std::ranges::count_if(nodes_, &NodeInfo::drained);
  // NotReady: missed heartbeats, or (outside simulate_unregistered_nodes) no agent yet.
  f.nodes_not_ready = std::ranges::count_if(
      nodes_, [&](const NodeInfo& n) { return !n.drained && !schedulable(n); });
  f.node_failures = node_failures_;
  f.requeued_by_cause = requeued_by_cause_;
  f.lost_work_ms_by_cause = lost_work_ms_by_cause_;
  const TenantBook& book = scheduler_.book();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId id{static_cast<std::uint32_t>(t)};
    f.tenant_gpu_milli[book.tenant_name(id)] = scheduler_.usage_milli(id);
  }
  f.last_event_seq = last_event_seq_;
  f.internal_errors = internal_errors_;
  telemetry_.write_metrics(f.gpu_metrics);
  market_figures(f);
  return f;
}

}  // namespace tidepool
