// The job spec: what a user submits (`tidepool submit job.yaml`, POST /v1/jobs), as YAML or JSON
// with the same fields. Parsing checks every field and returns the first problem as an Error whose
// field is the spec's key path ("topology.within", "env.PATH", "command[3]") and whose reason says
// what is wrong and what is allowed ("tasks: 0 is out of range 1..100000"). Nothing here knows the
// cluster or the tenants: whether the tenant, queue and GPU models exist is checked by the server.
//
//   name: resnet-50            # required, 1..63 of [A-Za-z0-9._-], starting alphanumeric
//   tenant: vision             # required (same rule as name)
//   queue: default             # optional, default "default" (same rule as name)
//   class: training            # training | inference | dev | batch (default training)
//   priority: 0                # integer in [-1000000, 1000000] (default 0)
//   tasks: 4                   # 1..100000 (default 1)
//   gpus_per_task: 8           # 0..16 (default 1)
//   gpu_milli: 1000            # share of each GPU, 1..1000 (default 1000); < 1000 only with
//                              #   tasks: 1 and gpus_per_task: 1
//   mig_profile: 3g.40gb       # optional: the task takes one MIG instance of one GPU
//                              #   (core/mig.h: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb,
//                              #   7g.80gb); only with tasks: 1 and gpus_per_task: 1, without
//                              #   gpu_milli, and gpu_model only of models that can be
//                              #   partitioned (A100, H100)
//   gpu_model: [H100, A100]    # accepted models (a list of names, or one name; no repeats; at
//                              #   most 64); default any
//   cpu_milli_per_task: 8000   # 0..10^9 (default 0)
//   memory_mib_per_task: 65536 # 0..2^30, i.e. up to 1 PiB (default 0)
//   topology: {within: node, mode: required}   # within: nvlink|node|leaf|spine (default spine),
//                                              # mode: required|preferred (default preferred)
//   runtime_estimate: 6h       # durations: "90s", "30m", "6h", "2d", "1h30m", or integer seconds;
//                              #   more than 0, at most 10 years; optional
//   max_runtime: 12h           # optional; >= runtime_estimate when both are given
//   max_cost: 250              # optional: the most the job may be charged (the internal market's
//                              #   currency; up to 6 decimals, as a number or a string); a job
//                              #   charged that much is stopped like one past max_runtime
//   preemptible: true          # default true
//   checkpoint_interval: 30m   # optional; absent: the job does not checkpoint
//   command: [python, train.py]  # list of strings; a new job needs one (check_runnable)
//   working_dir: /data/resnet  # absolute path where the tasks start (default: each task's own
//                              #   folder on its node)
//   env: {EPOCHS: "90"}        # map string -> string (keys: [A-Za-z_][A-Za-z0-9_]*)
//   labels: {team: ranking}    # map string -> string (keys: names, as for name)
//   array: 0-99                # a job array: one job per index (ranges and lists: "0-9,20-29"),
//                              #   each with TIDEPOOL_ARRAY_INDEX and TIDEPOOL_ARRAY_JOB_ID (the
//                              #   first job's id) in its env; indexes 0..1000000, at most 10000
//   after_ok: [41, 42]         # job ids: it starts only once each of them has succeeded, and is
//                              #   cancelled if one fails or is cancelled (Slurm's afterok); at
//                              #   most 100, no repeats; each must exist when it is submitted
//   model_flops_per_step: 4.2e16  # optional: the model FLOPs one step of the whole job does
//                              #   (e.g. 6 x parameters x tokens per step), a number > 0 and at
//                              #   most 1e30, integer or not (1e21 does not fit an integer); with
//                              #   the steps the job reports (api/step_report.h) and the peak of
//                              #   its GPUs it gives the job's MFU (core/step_stats.h)
//   kind: job                  # job (default) or service: an inference service whose replicas
//                              #   are this spec's one task, with a `service` block
//                              #   (api/service_spec.h: replicas, target, autoscaling, spread,
//                              #   metrics)
//
// Numbers are JSON integers (YAML: plain integers); 1.5, 4.0 or "4" are refused where an integer is
// expected, and an integer or true is refused where a string is expected (quote it in YAML). A
// null value (YAML: a key with nothing after it) is the same as leaving the key out. Strings are
// valid UTF-8 without NUL characters.
//
// Unknown keys are errors (a misspelt key would otherwise be silently ignored), and so are keys
// given twice. Limits keep one spec small: at most 256 command words, 256 env entries, 64 labels,
// 4 KiB per string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/service_spec.h"
#include "config/duration_text.h"
#include "core/duration_format.h"
#include "core/error.h"
#include "core/gang_placement.h"
#include "core/gpu_model.h"
#include "core/ids.h"
#include "core/job.h"
#include "core/mig.h"
#include "core/money.h"
#include "core/resources.h"

