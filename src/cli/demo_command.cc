#include "cli/demo_command.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "cli/api_client.h"
#include "cli/client_session.h"
#include "cli/demo_plan.h"
#include "cli/demo_processes.h"
#include "cli/demo_view.h"
#include "config/duration_text.h"
#include "config/yaml_reader.h"

// The source tree this tidepool was built from (CMakeLists.txt), where a build tree finds the
// demo folder.
#ifndef TIDEPOOL_BUILT_SOURCE_DIR
#define TIDEPOOL_BUILT_SOURCE_DIR ""
#endif

namespace tidepool {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kStopGrace{10'000};
constexpr milliseconds kStartTimeout{30'000};
constexpr std::int64_t kDefaultLimitMs = 10 * 60'000;
constexpr std::int64_t kMaxDurationMs = 24 * 3'600'000;
constexpr int kLogTailLines = 15;

// Stop signals received; the handler only counts them.
std::atomic<int> demo_signals{0};

extern "C" void on_demo_signal(int /*signal*/) { demo_signals.fetch_add(1); }

void install_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_demo_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a signal cuts a wait short
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
}

struct DemoFlags {
  int nodes = 4;
  std::string gpus = "fake:8xH100";
  std::string duration;
  std::string speed = "1";
  std::string refresh = "2s";
  bool keep = false;
  bool dry_run = false;
  bool service = false;
  std::string jobs;
};

struct DemoSettings {
  DemoPool pool;
  std::string demo_dir;
  std::string workload_source;  // workload.txt, or the folder when it has none
  std::vector<DemoSubmission> workload;
  std::optional<DemoSubmission> service;  // --service
  std::optional<std::int64_t> duration_ms;
  std::int64_t speed_milli = 1000;
  std::int64_t refresh_ms = 2000;
  bool keep = false;
};

Result<DemoSettings> settle(const DemoFlags& flags) {
  DemoSettings s;
  auto gpus = parse_demo_gpus(flags.gpus);
  if (!gpus) return std::unexpected(gpus.error());
  auto pool = make_demo_pool(flags.nodes, *gpus);
  if (!pool) return std::unexpected(pool.error());
  s.pool = std::move(*pool);
  auto speed = parse_demo_speed(flags.speed);
  if (!speed) return std::unexpected(speed.error());
  s.speed_milli = *speed;
  auto refresh = parse_refresh_ms(flags.refresh);
  if (!refresh) return std::unexpected(refresh.error());
  s.refresh_ms = *refresh;
  if (!flags.duration.empty()) {
    auto duration = parse_duration(flags.duration);
    if (!duration || *duration <= 0 || *duration * 1000 > kMaxDurationMs) {
      return fail("--duration", fmt::format("'{}' is not a duration from 1s to 24h, e.g. 90s or "
                                            "5m",
                                            flags.duration));
    }
    s.duration_ms = *duration * 1000;
  }
  s.keep = flags.keep;
  if (!flags.jobs.empty()) {
    std::error_code error;
    const fs::path dir = fs::weakly_canonical(fs::absolute(flags.jobs, error), error);
    if (error || !fs::is_directory(dir, error)) {
      return fail("--jobs", fmt::format("'{}' is not a folder", flags.jobs));
    }
    s.demo_dir = dir.string();
  } else {
    const char* source_dir = std::getenv("TIDEPOOL_SOURCE_DIR");
    auto found = find_demo_folder(demo_folder_candidates(
        source_dir == nullptr ? std::nullopt : std::optional<std::string>(source_dir),
        executable_dir(), TIDEPOOL_BUILT_SOURCE_DIR));
    if (!found) return std::unexpected(found.error());
    s.demo_dir = *found;
  }
  std::error_code error;
  s.workload_source = fs::exists(s.demo_dir + "/workload.txt", error)
                          ? s.demo_dir + "/workload.txt"
                          : s.demo_dir + " (every spec file)";
  auto workload = load_demo_workload(s.demo_dir, s.speed_milli);
  if (!workload) return std::unexpected(workload.error());
  s.workload = std::move(*workload);
  for (const DemoSubmission& submission : s.workload) {
    if (auto misfit = demo_misfit(submission, s.pool)) return std::unexpected(*misfit);
  }
  if (flags.service) {
    auto service = load_demo_service(s.demo_dir, s.speed_milli);
    if (!service) return std::unexpected(service.error());
    if (auto misfit = demo_misfit(*service, s.pool)) return std::unexpected(*misfit);
    s.service = std::move(*service);
  }
  return s;
}

std::string tenants_line(const DemoPool& pool) {
  std::vector<std::string> items;
  for (const DemoTenant& t : pool.tenants) {
    items.push_back(fmt::format("{} {} (org {})", t.name, t.guaranteed_gpus, t.org));
  }
  return fmt::format("guaranteed {} GPUs: {}; idle guarantees are lent to the others",
                     pool.gpus.model, fmt::join(items, ", "));
}

void print_dry_run(const DemoSettings& s, const Result<std::string>& server_program,
                   const Result<std::string>& agent_program) {
  const char* tmp = std::getenv("TMPDIR");
  const DemoPaths paths{
      fmt::format("{}/tidepool-demo.XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp")};
  fmt::print(
      "tidepool demo --dry-run: what the demo would do; it starts nothing and writes nothing.\n\n"
      "The run folder is {}, with XXXXXX made unique when it starts (mkdtemp); it is removed at "
      "the end unless --keep.\n\n",
      paths.run_dir);
  fmt::print("Files it would write:\n");
  for (const auto& [name, text] :
       {std::pair{std::string("cluster.yaml"), demo_cluster_yaml(s.pool)},
        std::pair{std::string("tenants.yaml"), demo_tenants_yaml(s.pool)},
        std::pair{std::string("server.yaml"), demo_server_yaml(paths.run_dir)}}) {
    fmt::print("--- {}\n{}", paths.file(name), text);
  }
  fmt::print("--- folders: {} (shared by the agents), {}/NODE (each agent's state), {}\n\n",
             paths.checkpoint_root(), paths.file("agents"), paths.file("logs"));

  const auto program = [](const Result<std::string>& found, const char* name) {
    return found ? *found : std::string(name);
  };
  fmt::print("Commands it would start, each in its own process group:\n");
  fmt::print("  {}\n      output to {}\n",
             shell_line(demo_server_command(program(server_program, "tidepool-server"), paths)),
             paths.server_log());
  fmt::print(
      "  then, with the admin token the server writes to {}, one agent token per node\n"
      "  (POST /v1/tokens {{\"role\": \"agent\", \"node\": NODE}}), and per node:\n",
      paths.admin_token_file());
  for (const DemoNode& node : s.pool.nodes) {
    fmt::print(
        "  {}\n      output to {}\n",
        shell_line(demo_agent_command(program(agent_program, "tidepool-agent"), paths, s.pool, node,
                                      "http://127.0.0.1:PORT", "AGENT_TOKEN_OF_" + node.name)),
        paths.agent_log(node.name));
  }
  for (const auto* found : {&server_program, &agent_program}) {
    if (!*found)
      fmt::print("  warning: {}; the demo cannot run without it\n", found->error().reason);
  }

  fmt::print(
      "\nWorkload from {}, submitted once every agent has registered, each with\n"
      "env {}={} added (to find its processes at the end):\n",
      s.workload_source, kDemoRunEnv, paths.run_dir);
  fmt::print("  {:<7} {:<18} {:<8} {:<9} {:>4} {:<11} {}\n", "AT", "JOB", "TENANT", "CLASS", "GPUS",
             "PREEMPTIBLE", "COMMAND");
  for (const DemoSubmission& sub : s.workload) {
    const JobSpec& spec = sub.spec;
    fmt::print("  {:<7} {:<18} {:<8} {:<9} {:>4} {:<11} {}\n", format_seconds(sub.at_ms) + "s",
               spec.name, spec.tenant, job_class_name(spec.job_class),
               spec.mig_profile  ? fmt::format("MIG {}", mig_profile_spec(*spec.mig_profile).name)
               : spec.tasks == 1 ? std::to_string(spec.gpus_per_task)
                                 : fmt::format("{}x{}", spec.tasks, spec.gpus_per_task),
               spec.preemptible ? "yes" : "no", shell_line(spec.command));
  }
  if (s.service) {
    const JobSpec& spec = s.service->spec;
    fmt::print(
        "\n--service: it would also submit the inference service {} (tenant {}, {}..{} "
        "replicas) from\n{} once every agent has registered, and once a replica serves, "
        "start\n  {}\n      output to {}\n",
        spec.name, spec.tenant, spec.service->scaler.min_replicas,
        spec.service->scaler.max_replicas, s.service->file,
        shell_line(demo_load_generator_command(
            "python3", s.demo_dir, "http://127.0.0.1:PORT/v1/services/ID", paths.admin_token_file(),
            demo_load_steps(s.speed_milli))),
        paths.load_generator_log());
  }
  fmt::print(
      "\nIt would end when every job has ended{} ({}), then stop {}the agents, any job process "
      "they left, and the server.\n",
      s.service ? " and the load generator has finished" : "",
      s.duration_ms ? fmt::format("or after --duration {}", format_seconds(*s.duration_ms) + "s")
                    : std::string("at most 10 minutes"),
      s.service ? "the load generator, " : "");
}

Result<void> write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return fail(path, "cannot write the file");
  return {};
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

// A service, or one of its replicas, in GET /v1/jobs: they run until the service is cancelled.
bool is_service_or_replica(const nlohmann::json& job) {
  if (job.contains("replica_of")) return true;
  auto spec = job.find("spec");
  return spec != job.end() && spec->is_object() && spec->value("kind", std::string()) == "service";
}

// Why the demo ended, and what it saw last.
struct DemoOutcome {
  std::string ended_because;
  bool failed = false;
  bool interrupted = false;
  std::int64_t elapsed_ms = 0;
  nlohmann::json jobs = nlohmann::json::array();
  std::string service_summary;  // --service: the summary's lines for the service
};

class DemoRun {
 public:
  DemoRun(DemoSettings settings, std::string server_program, std::string agent_program)
      : s_(std::move(settings)),
        server_program_(std::move(server_program)),
        agent_program_(std::move(agent_program)) {}

