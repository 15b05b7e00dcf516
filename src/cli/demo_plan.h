// What `tidepool demo` sets up, decided before anything starts: the fake pool (nodes, leaves,
// GPUs), the files it writes (cluster, tenants, server configuration), the command lines of the
// server and the agents, and the workload read from the demo folder. Pure but for the functions
// that say they read files; nothing here starts a process (demo_processes.h does).
//
// The pool: nodes node-1..node-N with the same fake GPUs each, split over two leaf switches
// (leaf-1 gets the first ceil(N/2)) under one spine. Three tenants share it: vision (org research)
// is guaranteed half of the GPUs, ads (org products) three eighths, interns (products) the rest;
// the guarantees add up to the pool, so that every GPU a tenant borrows is the idle guarantee of
// another, which that one can reclaim.
//
// The workload: workload.txt in the demo folder lists "AT SPEC" lines (a duration such as 0s or
// 20s, and a spec file of that folder), submitted in file order, each AT after the agents are up;
// without workload.txt every *.yaml, *.yml and *.json file of the folder is submitted at once, in
// name order. In the spec files `${DEMO_DIR}` becomes the folder's absolute path (the agent does
// not expand variables: commands name the shipped scripts by absolute path) and
// `${DEMO_STEP_SECONDS}` the length of a step of the job scripts (1 s divided by --speed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job_spec.h"
#include "core/error.h"

namespace tidepool {

inline constexpr int kMaxDemoNodes = 64;
// --speed bounds, in thousandths: 0.1x .. 20x.
inline constexpr std::int64_t kMinDemoSpeedMilli = 100;
inline constexpr std::int64_t kMaxDemoSpeedMilli = 20'000;

// --gpus: "fake:COUNTxMODEL", e.g. fake:8xH100.
struct DemoGpus {
  int count = 8;
  std::string model = "H100";
};

// Parses --gpus; COUNT 1..kMaxGpusPerNode, MODEL a name ([A-Za-z0-9._-]). The demo runs fake
// GPUs only: anything but "fake:" is refused with a reason saying so.
Result<DemoGpus> parse_demo_gpus(std::string_view text);

// Parses --speed: a factor with up to 3 decimals ("2", "0.5"), in thousandths, within
// kMinDemoSpeedMilli..kMaxDemoSpeedMilli.
Result<std::int64_t> parse_demo_speed(std::string_view text);

// Parses --refresh: a duration ("2s", "1m") or milliseconds ("500ms"), 200 ms .. 1 h.
Result<std::int64_t> parse_refresh_ms(std::string_view text);

// `ms` milliseconds as seconds with up to 3 decimals, no trailing zeros: 1000 -> "1", 500 ->
// "0.5", 1250 -> "1.25" (what `sleep` takes).
std::string format_seconds(std::int64_t ms);

struct DemoNode {
  std::string name;   // node-1 ...
  std::string leaf;   // leaf-1 or leaf-2
  std::string spine;  // spine-1
};

struct DemoTenant {
  std::string name;
  std::string org;
  int guaranteed_gpus = 0;
};

struct DemoPool {
  std::vector<DemoNode> nodes;
  DemoGpus gpus;
  std::vector<DemoTenant> tenants;

