// tidepool submit, jobs, job, why, logs, checkpoint.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "api/agent_wire.h"
#include "api/job_spec.h"
#include "cli/client_commands.h"
#include "cli/client_config.h"
#include "cli/client_session.h"
#include "cli/client_views.h"
#include "cli/time_text.h"
#include "config/yaml_reader.h"

namespace tidepool {
namespace {

// --- submit ---

struct SubmitFlags {
  ClientFlags client;
  std::vector<std::string> files;
  bool parsable = false;
  std::string idempotency_key;
  std::vector<std::int64_t> after_ok;  // added to each spec's after_ok
  std::string array;                   // replaces each spec's array
};

Result<std::string> read_spec(const std::string& file) {
  if (file != "-") return read_file_text(file);
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad()) return fail("-", "cannot read the standard input");
  return text;
}

// By the file's extension; else by its first character, as the server guesses.
std::string spec_content_type(const std::string& file, const std::string& text) {
  if (file.ends_with(".json")) return "application/json";
  if (file.ends_with(".yaml") || file.ends_with(".yml")) return "application/yaml";
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    return "application/json";
  }
  return "application/yaml";
}

// `error` about the spec in `file` ("-": the standard input), its field prefixed by the file.
Error in_file(const std::string& file, const Error& error) {
  const std::string where = file == "-" ? "<stdin>" : file;
  return Error{error.field.empty() ? where : where + ": " + error.field, error.reason};
}

// The spec with the command line's additions, as JSON: --after-ok added to its after_ok (sbatch
// --dependency=afterok:...), --array for its array (sbatch --array).
Result<std::string> with_flags(const std::string& text, const std::string& content_type,
                               const SubmitFlags& flags) {
  auto value =
      parse_body(text, content_type == "application/json" ? BodyFormat::kJson : BodyFormat::kYaml);
  if (!value) return std::unexpected(value.error());
  if (!value->is_object()) return fail("", "a job spec is a map of its fields");
  if (!flags.after_ok.empty()) {
    nlohmann::json& ids = (*value)["after_ok"];
    if (!ids.is_array()) ids = nlohmann::json::array();
    for (std::int64_t id : flags.after_ok) {
      if (std::ranges::find(ids, nlohmann::json(id)) == ids.end()) ids.push_back(id);
    }
  }
  if (!flags.array.empty()) (*value)["array"] = flags.array;
  return value->dump();
}

Result<void> submit(const SubmitFlags& flags) {
  if (!flags.idempotency_key.empty() && flags.files.size() > 1) {
    return fail("--idempotency-key", "one key names one submission: give a single FILE with it");
  }
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  const OutputFormat format = output_format(flags.client);
  nlohmann::json submitted = nlohmann::json::array();
  bool failed = false;
  for (const std::string& file : flags.files) {
    auto text = read_spec(file);
    if (!text) {
      print_error(text.error());
      failed = true;
      continue;
    }
    const std::string key = flags.idempotency_key.empty() ? random_uuid() : flags.idempotency_key;
    std::string content_type = spec_content_type(file, *text);
    if (!flags.after_ok.empty() || !flags.array.empty()) {
      auto merged = with_flags(*text, content_type, flags);
      if (!merged) {
        print_error(in_file(file, merged.error()));
        failed = true;
        continue;
      }
      *text = std::move(*merged);
      content_type = "application/json";
    }
    auto reply = client->post_raw("/v1/jobs", *text, content_type, {{"Idempotency-Key", key}});
    if (!reply) {
      const Error& e = reply.error();
      if (is_connection_error(e)) return std::unexpected(e);
      print_error(in_file(file, e));
      failed = true;
      continue;
    }
    const auto id = reply->body.at("id").get<std::int64_t>();
    // An array: its jobs' ids, in a row from the first.
    std::vector<std::int64_t> ids = {id};
    if (auto array = reply->body.find("array"); array != reply->body.end()) {
      ids = array->at("jobs").get<std::vector<std::int64_t>>();
    }
    const std::string what = ids.size() > 1 ? fmt::format("array job {} ({} jobs, {}..{})", id,
                                                          ids.size(), ids.front(), ids.back())
                                            : fmt::format("job {}", id);
    if (is_document(format)) {
      submitted.push_back(reply->body);
    } else if (format == OutputFormat::kName) {
      for (std::int64_t member : ids) fmt::print("job/{}\n", member);
    } else if (flags.parsable) {
      fmt::print("{}\n", id);
    } else if (reply->status == 200) {
      std::string said = what;
      said[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(said[0])));
      fmt::print("{} was already submitted with idempotency key {}\n", said, key);
    } else {
      fmt::print("Submitted {}\n", what);
    }
  }
  if (is_document(format) && !submitted.empty()) {
    write_document(submitted.size() == 1 ? submitted[0] : submitted, format, std::cout);
  }
  if (failed) {
    if (flags.files.size() == 1) return std::unexpected(already_reported());
    return fail("", "some jobs were not submitted");
  }
  return {};
}

