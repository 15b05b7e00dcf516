// The user commands of the `tidepool` binary, clients of a running server (`tidepool server`)
// through its REST API, shaped after Slurm and kubectl:
//
//   tidepool submit FILE...            submit job specs (YAML or JSON; - reads stdin), like sbatch
//   tidepool jobs                      list jobs (live ones by default), like squeue
//   tidepool job ID                    one job: spec, transitions, placement
//   tidepool cancel ID...              cancel jobs, like scancel
//   tidepool hold|release ID...        keep pending jobs from starting, and let them again
//   tidepool requeue ID...             stop running jobs and queue them again (they resume)
//   tidepool update ID... --priority N change pending jobs' priority and limits (scontrol update)
//   tidepool why ID                    why a job waits (or where it runs)
//   tidepool advise ID                 what a job could change to run faster, with the numbers
//   tidepool logs ID                   a task's output, as its agent shipped it (--follow)
//   tidepool checkpoint                a job reports a checkpoint (from inside its tasks)
//   tidepool nodes                     nodes and who holds their GPUs
//   tidepool drain NODE / undrain NODE (admin) stop / resume placing jobs on a node
//   tidepool queues                    pending and running jobs per team queue
//   tidepool tenants [NAME]            quotas and usage per GPU model
//   tidepool top                       a refreshing view of the pool
//   tidepool services [ID]             inference services: replicas, target, last decision
//   tidepool token create|list|revoke  (admin) manage API tokens
//   tidepool events [--watch]          the pool's events, from a time on or as they happen
//   tidepool price                     the internal market's price of a GPU-hour per model
//   tidepool bill --tenant T --from D --to D   a tenant's charges and credits, grouped
//   tidepool admin backup FILE         (admin) a consistent backup of the server's state
//
// Every command takes --server and --token (see client_config.h for the other sources), and
// those that print data take -o/--output table|json|yaml; the listings also wide, name and csv,
// and --no-headers (listing.h). Errors go to stderr as "error: ..." with the exit statuses of
// exit_status.h.
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

// The groups of user commands, each registered on `app` (client_job_commands.cc,
// client_pool_commands.cc, client_token_commands.cc); a command that fails sets *exit_code to its
// exit status. main.cc lists the groups.
void add_job_commands(CLI::App& app, int* exit_code);
void add_job_control_commands(CLI::App& app, int* exit_code);  // client_control_commands.cc
void add_pool_commands(CLI::App& app, int* exit_code);
void add_service_commands(CLI::App& app, int* exit_code);  // client_service_commands.cc
void add_token_commands(CLI::App& app, int* exit_code);
void add_market_commands(CLI::App& app, int* exit_code);  // client_market_commands.cc
void add_event_commands(CLI::App& app, int* exit_code);   // client_event_commands.cc
void add_admin_commands(CLI::App& app, int* exit_code);   // client_admin_commands.cc

}  // namespace tidepool
