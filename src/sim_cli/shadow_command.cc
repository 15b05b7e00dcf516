#include "sim_cli/shadow_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "cli/output_format.h"
#include "config/cluster_file.h"
#include "config/duration_text.h"
#include "config/tenants_file.h"
#include "sim_cli/command_output.h"
#include "sim_cli/shadow_report.h"
#include "sim_cli/shadow_trace.h"
#include "sim_cli/slurm_json.h"

namespace tidepool {
namespace {

namespace fs = std::filesystem;

struct ShadowOptions {
  bool slurm = false;
  std::string trace;
  std::string interval = "10s";
  bool once = false;
  std::string until;
  bool until_done = false;
  std::string sacct = "auto";
  std::string since = "1h";
  std::string partition;
  std::string cluster;
  std::string tenants;
  std::string sinfo;
  std::string gpu_model = "GPU";
  std::string policy = "tidepool";
  std::string share = "100%";
  std::string by = "hash";
  std::uint64_t seed = 0;
  std::string out;
  std::string format = "table";
  bool summary_only = false;
};

volatile std::sig_atomic_t g_stop = 0;
void on_stop(int /*signal*/) { g_stop = 1; }

constexpr std::chrono::seconds kCommandTimeout{60};

Result<int> parse_percent(std::string text) {
  if (!text.empty() && text.back() == '%') text.pop_back();
  int value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0 ||
      value > 100) {
    return fail("--share", "expected a percentage 0..100 (\"30%\" or \"30\"), got '" + text + "'");
  }
  return value;
}

// The JSON a Slurm command printed; fails naming the command and quoting its error.
Result<nlohmann::json> slurm_json(const std::vector<std::string>& argv) {
  auto run = run_command(argv, kCommandTimeout);
  if (!run) return std::unexpected(run.error());
  if (run->exit_status != 0) {
    std::string err = run->err.substr(0, run->err.find_last_not_of(" \n") + 1);
    return fail(argv[0], fmt::format("exit status {}: {}", run->exit_status, err));
  }
  nlohmann::json reply = nlohmann::json::parse(run->out, nullptr, false);
  if (reply.is_discarded())
    return fail(argv[0], "did not print JSON (is it Slurm 21.08 or later?)");
  return reply;
}

std::string sacct_since(std::int64_t epoch) {
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  localtime_r(&t, &tm);  // sacct reads times in the local time zone
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  return text;
}

// The latest time the jobs show (submit, start or end).
std::int64_t latest_time(const std::vector<ObservedJob>& jobs) {
  std::int64_t latest = 0;
  for (const ObservedJob& j : jobs) {
    latest = std::max({latest, j.submit, j.start.value_or(0), j.end.value_or(0)});
  }
  return latest;
}

class SlurmFollower {
 public:
  SlurmFollower(const ShadowOptions& options, std::int64_t since)
      : options_(options), since_(since), sacct_(options.sacct != "off") {}

  // One poll: squeue, then sacct while it answers (in "auto", the first failure turns it off with
  // a note; in "on", a failure is an error).
  Result<void> poll() {
    auto queue = slurm_json({"squeue", "--all", "--json"});
    if (!queue) return std::unexpected(queue.error());
    auto jobs = read_squeue_json(*queue, options_.partition);
    if (!jobs) return std::unexpected(jobs.error());
    if (sacct_) {
      auto acct = slurm_json({"sacct", "--json", "--allusers", "--starttime", sacct_since(since_)});
      if (!acct && options_.sacct == "on") return std::unexpected(acct.error());
      if (!acct) {
        std::cerr << "shadow: sacct does not answer (" << acct.error().message()
                  << "); following squeue alone, which lists ended jobs for MinJobAge\n";
        sacct_ = false;
      } else {
        auto done = read_sacct_json(*acct, options_.partition);
        if (!done) return std::unexpected(done.error());
        merge_observations(known_, std::move(*done));
        used_sacct_ = true;
      }
    }
    // A job not ended that squeue no longer lists left it unseen (MinJobAge passed between two
    // polls, without sacct): its end is not known, and nothing will tell it.
    std::set<std::string, std::less<>> listed;
    for (const ObservedJob& j : *jobs) listed.insert(j.id);
    merge_observations(known_, std::move(*jobs));
    for (const ObservedJob& j : known_) {
      if (!j.end && !j.cancelled && !listed.contains(j.id) && lost_.insert(j.id).second) {
        std::cerr << "shadow: job " << j.id
                  << " left squeue without being seen to end (poll more often than MinJobAge, "
                     "or run sacct); it stays censored\n";
      }
    }
    return {};
  }
  [[nodiscard]] const std::vector<ObservedJob>& jobs() const { return known_; }
  // Jobs that left squeue unseen to end: they count as ended for --until-done.
  [[nodiscard]] bool lost(const std::string& id) const { return lost_.contains(id); }
  [[nodiscard]] std::string source() const { return used_sacct_ ? "squeue + sacct" : "squeue"; }

