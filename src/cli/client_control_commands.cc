// tidepool cancel, hold, release, requeue and update: a user's hand on jobs (scancel, scontrol
// hold/release/requeue/update). Each takes several job ids and goes on past one it cannot act
// on; the exit status is that of the first failure.
#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/client_commands.h"
#include "cli/client_session.h"

namespace tidepool {
namespace {

struct ControlFlags {
  ClientFlags client;
  std::vector<std::string> ids;
};

// Acts on each job with `act`, printing "<done> job N" (or job/N, or the jobs as a document).
Result<void> act_on_jobs(
    const ControlFlags& flags, std::string_view done, std::string_view verb,
    const std::function<Result<nlohmann::json>(ApiClient&, const std::string&)>& act) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  const OutputFormat format = output_format(flags.client);
  int failures = 0;
  nlohmann::json jobs = nlohmann::json::array();
  for (const std::string& id : flags.ids) {
    auto job = act(*client, id);
    if (!job) {
      if (is_connection_error(job.error())) return std::unexpected(job.error());
      print_error(job.error());
      ++failures;
      continue;
    }
    if (format == OutputFormat::kTable) {
      fmt::print("{} job {}\n", done, job->at("id").get<std::int64_t>());
    } else if (format == OutputFormat::kName) {
      fmt::print("job/{}\n", job->at("id").get<std::int64_t>());
    } else {
      jobs.push_back(std::move(*job));
    }
  }
  if (is_document(format)) write_document({{"jobs", jobs}}, format, std::cout);
  if (failures > 0) {
    if (flags.ids.size() == 1) return std::unexpected(already_reported());
    return fail("", fmt::format("{} of {} jobs not {}", failures, flags.ids.size(), verb));
  }
  return {};
}

struct UpdateFlags {
  ControlFlags control;
  std::optional<int> priority;
  std::optional<std::string> max_runtime;
  std::optional<std::string> runtime_estimate;
  std::optional<std::string> max_cost;
};

// The PATCH body: the options given; "none" clears a limit.
Result<nlohmann::json> update_body(const UpdateFlags& flags) {
  nlohmann::json body = nlohmann::json::object();
  if (flags.priority) body["priority"] = *flags.priority;
  for (auto [key, value] : {std::pair{"max_runtime", &flags.max_runtime},
                            std::pair{"runtime_estimate", &flags.runtime_estimate},
                            std::pair{"max_cost", &flags.max_cost}}) {
    if (!*value) continue;
    body[key] = **value == "none" ? nlohmann::json(nullptr) : nlohmann::json(**value);
  }
  if (body.empty()) {
    return fail("",
                "nothing to update: give --priority, --max-runtime, --runtime-estimate or "
                "--max-cost");
  }
  return body;
}

CLI::App* add_control_command(CLI::App& app, const std::string& name, const std::string& summary,
                              ControlFlags& flags, const std::string& examples) {
  CLI::App* cmd = app.add_subcommand(name, summary);
  cmd->add_option("ID", flags.ids, "Job ids")->required();
  add_client_flags(*cmd, flags.client, kNamedFormats);
  cmd->footer("Examples:\n" + examples + "\n" + connection_help());
  return cmd;
}

}  // namespace

void add_job_control_commands(CLI::App& app, int* exit_code) {
  struct Simple {
    const char* name;
    const char* summary;
    const char* done;
    const char* verb;
    const char* examples;
    bool del;  // DELETE /v1/jobs/ID; else POST /v1/jobs/ID/<name>
  };
  for (const Simple& simple : {
           Simple{"cancel", "Cancel jobs (like scancel)", "Cancelled", "cancelled",
                  "  tidepool cancel 42\n  tidepool cancel 42 43 44 -o json\n", true},
           Simple{"hold",
                  "Keep pending jobs from starting until `tidepool release` (like scontrol hold)",
                  "Held", "held",
                  "  tidepool hold 42\n  tidepool hold $(tidepool jobs --state "
                  "pending -o name | cut -d/ -f2)\n",
                  false},
           Simple{"release", "Let held jobs be scheduled again (like scontrol release)", "Released",
                  "released", "  tidepool release 42 43\n", false},
           Simple{"requeue",
                  "Stop running jobs and queue them again; they resume from their last checkpoint "
                  "(like scontrol requeue)",
                  "Requeued", "requeued", "  tidepool requeue 42\n", false},
       }) {
    auto flags = std::make_shared<ControlFlags>();
    CLI::App* cmd = add_control_command(app, simple.name, simple.summary, *flags, simple.examples);
    cmd->callback([flags, exit_code, simple] {
      run_client_command(exit_code, [&] {
        return act_on_jobs(
            *flags, simple.done, simple.verb, [&](ApiClient& client, const std::string& id) {
              return simple.del
                         ? client.del(job_path(id))
                         : client.post(job_path(id) + "/" + simple.name, nlohmann::json::object());
            });
      });
    });
  }
  auto flags = std::make_shared<UpdateFlags>();
  CLI::App* cmd = add_control_command(
      app, "update", "Change pending jobs' priority and limits (like scontrol update)",
      flags->control,
      "  tidepool update 42 --priority 500\n"
      "  tidepool update 42 43 --max-runtime 2h --runtime-estimate 30m\n"
      "  tidepool update 42 --max-cost none\n");
  cmd->add_option("--priority", flags->priority, "The new priority, -1000000 to 1000000");
  cmd->add_option("--max-runtime", flags->max_runtime,
                  "Stop it once it has run this long, e.g. 2h (none: no limit)");
  cmd->add_option("--runtime-estimate", flags->runtime_estimate,
                  "How long it is expected to run, e.g. 30m (none: not known)");
  cmd->add_option("--max-cost", flags->max_cost,
                  "Stop it once its charges reach this much, e.g. 40.00 (none: no limit)");
  cmd->callback([flags, exit_code] {
    run_client_command(exit_code, [&]() -> Result<void> {
      auto body = update_body(*flags);
      if (!body) return std::unexpected(body.error());
      return act_on_jobs(flags->control, "Updated", "updated",
                         [&](ApiClient& client, const std::string& id) {
                           return client.patch(job_path(id), *body);
                         });
    });
  });
}

}  // namespace tidepool