// --- jobs ---

struct JobsFlags {
  ClientFlags client;
  bool all = false;
  std::string state;
  std::string tenant;
  std::string queue;
  std::string node;
  std::string since;
  std::string until;
  std::size_t limit = 0;
};

Result<void> list_jobs(const JobsFlags& flags) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  std::string state = flags.state;
  // A window is job history (sacct): every state unless --state says.
  const bool history = !flags.since.empty() || !flags.until.empty();
  if (state.empty() && !flags.all && !history) state = "pending,running";
  QueryParams params = {
      {"tenant", flags.tenant}, {"queue", flags.queue}, {"state", state}, {"node", flags.node}};
  const std::int64_t now = wall_clock_ms();
  for (auto [field, name, text] : {std::tuple{"--since", "since_ms", &flags.since},
                                   std::tuple{"--until", "until_ms", &flags.until}}) {
    if (text->empty()) continue;
    auto at = parse_time_point(*text, now, field);
    if (!at) return std::unexpected(at.error());
    if (*at <= 0) return fail(field, fmt::format("'{}' is before 1970", *text));
    params.emplace_back(name, std::to_string(*at));
  }
  auto reply = client->get_jobs(params, flags.limit);
  if (!reply) return std::unexpected(reply.error());
  const nlohmann::json& jobs = reply->at("jobs");
  const OutputFormat format = output_format(flags.client);
  if (is_document(format)) {
    write_document(*reply, format, std::cout);
    return {};
  }
  // The pending reason of each pending job, as squeue's REASON column.
  std::map<std::int64_t, std::string> kinds;
  for (const nlohmann::json& job : jobs) {
    if (auto pending = job.find("pending"); pending != job.end() && pending->contains("kind")) {
      kinds[job.at("id").get<std::int64_t>()] = pending->at("kind").get<std::string>();
    }
  }
  std::cout << render_listing(jobs_listing(jobs, kinds, wall_clock_ms()), format,
                              !flags.client.no_headers);
  return {};
}

// --- job, why ---

struct JobFlags {
  ClientFlags client;
  std::string id;
};

Result<void> show_job(const JobFlags& flags) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  auto job = client->get(job_path(flags.id));
  if (!job) return std::unexpected(job.error());
  const OutputFormat format = output_format(flags.client);
  if (is_document(format)) {
    write_document(*job, format, std::cout);
  } else {
    std::cout << render_job_details(*job, wall_clock_ms());
  }
  return {};
}

// GETs the job's `part` ("/why", "/advice") and prints it: the reply as it is for -o json|yaml,
// else as `render` writes it.
Result<void> show_job_part(const JobFlags& flags, std::string_view part,
                           std::string (*render)(const nlohmann::json&)) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  auto reply = client->get(job_path(flags.id) + std::string(part));
  if (!reply) return std::unexpected(reply.error());
  const OutputFormat format = output_format(flags.client);
  if (is_document(format)) {
    write_document(*reply, format, std::cout);
  } else {
    std::cout << render(*reply);
  }
  return {};
}

Result<void> why_job(const JobFlags& flags) { return show_job_part(flags, "/why", render_why); }

Result<void> advise_job(const JobFlags& flags) {
  return show_job_part(flags, "/advice", render_advice);
}

// --- logs ---

struct LogsFlags {
  ClientFlags client;
  std::string id;
  int task = 0;
  std::int64_t run = -1;  // -1: every run, one after another
  bool follow = false;
  std::int64_t tail = -1;  // -1: from the start
};

// logs -f polls this often; once the job has ended it goes on for kEndGrace, several of the
// agents' shipping intervals (1 s by default), for the output of the tasks' last moments.
constexpr std::chrono::milliseconds kFollowInterval{250};
constexpr std::chrono::milliseconds kEndGrace{3000};

