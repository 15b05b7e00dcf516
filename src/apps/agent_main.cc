// tidepool-agent: the node agent, which `tidepool agent` runs (apps/external_command.h).
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/agent.h"
#include "agent/cgroup_limits.h"
#include "agent/gpu_backend.h"
#include "agent/task_process.h"
#include "agent/task_uids.h"
#include "api/job_spec.h"
#include "apps/external_command.h"

namespace tidepool {
namespace {

struct AgentFlags {
  std::string server;
  std::string token;
  std::string token_file;
  std::string ca_cert;
  std::string node;
  std::string address;
  std::string leaf;
  std::string spine;
  std::string gpus = "nvml";
  std::string state_dir = "/var/lib/tidepool-agent";
  std::string checkpoint_root;
  std::string heartbeat_interval = "2s";
  std::string sample_interval = "5s";
  std::string notice_timeout = "30s";
  std::string grace_period = "10s";
  std::string notice_signal = "USR1";
  std::string cgroups = "auto";
  std::string task_uids = "61000-61999";
  bool allow_shared_node = false;
  std::int64_t log_quota_mib = 10240;
  bool stop_tasks_on_exit = false;
};

// Whether a task can start with `uid` and/or PID namespaces here: the honest test is to start
// one (a container may refuse namespaces to root, a missing capability refuses the uid).
Result<void> probe_launch(int uid, bool namespaces) {
  TaskLaunch probe;
  probe.command = {"true"};
  probe.log_path = "/dev/null";
  probe.uid = uid;
  probe.gid = uid;
  probe.own_pid_namespace = namespaces;
  auto process = TaskProcess::start(probe);
  if (!process) return std::unexpected(process.error());
  const TaskExit exit = process->wait();
  if (exit.exit_code != 0) return fail("isolation", "the probe task " + exit.reason);
  return {};
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

Result<std::int64_t> duration_flag(const std::string& text, const std::string& flag,
                                   std::int64_t min_ms) {
  auto ms = parse_duration_ms(text);
  if (!ms) return fail(flag, ms.error().reason);
  if (*ms < min_ms) {
    return fail(flag, fmt::format("'{}' is shorter than the least allowed, {} ms", text, min_ms));
  }
  return *ms;
}

Result<int> signal_flag(const std::string& text) {
  std::string name = text;
  if (name.starts_with("SIG")) name = name.substr(3);
  for (auto [word, number] :
       {std::pair{"USR1", SIGUSR1}, std::pair{"USR2", SIGUSR2}, std::pair{"INT", SIGINT},
        std::pair{"HUP", SIGHUP}, std::pair{"TERM", SIGTERM}, std::pair{"URG", SIGURG},
        std::pair{"WINCH", SIGWINCH}}) {
    if (name == word) return number;
  }
  return fail("--notice-signal",
              fmt::format("'{}' is not a notice signal; use USR1, USR2, INT, HUP, TERM, URG or "
                          "WINCH",
                          text));
}

std::string executable_dir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.parent_path().string();
}

Result<AgentOptions> options_from(const AgentFlags& flags) {
  AgentOptions o;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  o.hostname = host;
  o.node = flags.node.empty() ? o.hostname : flags.node;
  if (auto ok = check_name(o.node); !ok) return fail("--node", ok.error().reason);
  o.address = flags.address;
  o.leaf = flags.leaf;
  o.spine = flags.spine;
  o.state_dir = std::filesystem::absolute(flags.state_dir).lexically_normal().string();
  o.checkpoint_root =
      flags.checkpoint_root.empty()
          ? o.state_dir + "/checkpoints"
          : std::filesystem::absolute(flags.checkpoint_root).lexically_normal().string();
  o.agent_dir = executable_dir();
  for (auto [text, flag, min_ms, target] :
       {std::tuple{&flags.heartbeat_interval, "--heartbeat-interval", 100, &o.heartbeat_ms},
        std::tuple{&flags.sample_interval, "--sample-interval", 100, &o.sample_ms},
        std::tuple{&flags.notice_timeout, "--notice-timeout", 0, &o.notice_ms},
        std::tuple{&flags.grace_period, "--grace-period", 0, &o.grace_ms}}) {
    auto ms = duration_flag(*text, flag, min_ms);
    if (!ms) return std::unexpected(ms.error());
    *target = *ms;
  }
  auto signal = signal_flag(flags.notice_signal);
  if (!signal) return std::unexpected(signal.error());
  o.notice_signal = *signal;
  o.stop_tasks_on_exit = flags.stop_tasks_on_exit;
  auto uids = parse_uid_range(flags.task_uids);
  if (!uids) return std::unexpected(uids.error());
  o.task_uids = *uids;
  o.allow_shared_node_without_isolation = flags.allow_shared_node;
  if (flags.log_quota_mib < 1) return fail("--log-quota-mib", "expected at least 1");
  o.log_quota_bytes = flags.log_quota_mib * 1024 * 1024;
  return o;
}

Result<std::string> read_token(const AgentFlags& flags) {
  if (!flags.token_file.empty()) {
    // A token others may read lets them act as this node: refused, not just warned about.
    struct stat info {};
    if (::stat(flags.token_file.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
      return fail("--token-file",
                  fmt::format("{} may be read by group or others (mode {:04o}); the agent refuses "
                              "it: chmod 600 it",
                              flags.token_file, info.st_mode & 07777));
    }
    std::ifstream in(flags.token_file);
    std::string token;
    if (!in || !std::getline(in, token)) return fail("--token-file", "cannot read the file");
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    return token;
  }
  std::string token = flags.token.empty() ? env_or("TIDEPOOL_TOKEN", "") : flags.token;
  if (token.empty()) {
    return fail("--token",
                "the agent needs its node's agent token (`tidepool token create --role agent "
                "--node NAME`): give --token, --token-file or TIDEPOOL_TOKEN");
  }
  return token;
}

int run_agent(const AgentFlags& flags) {
  const auto error = [](const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.message().c_str());
    return 1;
  };
  auto options = options_from(flags);
  if (!options) return error(options.error());
  auto token = read_token(flags);
  if (!token) return error(token.error());
  // The servers from the first source that gives them, which a bad URL's error names.
  std::string server = flags.server;
  std::string server_source = "--server";
  if (server.empty()) {
    server = env_or("TIDEPOOL_SERVER", "");
    server_source = "$TIDEPOOL_SERVER";
  }
  if (server.empty()) {
    server = "http://127.0.0.1:8470";
    server_source = "default";
  }
  auto client =
      AgentClient::create(server, server_source, *token, env_or("TIDEPOOL_CA_CERT", flags.ca_cert));
  if (!client) return error(client.error());
  auto gpus = make_gpu_backend(flags.gpus, options->node);
  if (!gpus) return error(gpus.error());
  CgroupSetup cgroups = probe_cgroups(flags.cgroups);
  if (!cgroups.warning.empty()) std::fprintf(stderr, "warning: %s\n", cgroups.warning.c_str());
  // What this machine lets the agent do for isolation, said once.
  if (auto uid_ok = probe_launch(options->task_uids->first, false); !uid_ok) {
    std::fprintf(stderr,
                 "warning: tasks run as the agent's own user, not as uids %d-%d: %s (run the "
                 "agent as root, or with CAP_SETUID and CAP_SETGID); tasks of different tenants "
                 "do not share this node\n",
                 options->task_uids->first, options->task_uids->last,
                 uid_ok.error().message().c_str());
    options->task_uids.reset();
  }
  if (auto ns_ok = probe_launch(-1, true); ns_ok) {
    options->pid_namespaces = true;
  } else {
    std::fprintf(stderr,
                 "warning: tasks run without PID and mount namespaces of their own: %s (they "
                 "need CAP_SYS_ADMIN)\n",
                 ns_ok.error().message().c_str());
  }
  // Block the signals the agent waits for before anything else runs; tasks start with an empty
  // mask (task_process.h). Orphans of the tasks come to the agent, which reaps them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGCHLD);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Agent agent(std::move(*options), std::move(*client), std::move(*gpus), std::move(cgroups));
  if (auto ok = agent.run(); !ok) return error(ok.error());
  return 0;
}

}  // namespace
}  // namespace tidepool

