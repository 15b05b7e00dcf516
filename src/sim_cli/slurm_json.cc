#include "sim_cli/slurm_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>

#include "cli/output_format.h"
#include "core/split_text.h"
#include "sim/observed_job.h"

namespace tidepool {
namespace {

using Json = nlohmann::json;

// A field of an object: missing and null are told apart from a wrong type.
const Json* find_field(const Json& object, std::string_view key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::optional<std::int64_t>> optional_integer(const Json& object, std::string_view key,
                                                     const std::string& where) {
  const Json* v = find_field(object, key);
  if (v == nullptr) return std::optional<std::int64_t>();
  if (!v->is_number_integer()) {
    return fail(where + " " + std::string(key),
                fmt::format("expected an integer, got {}", v->dump()));
  }
  return std::optional(v->get<std::int64_t>());
}

Result<std::int64_t> integer(const Json& object, std::string_view key, const std::string& where) {
  auto v = optional_integer(object, key, where);
  if (!v) return std::unexpected(v.error());
  if (!*v) return fail(where + " " + std::string(key), "missing");
  return **v;
}

Result<std::string> optional_text(const Json& object, std::string_view key,
                                  const std::string& where) {
  const Json* v = find_field(object, key);
  if (v == nullptr) return std::string();
  if (!v->is_string()) {
    return fail(where + " " + std::string(key),
                fmt::format("expected a string, got {}", v->dump()));
  }
  return v->get<std::string>();
}

Result<const Json*> optional_object(const Json& object, std::string_view key,
                                    const std::string& where) {
  const Json* v = find_field(object, key);
  if (v != nullptr && !v->is_object()) {
    return fail(where + " " + std::string(key),
                fmt::format("expected an object, got {}", v->dump()));
  }
  return v;
}

// The list at `key` of the reply, after checking its "errors".
Result<const Json*> reply_list(const Json& reply, std::string_view source, std::string_view key) {
  const std::string where(source);
  if (!reply.is_object()) return fail(where, "expected a JSON object");
  if (const Json* errors = find_field(reply, "errors");
      errors != nullptr && errors->is_array() && !errors->empty()) {
    return fail(where + " errors", errors->dump());
  }
  const Json* list = find_field(reply, key);
  if (list == nullptr) return fail(where + " " + std::string(key), "missing");
  if (!list->is_array()) return fail(where + " " + std::string(key), "expected a list");
  return list;
}

// Slurm's "not set" and "unlimited" for a number (NO_VAL and INFINITE, 32 bits; their 64-bit
// forms read as -2 and -1): the figure is absent, as when it is null.
std::optional<std::int64_t> set_figure(std::optional<std::int64_t> v) {
  if (v && (*v == -1 || *v == -2 || *v == 0xfffffffe || *v == 0xffffffff)) return std::nullopt;
  return v;
}

// The optional count at `key`, 0..`most` when set (Slurm's sentinels read as absent).
Result<std::optional<std::int64_t>> optional_count(const Json& object, std::string_view key,
                                                   const std::string& where, std::int64_t most) {
  auto v = optional_integer(object, key, where);
  if (!v) return std::unexpected(v.error());
  const auto figure = set_figure(*v);
  if (!figure) return figure;
  auto count = observed_count(*figure, most, where + " " + std::string(key));
  if (!count) return std::unexpected(count.error());
  return figure;
}

// A time limit in minutes as seconds, when it is set and > 0.
Result<std::optional<Seconds>> limit_seconds(std::optional<std::int64_t> minutes,
                                             const std::string& field) {
  minutes = set_figure(minutes);
  if (!minutes || *minutes <= 0) return std::optional<Seconds>();
  auto seconds = observed_product(*minutes, 60, kMaxObservedTime, field);
  if (!seconds) return std::unexpected(seconds.error());
  return std::optional<Seconds>(*seconds);
}

enum class Stage : std::uint8_t { kWaiting, kRunning, kEnded };

Stage stage_of(std::string_view state) {
  static const std::map<std::string_view, Stage> kStages = {
      {"COMPLETED", Stage::kEnded},     {"COMPLETING", Stage::kEnded},
      {"FAILED", Stage::kEnded},        {"CANCELLED", Stage::kEnded},
      {"TIMEOUT", Stage::kEnded},       {"NODE_FAIL", Stage::kEnded},
      {"PREEMPTED", Stage::kEnded},     {"OUT_OF_MEMORY", Stage::kEnded},
      {"BOOT_FAIL", Stage::kEnded},     {"DEADLINE", Stage::kEnded},
      {"RUNNING", Stage::kRunning},     {"SUSPENDED", Stage::kRunning},
      {"CONFIGURING", Stage::kRunning}, {"STAGE_OUT", Stage::kRunning},
      {"SIGNALING", Stage::kRunning},   {"RESIZING", Stage::kRunning}};
  // "CANCELLED by 0" in sacct's state.current of some versions: the first word decides.
  const std::string_view word = state.substr(0, state.find(' '));
  const auto it = kStages.find(word);
  return it == kStages.end() ? Stage::kWaiting : it->second;
}

Stage stage_of(const ObservedJob& job) {
  if (job.end || job.cancelled) return Stage::kEnded;
  return job.start ? Stage::kRunning : Stage::kWaiting;
}

// Sets start, end and cancelled from the stage and the times (0: not yet); a time used must be
// one of observed_job.h (its field: `where` and the key).
Result<void> set_times(ObservedJob& job, Stage stage, std::int64_t start, std::int64_t end,
                       const std::string& where, std::string_view start_key,
                       std::string_view end_key) {
  if (stage == Stage::kWaiting) return {};
  if (start <= 0 || job.nodes.empty()) {
    // A job that ended without starting was cancelled (or failed) before it ran.
    job.cancelled = stage == Stage::kEnded;
    return {};
  }
  auto started = observed_time(start, where + " " + std::string(start_key));
  if (!started) return std::unexpected(started.error());
  job.start = start;
  if (stage != Stage::kEnded) return {};
  auto ended = observed_time(std::max(start, end), where + " " + std::string(end_key));
  if (!ended) return std::unexpected(ended.error());
  job.end = *ended;
  return {};
}

// The keys a reply gives a job's time limit (minutes) and times under.
struct TimeKeys {
  const char* limit;
  const char* start;
  const char* end;
};

// `job` with its time limit and times (set_times), if it then keeps observed_job.h's bounds (the
// readers check each figure as they read it, so this only guards what they combine), else an
// error naming the job's field after `where`.
Result<std::optional<ObservedJob>> with_times(ObservedJob job, Stage stage,
                                              std::optional<std::int64_t> limit_minutes,
                                              std::int64_t start, std::int64_t end,
                                              const std::string& where, const TimeKeys& keys) {
  auto limit = limit_seconds(limit_minutes, where + " " + keys.limit);
  if (!limit) return std::unexpected(limit.error());
  job.time_limit = *limit;
  if (auto timed = set_times(job, stage, start, end, where, keys.start, keys.end); !timed) {
    return std::unexpected(timed.error());
  }
  if (auto kept = check_observed(job); !kept) {
    return fail(where + " " + kept.error().field, kept.error().reason);
  }
  return std::optional(std::move(job));
}

Result<std::vector<std::string>> hostlist(std::string_view text, const std::string& field) {
  if (text.empty() || text == "None assigned" || text == "(null)") {
    return std::vector<std::string>();
  }
  return expand_node_names(text, field);
}

std::string tenant_of(const std::string& account, const std::string& user,
                      std::optional<std::int64_t> uid) {
  if (!account.empty()) return account;
  if (!user.empty()) return user;
  return uid ? fmt::format("uid {}", *uid) : "unknown";
}

// A job of squeue's reply; nullopt for the record of an array's tasks that have not started
// (array_job_id set, array_task_id null): each task is listed as a job of its own once it starts.
Result<std::optional<ObservedJob>> squeue_job(const Json& entry, std::size_t index) {
  std::string where = fmt::format("squeue jobs[{}]", index);
  if (!entry.is_object()) return fail(where, "expected an object");
  auto id = integer(entry, "job_id", where);
  if (!id) return std::unexpected(id.error());
  ObservedJob job;
  job.id = std::to_string(*id);
  auto array_task = optional_integer(entry, "array_task_id", where);
  if (!array_task) return std::unexpected(array_task.error());
  auto array_job = optional_integer(entry, "array_job_id", where);
  if (!array_job) return std::unexpected(array_job.error());
  if (*array_job && **array_job > 0) {
    if (!*array_task) return std::optional<ObservedJob>();
    job.id = fmt::format("{}_{}", **array_job, **array_task);
  }
  where += " (job " + job.id + ")";
  auto account = optional_text(entry, "account", where);
  auto user = optional_text(entry, "user_name", where);
  auto uid = optional_integer(entry, "user_id", where);
  auto partition = optional_text(entry, "partition", where);
  auto state = optional_text(entry, "job_state", where);
  auto nodes_text = optional_text(entry, "nodes", where);
  for (const auto* r : {&account, &user, &partition, &state, &nodes_text}) {
    if (!*r) return std::unexpected(r->error());
  }
  if (!uid) return std::unexpected(uid.error());
  if (state->empty()) return fail(where + " job_state", "missing");
  job.tenant = tenant_of(*account, *user, *uid);
  job.partition = *partition;
  auto submit = integer(entry, "submit_time", where);
  auto start = optional_integer(entry, "start_time", where);
  auto end = optional_integer(entry, "end_time", where);
  auto node_count = optional_count(entry, "node_count", where, kMaxObservedNodes);
  auto cpus = optional_count(entry, "cpus", where, kMaxObservedCpus);
  auto tasks = optional_count(entry, "tasks", where, kMaxObservedCpus);
  auto limit = optional_integer(entry, "time_limit", where);
  auto mem_node = optional_integer(entry, "memory_per_node", where);
  auto mem_cpu = optional_integer(entry, "memory_per_cpu", where);
  if (!submit) return std::unexpected(submit.error());
  for (const auto* r : {&start, &end, &node_count, &cpus, &tasks, &limit, &mem_node, &mem_cpu}) {
    if (!*r) return std::unexpected(r->error());
  }
  auto submitted = observed_time(*submit, where + " submit_time");
  if (!submitted) return std::unexpected(submitted.error());
  job.submit = *submitted;
  // The nodes: job_resources lists them one by one; else the hostlist.
  auto resources = optional_object(entry, "job_resources", where);
  if (!resources) return std::unexpected(resources.error());
  if (*resources != nullptr) {
    if (const Json* list = find_field(**resources, "allocated_nodes"); list != nullptr) {
      if (!list->is_array())
        return fail(where + " job_resources.allocated_nodes", "expected a list");
      for (std::size_t n = 0; n < list->size(); ++n) {
        const std::string at = fmt::format("{} job_resources.allocated_nodes[{}]", where, n);
        if (!(*list)[n].is_object()) return fail(at, "expected an object");
        auto name = optional_text((*list)[n], "nodename", at);
        if (!name) return std::unexpected(name.error());
        if (name->empty()) return fail(at + " nodename", "missing");
        job.nodes.push_back(*name);
      }
    }
  }
  if (job.nodes.empty()) {
    auto names = hostlist(*nodes_text, where + " nodes");
    if (!names) return std::unexpected(names.error());
    job.nodes = std::move(*names);
  }
  job.node_count = static_cast<int>(std::max<std::int64_t>(1, node_count->value_or(1)));
  const std::int64_t nodes =
      job.nodes.empty() ? job.node_count : static_cast<std::int64_t>(job.nodes.size());
  // GPUs: allocated (a total) when accounting tracks them, else as asked.
  std::optional<int> gpus;
  for (const auto& [key, per] :
       {std::pair<const char*, std::int64_t>{"tres_alloc_str", 1},
        {"tres_per_job", 1},
        {"tres_per_node", nodes},
        {"tres_per_task", std::max<std::int64_t>(1, tasks->value_or(1))}}) {
    auto text = optional_text(entry, key, where);
    if (!text) return std::unexpected(text.error());
    auto count = gpus_in_tres(*text, where + " " + key);
    if (!count) return std::unexpected(count.error());
    if (*count) {
      auto total = observed_product(**count, per, kMaxObservedGpus, where + " " + key);
      if (!total) return std::unexpected(total.error());
      gpus = static_cast<int>(*total);
      break;
    }
  }
  job.gpus = gpus.value_or(0);
  job.milli_cpu = cpus->value_or(0) * 1000;
  // Memory only as asked (--mem, --mem-per-cpu): the mem= of tres_req_str is Slurm's default
  // even where memory is not a consumable resource.
  const auto per_node = set_figure(*mem_node);
  const auto per_cpu = set_figure(*mem_cpu);
  if (per_node && *per_node > 0) {
    auto memory =
        observed_product(*per_node, nodes, kMaxObservedMemoryMib, where + " memory_per_node");
    if (!memory) return std::unexpected(memory.error());
    job.memory_mib = *memory;
  } else if (per_cpu && *per_cpu > 0) {
    auto memory = observed_product(*per_cpu, std::max<std::int64_t>(1, cpus->value_or(1)),
                                   kMaxObservedMemoryMib, where + " memory_per_cpu");
    if (!memory) return std::unexpected(memory.error());
    job.memory_mib = *memory;
  }
  return with_times(std::move(job), stage_of(*state), *limit, start->value_or(0), end->value_or(0),
                    where, {.limit = "time_limit", .start = "start_time", .end = "end_time"});
}

// The GPUs of a sacct TRES list ([{type, name, count}]).
Result<std::optional<int>> gpus_in_tres_list(const Json& list, const std::string& where) {
  if (!list.is_array()) return fail(where, "expected a list");
  std::optional<int> gpus;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!list[i].is_object()) return fail(at, "expected an object");
    auto type = optional_text(list[i], "type", at);
    auto name = optional_text(list[i], "name", at);
    if (!type) return std::unexpected(type.error());
    if (!name) return std::unexpected(name.error());
    if (*type != "gres" || !(*name == "gpu" || name->starts_with("gpu:"))) continue;
    auto count = integer(list[i], "count", at);
    if (!count) return std::unexpected(count.error());
    if (*count < 0 || *count > kMaxObservedGpus - gpus.value_or(0)) {
      return fail(at + " count",
                  fmt::format("{} GPUs: a job has 0..{} in all", *count, kMaxObservedGpus));
    }
    gpus = gpus.value_or(0) + static_cast<int>(*count);
  }
  return gpus;
}

Result<std::optional<ObservedJob>> sacct_job(const Json& entry, std::size_t index) {
  std::string where = fmt::format("sacct jobs[{}]", index);
  if (!entry.is_object()) return fail(where, "expected an object");
  auto id = integer(entry, "job_id", where);
  if (!id) return std::unexpected(id.error());
  ObservedJob job;
  job.id = std::to_string(*id);
  auto array = optional_object(entry, "array", where);
  if (!array) return std::unexpected(array.error());
  if (*array != nullptr) {
    auto task = optional_integer(**array, "task_id", where + " array");
    auto array_job = optional_integer(**array, "job_id", where + " array");
    if (!task) return std::unexpected(task.error());
    if (!array_job) return std::unexpected(array_job.error());
    if (*task && *array_job && **array_job > 0) job.id = fmt::format("{}_{}", **array_job, **task);
  }
  where += " (job " + job.id + ")";
  auto account = optional_text(entry, "account", where);
  auto user = optional_text(entry, "user", where);
  auto partition = optional_text(entry, "partition", where);
  auto nodes_text = optional_text(entry, "nodes", where);
  for (const auto* r : {&account, &user, &partition, &nodes_text}) {
    if (!*r) return std::unexpected(r->error());
  }
  job.tenant = tenant_of(*account, *user, std::nullopt);
  job.partition = *partition;
  auto time = optional_object(entry, "time", where);
  auto state = optional_object(entry, "state", where);
  auto required = optional_object(entry, "required", where);
  auto tres = optional_object(entry, "tres", where);
  for (const auto* r : {&time, &state, &required, &tres}) {
    if (!*r) return std::unexpected(r->error());
  }
  if (*time == nullptr) return fail(where + " time", "missing");
  if (*state == nullptr) return fail(where + " state", "missing");
  auto submit = integer(**time, "submission", where + " time");
  auto start = optional_integer(**time, "start", where + " time");
  auto end = optional_integer(**time, "end", where + " time");
  auto limit = optional_integer(**time, "limit", where + " time");
  auto current = optional_text(**state, "current", where + " state");
  if (!submit) return std::unexpected(submit.error());
  for (const auto* r : {&start, &end, &limit}) {
    if (!*r) return std::unexpected(r->error());
  }
  if (!current) return std::unexpected(current.error());
  if (current->empty()) return fail(where + " state.current", "missing");
  auto submitted = observed_time(*submit, where + " time.submission");
  if (!submitted) return std::unexpected(submitted.error());
  job.submit = *submitted;
  auto names = hostlist(*nodes_text, where + " nodes");
  if (!names) return std::unexpected(names.error());
  job.nodes = std::move(*names);
  job.node_count = std::max<int>(1, static_cast<int>(job.nodes.size()));
  if (*required != nullptr) {
    auto cpus = optional_count(**required, "CPUs", where + " required", kMaxObservedCpus);
    auto memory = optional_count(**required, "memory", where + " required", kMaxObservedMemoryMib);
    if (!cpus) return std::unexpected(cpus.error());
    if (!memory) return std::unexpected(memory.error());
    job.milli_cpu = cpus->value_or(0) * 1000;
    job.memory_mib = memory->value_or(0);
  }
  if (*tres != nullptr) {
    for (const char* key : {"allocated", "requested"}) {
      const Json* list = find_field(**tres, key);
      if (list == nullptr) continue;
      auto gpus = gpus_in_tres_list(*list, where + " tres." + key);
      if (!gpus) return std::unexpected(gpus.error());
      if (*gpus) {
        job.gpus = **gpus;
        break;
      }
    }
  }
  return with_times(std::move(job), stage_of(*current), *limit, start->value_or(0),
                    end->value_or(0), where,
                    {.limit = "time.limit", .start = "time.start", .end = "time.end"});
}

template <class Read>
Result<std::vector<ObservedJob>> read_jobs(const Json& reply, std::string_view source,
                                           std::string_view partition, Read read) {
  auto list = reply_list(reply, source, "jobs");
  if (!list) return std::unexpected(list.error());
  std::vector<ObservedJob> jobs;
  for (std::size_t i = 0; i < (*list)->size(); ++i) {
    auto job = read((**list)[i], i);
    if (!job) return std::unexpected(job.error());
    if (!*job || (!partition.empty() && (*job)->partition != partition)) continue;
    jobs.push_back(std::move(**job));
  }
  return jobs;
}

}  // namespace

