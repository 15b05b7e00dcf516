// The control plane's admin commands: tenants (their entries changed over the tenants file),
// queues and tokens.
#include <fmt/format.h>

#include <utility>

#include "server/control_plane.h"

namespace tidepool {
namespace {

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

std::unexpected<Refused> no_such_tenant(const std::string& name) {
  return refuse(Refusal::kNotFound, Error{"tenant", fmt::format("no tenant '{}'", name)});
}

}  // namespace

// --- tenants and queues ---

Result<TenantsSpec> ControlPlane::apply_overrides(
    TenantsSpec base, const std::map<std::string, TenantUpdate>& overrides,
    const GpuModelCatalog& models) {
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

Reply ControlPlane::list_tenants(const Principal& who) const { return answer(views_.tenants(who)); }

Reply ControlPlane::get_tenant(const Principal& who, const std::string& name) const {
  auto tenant = state_.scheduler().book().find_tenant(name);
  if (!tenant || (who.role == Role::kUser && who.tenant != name)) return no_such_tenant(name);
  return answer(views_.tenant(*tenant));
}

Reply ControlPlane::put_tenant(const Principal& who, const std::string& name,
                               const TenantUpdate& update, Instant now, Batch& batch) {
  if (auto ok = check_admin(who); !ok) return std::unexpected(ok.error());
  if (!state_.scheduler().book().find_tenant(name)) {
    return refuse(
        Refusal::kNotFound,
        Error{"tenant", fmt::format("no tenant '{}'; tenants come from the tenants file", name)});
  }
  const ControlPlaneSetup& setup = state_.setup();
  auto overrides = tenant_overrides_;
  overrides[name] = update;
  auto tenants = apply_overrides(setup.tenants, overrides, setup.cluster.models);
  if (!tenants) return refuse(Refusal::kInvalid, "invalid tenant", tenants.error());
  if (auto book = TenantBook::create(*tenants, setup.cluster.models); !book) {
    return refuse(Refusal::kInvalid, "invalid tenant", book.error());
  }
  auto scheduler = rebuild_scheduler(*tenants, now);
  if (!scheduler) return refuse(Refusal::kConflict, scheduler.error());
  clerk_.advance(now, batch);
  state_.replace_scheduler(std::move(*scheduler));
  clerk_.apply_budget_holds(now, batch);
  clerk_.replace_book(*tenants, now, batch);
  tenant_overrides_ = std::move(overrides);
  state_.mark_dirty();
  batch.settings.push_back(KeyedRecord{"tenant/" + name, tenant_update_to_json(update).dump()});
  state_.emit(batch, now, "tenant.updated", {{"tenant", name}});
  return answer(views_.tenant(*state_.scheduler().book().find_tenant(name)));
}

Reply ControlPlane::list_queues(const Principal& who) const { return answer(views_.queues(who)); }

// --- tokens ---

Reply ControlPlane::create_token(const Principal& who, const TokenRequest& request, Instant now,
                                 Batch& batch) {
  if (auto ok = check_admin(who); !ok) return std::unexpected(ok.error());
  auto role = parse_role(request.role);
  if (!role) return refuse(Refusal::kInvalid, role.error());
  if (*role == Role::kUser && !state_.scheduler().book().find_tenant(request.tenant)) {
    return refuse(Refusal::kInvalid,
                  Error{"tenant", fmt::format("no tenant '{}'", request.tenant)});
  }
  if (*role == Role::kAgent && !state_.pool_node(request.node)) {
    return refuse(Refusal::kInvalid,
                  Error{"node", fmt::format("no node '{}' in the cluster", request.node)});
  }
  NewToken token = make_token(*role, request.tenant, request.node, request.description, now);
  state_.store_token(token.record, batch);
  state_.emit(batch, now, "token.created",
              {{"token", token.record.id}, {"role", token.record.role}});
  nlohmann::json out = PlaneViews::token(token.record);
  out["secret"] = token.secret;
  return created(std::move(out));
}

std::string ControlPlane::bootstrap_admin(Instant now, Batch& batch) {
  NewToken token = make_token(Role::kAdmin, "", "", "created at the server's first start", now);
  state_.store_token(token.record, batch);
  state_.emit(batch, now, "token.created", {{"token", token.record.id}, {"role", "admin"}});
  return token.secret;
}

Reply ControlPlane::list_tokens(const Principal& who) const {
  if (auto ok = check_admin(who); !ok) return std::unexpected(ok.error());
  return answer(views_.tokens());
}

Reply ControlPlane::revoke_token(const Principal& who, const std::string& id, Instant now,
                                 Batch& batch) {
  if (auto ok = check_admin(who); !ok) return std::unexpected(ok.error());
  auto token = state_.tokens().find(id);
  if (!token) {
    return refuse(Refusal::kNotFound, Error{"token", fmt::format("no token '{}'", id)});
  }
  token->revoked = true;
  state_.store_token(*token, batch);
  state_.emit(batch, now, "token.revoked", {{"token", id}});
  return answer(PlaneViews::token(*token));
}

}  // namespace tidepool