// A run's log as the server lists it; run -1: the task's whole log (a server that does not
// list runs).
struct ListedRun {
  std::int64_t run = 0;
  std::int64_t size = 0;
};

struct LogRead {
  std::string bytes;
  std::int64_t size = 0;        // of what was read from: the run's log, or all of them
  std::vector<ListedRun> runs;  // the task's runs with a log, in run order
};

// "1:2048,2:512" (X-Tidepool-Log-Runs); nullopt when it is not that.
std::optional<std::vector<ListedRun>> parse_listed_runs(std::string_view text) {
  std::vector<ListedRun> runs;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    ListedRun r;
    const auto number = [](std::string_view digits, std::int64_t& out) {
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
      return ec == std::errc() && end == digits.data() + digits.size() && out >= 0;
    };
    if (!number(item.substr(0, colon), r.run) || !number(item.substr(colon + 1), r.size)) {
      return std::nullopt;
    }
    runs.push_back(r);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return runs;
}

// One GET of run `run`'s log (-1: all runs one after another) from `offset`, at most `limit`
// bytes when given.
Result<LogRead> read_log(ApiClient& client, const LogsFlags& flags, std::int64_t run,
                         std::int64_t offset, std::optional<std::int64_t> limit) {
  QueryParams params = {{"task", std::to_string(flags.task)}, {"offset", std::to_string(offset)}};
  if (run >= 0) params.emplace_back("run", std::to_string(run));
  if (limit) params.emplace_back("limit", std::to_string(*limit));
  auto reply = client.get_text(job_path(flags.id) + "/logs", params);
  if (!reply) return std::unexpected(reply.error());
  const std::string* size_text = reply->header("X-Tidepool-Log-Size");
  LogRead read;
  if (size_text == nullptr ||
      std::from_chars(size_text->data(), size_text->data() + size_text->size(), read.size).ec !=
          std::errc()) {
    return fail("", fmt::format("the server at {} sent the log without its size "
                                "(X-Tidepool-Log-Size); are the client and the server the same "
                                "version?",
                                client.server()));
  }
  read.bytes = std::move(reply->body);
  const std::string* runs_text = reply->header("X-Tidepool-Log-Runs");
  auto runs = runs_text != nullptr ? parse_listed_runs(*runs_text) : std::nullopt;
  if (runs) {
    read.runs = std::move(*runs);
  } else if (run < 0 && read.size > 0) {
    read.runs = {ListedRun{-1, read.size}};  // a server that keeps one log per task
  }
  if (flags.run >= 0) {
    std::erase_if(read.runs, [&](const ListedRun& r) { return r.run != flags.run; });
  }
  return read;
}

bool has_ended(const nlohmann::json& job) {
  const auto state = job.at("state").get<std::string>();
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

Result<void> show_logs(const LogsFlags& flags) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  auto listed = read_log(*client, flags, -1, 0, 0);
  if (!listed) return std::unexpected(listed.error());
  std::vector<ListedRun> runs = std::move(listed->runs);
  // Where the next byte is: the run (an index in runs) and the offset in its log.
  std::size_t at = 0;
  std::int64_t offset = 0;
  if (flags.tail >= 0) {
    std::int64_t whole = 0;
    for (const ListedRun& r : runs) whole += r.size;
    std::int64_t skip = std::max<std::int64_t>(0, whole - flags.tail);
    while (at < runs.size() && skip >= runs[at].size && at + 1 < runs.size()) {
      skip -= runs[at].size;
      ++at;
    }
    offset = skip;
  }
  bool ended = false;
  std::chrono::steady_clock::time_point ended_at;
  while (true) {
    if (at < runs.size()) {
      auto chunk = read_log(*client, flags, runs[at].run, offset, std::nullopt);
      if (!chunk) return std::unexpected(chunk.error());
      if (!chunk->runs.empty()) runs = std::move(chunk->runs);
      if (!chunk->bytes.empty()) {
        std::fwrite(chunk->bytes.data(), 1, chunk->bytes.size(), stdout);
        if (!flush_stdout()) return {};
        offset += static_cast<std::int64_t>(chunk->bytes.size());
        continue;  // until a read brings nothing: more may be stored than one reply carries
      }
      if (at + 1 < runs.size()) {
        // This run's log is read to its end and a later run has one: on to it (a stopped run's
        // last bytes arrive before its node reports it stopped, so none are left behind).
        ++at;
        offset = 0;
        continue;
      }
    }
    if (!flags.follow) return {};
    // The agents ship the last output of a stopped task after the job ended (a cancelled job's
    // tasks are stopped after the server ended it): stop at the first poll that brings nothing
    // once kEndGrace has passed since the end was seen.
    if (ended && std::chrono::steady_clock::now() - ended_at >= kEndGrace) return {};
    if (!ended) {
      auto job = client->get(job_path(flags.id));
      if (!job) return std::unexpected(job.error());
      ended = has_ended(*job);
      ended_at = std::chrono::steady_clock::now();
    }
    std::this_thread::sleep_for(kFollowInterval);
    if (at >= runs.size()) {
      auto now = read_log(*client, flags, -1, 0, 0);
      if (!now) return std::unexpected(now.error());
      runs = std::move(now->runs);
    }
  }
}