Result<std::optional<int>> gpus_in_tres(std::string_view text, const std::string& field) {
  std::optional<int> total;
  for (std::string_view item : split_text(text, ',')) {
    if (item.starts_with("gres:") || item.starts_with("gres/")) item.remove_prefix(5);
    if (item != "gpu" && !item.starts_with("gpu:") && !item.starts_with("gpu=")) continue;
    // The count is the last figure: "gpu:2", "gpu:a100:2", "gpu=2", "gpu:a100=2", "gpu:2(IDX:0-1)".
    item = item.substr(0, item.find('('));
    const std::size_t at = item.find_last_of(":=");
    int count = 0;
    const std::string_view digits = at == std::string_view::npos ? "" : item.substr(at + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || count < 0) {
      return fail(field, fmt::format("no GPU count in '{}'", text));
    }
    if (count > kMaxObservedGpus - total.value_or(0)) {
      return fail(field, fmt::format("more than {} GPUs in '{}'", kMaxObservedGpus, text));
    }
    total = total.value_or(0) + count;
  }
  return total;
}

Result<std::vector<ObservedJob>> read_squeue_json(const nlohmann::json& reply,
                                                  std::string_view partition) {
  return read_jobs(reply, "squeue", partition, squeue_job);
}

Result<std::vector<ObservedJob>> read_sacct_json(const nlohmann::json& reply,
                                                 std::string_view partition) {
  return read_jobs(reply, "sacct", partition, sacct_job);
}