int main(int argc, char** argv) {
  using tidepool::AgentFlags;
  CLI::App app("tidepool agent: runs the jobs the Tidepool server places on this GPU node",
               "tidepool");
  auto flags = std::make_shared<AgentFlags>();
  CLI::App* cmd = app.add_subcommand("agent", "Run the node agent");
  app.require_subcommand(1);
  cmd->add_option("--server", flags->server,
                  "Server URL (default $TIDEPOOL_SERVER, else http://127.0.0.1:8470), or the "
                  "servers of a highly available Tidepool as a comma-separated list (up to 16): "
                  "the agent reports to their leader");
  cmd->add_option("--token", flags->token,
                  "The node's agent token (default $TIDEPOOL_TOKEN); other users see it in ps: "
                  "prefer --token-file");
  cmd->add_option("--token-file", flags->token_file,
                  "Read the token from this file (only the agent's user may read it), e.g. from "
                  "`tidepool token create --role agent --node NAME --secret-file FILE`");
  cmd->add_option("--ca-cert", flags->ca_cert,
                  "PEM file of the CA that signed an https server's certificate "
                  "(default $TIDEPOOL_CA_CERT)");
  cmd->add_option("--node", flags->node,
                  "This node's name in the server's cluster file (default: the host name)");
  cmd->add_option("--address", flags->address,
                  "How other nodes reach this one: MASTER_ADDR of gangs led here (default: the "
                  "node name)");
  cmd->add_option("--leaf", flags->leaf, "The leaf switch this node hangs off (checked)");
  cmd->add_option("--spine", flags->spine, "The spine above that leaf (checked)");
  cmd->add_option("--gpus", flags->gpus,
                  "GPU backend: nvml (the NVIDIA driver), or fake GPUs such as fake:8xH100, "
                  "fake:4xA100,4xH100 or, with MIG partitions, "
                  "fake:2xA100[3g.40gb+2g.20gb+1g.10gb],2xH100")
      ->capture_default_str();
  cmd->add_option("--state-dir", flags->state_dir,
                  "Folder of the tasks' run folders, logs and the agent's state")
      ->capture_default_str();
  cmd->add_option("--checkpoint-root", flags->checkpoint_root,
                  "Folder of the jobs' checkpoints, on storage all nodes share "
                  "(default <state-dir>/checkpoints)");
  cmd->add_option("--heartbeat-interval", flags->heartbeat_interval,
                  "How often to report to the server, e.g. 2s, 500ms")
      ->capture_default_str();
  cmd->add_option("--sample-interval", flags->sample_interval, "How often to read the GPUs")
      ->capture_default_str();
  cmd->add_option("--notice-timeout", flags->notice_timeout,
                  "How long a job may take to checkpoint after a preemption notice")
      ->capture_default_str();
  cmd->add_option("--grace-period", flags->grace_period, "From SIGTERM to SIGKILL")
      ->capture_default_str();
  cmd->add_option("--notice-signal", flags->notice_signal,
                  "The signal that gives notice: USR1, USR2, INT, HUP, TERM, URG or WINCH")
      ->capture_default_str();
  cmd->add_option("--cgroups", flags->cgroups,
                  "A cgroup per task, killed whole when the task stops, with its CPU and memory "
                  "limits where those controllers are delegated: auto (the agent's cgroup v2 "
                  "group, wherever cgroup2 is mounted), none, or a cgroup v2 folder to make the "
                  "tasks' groups in")
      ->capture_default_str();
  cmd->add_option("--task-uids", flags->task_uids,
                  "The uids jobs' tasks run as, one per job on this node (gid the same number); "
                  "keep the range free of other users, and the same on nodes that share "
                  "--checkpoint-root")
      ->capture_default_str();
  cmd->add_flag("--allow-shared-node-without-isolation", flags->allow_shared_node,
                "Run tasks of several tenants at once even when the agent cannot isolate them "
                "(no uid switch, or neither a cgroup nor PID namespaces); without it such a node "
                "runs one tenant's tasks at a time");
  cmd->add_option("--log-quota-mib", flags->log_quota_mib,
                  "Total size of the task logs kept under <state-dir>/logs; past it the logs of "
                  "finished tasks (already shipped to the server) are removed, oldest first")
      ->capture_default_str();
  cmd->footer(
      "Isolation: each job runs as its own uid from --task-uids, in PID and mount namespaces of "
      "its own (a fresh /proc: other jobs' processes are invisible), each task in a cgroup of its "
      "own that is killed whole when the task stops; run, log and checkpoint folders are 0700, "
      "logs and tasks.json 0600. The agent needs root, or the capabilities CAP_SETUID and "
      "CAP_SETGID (uids), CAP_SYS_ADMIN (namespaces, mounting /proc), CAP_KILL, CAP_CHOWN, "
      "CAP_FOWNER and CAP_DAC_OVERRIDE (the folders), and a cgroup v2 subtree it may write "
      "(systemd Delegate=yes; with no cpu and memory controllers delegated the tasks are still "
      "grouped and killed, without limits). Without the uid switch tasks run as the agent. "
      "Without the uid switch, or with neither a cgroup nor namespaces, the node runs one "
      "tenant's tasks at a time (see --allow-shared-node-without-isolation). A --token-file "
      "that group or others may read is refused.");
  cmd->add_flag("--stop-tasks-on-exit", flags->stop_tasks_on_exit,
                "On SIGTERM, stop the tasks (notice, checkpoint, SIGTERM) before exiting; "
                "without it they keep running and the next agent takes them back");
  int exit_code = 0;
  cmd->callback([&] { exit_code = tidepool::run_agent(*flags); });
  try {
    app.parse(tidepool::external_program_args(argc, argv, "agent"));
  } catch (const CLI::ParseError& e) {
    return tidepool::usage_exit_status(app.exit(e));
  }
  return exit_code;
}