// --- checkpoint ---

struct CheckpointFlags {
  ClientFlags client;
  std::string job;         // empty: $TIDEPOOL_JOB_ID
  std::int64_t step = -1;  // -1: not given
  std::string path;        // empty: not given
  std::string note;
};

Result<std::int64_t> parse_job_id(const std::string& text, const std::string& field) {
  std::int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id <= 0) {
    return fail(field, fmt::format("'{}' is not a job id", text));
  }
  return id;
}

// Appends `line` to the file at `path` in one write(), so that lines of concurrent writers (the
// tasks of one job on a node) never interleave.
Result<void> append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return fail("TIDEPOOL_CHECKPOINT_REPORT",
                fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  }
  ssize_t written = 0;
  do {
    written = ::write(fd, line.data(), line.size());
  } while (written < 0 && errno == EINTR);
  const int write_error = errno;
  const bool closed = ::close(fd) == 0;
  if (written != static_cast<ssize_t>(line.size()) || !closed) {
    return fail("TIDEPOOL_CHECKPOINT_REPORT",
                fmt::format("cannot write the checkpoint report to '{}': {}", path,
                            written < 0 ? std::strerror(write_error) : "short write"));
  }
  return {};
}

Result<void> report_checkpoint(const CheckpointFlags& flags) {
  const EnvLookup env = process_environment();
  std::string id_text = flags.job;
  std::string id_field = "--job";
  if (id_text.empty()) {
    id_text = env("TIDEPOOL_JOB_ID").value_or("");
    id_field = "TIDEPOOL_JOB_ID";
  }
  if (id_text.empty()) {
    return fail("--job", "which job? give --job ID (inside a task, TIDEPOOL_JOB_ID says it)");
  }
  auto id = parse_job_id(id_text, id_field);
  if (!id) return std::unexpected(id.error());
  const CheckpointReport report{.step = flags.step >= 0 ? std::optional(flags.step) : std::nullopt,
                                .path = flags.path,
                                .note = flags.note,
                                .run = std::nullopt};
  const nlohmann::json body = checkpoint_report_to_json(report);
  // The server's own rules, so that a report the agent would forward is not refused there.
  if (auto valid = checkpoint_report_from_json(body); !valid) {
    const Error& e = valid.error();
    return fail(e.field.empty() ? "" : "--" + e.field, e.reason);
  }
  if (auto report_file = env("TIDEPOOL_CHECKPOINT_REPORT")) {
    nlohmann::ordered_json line = {{"job", *id}};
    if (flags.step >= 0) line["step"] = flags.step;
    if (!flags.path.empty()) line["path"] = flags.path;
    if (!flags.note.empty()) line["note"] = flags.note;
    line["at_ms"] = wall_clock_ms();
    return append_line(*report_file, line.dump() + "\n");
  }
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  auto job = client->post(job_path(std::to_string(*id)) + "/checkpoint", body);
  if (!job) return std::unexpected(job.error());
  std::string what;
  if (flags.step >= 0) what += fmt::format(", step {}", flags.step);
  if (!flags.path.empty()) what += ", " + flags.path;
  fmt::print("Recorded a checkpoint of job {}{}\n", *id, what);
  return {};
}

}  // namespace