Result<ClusterSpec> read_sinfo_json(const nlohmann::json& reply, std::string_view default_model,
                                    std::string_view partition) {
  auto list = reply_list(reply, "sinfo", "nodes");
  if (!list) return std::unexpected(list.error());
  ClusterSpec spec;
  spec.topology = Topology::single_leaf();
  std::map<std::string, bool, std::less<>> seen;
  for (std::size_t i = 0; i < (*list)->size(); ++i) {
    const Json& entry = (**list)[i];
    std::string where = fmt::format("sinfo nodes[{}]", i);
    if (!entry.is_object()) return fail(where, "expected an object");
    auto name = optional_text(entry, "name", where);
    if (!name) return std::unexpected(name.error());
    if (name->empty()) return fail(where + " name", "missing");
    where += " (" + *name + ")";
    if (seen.contains(*name)) continue;  // sinfo lists a node once per partition
    if (!partition.empty()) {
      const Json* parts = find_field(entry, "partitions");
      if (parts == nullptr || !parts->is_array()) {
        return fail(where + " partitions", "expected a list");
      }
      const bool member = std::any_of(parts->begin(), parts->end(), [&](const Json& p) {
        return p.is_string() && p.get<std::string>() == partition;
      });
      if (!member) continue;
    }
    seen.emplace(*name, true);
    auto cpus = integer(entry, "cpus", where);
    auto memory = optional_count(entry, "real_memory", where, kMaxObservedMemoryMib);
    auto gres = optional_text(entry, "gres", where);
    if (!cpus) return std::unexpected(cpus.error());
    if (!memory) return std::unexpected(memory.error());
    if (!gres) return std::unexpected(gres.error());
    NodeSpec node;
    node.name = *name;
    auto node_cpus = observed_count(*cpus, kMaxObservedCpus, where + " cpus");
    if (!node_cpus) return std::unexpected(node_cpus.error());
    node.milli_cpu = *node_cpus * 1000;
    node.memory_mib = memory->value_or(0);
    std::string model(default_model);
    for (std::string_view item : split_text(*gres, ',')) {
      item = item.substr(0, item.find('('));
      if (!item.starts_with("gpu:")) continue;
      const auto parts = split_text(item, ':');
      if (parts.size() == 3 && node.gpu_count == 0) model = std::string(parts[1]);
      int count = 0;
      const std::string_view digits = parts.back();
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
      if (ec != std::errc() || end != digits.data() + digits.size() || count < 0) {
        return fail(where + " gres", fmt::format("no GPU count in '{}'", *gres));
      }
      if (count > kMaxGpusPerNode - node.gpu_count) {
        return fail(where + " gres", fmt::format("more than {} GPUs in '{}'; a node has at most {}",
                                                 kMaxGpusPerNode, *gres, kMaxGpusPerNode));
      }
      node.gpu_count += count;
    }
    auto id = spec.models.intern(model);
    if (!id) return fail(where + " gres", id.error().reason);
    node.model = *id;
    spec.nodes.push_back(std::move(node));
  }
  if (spec.nodes.empty()) return fail("sinfo nodes", "no nodes");
  return spec;
}

void merge_observations(std::vector<ObservedJob>& known, std::vector<ObservedJob> update) {
  std::unordered_map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < known.size(); ++i) at.emplace(known[i].id, i);
  for (ObservedJob& job : update) {
    const auto it = at.find(job.id);
    if (it == at.end()) {
      at.emplace(job.id, known.size());
      known.push_back(std::move(job));
    } else if (stage_of(job) >= stage_of(known[it->second])) {
      known[it->second] = std::move(job);
    }
  }
}

}  // namespace tidepool
