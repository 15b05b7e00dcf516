// tidepool submit, jobs, job, cancel, why.
#include <fmt/format.h>

#include <iostream>
#include <iterator>
#include <map>
#include <memory>

#include "cli/client_commands.h"
#include "cli/client_session.h"
#include "cli/client_views.h"
#include "sim/yaml_reader.h"

namespace tidepool {
namespace {

std::string job_path(const std::string& id) { return "/v1/jobs/" + url_escape(id); }

// --- submit ---

struct SubmitFlags {
  ClientFlags client;
  std::vector<std::string> files;
  bool parsable = false;
  std::string idempotency_key;
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
    auto reply = client->post_raw("/v1/jobs", *text, spec_content_type(file, *text),
                                  {{"Idempotency-Key", key}});
    if (!reply) {
      const Error& e = reply.error();
      if (is_connection_error(e)) return std::unexpected(e);
      const std::string where = file == "-" ? "<stdin>" : file;
      print_error(Error{e.field.empty() ? where : where + ": " + e.field, e.reason});
      failed = true;
      continue;
    }
    const auto id = reply->body.at("id").get<std::int64_t>();
    if (format != OutputFormat::kTable) {
      submitted.push_back(reply->body);
    } else if (flags.parsable) {
      fmt::print("{}\n", id);
    } else if (reply->status == 200) {
      fmt::print("Job {} was already submitted with idempotency key {}\n", id, key);
    } else {
      fmt::print("Submitted job {}\n", id);
    }
  }
  if (format != OutputFormat::kTable && !submitted.empty()) {
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
  std::size_t limit = 0;
};

Result<void> list_jobs(const JobsFlags& flags) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  std::string state = flags.state;
  if (state.empty() && !flags.all) state = "pending,running";
  QueryParams params = {
      {"tenant", flags.tenant}, {"queue", flags.queue}, {"state", state}, {"node", flags.node}};
  if (flags.limit > 0) params.emplace_back("limit", std::to_string(flags.limit));
  auto reply = client->get("/v1/jobs", params);
  if (!reply) return std::unexpected(reply.error());
  const nlohmann::json& jobs = reply->at("jobs");
  const OutputFormat format = output_format(flags.client);
  if (format != OutputFormat::kTable) {
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
  std::cout << render_jobs_table(jobs, kinds, wall_clock_ms());
  return {};
}

// --- job, why, cancel ---

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
  if (format != OutputFormat::kTable) {
    write_document(*job, format, std::cout);
  } else {
    std::cout << render_job_details(*job, wall_clock_ms());
  }
  return {};
}

Result<void> why_job(const JobFlags& flags) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  auto why = client->get(job_path(flags.id) + "/why");
  if (!why) return std::unexpected(why.error());
  const OutputFormat format = output_format(flags.client);
  if (format != OutputFormat::kTable) {
    write_document(*why, format, std::cout);
  } else {
    std::cout << render_why(*why);
  }
  return {};
}

struct CancelFlags {
  ClientFlags client;
  std::vector<std::string> ids;
};

Result<void> cancel_jobs(const CancelFlags& flags) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  int failures = 0;
  for (const std::string& id : flags.ids) {
    auto job = client->del(job_path(id));
    if (!job) {
      if (is_connection_error(job.error())) return std::unexpected(job.error());
      print_error(job.error());
      ++failures;
      continue;
    }
    fmt::print("Cancelled job {}\n", job->at("id").get<std::int64_t>());
  }
  if (failures > 0) {
    if (flags.ids.size() == 1) return std::unexpected(already_reported());
    return fail("", fmt::format("{} of {} jobs not cancelled", failures, flags.ids.size()));
  }
  return {};
}

}  // namespace

void add_job_commands(CLI::App& app, int* exit_code) {
  {
    auto flags = std::make_shared<SubmitFlags>();
    CLI::App* cmd = app.add_subcommand("submit", "Submit jobs from spec files (like sbatch)");
    cmd->add_option("FILE", flags->files,
                    "Job spec, YAML or JSON (fields: src/server/job_spec.h; examples in "
                    "data/examples); - reads the standard input")
        ->required();
    cmd->add_flag("--parsable", flags->parsable, "Print only the job id of each submitted job");
    cmd->add_option("--idempotency-key", flags->idempotency_key,
                    "Key that makes resubmitting the same spec return the first job instead of a "
                    "new one (default: a random UUID per submission)");
    add_client_flags(*cmd, flags->client, true);
    cmd->footer(
        "Examples:\n"
        "  tidepool submit data/examples/train-resnet.yaml\n"
        "  tidepool submit --parsable job.json          # prints only the id, for scripts\n"
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
    cmd->add_option("--limit", flags->limit, "At most this many jobs, the newest")
        ->check(CLI::Range(1, 1'000'000));
    add_client_flags(*cmd, flags->client, true);
    cmd->footer(
        "Columns: AGE is the time since submission, TIME the time run; REASON says why a pending "
        "job waits (see `tidepool why ID`) or how an ended one ended.\n\n"
        "Examples:\n"
        "  tidepool jobs\n"
        "  tidepool jobs --tenant vision --state pending\n"
        "  tidepool jobs --all --limit 20 -o json\n\n" +
        connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return list_jobs(*flags); }); });
  }
  {
    auto flags = std::make_shared<JobFlags>();
    CLI::App* cmd =
        app.add_subcommand("job", "Show one job: its spec, state transitions and placement");
    cmd->add_option("ID", flags->id, "Job id")->required();
    add_client_flags(*cmd, flags->client, true);
    cmd->footer("Examples:\n  tidepool job 42\n  tidepool job 42 -o yaml\n\n" + connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return show_job(*flags); }); });
  }
  {
    auto flags = std::make_shared<CancelFlags>();
    CLI::App* cmd = app.add_subcommand("cancel", "Cancel jobs (like scancel)");
    cmd->add_option("ID", flags->ids, "Job ids")->required();
    add_client_flags(*cmd, flags->client, false);
    cmd->footer("Examples:\n  tidepool cancel 42\n  tidepool cancel 42 43 44\n\n" +
                connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return cancel_jobs(*flags); }); });
  }
  {
    auto flags = std::make_shared<JobFlags>();
    CLI::App* cmd = app.add_subcommand(
        "why",
        "Why a job is pending (the reason, and how long it waited for each), or where it runs");
    cmd->add_option("ID", flags->id, "Job id")->required();
    add_client_flags(*cmd, flags->client, true);
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
}

void add_client_commands(CLI::App& app, int* exit_code) {
  add_job_commands(app, exit_code);
  add_pool_commands(app, exit_code);
  add_token_commands(app, exit_code);
}

}  // namespace tidepool