void add_job_commands(CLI::App& app, int* exit_code) {
  {
    auto flags = std::make_shared<SubmitFlags>();
    CLI::App* cmd = app.add_subcommand("submit", "Submit jobs from spec files (like sbatch)");
    cmd->add_option("FILE", flags->files,
                    "Job spec, YAML or JSON (fields: src/api/job_spec.h; examples in "
                    "data/examples); - reads the standard input")
        ->required();
    cmd->add_flag("--parsable", flags->parsable, "Print only the job id of each submitted job");
    cmd->add_option("--after-ok", flags->after_ok,
                    "Start only once these jobs have succeeded, and be cancelled if one fails "
                    "(comma-separated ids; added to the spec's after_ok; sbatch -d afterok:ID)")
        ->delimiter(',')
        ->check(CLI::PositiveNumber);
    cmd->add_option("--array", flags->array,
                    "A job array: one job per index, e.g. 0-99 or 1,3,5-7, each with "
                    "$TIDEPOOL_ARRAY_INDEX (replaces the spec's array; sbatch --array)");
    cmd->add_option("--idempotency-key", flags->idempotency_key,
                    "Key that makes resubmitting the same spec return the first job instead of a "
                    "new one (default: a random UUID per submission)");
    add_client_flags(*cmd, flags->client, kNamedFormats);
    cmd->footer(
        "Examples:\n"
        "  tidepool submit data/examples/train-resnet.yaml\n"
        "  tidepool submit --parsable job.json          # prints only the id, for scripts\n"
        "  tidepool submit --after-ok 41,42 eval.yaml   # once jobs 41 and 42 have succeeded\n"
        "  tidepool submit --array 0-99 sweep.yaml      # 100 jobs, $TIDEPOOL_ARRAY_INDEX 0..99\n"
        "  generate-spec | tidepool submit -\n"
        "  tidepool submit --idempotency-key nightly-2024-05-01 job.yaml   # safe to retry\n\n" +
        connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return submit(*flags); }); });
  }
  {
    auto flags = std::make_shared<JobsFlags>();
    CLI::App* cmd = app.add_subcommand(
        "jobs", "List jobs (like squeue): pending and running ones unless --all or --state");
    cmd->add_flag("-a,--all", flags->all, "Jobs in every state, ended ones too");
    cmd->add_option("--state", flags->state,
                    "Only these states, comma-separated: pending, running, succeeded, failed, "
                    "cancelled")
        ->excludes("--all");
    cmd->add_option("--tenant", flags->tenant, "Only this tenant's jobs");
    cmd->add_option("--queue", flags->queue, "Only jobs of this queue");
    cmd->add_option("--node", flags->node, "Only jobs running on this node");
    cmd->add_option("--since", flags->since,
                    "Job history: jobs not ended before this time (2h, now-30m, 2026-12-01, "
                    "2026-12-01T13:30; local time, Z for UTC), in every state unless --state");
    cmd->add_option("--until", flags->until,
                    "Job history: jobs submitted at or before this time (same forms as --since)");
    cmd->add_option("--limit", flags->limit, "At most this many jobs, the newest")
        ->check(CLI::Range(1, 1'000'000));
    add_client_flags(*cmd, flags->client, kListingFormats);
    cmd->footer(
        "Columns: AGE is the time since submission, TIME the time run; REASON says why a pending "
        "job waits (see `tidepool why ID`) or how an ended one ended.\n\n"
        "Examples:\n"
        "  tidepool jobs\n"
        "  tidepool jobs --tenant vision --state pending\n"
        "  tidepool jobs --all --limit 20 -o json\n"
        "  tidepool jobs --since 2026-12-01 --until 2026-12-02 --state failed   (history)\n"
        "  tidepool jobs --since 24h --tenant vision -o csv\n\n" +
        connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return list_jobs(*flags); }); });
  }
  {
    auto flags = std::make_shared<JobFlags>();
    CLI::App* cmd =
        app.add_subcommand("job", "Show one job: its spec, state transitions and placement");
    cmd->add_option("ID", flags->id, "Job id")->required();
    add_client_flags(*cmd, flags->client, kDocumentFormats);
    cmd->footer("Examples:\n  tidepool job 42\n  tidepool job 42 -o yaml\n\n" + connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return show_job(*flags); }); });
  }
  {
    auto flags = std::make_shared<JobFlags>();
    CLI::App* cmd = app.add_subcommand(
        "why",
        "Why a job is pending (the reason, and how long it waited for each), or where it runs");
    cmd->add_option("ID", flags->id, "Job id")->required();
    add_client_flags(*cmd, flags->client, kDocumentFormats);
    cmd->footer(
        "Reasons: quota (its tenant's guarantee and borrowing limits refuse it), capacity "
        "(fewer free GPUs of the models it accepts than it needs), topology (enough free GPUs, "
        "but not within the level it requires), reservation (it would delay the reserved start "
        "of an earlier job), head-of-line (strict FIFO: behind the first job of its queue), "
        "window (capacity kept for another job class by a tidal window), not-considered "
        "(submitted after the last scheduling pass).\n\n"
        "Example:\n  tidepool why 42\n\n" +
        connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return why_job(*flags); }); });
  }
  {
    auto flags = std::make_shared<JobFlags>();
    CLI::App* cmd = app.add_subcommand(
        "advise", "What a job could change to run faster or waste less, with the numbers");
    cmd->add_option("ID", flags->id, "Job id")->required();
    add_client_flags(*cmd, flags->client, kDocumentFormats);
    cmd->footer(
        "From the step times the job reports (TIDEPOOL_STEP_REPORT, see docs/step-telemetry.md), "
        "where it runs and its GPUs' utilisation: gradient accumulation when its all-reduce is "
        "bandwidth-bound and takes more than 10% of a step (the micro-batches per all-reduce "
        "and the expected time per micro-batch), the compact placement it could have had and "
        "the slowdown it pays now, and GPUs it holds idle. With model_flops_per_step in its "
        "spec, the MFU it would reach.\n\n"
        "Examples:\n  tidepool advise 42\n  tidepool advise 42 -o json\n\n" +
        connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return advise_job(*flags); }); });
  }
  {
    auto flags = std::make_shared<LogsFlags>();
    CLI::App* cmd = app.add_subcommand(
        "logs", "Print a task's output (stdout and stderr, as its agent shipped it to the server)");
    cmd->add_option("ID", flags->id, "Job id")->required();
    cmd->add_option("--task", flags->task, "Task number, 0 to the job's tasks - 1")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()))
        ->capture_default_str();
    cmd->add_option("--run", flags->run,
                    "Only this run of the job (1 for its first start; `tidepool job ID` shows "
                    "its runs); default: every run, one after another")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{std::numeric_limits<int>::max()}));
    cmd->add_flag("-f,--follow", flags->follow,
                  "Keep printing new output until the job has ended, from one run to the next "
                  "when it is preempted and resumed (Ctrl-C stops)");
    cmd->add_option("--tail", flags->tail, "Start this many bytes before the end of the log")
        ->check(CLI::Range(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()));
    add_client_flags(*cmd, flags->client);
    cmd->footer(
        "The output is printed as it was written, bytes as they are. The agent ships a running "
        "task's output every second; it is kept on the server, so it can be read while the job "
        "runs, after it ended and after its node is gone. Each run (a start, or a resume after a "
        "preemption) has its own log.\n\n"
        "Examples:\n"
        "  tidepool logs 42\n"
        "  tidepool logs 42 --task 3 --follow\n"
        "  tidepool logs 42 --tail 4096\n\n" +
        connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return show_logs(*flags); }); });
  }
  {
    auto flags = std::make_shared<CheckpointFlags>();
    CLI::App* cmd = app.add_subcommand(
        "checkpoint", "Report that a job saved a checkpoint (run it from the job's tasks)");
    cmd->add_option("--job", flags->job, "Job id (default: $TIDEPOOL_JOB_ID, set in every task)");
    cmd->add_option("--step", flags->step, "Training step of the checkpoint (0 or more)")
        ->check(CLI::Range(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()));
    cmd->add_option("--path", flags->path,
                    "Where the checkpoint is; the job's next run gets it in TIDEPOOL_RESUME_FROM");
    cmd->add_option("--note", flags->note, "A few words about it, e.g. \"epoch 3\"");
    add_client_flags(*cmd, flags->client);
    cmd->footer(
        "Inside a task the agent sets TIDEPOOL_JOB_ID and TIDEPOOL_CHECKPOINT_REPORT: the report "
        "is then appended to that file as one JSON line, nothing is printed, and the agent "
        "forwards it to the server. Elsewhere it is sent to the server, with the token below.\n\n"
        "Examples:\n"
        "  tidepool checkpoint --step 1200 --path /ckpt/run-7/step-1200 --note \"epoch 3\"\n"
        "  tidepool checkpoint --job 42 --step 1200 --path s3://ckpt/42/1200\n\n" +
        connection_help());
    cmd->callback([flags, exit_code] {
      run_client_command(exit_code, [&] { return report_checkpoint(*flags); });
    });
  }
}

}  // namespace tidepool