  Result<void> start();
  void print_intro() const;
  DemoOutcome run_workload();
  void shutdown();
  [[nodiscard]] const DemoTally& tally() const { return tally_; }

 private:
  Error died(DemoChild& child) const;
  // Fails when a child has exited or a stop signal came.
  Result<void> check_alive();
  Result<void> wait_for_port();
  Result<void> wait_for_registration();
  void submit(const DemoSubmission& submission, std::vector<std::string>& lines);
  Result<void> fetch_events(std::vector<std::string>& lines);
  // Fetches nodes and jobs and prints a frame with `lines`; false when the server did not answer.
  bool refresh(std::int64_t elapsed_ms, std::vector<std::string>& lines, const std::string& note);
  // --service: submits the service; then, once it has an endpoint, starts the load generator.
  void submit_service(std::vector<std::string>& lines);
  void start_load_when_serving(std::vector<std::string>& lines);
  // GET /v1/services/{id}; notes the most replicas ready and wanted. Null when it failed.
  nlohmann::json fetch_service_view();
  [[nodiscard]] bool load_finished();
  void stop_load();

  DemoSettings s_;
  std::string server_program_;
  std::string agent_program_;
  DemoPaths paths_;
  std::optional<DemoChild> server_;
  std::vector<DemoChild> agents_;
  std::string url_;
  std::optional<ApiClient> client_;
  DemoTally tally_;
  std::int64_t since_ = 0;
  std::int64_t start_wall_ms_ = 0;
  int submitted_ = 0;
  nlohmann::json last_jobs_ = nlohmann::json::array();
  // --service
  std::optional<std::int64_t> service_id_;
  std::optional<DemoChild> load_;
  std::string python_;
  int max_ready_ = 0;
  int max_wanted_ = 0;
};

Error DemoRun::died(DemoChild& child) const {
  return Error{"", fmt::format("{} (pid {}) {}; the end of its log {}:\n{}", child.label(),
                               child.pid(), child.exit_reason(), child.log_path(),
                               tail_of_file(child.log_path(), kLogTailLines))};
}

Result<void> DemoRun::check_alive() {
  if (demo_signals.load() > 0) return fail("", "interrupted");
  if (server_ && !server_->running()) return std::unexpected(died(*server_));
  for (DemoChild& agent : agents_) {
    if (!agent.running()) return std::unexpected(died(agent));
  }
  return {};
}

Result<void> DemoRun::wait_for_port() {
  const auto deadline = Clock::now() + kStartTimeout;
  while (Clock::now() < deadline) {
    if (auto ok = check_alive(); !ok) return ok;
    std::ifstream in(paths_.port_file());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.ends_with('\n')) {
      const std::string port = trimmed(text);
      if (!port.empty() && std::ranges::all_of(port, [](char c) { return c >= '0' && c <= '9'; })) {
        url_ = "http://127.0.0.1:" + port;
        return {};
      }
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return fail("",
              fmt::format("the server wrote no port to {} within {} s; the end of its log {}:\n{}",
                          paths_.port_file(), kStartTimeout.count() / 1000, paths_.server_log(),
                          tail_of_file(paths_.server_log(), kLogTailLines)));
}

Result<void> DemoRun::wait_for_registration() {
  const auto deadline = Clock::now() + kStartTimeout;
  std::vector<std::string> missing;
  while (Clock::now() < deadline) {
    if (auto ok = check_alive(); !ok) return ok;
    auto nodes = client_->get("/v1/nodes");
    if (nodes) {
      missing.clear();
      for (const nlohmann::json& node : nodes->at("nodes")) {
        if (node.value("registered_ms", std::int64_t{0}) == 0) {
          missing.push_back(node.value("name", std::string()));
        }
      }
      if (missing.empty()) return {};
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  std::string logs;
  for (DemoChild& agent : agents_) {
    if (std::ranges::find(missing, agent.label().substr(agent.label().rfind(' ') + 1)) ==
        missing.end()) {
      continue;
    }
    logs += fmt::format("\n{} (log {}):\n{}", agent.label(), agent.log_path(),
                        tail_of_file(agent.log_path(), kLogTailLines));
  }
  return fail("", fmt::format("these nodes' agents did not register within {} s: {}{}",
                              kStartTimeout.count() / 1000, fmt::join(missing, ", "), logs));
}

Result<void> DemoRun::start() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      fmt::format("{}/tidepool-demo.XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
  if (::mkdtemp(pattern.data()) == nullptr) {
    return fail(pattern, fmt::format("cannot make the run folder: {}", std::strerror(errno)));
  }
  paths_.run_dir = pattern;
  // The agents run the jobs as uids of their own (when root), which pass through this folder to
  // their run and checkpoint folders: traversable, not listable.
  ::chmod(paths_.run_dir.c_str(), 0711);
  for (const auto& [name, text] :
       {std::pair{std::string("cluster.yaml"), demo_cluster_yaml(s_.pool)},
        std::pair{std::string("tenants.yaml"), demo_tenants_yaml(s_.pool)},
        std::pair{std::string("server.yaml"), demo_server_yaml(paths_.run_dir)}}) {
    if (auto ok = write_text(paths_.file(name), text); !ok) return ok;
  }
  std::error_code error;
  fs::create_directories(paths_.checkpoint_root(), error);
  fs::create_directories(paths_.file("logs"), error);
  for (const DemoNode& node : s_.pool.nodes) {
    fs::create_directories(paths_.agent_state_dir(node.name), error);
  }
  if (error) return fail(paths_.run_dir, "cannot make its folders: " + error.message());

  auto server = DemoChild::start("tidepool-server", demo_server_command(server_program_, paths_),
                                 paths_.server_log());
  if (!server) return std::unexpected(server.error());
  server_.emplace(std::move(*server));
  if (auto ok = wait_for_port(); !ok) return ok;
  auto admin = read_file_text(paths_.admin_token_file());
  if (!admin) return std::unexpected(admin.error());
  client_.emplace(ClientSettings{.server = url_,
                                 .server_source = "the demo's server",
                                 .token = trimmed(*admin),
                                 .token_source = paths_.admin_token_file(),
                                 .ca_cert = ""},
                  ApiClientOptions{.connect_timeout = milliseconds(2000),
                                   .read_timeout = milliseconds(10'000),
                                   .failover_deadline = milliseconds(0)});

  for (const DemoNode& node : s_.pool.nodes) {
    auto token = client_->post(
        "/v1/tokens",
        {{"role", "agent"}, {"node", node.name}, {"description", "tidepool demo agent"}});
    if (!token) {
      if (!server_->running()) return std::unexpected(died(*server_));
      return fail("", fmt::format("cannot create the agent token of {}: {}", node.name,
                                  token.error().message()));
    }
    auto agent = DemoChild::start("tidepool-agent of " + node.name,
                                  demo_agent_command(agent_program_, paths_, s_.pool, node, url_,
                                                     token->at("secret").get<std::string>()),
                                  paths_.agent_log(node.name));
    if (!agent) return std::unexpected(agent.error());
    agents_.push_back(std::move(*agent));
  }
  return wait_for_registration();
}

void DemoRun::print_intro() const {
  const DemoPool& pool = s_.pool;
  fmt::print(
      "Tidepool demo: a control plane and {} node agents with fake GPUs, all on this "
      "machine.\n",
      pool.nodes.size());
  fmt::print("  run folder  {}  ({})\n", paths_.run_dir,
             s_.keep ? "kept at the end: --keep" : "removed at the end; --keep keeps it");
  fmt::print("  server      {}  pid {}, log {}\n", url_, server_->pid(), paths_.server_log());
  fmt::print("  agents      {} fake {} GPUs each, heartbeat every 1 s; logs {}/NODE.log\n",
             pool.gpus.count, pool.gpus.model, paths_.file("agents"));
  for (const char* leaf : {"leaf-1", "leaf-2"}) {
    std::vector<std::string> items;
    for (std::size_t i = 0; i < pool.nodes.size(); ++i) {
      if (pool.nodes[i].leaf != leaf) continue;
      items.push_back(fmt::format("{} (pid {})", pool.nodes[i].name, agents_[i].pid()));
    }
    if (!items.empty()) fmt::print("              {}: {}\n", leaf, fmt::join(items, ", "));
  }
  fmt::print("  tenants     {}\n", tenants_line(pool));
  std::int64_t last_at = 0;
  for (const DemoSubmission& sub : s_.workload) last_at = std::max(last_at, sub.at_ms);
  fmt::print("  workload    {} jobs from {}, submitted over {} s\n", s_.workload.size(),
             s_.workload_source, format_seconds(last_at));
  if (s_.service) {
    fmt::print(
        "  service     {} from {}, submitted now; once a replica serves, load_generator.py "
        "--steps {}, log {}\n",
        s_.service->spec.name, s_.service->file, demo_load_steps(s_.speed_milli),
        paths_.load_generator_log());
  }
  fmt::print("From another terminal:\n");
  fmt::print("  export TIDEPOOL_SERVER={} TIDEPOOL_TOKEN=$(cat {})\n", url_,
             paths_.admin_token_file());
  fmt::print("  tidepool jobs -a    tidepool top    tidepool why JOB    tidepool logs JOB\n");
  fmt::print("In a browser: {}/ (the web dashboard; sign in with the token in {})\n", url_,
             paths_.admin_token_file());
  fmt::print("Ctrl-C stops everything: the agents first, then the server.\n\n");
  std::fflush(stdout);
}

void DemoRun::submit(const DemoSubmission& submission, std::vector<std::string>& lines) {
  nlohmann::json body = job_spec_to_json(submission.spec);
  body["env"][kDemoRunEnv] = paths_.run_dir;
  auto reply = client_->post("/v1/jobs", body);
  if (!reply) {
    lines.push_back(
        fmt::format("error: submitting {}: {}", submission.file, reply.error().message()));
    return;
  }
  ++submitted_;
}

Result<void> DemoRun::fetch_events(std::vector<std::string>& lines) {
  for (int page = 0; page < 10; ++page) {
    auto reply = client_->get(
        "/v1/events", {{"since", std::to_string(since_)}, {"timeout", "0"}, {"limit", "1000"}});
    if (!reply) return std::unexpected(reply.error());
    const nlohmann::json& events = reply->at("events");
    for (const nlohmann::json& event : events) {
      if (std::string line = tally_.take(event, start_wall_ms_); !line.empty()) {
        lines.push_back(std::move(line));
      }
    }
    since_ = reply->value("last_seq", since_);
    if (events.size() < 1000) break;
  }
  return {};
}

bool DemoRun::refresh(std::int64_t elapsed_ms, std::vector<std::string>& lines,
                      const std::string& note) {
  auto events = fetch_events(lines);
  auto nodes =
      events ? client_->get("/v1/nodes") : Result<nlohmann::json>(std::unexpected(events.error()));
  auto jobs =
      nodes ? client_->get_jobs({}) : Result<nlohmann::json>(std::unexpected(nodes.error()));
  if (!jobs) {
    fmt::print("--- {}  error: {}\n", format_clock(elapsed_ms), jobs.error().message());
    std::fflush(stdout);
    return false;
  }
  last_jobs_ = jobs->at("jobs");
  DemoFrame frame{.elapsed_ms = elapsed_ms,
                  .submitted = submitted_,
                  .to_submit = static_cast<int>(s_.workload.size()),
                  .note = note,
                  .events = std::move(lines)};
  lines.clear();
  std::string out = render_demo_frame(nodes->at("nodes"), last_jobs_, frame);
  if (service_id_) {
    const nlohmann::json view = fetch_service_view();
    if (!view.is_null()) {
      const std::string load_line =
          load_ ? last_line_starting(tail_of_file(load_->log_path(), 5), "t ") : std::string();
      out += render_demo_service(view, load_ ? load_line : "(waiting for a replica to serve)");
    }
  }
  fmt::print("{}", out);
  std::fflush(stdout);
  return true;
}

void DemoRun::submit_service(std::vector<std::string>& lines) {
  nlohmann::json body = job_spec_to_json(s_.service->spec);
  body["env"][kDemoRunEnv] = paths_.run_dir;
  auto reply = client_->post("/v1/jobs", body);
  if (!reply) {
    lines.push_back(
        fmt::format("error: submitting {}: {}", s_.service->file, reply.error().message()));
    return;
  }
  service_id_ = reply->value("id", std::int64_t{0});
  lines.push_back(fmt::format("service {} submitted (#{})", s_.service->spec.name, *service_id_));
}

nlohmann::json DemoRun::fetch_service_view() {
  auto view = client_->get(fmt::format("/v1/services/{}", *service_id_));
  if (!view) return nullptr;
  max_ready_ = std::max(max_ready_, ready_replicas(*view));
  if (auto wanted = view->find("wanted"); wanted != view->end() && wanted->is_number()) {
    max_wanted_ = std::max(max_wanted_, wanted->get<int>());
  }
  return std::move(*view);
}

void DemoRun::start_load_when_serving(std::vector<std::string>& lines) {
  if (!service_id_ || load_ || python_.empty()) return;
  const nlohmann::json view = fetch_service_view();
  if (view.is_null() || !view.contains("endpoints") || view["endpoints"].empty()) return;
  const std::string steps = demo_load_steps(s_.speed_milli);
  auto load = DemoChild::start(
      "load generator",
      demo_load_generator_command(python_, s_.demo_dir,
                                  fmt::format("{}/v1/services/{}", url_, *service_id_),
                                  paths_.admin_token_file(), steps),
      paths_.load_generator_log());
  if (!load) {
    lines.push_back("error: starting the load generator: " + load.error().message());
    python_.clear();  // no second try
    return;
  }
  load_.emplace(std::move(*load));
  lines.push_back(fmt::format("load generator started (pid {}): --steps {} (requests/s:seconds)",
                              load_->pid(), steps));
}

bool DemoRun::load_finished() { return !s_.service || (load_ && !load_->running()); }

void DemoRun::stop_load() {
  if (!load_) return;
  // SIGTERM ends its schedule; the requests in flight finish, then it prints its summary.
  for (const StopOutcome& stop : stop_children({&*load_}, kStopGrace, [] { return false; })) {
    fmt::print("  load generator: {}\n", stop.how);
  }
  std::fflush(stdout);
}

DemoOutcome DemoRun::run_workload() {
  DemoOutcome out;
  std::vector<std::string> lines;
  // Skip what happened while starting (tokens, registrations): the view starts now.
  (void)fetch_events(lines);
  lines.clear();
  const auto start = Clock::now();
  start_wall_ms_ = wall_clock_ms();
  const std::int64_t limit_ms = s_.duration_ms.value_or(kDefaultLimitMs);
  const auto elapsed = [&] {
    return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  };
  std::size_t next = 0;
  std::int64_t next_refresh_ms = s_.refresh_ms;
  std::int64_t next_service_poll_ms = 0;
  if (s_.service) {
    if (auto python = locate_program("python3"); python) {
      python_ = *python;
    } else {
      lines.push_back("error: no load generator: " + python.error().reason);
    }
    submit_service(lines);
  }
  while (true) {
    if (auto ok = check_alive(); !ok) {
      out.interrupted = demo_signals.load() > 0;
      out.failed = !out.interrupted;
      out.ended_because = out.interrupted ? "interrupted" : "a process of the demo died";
      if (out.failed) print_error(ok.error());
      break;
    }
    while (next < s_.workload.size() && s_.workload[next].at_ms <= elapsed()) {
      submit(s_.workload[next++], lines);
    }
    if (service_id_ && !load_ && elapsed() >= next_service_poll_ms) {
      start_load_when_serving(lines);
      next_service_poll_ms = elapsed() + 500;
    }
    if (elapsed() >= next_refresh_ms) {
      const bool fresh = refresh(elapsed(), lines, "");
      next_refresh_ms = elapsed() + s_.refresh_ms;
      // The service and its replicas run until cancelled: with --service the demo waits for
      // the load generator's schedule instead.
      const bool all_ended =
          fresh && next == s_.workload.size() &&
          std::cmp_greater_equal(last_jobs_.size(), submitted_) &&
          std::ranges::all_of(last_jobs_, [](const nlohmann::json& job) {
            if (is_service_or_replica(job)) return true;
            const std::string state = job.value("state", std::string());
            return state == "succeeded" || state == "failed" || state == "cancelled";
          });
      if (all_ended && load_finished()) {
        out.ended_because =
            s_.service ? "every job ended and the load generator finished" : "every job ended";
        break;
      }
    }
    if (elapsed() >= limit_ms) {
      out.ended_because = s_.duration_ms
                              ? fmt::format("--duration {}s is over", format_seconds(limit_ms))
                              : std::string("the limit of 10 minutes is over");
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  out.elapsed_ms = elapsed();
  // The last events, unless the frame that saw every job end just showed them.
  if (!out.ended_because.starts_with("every job ended") && server_ && server_->running()) {
    refresh(out.elapsed_ms, lines, "(final)");
  }
  out.jobs = last_jobs_;
  if (s_.service) {
    // The summary's job counts are the workload's; the service has lines of its own.
    out.jobs = nlohmann::json::array();
    for (const nlohmann::json& job : last_jobs_) {
      if (!is_service_or_replica(job)) out.jobs.push_back(job);
    }
    if (load_ && load_->running()) {
      fmt::print("\nStopping the load generator (SIGTERM: no new requests)...\n");
      stop_load();
    }
    out.service_summary = render_demo_service_summary(
        s_.service->spec.name, max_ready_, max_wanted_,
        load_ ? last_line_starting(tail_of_file(load_->log_path(), 5), "sent ") : std::string());
  }
  return out;
}

void DemoRun::shutdown() {
  if (load_ && load_->running()) stop_load();
  const int baseline = demo_signals.load();
  const auto hurry = [baseline] { return demo_signals.load() > baseline; };
  if (!agents_.empty()) {
    fmt::print("\nStopping the agents (SIGTERM; SIGKILL after {} s; Ctrl-C again: at once)...\n",
               kStopGrace.count() / 1000);
    std::fflush(stdout);
    std::vector<DemoChild*> agents;
    for (DemoChild& agent : agents_) agents.push_back(&agent);
    std::vector<std::string> items;
    for (const StopOutcome& stop : stop_children(agents, kStopGrace, hurry)) {
      items.push_back(fmt::format("{} {}", stop.label.substr(stop.label.rfind(' ') + 1), stop.how));
    }
    fmt::print("  agents: {}\n", fmt::join(items, ", "));
  }
  if (!paths_.run_dir.empty()) {
    const int left = stop_marked_processes(kDemoRunEnv, paths_.run_dir, kStopGrace, hurry);
    if (left > 0) fmt::print("  job processes the agents left: {} stopped\n", left);
  }
  // Close the client's keep-alive connection first: the server waits for open connections.
  client_.reset();
  if (server_) {
    for (const StopOutcome& stop : stop_children({&*server_}, kStopGrace, hurry)) {
      fmt::print("  server: {}\n", stop.how);
    }
  }
  if (!paths_.run_dir.empty()) {
    if (s_.keep) {
      fmt::print("  run folder kept: {}\n", paths_.run_dir);
    } else {
      std::error_code error;
      fs::remove_all(paths_.run_dir, error);
      if (error) {
        fmt::print("  could not remove the run folder {}: {}\n", paths_.run_dir, error.message());
      } else {
        fmt::print("  run folder removed: {}\n", paths_.run_dir);
      }
    }
  }
  std::fflush(stdout);
}

int run_demo(const DemoFlags& flags) {
  auto settings = settle(flags);
  if (!settings) {
    print_error(settings.error());
    return 1;
  }
  auto server_program = locate_program("tidepool-server");
  auto agent_program = locate_program("tidepool-agent");
  if (flags.dry_run) {
    print_dry_run(*settings, server_program, agent_program);
    return 0;
  }
  if (!server_program) {
    print_error(
        Error{"", fmt::format("{}; install it with tidepool", server_program.error().reason)});
    return 1;
  }
  if (!agent_program) {
    print_error(Error{"", fmt::format("the demo runs the node agent, tidepool-agent: {}; build it "
                                      "(cmake --build BUILD --target tidepool-agent) or install "
                                      "it with tidepool",
                                      agent_program.error().reason)});
    return 1;
  }
  install_signal_handlers();
  DemoRun run(std::move(*settings), std::move(*server_program), std::move(*agent_program));
  if (auto started = run.start(); !started) {
    const bool interrupted = demo_signals.load() > 0;
    if (!interrupted)
      print_error(Error{"", "the demo could not start: " + started.error().message()});
    run.shutdown();
    return interrupted ? 130 : 1;
  }
  run.print_intro();
  const DemoOutcome outcome = run.run_workload();
  run.shutdown();
  fmt::print(
      "\n{}{}",
      render_demo_summary(outcome.jobs, run.tally(), outcome.elapsed_ms, outcome.ended_because),
      outcome.service_summary);
  std::fflush(stdout);
  if (outcome.failed) return 1;
  return outcome.interrupted ? 130 : 0;
}

}  // namespace

void add_demo_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<DemoFlags>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "Run a whole pool on this machine: a server, fake-GPU agents and sample jobs");
  cmd->add_option("--nodes", flags->nodes, "Nodes, split over 2 leaf switches of one spine")
      ->capture_default_str();
  cmd->add_option("--gpus", flags->gpus, "Fake GPUs of each node: fake:COUNTxMODEL")
      ->capture_default_str();
  cmd->add_option("--duration", flags->duration,
                  "Stop after this long even if jobs remain, e.g. 90s or 5m (default: when every "
                  "job has ended, at most 10m)");
  cmd->add_option("--speed", flags->speed,
                  "Run the workload this many times faster: job steps and submission times are "
                  "divided by it (0.1 to 20)")
      ->capture_default_str();
  cmd->add_option("--refresh", flags->refresh, "Print the view this often, e.g. 2s or 500ms")
      ->capture_default_str();
  cmd->add_flag("--keep", flags->keep,
                "Keep the run folder (database, configs, logs, checkpoints) and print where it is");
  cmd->add_option("--jobs", flags->jobs,
                  "Demo folder: job specs, their scripts and workload.txt (default: the shipped "
                  "data/examples/demo)");
  cmd->add_flag("--service", flags->service,
                "Also run the demo folder's inference service (service.yaml) under a load that "
                "steps up and back down (load_generator.py: 5/s for 20 s, 40/s for 60 s, 5/s "
                "for 60 s, divided by --speed), and show its replicas following it; the demo "
                "then lasts until the load ends (about 2.5 minutes)");
  cmd->add_flag("--dry-run", flags->dry_run,
                "Print the files it would write and the commands it would start; start nothing");
  cmd->footer(
      "It starts tidepool-server and one tidepool-agent per node (beside tidepool, else on PATH)\n"
      "in a new folder under $TMPDIR (or /tmp), submits the demo folder's jobs once every agent\n"
      "has registered, and prints the pool every --refresh. Ctrl-C (or the end of the jobs, or\n"
      "--duration) stops the agents, then the server, and prints a summary.\n\n"
      "The demo folder is --jobs DIR, else the first of $TIDEPOOL_SOURCE_DIR/data/examples/demo,\n"
      "<tidepool's folder>/../share/tidepool/examples/demo (installed) and the source tree\n"
      "tidepool was built from, that holds a workload.txt.\n\n"
      "Examples:\n"
      "  tidepool demo\n"
      "  tidepool demo --nodes 6 --speed 2 --keep\n"
      "  tidepool demo --service\n"
      "  tidepool demo --dry-run");
  cmd->callback([flags, exit_code] { *exit_code = run_demo(*flags); });
}

}  // namespace tidepool