 private:
  const ShadowOptions& options_;
  std::int64_t since_;
  bool sacct_;
  bool used_sacct_ = false;
  std::vector<ObservedJob> known_;
  std::set<std::string, std::less<>> lost_;
};

Result<ClusterSpec> slurm_pool(const ShadowOptions& options) {
  auto reply = slurm_json({"sinfo", "--json"});
  if (!reply) return std::unexpected(reply.error());
  return read_sinfo_json(*reply, options.gpu_model, options.partition);
}

// Writes `text` to DIR/name through a temporary file, so that a reader never sees half of it.
Result<void> write_file(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir / name;
  const fs::path temporary = dir / ("." + name + ".tmp");
  {
    std::ofstream out(temporary);
    out << text;
    if (!out) return fail("--out", "cannot write '" + temporary.string() + "'");
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) return fail("--out", "cannot write '" + path.string() + "': " + error.message());
  return {};
}

struct Report {
  ShadowRun run;
  ShadowReportContext context;
};

Result<Report> shadow_once(const ShadowOptions& options, const ClusterSpec& cluster,
                           const std::vector<ObservedJob>& jobs, std::int64_t now,
                           std::string source, const ShadowSettings& settings) {
  Report report;
  auto run = run_shadow(cluster, jobs, now, settings);
  if (!run) return std::unexpected(run.error());
  report.run = std::move(*run);
  report.context.observed = options.slurm ? "slurm" : "observed";
  report.context.source = std::move(source);
  report.context.policy = settings.policy;
  report.context.tenants_file = options.tenants;
  report.context.share = settings.share;
  report.context.nodes = static_cast<int>(cluster.nodes.size());
  for (const NodeSpec& n : cluster.nodes) report.context.gpus += n.gpu_count;
  report.context.job_rows = !options.summary_only;
  if (!options.out.empty()) {
    std::error_code error;
    fs::create_directories(options.out, error);
    if (error) return fail("--out", "cannot create '" + options.out + "': " + error.message());
    for (const auto& [name, text] :
         {std::pair{"report.txt", shadow_report_text(report.run, jobs, report.context)},
          std::pair{"report.json",
                    shadow_report_json(report.run, jobs, report.context).dump(2) + "\n"},
          std::pair{"jobs.csv", shadow_report_csv(report.run, jobs)}}) {
      if (auto ok = write_file(options.out, name, text); !ok) return std::unexpected(ok.error());
    }
  }
  return report;
}

void print_report(const Report& report, const std::vector<ObservedJob>& jobs, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    std::cout << shadow_report_json(report.run, jobs, report.context).dump(2) << '\n';
  } else if (format == OutputFormat::kCsv) {
    std::cout << shadow_report_csv(report.run, jobs);
  } else {
    std::cout << shadow_report_text(report.run, jobs, report.context);
  }
}

// A tenants file under which no job could start: it guarantees no GPU of a model the pool has
// (quotas of other models only, or none), so there is nothing to run on or borrow. Else nothing.
std::optional<std::string> guarantees_nothing_here(const TenantsSpec& tenants,
                                                   const ClusterSpec& cluster) {
  std::set<GpuModelId> in_pool;
  for (const NodeSpec& n : cluster.nodes) {
    if (n.gpu_count > 0) in_pool.insert(n.model);
  }
  std::set<std::string> named;
  for (const OrgSpec& org : tenants.orgs) {
    for (const TenantSpec& tenant : org.tenants) {
      for (const ModelQuota& quota : tenant.quotas) {
        if (in_pool.contains(quota.model) && quota.guaranteed_milli > 0) return std::nullopt;
        named.insert(cluster.models.name(quota.model));
      }
    }
  }
  std::vector<std::string> pool_models;
  for (const GpuModelId model : in_pool) pool_models.push_back(cluster.models.name(model));
  return fmt::format(
      "it guarantees no GPU of the pool's models ({}), so no job could start{}",
      fmt::join(pool_models, ", "),
      named.empty() ? "" : fmt::format("; its quotas name {}", fmt::join(named, ", ")));
}

