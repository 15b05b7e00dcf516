#include "server/job_listing.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

namespace tidepool {

bool may_see_job(const Principal& who, std::string_view tenant,
                 const std::vector<std::string>& ran_on, const std::vector<TaskPlace>& placement) {
  switch (who.role) {
    case Role::kAdmin:
      return true;
    case Role::kUser:
      return tenant == who.tenant;
    case Role::kAgent:
      return std::ranges::binary_search(ran_on, who.node) ||
             std::ranges::any_of(placement, [&](const TaskPlace& p) { return p.node == who.node; });
  }
  return false;
}

ListedJob listed_job(const ServerJob& job) {
  return ListedJob{.id = job.id,
                   .tenant = job.spec.tenant,
                   .queue = job.spec.queue,
                   .state = job.state,
                   .submitted_at = job.submitted_at,
                   .ended_at = is_final(job.state) ? job.ended_at : kNotYet,
                   .ran_on = job.ran_on,
                   .placement = job.placement,
                   .view = server_job_to_json(job)};
}

Reply list_jobs(const JobListing& listing, const Principal& who, const JobFilter& filter) {
  if (who.role == Role::kUser && !filter.tenant.empty() && filter.tenant != who.tenant) {
    return refuse(Refusal::kForbidden,
                  Error{"tenant", fmt::format("this token sees tenant '{}' only", who.tenant)});
  }
  if (!listing.queues_of_tenant.empty()) {
    const auto tenant = listing.queues_of_tenant.find(filter.tenant);
    if (!filter.tenant.empty() && tenant == listing.queues_of_tenant.end()) {
      return refuse(Refusal::kNotFound,
                    Error{"tenant", fmt::format("no tenant '{}'", filter.tenant)});
    }
    const bool known_queue =
        filter.queue.empty() ||
        (tenant != listing.queues_of_tenant.end()
             ? tenant->second.contains(filter.queue)
             : std::ranges::any_of(listing.queues_of_tenant,
                                   [&](const auto& t) { return t.second.contains(filter.queue); }));
    if (!known_queue) {
      return refuse(
          Refusal::kNotFound,
          Error{"queue",
                fmt::format("no queue '{}'{}", filter.queue,
                            filter.tenant.empty() ? "" : " in tenant '" + filter.tenant + "'")});
    }
  }
  if (!listing.nodes.empty() && !filter.node.empty() && !listing.nodes.contains(filter.node)) {
    return refuse(Refusal::kNotFound, Error{"node", fmt::format("no node '{}'", filter.node)});
  }
  if (filter.limit < 1 || filter.limit > kMaxJobPage) {
    return refuse(Refusal::kInvalid,
                  Error{"limit", fmt::format("a page holds 1..{} jobs", kMaxJobPage)});
  }
  if (filter.since && filter.until && *filter.until < *filter.since) {
    return refuse(Refusal::kInvalid,
                  Error{"until_ms", fmt::format("{} is before since_ms {}", unix_ms(*filter.until),
                                                unix_ms(*filter.since))});
  }
  std::set<JobState> states;
  for (std::size_t start = 0; start < filter.state.size();) {
    std::size_t comma = filter.state.find(',', start);
    if (comma == std::string::npos) comma = filter.state.size();
    auto state = parse_job_state(filter.state.substr(start, comma - start));
    if (!state) return refuse(Refusal::kInvalid, state.error());
    states.insert(*state);
    start = comma + 1;
  }
  // Newest first, so that "the last N jobs" is one request.
  auto end = filter.before > 0
                 ? std::ranges::lower_bound(listing.jobs, filter.before, {},
                                            [](const auto& job) { return wire_job_id(job->id); })
                 : listing.jobs.end();
  std::vector<const ListedJob*> chosen;
  bool more = false;
  for (auto it = std::make_reverse_iterator(end); it != listing.jobs.rend(); ++it) {
    const ListedJob& job = **it;
    if (!may_see_job(who, job.tenant, job.ran_on, job.placement)) continue;
    if (!filter.tenant.empty() && job.tenant != filter.tenant) continue;
    if (!filter.queue.empty() && job.queue != filter.queue) continue;
    if (!states.empty() && !states.contains(job.state)) continue;
    if (filter.until && job.submitted_at > *filter.until) continue;
    if (filter.since && job.ended_at != kNotYet && job.ended_at < *filter.since) continue;
    if (!filter.node.empty() && std::ranges::none_of(job.placement, [&](const TaskPlace& p) {
          return p.node == filter.node;
        })) {
      continue;
    }
    if (chosen.size() == filter.limit) {
      more = true;
      break;
    }
    chosen.push_back(&job);
  }
  nlohmann::json jobs = nlohmann::json::array();
  for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) {
    nlohmann::json view = (*it)->view;
    if (auto pending = listing.pending.find((*it)->id); pending != listing.pending.end()) {
      view["pending"] = pending->second;
    }
    if (auto attained = listing.attained.find((*it)->id); attained != listing.attained.end()) {
      view["attained_gpu_seconds"] = attained->second;
    }
    jobs.push_back(std::move(view));
  }
  nlohmann::json out = {{"jobs", std::move(jobs)}};
  if (more) out["next"] = std::to_string(wire_job_id(chosen.back()->id));
  return answer(std::move(out));
}

}  // namespace tidepool