namespace tidepool {

enum class BodyFormat : std::uint8_t { kJson, kYaml };

// Limits of a job spec (see the file comment).
inline constexpr std::size_t kMaxNameLength = 63;
inline constexpr std::size_t kMaxCommandWords = 256;
inline constexpr std::size_t kMaxEnvEntries = 256;
inline constexpr std::size_t kMaxLabels = 64;
inline constexpr std::size_t kMaxJobGpuModels = 64;
inline constexpr std::size_t kMaxDependencies = 100;
inline constexpr std::int64_t kMaxArrayIndex = 1'000'000;
inline constexpr std::size_t kMaxArrayJobs = 10'000;
inline constexpr std::int64_t kMaxCpuMilliPerTask = 1'000'000'000;
inline constexpr std::int64_t kMaxMemoryMibPerTask = std::int64_t{1} << 30;
inline constexpr double kMaxModelFlopsPerStep = 1e30;
// The deepest nesting of maps and lists parse_body accepts.
inline constexpr int kMaxBodyDepth = 32;

struct JobSpec {
  std::string name;
  std::string tenant;
  std::string queue = "default";
  JobClass job_class = JobClass::kTraining;
  int priority = 0;
  int tasks = 1;
  int gpus_per_task = 1;
  int gpu_milli = 1000;                   // left at 1000 with mig_profile
  std::optional<MigProfile> mig_profile;  // one MIG instance of one GPU rather than gpu_milli
  std::vector<std::string> gpu_models;    // empty: any
  std::int64_t cpu_milli_per_task = 0;
  std::int64_t memory_mib_per_task = 0;
  TopologyRequirement topology;
  std::optional<Seconds> runtime_estimate;
  std::optional<Seconds> max_runtime;
  std::optional<Micros> max_cost;
  bool preemptible = true;
  std::optional<Seconds> checkpoint_interval;
  std::vector<std::string> command;
  std::string working_dir;  // empty: the agent's folder for the task
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> labels;
  std::vector<std::int64_t> after_ok;  // job ids, in the order given
  std::string array;                   // the indexes of a job array as written; empty: one job
  std::optional<double> model_flops_per_step;  // FLOPs, > 0 and <= kMaxModelFlopsPerStep
  std::optional<ServiceSpec> service;          // kind: service

  // Field by field. (Not defaulted: TopologyRequirement has no operator==.)
  friend bool operator==(const JobSpec&, const JobSpec&);
};

// Parses a request body into a JSON value: JSON as is; YAML (one document) converted, plain
// scalars typed as the YAML 1.2 core schema does (true/false, null/~, integers, also 0x and 0o;
// floats; anything else a string), quoted scalars (and those tagged !!str) always strings. Keys
// given twice in one map, bodies nested deeper than kMaxBodyDepth maps and lists, and in YAML
// aliases (*name), other tags, non-string keys, a second document and text that is not UTF-8 are
// refused. An empty body (only white space, or in YAML only comments) is null. Errors name the
// field "body" (or the key path of a repeated key) and, for YAML, the line and column. Never
// throws.
Result<nlohmann::json> parse_body(std::string_view body, BodyFormat format);

// The indexes of an `array` text ("0-9,20,30-31"), ascending; an Error (field "array") for a
// malformed item, a range that ends before it starts, an index out of 0..kMaxArrayIndex, one
// given twice, or more than kMaxArrayJobs of them.
Result<std::vector<std::int64_t>> parse_array_indexes(std::string_view text);

// Reads a job spec from a parsed body (see the file comment).
Result<JobSpec> job_spec_from_json(const nlohmann::json& value);

// What a new job needs beyond a well-formed spec (POST /v1/jobs; stored jobs are not checked
// again): a command whose first word, the program, is not empty. A job without one would be
// placed and could never start.
Result<void> check_runnable(const JobSpec& spec);

// parse_body, then job_spec_from_json.
Result<JobSpec> parse_job_spec(std::string_view body, BodyFormat format);

// The spec as JSON, every field written (durations as strings such as "1h30m", absent ones as
// null), except after_ok, array, model_flops_per_step, kind and service only when given, and
// mig_profile in place of
// gpu_milli for a MIG task; reading it back with job_spec_from_json gives an equal spec, for any
// spec that job_spec_from_json returned.
nlohmann::json job_spec_to_json(const JobSpec& spec);

// The spec's name of a field the core names ("task_count" -> "tasks", "gpu_count" ->
// "gpus_per_task", ...); other names unchanged.
std::string spec_field(const std::string& core_field);

// What a task of `spec` takes of each of its GPUs, in milli-GPUs, as quotas, the meter and the
// views count it: 0 without GPUs, the instance's share for a MIG profile (core/mig.h), else
// gpu_milli.
[[nodiscard]] std::int64_t task_gpu_milli(const JobSpec& spec);

// The core job (core/job.h) of `spec`, with what the caller resolved: its id, tenant, queue and
// submit time. GPU models are looked up by name in `models` (one it lacks fails naming
// "gpu_model[i]", with the models it has); the task shape and the job are checked by the core,
// errors naming the spec's fields (spec_field).
Result<Job> core_job_of(const JobSpec& spec, JobId id, TenantId tenant, QueueId queue,
                        Seconds submit_time, const GpuModelCatalog& models);

// Whether `name` is a valid name for jobs, tenants, queues and nodes (see the file comment); the
// reason why not otherwise (the Error's field is empty: the caller knows which field it read).
Result<void> check_name(std::string_view name);

// Whether `key` may name a variable of a job's env: letters, digits and '_', not starting with a
// digit.
bool valid_env_name(std::string_view key);

// A job's command as a body holds it: a list of at most kMaxCommandWords strings, each of at most
// body_fields::kMaxTextBytes bytes. Read for job specs and for the agent's assignments
// (agent_wire.h); `path` names the value in errors.
Result<std::vector<std::string>> read_job_command(const nlohmann::json& value,
                                                  const std::string& path);
// A job's env as a body holds it: a map of at most kMaxEnvEntries strings of at most
// body_fields::kMaxTextBytes bytes, each key a name valid_env_name accepts.
Result<std::map<std::string, std::string>> read_job_env(const nlohmann::json& value,
                                                        const std::string& path);

}  // namespace tidepool