  [[nodiscard]] int total_gpus() const { return static_cast<int>(nodes.size()) * gpus.count; }
};

// The pool of `node_count` nodes (1..kMaxDemoNodes) with `gpus` each.
Result<DemoPool> make_demo_pool(int node_count, const DemoGpus& gpus);

// The files the demo writes into its run folder.
std::string demo_cluster_yaml(const DemoPool& pool);
std::string demo_tenants_yaml(const DemoPool& pool);
// The server's configuration: listen on 127.0.0.1:0, the files above, the database, admin token
// file and task logs in `run_dir`, a tick of 1 s and a heartbeat timeout of 5 s.
std::string demo_server_yaml(const std::string& run_dir);

// Where the demo puts things in its run folder.
struct DemoPaths {
  std::string run_dir;
  [[nodiscard]] std::string file(std::string_view name) const;  // run_dir + "/" + name
  [[nodiscard]] std::string server_config() const { return file("server.yaml"); }
  [[nodiscard]] std::string port_file() const { return file("server.port"); }
  [[nodiscard]] std::string admin_token_file() const { return file("admin.token"); }
  [[nodiscard]] std::string server_log() const { return file("server.log"); }
  [[nodiscard]] std::string checkpoint_root() const { return file("checkpoints"); }
  [[nodiscard]] std::string load_generator_log() const { return file("load_generator.log"); }
  [[nodiscard]] std::string agent_state_dir(const std::string& node) const;
  [[nodiscard]] std::string agent_log(const std::string& node) const;
};

// argv of the server: PROGRAM server --config ... --port-file ...
std::vector<std::string> demo_server_command(const std::string& program, const DemoPaths& paths);

// argv of one node's agent: fake GPUs, address 127.0.0.1 (the nodes share this machine: a
// service's endpoints must be reachable here; the server gives replicas at one address ports of
// their own), its own state folder, the shared checkpoint root, a
// heartbeat every second, 5 s for a job to checkpoint on notice and 3 s from SIGTERM to SIGKILL
// (so that stopping an agent, which stops its tasks first, takes less than the demo's 10 s), no
// cgroup limits (the demo changes nothing of the machine) and --stop-tasks-on-exit.
std::vector<std::string> demo_agent_command(const std::string& program, const DemoPaths& paths,
                                            const DemoPool& pool, const DemoNode& node,
                                            const std::string& server_url,
                                            const std::string& token);

// argv as one shell-quoted line (words with characters other than [A-Za-z0-9_./:=,@%+-] in
// single quotes).
std::string shell_line(const std::vector<std::string>& argv);

// One submission of the workload.
struct DemoSubmission {
  std::int64_t at_ms = 0;  // after the agents are up, already divided by --speed
  std::string file;        // the spec file's absolute path
  JobSpec spec;            // parsed, placeholders substituted
};

// `text` with every ${DEMO_DIR} and ${DEMO_STEP_SECONDS} replaced; other text is kept as it is.
std::string substitute_demo_placeholders(std::string_view text, const std::string& demo_dir,
                                         const std::string& step_seconds);

// Parses the text of a workload.txt (see the file comment) into (at in seconds, file) pairs;
// errors name "<source>:<line>".
Result<std::vector<std::pair<std::int64_t, std::string>>> parse_workload(std::string_view text,
                                                                         const std::string& source);

// Reads the workload of `demo_dir` (an absolute path): the schedule, every spec file read,
// substituted and parsed. Errors name the file and the spec field. Reads files.
Result<std::vector<DemoSubmission>> load_demo_workload(const std::string& demo_dir,
                                                       std::int64_t speed_milli);

// --service: the demo's inference service, service.yaml of the demo folder (read, substituted
// and parsed like the workload; at_ms 0: submitted once every agent has registered), and the load
// the demo puts on it with load_generator.py of that folder.
inline constexpr const char* kDemoServiceFile = "service.yaml";
inline constexpr const char* kDemoLoadGenerator = "load_generator.py";

// Reads `demo_dir`/service.yaml; an error when it is missing or is not a kind: service spec.
Result<DemoSubmission> load_demo_service(const std::string& demo_dir, std::int64_t speed_milli);

// The load's steps for load_generator.py --steps: 5 requests/s for 20 s (one replica), 40/s for
// 60 s (about three), 5/s for 60 s (back down to one), the seconds divided by the speed (at least
// 1 s each): "5:20,40:60,5:60" at speed 1. The service's own windows do not scale with the speed.
std::string demo_load_steps(std::int64_t speed_milli);

// argv of the load generator: PYTHON DEMO_DIR/load_generator.py --service SERVICE_URL
// --token-file FILE --steps STEPS; `service_url` is that of GET /v1/services/{id}.
std::vector<std::string> demo_load_generator_command(const std::string& python,
                                                     const std::string& demo_dir,
                                                     const std::string& service_url,
                                                     const std::string& token_file,
                                                     const std::string& steps);

// Why a submission can never run on `pool` (a task needs more GPUs than a node has, or the job
// more than the pool), or nullopt.
std::optional<Error> demo_misfit(const DemoSubmission& submission, const DemoPool& pool);

// Where to look for the demo folder, in order, when --jobs is not given:
//   1. $TIDEPOOL_SOURCE_DIR/data/examples/demo, when that variable is set;
//   2. <folder of the executable>/../share/tidepool/examples/demo (installed by cmake --install,
//      e.g. /usr/bin/tidepool -> /usr/share/tidepool/examples/demo);
//   3. <the source tree this tidepool was built from>/data/examples/demo (a build tree).
// Empty entries are left out.
std::vector<std::string> demo_folder_candidates(const std::optional<std::string>& source_dir_env,
                                                const std::string& exe_dir,
                                                const std::string& built_source_dir);

// The first candidate that holds workload.txt (reads the file system); the error names every
// place looked at.
Result<std::string> find_demo_folder(const std::vector<std::string>& candidates);

}  // namespace tidepool