// The cluster the jobs ran on: a cluster file's, a saved sinfo reply's, else the nodes Slurm
// lists.
Result<ClusterSpec> load_cluster(const ShadowOptions& options) {
  if (!options.cluster.empty()) return load_cluster_yaml(options.cluster);
  if (!options.sinfo.empty()) {
    std::ifstream in(options.sinfo);
    const nlohmann::json reply = nlohmann::json::parse(in, nullptr, false);
    if (reply.is_discarded()) return fail("--sinfo", "'" + options.sinfo + "' is not JSON");
    auto spec = read_sinfo_json(reply, options.gpu_model, options.partition);
    if (!spec) return fail("--sinfo " + spec.error().field, spec.error().reason);
    return spec;
  }
  if (options.slurm) return slurm_pool(options);
  return fail("--cluster", "a trace needs its nodes: --cluster FILE or --sinfo FILE");
}

Result<void> run_shadow_command(const ShadowOptions& options) {
  if (options.slurm == !options.trace.empty()) {
    return fail("--slurm", "give exactly one of --slurm and --trace FILE");
  }
  static constexpr OutputFormat kFormats[] = {OutputFormat::kTable, OutputFormat::kJson,
                                              OutputFormat::kCsv};
  auto format = parse_output_format(options.format, "--format", kFormats);
  if (!format) return std::unexpected(format.error());
  ShadowSettings settings;
  settings.policy = options.policy;
  if (auto policy = scheduler_policy(options.policy); !policy) {
    return fail("--policy", policy.error().reason);
  }
  auto percent = parse_percent(options.share);
  if (!percent) return std::unexpected(percent.error());
  settings.share.percent = *percent;
  settings.share.seed = options.seed;
  if (options.by != "hash" && options.by != "tenant") {
    return fail("--by", "expected hash or tenant, got '" + options.by + "'");
  }
  settings.share.rule = options.by == "tenant" ? ShareRule::kTenant : ShareRule::kHash;
  auto interval = parse_duration(options.interval);
  if (!interval || *interval <= 0) return fail("--interval", "expected a positive duration");
  std::optional<Seconds> until;
  if (!options.until.empty()) {
    auto u = parse_duration(options.until);
    if (!u) return fail("--until", u.error().reason);
    until = *u;
  }
  auto since = parse_duration(options.since);
  if (!since) return fail("--since", since.error().reason);
  auto cluster = load_cluster(options);
  if (!cluster) return std::unexpected(cluster.error());
  if (!options.tenants.empty()) {
    // Its models go into the cluster's catalog, which the pool is built on.
    auto tenants = load_tenants_yaml(options.tenants, cluster->models);
    if (!tenants) return fail("--tenants", tenants.error().message());
    if (auto nothing = guarantees_nothing_here(*tenants, *cluster)) {
      return fail("--tenants", options.tenants + ": " + *nothing);
    }
    settings.tenants = std::move(*tenants);
  }

  if (!options.trace.empty()) {
    std::ifstream in(options.trace);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return fail("--trace", "cannot read '" + options.trace + "'");
    auto jobs = read_shadow_trace(text.str(), options.trace);
    if (!jobs) return std::unexpected(jobs.error());
    if (!options.partition.empty()) {
      std::erase_if(*jobs, [&](const ObservedJob& j) { return j.partition != options.partition; });
    }
    auto report =
        shadow_once(options, *cluster, *jobs, latest_time(*jobs), options.trace, settings);
    if (!report) return std::unexpected(report.error());
    print_report(*report, *jobs, *format);
    return {};
  }

  const auto wall = [] { return static_cast<std::int64_t>(std::time(nullptr)); };
  const std::int64_t started = wall();
  SlurmFollower follower(options, started - *since);
  std::signal(SIGINT, on_stop);
  std::signal(SIGTERM, on_stop);
  std::optional<Report> last;
  while (true) {
    if (auto ok = follower.poll(); !ok) return std::unexpected(ok.error());
    // Slurm's clock may run ahead of ours (another machine's): nothing it shows is in the future.
    const std::int64_t now = std::max(wall(), latest_time(follower.jobs()));
    auto report = shadow_once(options, *cluster, follower.jobs(), now, follower.source(), settings);
    if (!report) return std::unexpected(report.error());
    int waiting = 0;
    int running = 0;
    for (const ObservedJob& j : follower.jobs()) {
      if (!j.end && !j.cancelled && !follower.lost(j.id)) (j.start ? running : waiting) += 1;
    }
    std::cerr << fmt::format("shadow: {} jobs seen: {} waiting, {} running, {} ended\n",
                             follower.jobs().size(), waiting, running,
                             follower.jobs().size() - waiting - running);
    last = std::move(*report);
    const bool done = options.until_done && !follower.jobs().empty() && waiting + running == 0;
    if (options.once || done || g_stop != 0 || (until && now - started >= *until)) break;
    for (Seconds s = 0; s < *interval && g_stop == 0; ++s) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (g_stop != 0) break;
  }
  print_report(*last, follower.jobs(), *format);
  return {};
}

}  // namespace

