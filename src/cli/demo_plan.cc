#include "cli/demo_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "config/duration_text.h"
#include "config/yaml_reader.h"
#include "core/decimal_text.h"
#include "core/resources.h"

namespace tidepool {
namespace {

bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string_view trimmed_line(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

void replace_all(std::string& text, std::string_view from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

Result<DemoGpus> parse_demo_gpus(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return fail("--gpus",
                fmt::format("'{}' {}; expected fake:COUNTxMODEL, e.g. fake:8xH100", text, why));
  };
  if (!text.starts_with("fake:")) {
    return bad("is not fake GPUs (the demo runs on any machine, without GPUs)");
  }
  const std::string_view rest = text.substr(5);
  const auto x = rest.find('x');
  if (x == std::string_view::npos) return bad("has no 'x' between the count and the model");
  const auto count = parse_int(rest.substr(0, x));
  if (!count || *count < 1 || *count > kMaxGpusPerNode) {
    return bad(fmt::format("has a GPU count outside 1..{}", kMaxGpusPerNode));
  }
  const std::string_view model = rest.substr(x + 1);
  if (model.empty() || !std::ranges::all_of(model, is_name_char)) {
    return bad("has no model name of letters, digits, '.', '_' or '-'");
  }
  return DemoGpus{*count, std::string(model)};
}

Result<std::int64_t> parse_demo_speed(std::string_view text) {
  const auto milli = parse_decimal(text, 3);
  if (!milli || *milli < kMinDemoSpeedMilli || *milli > kMaxDemoSpeedMilli) {
    return fail("--speed", fmt::format("'{}' is not a speed factor from 0.1 to 20 (e.g. 2: twice "
                                       "as fast)",
                                       text));
  }
  return *milli;
}

Result<std::int64_t> parse_refresh_ms(std::string_view text) {
  const auto bad = [&] {
    return fail("--refresh", fmt::format("'{}' is not a refresh interval; use e.g. 2s, 500ms or "
                                         "1m (from 200ms to 1h)",
                                         text));
  };
  std::int64_t ms = 0;
  if (text.ends_with("ms")) {
    const std::string_view digits = text.substr(0, text.size() - 2);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (ec != std::errc() || end != digits.data() + digits.size()) return bad();
  } else {
    auto seconds = parse_duration(text);
    if (!seconds) return bad();
    ms = *seconds * 1000;
  }
  if (ms < 200 || ms > 3'600'000) return bad();
  return ms;
}

std::string format_seconds(std::int64_t ms) { return format_decimal(ms, 3); }

Result<DemoPool> make_demo_pool(int node_count, const DemoGpus& gpus) {
  if (node_count < 1 || node_count > kMaxDemoNodes) {
    return fail("--nodes", fmt::format("{} is outside 1..{}", node_count, kMaxDemoNodes));
  }
  DemoPool pool;
  pool.gpus = gpus;
  const int first_leaf = (node_count + 1) / 2;
  for (int i = 1; i <= node_count; ++i) {
    pool.nodes.push_back(
        DemoNode{fmt::format("node-{}", i), i <= first_leaf ? "leaf-1" : "leaf-2", "spine-1"});
  }
  const int total = pool.total_gpus();
  const int vision = total / 2;
  const int ads = total * 3 / 8;
  pool.tenants = {DemoTenant{"vision", "research", vision}, DemoTenant{"ads", "products", ads},
                  DemoTenant{"interns", "products", total - vision - ads}};
  return pool;
}

std::string demo_cluster_yaml(const DemoPool& pool) {
  std::string out = fmt::format(
      "# The pool of `tidepool demo`: {} node(s) with {} fake {} GPUs each, under two leaf\n"
      "# switches of one spine. Format: src/config/cluster_file.h.\n"
      "site: demo\n"
      "spines:\n"
      "  - name: spine-1\n"
      "    leaves:\n",
      pool.nodes.size(), pool.gpus.count, pool.gpus.model);
  for (const char* leaf : {"leaf-1", "leaf-2"}) {
    out += fmt::format("      - name: {}\n        nodes:", leaf);
    bool any = false;
    for (const DemoNode& node : pool.nodes) {
      if (node.leaf != leaf) continue;
      out += fmt::format(
          "\n          - {{name: {}, gpu_model: {}, gpus: {}, cpus: 64, memory_gib: 512}}",
          node.name, pool.gpus.model, pool.gpus.count);
      any = true;
    }
    out += any ? "\n" : " []\n";
  }
  return out;
}

std::string demo_tenants_yaml(const DemoPool& pool) {
  std::string out = fmt::format(
      "# The tenants of `tidepool demo`: guarantees of {} GPUs, the whole pool, so that what one\n"
      "# tenant borrows is another's idle guarantee, which it can reclaim. Borrowing is not\n"
      "# limited. Format: src/config/tenants_file.h.\n"
      "orgs:\n",
      pool.gpus.model);
  std::vector<std::string> orgs;
  for (const DemoTenant& t : pool.tenants) {
    if (std::ranges::find(orgs, t.org) == orgs.end()) orgs.push_back(t.org);
  }
  for (const std::string& org : orgs) {
    out += fmt::format("  - name: {}\n    tenants:\n", org);
    for (const DemoTenant& t : pool.tenants) {
      if (t.org != org) continue;
      out += fmt::format("      - name: {}\n", t.name);
      if (t.guaranteed_gpus > 0) {
        out += fmt::format("        quota:\n          {}: {{guaranteed_gpus: {}}}\n",
                           pool.gpus.model, t.guaranteed_gpus);
      }
    }
  }
  return out;
}

std::string demo_server_yaml(const std::string& run_dir) {
  return fmt::format(
      "# The server of `tidepool demo`. Keys: src/server/server_config.h.\n"
      "listen: 127.0.0.1:0\n"
      "cluster: {0}/cluster.yaml\n"
      "tenants: {0}/tenants.yaml\n"
      "policy: tidepool\n"
      "database: {0}/tidepool.db\n"
      "admin_token_file: {0}/admin.token\n"
      "logs: {0}/logs\n"
      "tick: 1s\n"
      "heartbeat_timeout: 5s\n",
      run_dir);
}

std::string DemoPaths::file(std::string_view name) const {
  return fmt::format("{}/{}", run_dir, name);
}

std::string DemoPaths::agent_state_dir(const std::string& node) const {
  return file("agents/" + node);
}

std::string DemoPaths::agent_log(const std::string& node) const {
  return file("agents/" + node + ".log");
}

std::vector<std::string> demo_server_command(const std::string& program, const DemoPaths& paths) {
  return {program, "server", "--config", paths.server_config(), "--port-file", paths.port_file()};
}

std::vector<std::string> demo_agent_command(const std::string& program, const DemoPaths& paths,
                                            const DemoPool& pool, const DemoNode& node,
                                            const std::string& server_url,
                                            const std::string& token) {
  return {program,
          "agent",
          "--server",
          server_url,
          "--token",
          token,
          "--node",
          node.name,
          "--leaf",
          node.leaf,
          "--spine",
          node.spine,
          "--gpus",
          fmt::format("fake:{}x{}", pool.gpus.count, pool.gpus.model),
          "--address",
          "127.0.0.1",
          "--state-dir",
          paths.agent_state_dir(node.name),
          "--checkpoint-root",
          paths.checkpoint_root(),
          "--heartbeat-interval",
          "1s",
          "--notice-timeout",
          "5s",
          "--grace-period",
          "3s",
          "--cgroups",
          "none",
          "--stop-tasks-on-exit"};
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !word.empty() && std::ranges::all_of(word, [](char c) {
      return is_name_char(c) || c == '/' || c == ':' || c == '=' || c == ',' || c == '@' ||
             c == '%' || c == '+';
    });
    if (plain) {
      out += word;
      continue;
    }
    out += '\'';
    for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string substitute_demo_placeholders(std::string_view text, const std::string& demo_dir,
                                         const std::string& step_seconds) {
  std::string out(text);
  replace_all(out, "${DEMO_DIR}", demo_dir);
  replace_all(out, "${DEMO_STEP_SECONDS}", step_seconds);
  return out;
}

Result<std::vector<std::pair<std::int64_t, std::string>>> parse_workload(
    std::string_view text, const std::string& source) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  int line_number = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = trimmed_line(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line_number;
    if (line.empty() || line.starts_with('#')) continue;
    const std::string where = fmt::format("{}:{}", source, line_number);
    const auto space = line.find_first_of(" \t");
    if (space == std::string_view::npos) {
      return fail(where, fmt::format("'{}' is not 'AT SPEC' (e.g. '20s train.yaml')", line));
    }
    auto at = parse_duration(line.substr(0, space));
    if (!at) return fail(where, fmt::format("AT: {}", at.error().reason));
    const std::string_view file = trimmed_line(line.substr(space));
    if (file.find_first_of(" \t") != std::string_view::npos) {
      return fail(where, fmt::format("'{}' is not 'AT SPEC': one spec file per line", line));
    }
    out.emplace_back(*at, std::string(file));
  }
  return out;
}

Result<std::vector<DemoSubmission>> load_demo_workload(const std::string& demo_dir,
                                                       std::int64_t speed_milli) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::int64_t, std::string>> schedule;
  const std::string workload_file = demo_dir + "/workload.txt";
  std::error_code error;
  if (fs::exists(workload_file, error)) {
    auto text = read_file_text(workload_file);
    if (!text) return std::unexpected(text.error());
    auto parsed = parse_workload(*text, workload_file);
    if (!parsed) return std::unexpected(parsed.error());
    schedule = std::move(*parsed);
  } else {
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(demo_dir, error)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file(error) &&
          (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"))) {
        names.push_back(name);
      }
    }
    if (error) return fail(demo_dir, "cannot list the folder: " + error.message());
    std::ranges::sort(names);
    for (std::string& name : names) schedule.emplace_back(0, std::move(name));
  }
  if (schedule.empty()) {
    return fail(demo_dir, "no job to submit: neither workload.txt nor any *.yaml or *.json spec");
  }
  const std::string step_seconds = format_seconds(1'000'000 / speed_milli);
  std::vector<DemoSubmission> out;
  for (const auto& [at, name] : schedule) {
    const std::string file = name.starts_with('/') ? name : demo_dir + "/" + name;
    auto text = read_file_text(file);
    if (!text) return std::unexpected(text.error());
    const std::string body = substitute_demo_placeholders(*text, demo_dir, step_seconds);
    const BodyFormat format = file.ends_with(".json") ? BodyFormat::kJson : BodyFormat::kYaml;
    auto spec = parse_job_spec(body, format);
    if (!spec) return fail(file + ": " + spec.error().field, spec.error().reason);
    out.push_back(DemoSubmission{at * 1'000'000 / speed_milli, file, std::move(*spec)});
  }
  return out;
}

Result<DemoSubmission> load_demo_service(const std::string& demo_dir, std::int64_t speed_milli) {
  const std::string file = demo_dir + "/" + kDemoServiceFile;
  auto text = read_file_text(file);
  if (!text) return std::unexpected(text.error());
  const std::string step_seconds = format_seconds(1'000'000 / speed_milli);
  auto spec = parse_job_spec(substitute_demo_placeholders(*text, demo_dir, step_seconds),
                             BodyFormat::kYaml);
  if (!spec) return fail(file + ": " + spec.error().field, spec.error().reason);
  if (!spec->service) return fail(file, "is not an inference service (kind: service)");
  return DemoSubmission{0, file, std::move(*spec)};
}

std::string demo_load_steps(std::int64_t speed_milli) {
  std::vector<std::string> steps;
  for (const auto& [rate, seconds] : {std::pair{5, 20}, std::pair{40, 60}, std::pair{5, 60}}) {
    const std::int64_t ms = std::max<std::int64_t>(1000, seconds * 1'000'000 / speed_milli);
    steps.push_back(fmt::format("{}:{}", rate, format_seconds(ms)));
  }
  return fmt::format("{}", fmt::join(steps, ","));
}

std::vector<std::string> demo_load_generator_command(const std::string& python,
                                                     const std::string& demo_dir,
                                                     const std::string& service_url,
                                                     const std::string& token_file,
                                                     const std::string& steps) {
  return {python,         demo_dir + "/" + kDemoLoadGenerator,
          "--service",    service_url,
          "--token-file", token_file,
          "--steps",      steps};
}

std::optional<Error> demo_misfit(const DemoSubmission& submission, const DemoPool& pool) {
  const JobSpec& spec = submission.spec;
  if (spec.gpus_per_task > pool.gpus.count) {
    return Error{submission.file,
                 fmt::format("job {} needs {} GPUs per task, more than a node has (--gpus "
                             "fake:{}x{})",
                             spec.name, spec.gpus_per_task, pool.gpus.count, pool.gpus.model)};
  }
  if (std::int64_t{spec.tasks} * spec.gpus_per_task > pool.total_gpus()) {
    return Error{submission.file,
                 fmt::format("job {} needs {} GPUs, more than the pool's {} (--nodes {})",
                             spec.name, std::int64_t{spec.tasks} * spec.gpus_per_task,
                             pool.total_gpus(), pool.nodes.size())};
  }
  if (!spec.gpu_models.empty() &&
      std::ranges::find(spec.gpu_models, pool.gpus.model) == spec.gpu_models.end()) {
    return Error{submission.file,
                 fmt::format("job {} accepts GPU models {}, not the pool's {}", spec.name,
                             fmt::join(spec.gpu_models, ", "), pool.gpus.model)};
  }
  return std::nullopt;
}

std::vector<std::string> demo_folder_candidates(const std::optional<std::string>& source_dir_env,
                                                const std::string& exe_dir,
                                                const std::string& built_source_dir) {
  std::vector<std::string> out;
  if (source_dir_env && !source_dir_env->empty()) {
    out.push_back(*source_dir_env + "/data/examples/demo");
  }
  if (!exe_dir.empty()) out.push_back(exe_dir + "/../share/tidepool/examples/demo");
  if (!built_source_dir.empty()) out.push_back(built_source_dir + "/data/examples/demo");
  return out;
}

Result<std::string> find_demo_folder(const std::vector<std::string>& candidates) {
  namespace fs = std::filesystem;
  for (const std::string& dir : candidates) {
    std::error_code error;
    if (fs::is_regular_file(dir + "/workload.txt", error)) {
      const fs::path canonical = fs::weakly_canonical(dir, error);
      return error || canonical.empty() ? dir : canonical.string();
    }
  }
  return fail("--jobs",
              fmt::format("found no demo folder (one with workload.txt); looked at {}; give one "
                          "with --jobs DIR or set TIDEPOOL_SOURCE_DIR to the source tree",
                          candidates.empty() ? std::string("nothing")
                                             : fmt::format("{}", fmt::join(candidates, ", "))));
}

}  // namespace tidepool