void add_shadow_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ShadowOptions>();
  CLI::App* command = app.add_subcommand(
      "shadow",
      "Run Tidepool's scheduler beside another one without acting: follow Slurm's job stream "
      "(squeue --json every --interval, and sacct --json where Slurm's accounting runs) or read "
      "a trace, schedule the same jobs on the same nodes with the core scheduler, and report "
      "per job when and where each would have started them, with both schedules' queueing, "
      "fragmentation and communication figures");
  command->footer(
      "Slurm: squeue lists ended jobs for MinJobAge (300 s by default) after they end, so a poll "
      "at least that often sees every job end even without accounting; where slurmdbd runs, "
      "sacct fills in the rest (--sacct auto turns it off, with a note, when it does not "
      "answer). Jobs still running or waiting are censored: Tidepool holds their GPUs to the end "
      "of the run. --share 30% --by tenant|hash: the gray rollout, only that share goes to "
      "Tidepool's scheduler, the other jobs stay where Slurm put them, and the figures compare "
      "the share under both. Trace files: a saved squeue/sacct --json reply, JSON lines or CSV "
      "with id,tenant,submit,gpus[,start,end,nodes,node_count,cpus,memory_mib,time_limit,"
      "partition,cancelled] (times in seconds since the epoch). Files in --out: report.txt, "
      "report.json and jobs.csv, rewritten after every poll.");
  CLI::Option* slurm =
      command->add_flag("--slurm", options->slurm, "follow the local Slurm (squeue, sacct, sinfo)");
  CLI::Option* trace =
      command->add_option("--trace", options->trace, "read the job stream from a file instead")
          ->check(CLI::ExistingFile);
  slurm->excludes(trace);
  trace->excludes(slurm);
  command->add_option("--interval", options->interval, "time between polls of Slurm")
      ->capture_default_str();
  command->add_flag("--once", options->once, "poll once, report and stop");
  command->add_option("--until", options->until, "stop following after this long (e.g. 1h)");
  command->add_flag("--until-done", options->until_done,
                    "stop once every job seen has ended (none waits or runs)");
  command->add_option("--sacct", options->sacct, "read sacct too: auto, on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  command->add_option("--since", options->since, "how far back sacct is asked, at the start")
      ->capture_default_str();
  command->add_option("--partition", options->partition, "only this partition's jobs and nodes");
  command
      ->add_option("--cluster", options->cluster,
                   "the nodes from a cluster file (with their topology) instead of sinfo; a "
                   "trace needs it or --sinfo")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--tenants", options->tenants,
                   "the tenants, their guarantees and borrowing limits, from a tenants file (every "
                   "job's account, else user, must be one); without it, each tenant is guaranteed "
                   "a part of each model in proportion to its GPU time so far")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--sinfo", options->sinfo,
                   "the nodes from a saved `sinfo --json` reply instead of asking sinfo")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--gpu-model", options->gpu_model,
                   "GPU model of sinfo's nodes whose gres names no type")
      ->capture_default_str();
  command
      ->add_option("--policy", options->policy,
                   "Tidepool's scheduling policy (tidepool, quota-borrow, tiresias, fifo-firstfit)")
      ->capture_default_str();
  command->add_option("--share", options->share, "share of jobs Tidepool schedules (30%)")
      ->capture_default_str();
  command->add_option("--by", options->by, "how the share is cut: hash (of job ids) or tenant")
      ->capture_default_str();
  command->add_option("--seed", options->seed, "seed of the share's hash")->capture_default_str();
  command->add_option("--out", options->out, "folder for report.txt, report.json and jobs.csv");
  command->add_option("--format", options->format, "what is printed: table, json or csv")
      ->capture_default_str();
  command->add_flag("--summary-only", options->summary_only, "the table without a row per job");
  command->callback([options, exit_code] {
    if (auto ok = run_shadow_command(*options); !ok) {
      std::cerr << "error: " << ok.error().message() << '\n';
      *exit_code = 1;
    }
  });
}

}  // namespace tidepool
